"""The fault server (Tests/faultserver) on two listeners that share one state: plain HTTP and HTTPS.

    python3 tlsfaultserver.py --cert CHAIN.pem --key KEY.pem [--later-cert CHAIN2.pem --later-key KEY2.pem]
    # prints "PORT=<http> TLSPORT=<https>" (flushed) once both listen; SIGTERM/SIGINT → exits 0

Every knob of the fault server works on both (same paths, same query), and the request log is
shared, so a test reads `/_log?key=K` over plain HTTP even for requests that came in over TLS
(a redirect from one listener to the other lands in the same key's log). The TLS handshake runs
in the connection's own thread, so a client that refuses the certificate costs nothing else.
"""

from __future__ import annotations

import argparse
import signal
import socket
import ssl
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "faultserver"))
import faultserver as fs  # noqa: E402


class TLSHandler(fs.Handler):
    """The fault server's handler behind a server-side TLS handshake."""

    def setup(self) -> None:
        self.handshake_ok = False
        try:
            self.request.settimeout(10)
            self.request.do_handshake()
            self.handshake_ok = True
        except (OSError, ssl.SSLError):
            pass
        super().setup()

    def handle(self) -> None:
        if self.handshake_ok:
            super().handle()


class TLSServer(fs.Server):
    def __init__(self, address, handler, context: ssl.SSLContext, later: ssl.SSLContext | None = None) -> None:
        self.context = context
        self.later = later
        self.accepted = 0
        super().__init__(address, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        self.accepted += 1
        ctx = self.later if self.later is not None and self.accepted > 1 else self.context
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--cert", required=True, help="PEM: the server certificate, then its chain")
    ap.add_argument("--key", required=True)
    ap.add_argument("--later-cert", help="PEM shown on every TLS connection after the first (with --later-key)")
    ap.add_argument("--later-key")
    args = ap.parse_args(argv)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    later = None
    if args.later_cert:
        later = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        later.load_cert_chain(args.later_cert, args.later_key)
    plain = fs.Server((args.host, 0), fs.Handler)
    tls = TLSServer((args.host, 0), TLSHandler, ctx, later)
    servers = (plain, tls)

    def stop(signum, frame):
        if not fs.STOP.is_set():
            fs.STOP.set()
            for s in servers:
                threading.Thread(target=s.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}) for s in servers]
    for t in threads:
        t.start()
    print(f"PORT={plain.server_address[1]} TLSPORT={tls.server_address[1]}", flush=True)
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)
    finally:
        for s in servers:
            s.server_close()
        with fs.STATE.lock:
            conns = list(fs.STATE.connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
