// The daemon's library builds on what it shares with the CLI (the model, the wire, the checks).
@_exported import TransferBase

@_exported import struct Foundation.Data
