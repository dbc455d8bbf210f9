@_exported import struct Foundation.Data
