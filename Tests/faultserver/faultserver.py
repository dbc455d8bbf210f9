#!/usr/bin/env python3
"""faultserver: a fault-injecting HTTP/1.1 server for aftransfer's integration tests.

Stdlib only. Every behaviour is chosen by the request's path and query string, so tests stay
independent; a ``key=`` query parameter scopes the per-test request counter and request log.
See README.md beside this file for every knob.

Run:  python3 faultserver.py [--host 127.0.0.1] [--port 0]
It prints ``PORT=<n>`` on stdout once it listens, and exits 0 on SIGTERM or SIGINT.

The module is also imported by the tests for ``data_bytes`` / ``data_sha256`` / ``etag_for``,
which compute exactly what ``/data?size=N&seed=S`` serves.
"""

from __future__ import annotations

import argparse
import base64
import functools
import gzip
import hashlib
import json
import math
import os
import signal
import select
import socket
import socketserver
import sys
import threading
import time
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import quote, unquote_to_bytes

# MARK: - Deterministic content

BLOCK = 65536
"""The content is generated in blocks of this many bytes, so any range is cheap to produce."""


@functools.lru_cache(maxsize=128)
def data_block(seed: str, index: int) -> bytes:
    """Block ``index`` (BLOCK bytes) of the content stream for ``seed``."""
    return hashlib.shake_256(f"aftransfer:{seed}:{index}".encode()).digest(BLOCK)


def data_chunks(seed: str, start: int, end: int):
    """Yields the bytes [start, end) of the content stream for ``seed``, block by block."""
    pos = start
    while pos < end:
        index, offset = divmod(pos, BLOCK)
        block = data_block(seed, index)
        take = min(BLOCK - offset, end - pos)
        yield block[offset : offset + take]
        pos += take


def data_bytes(size: int, seed: str = "0", start: int = 0, end: int | None = None) -> bytes:
    """The bytes ``/data?size=size&seed=seed`` serves (optionally only [start, end))."""
    end = size if end is None else min(end, size)
    return b"".join(data_chunks(str(seed), start, end))


def data_sha256(size: int, seed: str = "0") -> str:
    """Hex SHA-256 of ``/data?size=size&seed=seed``."""
    h = hashlib.sha256()
    for chunk in data_chunks(str(seed), 0, size):
        h.update(chunk)
    return h.hexdigest()


def etag_for(size: int, seed: str = "0") -> str:
    """The strong ETag (with its quotes) served for this content."""
    return '"' + hashlib.sha256(f"{seed}:{size}".encode()).hexdigest()[:20] + '"'


def last_modified_for(seed: str = "0", generation: int = 0) -> float:
    """The Last-Modified time (epoch seconds) served for this content."""
    base = 1_600_000_000 + int(hashlib.sha256(str(seed).encode()).hexdigest()[:6], 16) % 10_000_000
    return float(base + generation * 10)


def http_date(ts: float) -> str:
    return formatdate(ts, usegmt=True)


# MARK: - Server state

STOP = threading.Event()
"""Set on SIGTERM: stalls and slow transfers end early so the process can exit."""


class State:
    """Per-key request counters and request logs, shared by all connection threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counters: dict[str, int] = {}
        self.logs: dict[str, list[dict]] = {}
        self.connections: set[socket.socket] = set()
        # Per key: the connections that served it and are still open (idle ones included), and
        # the most there ever were at once (GET /_conns?key=K).
        self.key_open: dict[str, set[int]] = {}
        self.key_max: dict[str, int] = {}
        self.socks: dict[int, socket.socket] = {}

    def served(self, key: str, conn: int, sock: socket.socket) -> None:
        with self.lock:
            self.socks[conn] = sock
            open_now = self.key_open.setdefault(key, set())
            # A connection the client closed while its handler sleeps (pacing) is not open: a FIN
            # shows as end of file to a peek.
            for other in list(open_now):
                if other != conn and self.peer_closed(self.socks.get(other)):
                    open_now.discard(other)
            open_now.add(conn)
            self.key_max[key] = max(self.key_max.get(key, 0), len(open_now))

    @staticmethod
    def peer_closed(sock) -> bool:
        """Whether the client closed ``sock`` (end of file to a peek). Never blocks: it runs under
        the lock every handler takes. Python waits up to a socket's timeout for readability before
        a `recv`, so the peek goes through a non-blocking duplicate; on the socket itself it waited
        whenever its own thread had read what `select` had seen, holding the lock, and the whole
        server stood still until the client gave up (a test saw three downloads stall for 30 s)."""
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            with socket.socket(fileno=os.dup(sock.fileno())) as peek:
                peek.settimeout(0.0)
                return peek.recv(1, socket.MSG_PEEK) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except (OSError, ValueError):
            return True

    def closed(self, conn: int) -> None:
        with self.lock:
            self.socks.pop(conn, None)
            for open_now in self.key_open.values():
                open_now.discard(conn)

    def conns_json(self, key: str) -> bytes:
        with self.lock:
            return json.dumps({"open": len(self.key_open.get(key, ())), "max": self.key_max.get(key, 0)}).encode()

    def begin(self, key: str, entry: dict) -> int:
        with self.lock:
            n = self.counters.get(key, 0) + 1
            self.counters[key] = n
            entry["n"] = n
            self.logs.setdefault(key, []).append(entry)
            return n

    def log_json(self, key: str | None) -> bytes:
        with self.lock:
            if key is None:
                return json.dumps(self.logs, default=str).encode()
            return json.dumps(self.logs.get(key, []), default=str).encode()

    def reset(self, key: str | None) -> None:
        with self.lock:
            if key is None:
                self.counters.clear()
                self.logs.clear()
            else:
                self.counters.pop(key, None)
                self.logs.pop(key, None)


STATE = State()

# MARK: - Helpers


class Query:
    """A parsed query string: values are raw bytes (percent-decoded, '+' kept as '+')."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.items: list[tuple[str, bytes]] = []
        for part in raw.split("&") if raw else []:
            if not part:
                continue
            name, _, value = part.partition("=")
            self.items.append((unquote_to_bytes(name).decode("latin-1"), unquote_to_bytes(value)))
        self.values = {k: v for k, v in self.items}

    def has(self, name: str) -> bool:
        return name in self.values

    def str(self, name: str, default: str | None = None) -> str | None:
        v = self.values.get(name)
        return default if v is None else v.decode("utf-8", "surrogateescape")

    def latin1(self, name: str) -> str | None:
        v = self.values.get(name)
        return None if v is None else v.decode("latin-1")

    def int(self, name: str, default: int | None = None) -> int | None:
        v = self.values.get(name)
        if v is None or v == b"":
            return default
        return int(v)

    def float(self, name: str, default: float | None = None) -> float | None:
        v = self.values.get(name)
        if v is None or v == b"":
            return default
        return float(v)

    def flag(self, name: str) -> bool:
        v = self.values.get(name)
        return v is not None and v not in (b"0", b"false", b"no")

    def replaced(self, name: str, value: str) -> str:
        """The raw query with ``name`` set to ``value`` (other items kept verbatim)."""
        parts = []
        seen = False
        for part in self.raw.split("&"):
            if part.partition("=")[0] == name:
                parts.append(f"{name}={quote(value, safe='')}")
                seen = True
            elif part:
                parts.append(part)
        if not seen:
            parts.append(f"{name}={quote(value, safe='')}")
        return "&".join(parts)


class Dropped(Exception):
    """The fault plan closed the connection on purpose."""


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def clean_header_value(value: str) -> str:
    # Hostile values are welcome, but a CR or LF would break the framing itself.
    return value.replace("\r", "").replace("\n", "")


def parse_params(value: str) -> tuple[str, dict[str, str]]:
    """Parses `type; a=b; c="d \\" e"` into ('type', {'a': 'b', 'c': 'd " e'})."""
    i = 0
    n = len(value)
    head_end = value.find(";")
    head = (value if head_end < 0 else value[:head_end]).strip()
    params: dict[str, str] = {}
    if head_end < 0:
        return head, params
    i = head_end + 1
    while i < n:
        while i < n and value[i] in " \t;":
            i += 1
        eq = value.find("=", i)
        if eq < 0:
            break
        name = value[i:eq].strip().lower()
        i = eq + 1
        if i < n and value[i] == '"':
            i += 1
            out = []
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(value[i])
                i += 1
            i += 1
            params[name] = "".join(out)
        else:
            end = value.find(";", i)
            end = n if end < 0 else end
            params[name] = value[i:end].strip()
            i = end
    return head, params


class MultipartParser:
    """A streaming multipart/form-data parser: hashes each part as it arrives (never buffers a
    whole part), recording name, filename, content type, size and sha256."""

    VALUE_LIMIT = 4096

    def __init__(self, boundary: bytes) -> None:
        self.delim = b"--" + boundary
        self.sep = b"\r\n" + self.delim
        self.buf = b""
        self.state = "preamble"
        self.parts: list[dict] = []
        self.cur: dict | None = None
        self.hasher = None
        self.value = bytearray()
        self.errors: list[str] = []

    @property
    def complete(self) -> bool:
        return self.state == "end"

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self._step():
            pass

    def _consume(self, data: bytes) -> None:
        if not data or self.cur is None:
            return
        self.cur["size"] += len(data)
        self.hasher.update(data)
        if len(self.value) < self.VALUE_LIMIT:
            self.value += data[: self.VALUE_LIMIT - len(self.value)]

    def _finish_part(self) -> None:
        if self.cur is None:
            return
        self.cur["sha256"] = self.hasher.hexdigest()
        if self.cur["filename"] is None and self.cur["size"] <= self.VALUE_LIMIT:
            self.cur["value"] = bytes(self.value).decode("utf-8", "replace")
        self.cur = None

    def _step(self) -> bool:
        if self.state == "preamble":
            i = self.buf.find(self.delim)
            if i < 0:
                self.buf = self.buf[-(len(self.delim) - 1) :] if len(self.delim) > 1 else b""
                return False
            self.buf = self.buf[i + len(self.delim) :]
            self.state = "after_delim"
            return True
        if self.state == "after_delim":
            if len(self.buf) < 2:
                return False
            if self.buf[:2] == b"--":
                self.state = "end"
                self.buf = b""
                return False
            j = self.buf.find(b"\r\n")
            if j < 0:
                if len(self.buf) > 1024:
                    self.errors.append("garbage after delimiter")
                    self.state = "error"
                return False
            if self.buf[:j].strip(b" \t"):
                self.errors.append("garbage after delimiter")
            self.buf = self.buf[j + 2 :]
            self.state = "headers"
            return True
        if self.state == "headers":
            if self.buf.startswith(b"\r\n"):
                raw = b""
                self.buf = self.buf[2:]
            else:
                j = self.buf.find(b"\r\n\r\n")
                if j < 0:
                    if len(self.buf) > 65536:
                        self.errors.append("part headers too long")
                        self.state = "error"
                    return False
                raw = self.buf[:j]
                self.buf = self.buf[j + 4 :]
            headers: dict[str, str] = {}
            for line in raw.split(b"\r\n"):
                if not line:
                    continue
                name, _, value = line.decode("utf-8", "surrogateescape").partition(":")
                headers[name.strip().lower()] = value.strip()
            disposition = headers.get("content-disposition", "")
            kind, params = parse_params(disposition)
            self.cur = {
                "name": params.get("name"),
                "filename": params.get("filename"),
                "contentType": headers.get("content-type"),
                "disposition": disposition,
                "dispositionType": kind,
                "headers": headers,
                "size": 0,
                "sha256": None,
                "value": None,
            }
            self.parts.append(self.cur)
            self.hasher = hashlib.sha256()
            self.value = bytearray()
            self.state = "data"
            return True
        if self.state == "data":
            i = self.buf.find(self.sep)
            if i < 0:
                safe = len(self.buf) - (len(self.sep) - 1)
                if safe > 0:
                    self._consume(self.buf[:safe])
                    self.buf = self.buf[safe:]
                return False
            self._consume(self.buf[:i])
            self._finish_part()
            self.buf = self.buf[i + len(self.sep) :]
            self.state = "after_delim"
            return True
        # end / error: ignore the epilogue
        self.buf = b""
        return False


# MARK: - The request handler


class Handler(socketserver.BaseRequestHandler):
    IDLE_TIMEOUT = 60.0

    def setup(self) -> None:
        self.sock: socket.socket = self.request
        self.sock.settimeout(self.IDLE_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb", buffering=65536)
        with STATE.lock:
            STATE.connections.add(self.sock)

    def finish(self) -> None:
        with STATE.lock:
            STATE.connections.discard(self.sock)
        STATE.closed(id(self))
        try:
            self.rfile.close()
        except OSError:
            pass

    def handle(self) -> None:
        try:
            while not STOP.is_set():
                if not self.handle_one():
                    break
        except (OSError, Dropped, ValueError):
            pass

    # -- framing

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_recorded(self, data: bytes, updates: dict) -> None:
        """Sends ``data``, recording ``updates`` in this request's log entry *first*.

        A client may read ``/_log`` (on another connection, served by another thread) the moment
        the last byte arrives, before this thread runs again after ``sendall``; what those bytes
        say must already be in the log then. If sending fails, the entry is put back."""
        entry = self.entry if self.entry is not None else {}  # none before a request is logged
        before = {name: entry.get(name) for name in updates}
        entry.update(updates)
        try:
            self.send(data)
        except BaseException:
            entry.update(before)
            raise

    def head_bytes(self, status: int, headers: list[tuple[str, str]], close: bool = False) -> bytes:
        lines = [f"HTTP/1.1 {status} {reason(status)}"]
        lines.append(f"Date: {http_date(time.time())}")
        lines.append("Server: faultserver")
        for name, value in headers:
            lines.append(f"{name}: {clean_header_value(value)}")
        if close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def send_head(self, status: int, headers: list[tuple[str, str]], close: bool = False) -> None:
        self.send(self.head_bytes(status, headers, close=close))

    def simple(self, status: int, body: bytes = b"", headers=None, ctype="text/plain",
               close: bool = False, head_only: bool = False) -> bool:
        hs = [("Content-Type", ctype), ("Content-Length", str(len(body)))] + list(headers or [])
        data = self.head_bytes(status, hs, close=close) + (body if not head_only else b"")
        self.send_recorded(data, {"status": status, "responseHeaders": dict(hs),
                                  "sent": len(body) if not head_only else 0, "end": time.time(),
                                  "done": True})
        return not close

    def linger_close(self, between: float = 1.0, limit: float = 5.0) -> None:
        """nginx's `lingering_close`: the sending side shut, then what the client still sends read
        and dropped until it stops (`between` seconds without data, or its end) or `limit`
        seconds pass, so that closing with unread data sends no reset over the answer."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + limit
            self.sock.settimeout(between)
            while not STOP.is_set() and time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    break
        except OSError:  # a timeout included
            pass

    def close_now(self, rst: bool = False) -> None:
        if rst:
            import struct

            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        raise Dropped()

    def pace(self, started: float, done: int, bps: int | None) -> None:
        if not bps:
            return
        due = started + done / bps
        delay = due - time.monotonic()
        if delay > 0:
            STOP.wait(delay)

    # -- one request

    def handle_one(self) -> bool:
        self.entry = None
        line = self.rfile.readline(65537)
        while line in (b"\r\n", b"\n"):
            line = self.rfile.readline(65537)
        if not line:
            return False
        request_line = line.decode("latin-1").rstrip("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            self.send_head(400, [("Content-Length", "0")], close=True)
            return False
        method, target, version = parts
        header_list: list[list[str]] = []
        while True:
            hl = self.rfile.readline(65537)
            if not hl:
                return False
            if hl in (b"\r\n", b"\n"):
                break
            if len(header_list) > 200:
                self.send_head(431, [("Content-Length", "0")], close=True)
                return False
            name, _, value = hl.decode("latin-1").rstrip("\r\n").partition(":")
            header_list.append([name.strip(), value.strip()])
        headers = {}
        for name, value in header_list:
            low = name.lower()
            headers[low] = headers[low] + ", " + value if low in headers else value
        path, _, raw_query = target.partition("?")
        if target.startswith("http://") or target.startswith("https://"):
            # absolute-form (proxy style): keep only path and query
            rest = target.split("//", 1)[1]
            slash = rest.find("/")
            path_query = rest[slash:] if slash >= 0 else "/"
            path, _, raw_query = path_query.partition("?")
        q = Query(raw_query)
        self.method, self.target, self.path, self.q, self.headers = method, target, path, q, headers
        self.version = version
        wants_close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"

        if path == "/_log":
            self.drain_body()
            return self.simple(200, STATE.log_json(q.str("key")), ctype="application/json",
                               close=wants_close)
        if path == "/_reset":
            self.drain_body()
            STATE.reset(q.str("key"))
            return self.simple(200, b"{}", ctype="application/json", close=wants_close)
        if path == "/_conns":
            self.drain_body()
            return self.simple(200, STATE.conns_json(q.str("key", "") or ""), ctype="application/json",
                               close=wants_close)
        if path == "/_health":
            self.drain_body()
            return self.simple(200, b"ok", close=wants_close)

        key = q.str("key", "") or ""
        self.entry = {
            "n": 0,
            "time": time.time(),
            "end": None,
            "method": method,
            "target": target,
            "path": path,
            "query": raw_query,
            "version": version,
            "headers": headers,
            "headerList": header_list,
            "host": headers.get("host"),
            "range": headers.get("range"),
            "ifRange": headers.get("if-range"),
            "authorization": headers.get("authorization"),
            "acceptEncoding": headers.get("accept-encoding"),
            "contentType": headers.get("content-type"),
            "userAgent": headers.get("user-agent"),
            "status": None,
            "responseHeaders": None,
            "sent": 0,
            "seed": None,
            "etag": None,
            "lastModified": None,
            "dropped": False,
            "stalled": False,
            "done": False,
            "upload": None,
        }
        self.n = STATE.begin(key, self.entry)
        STATE.served(key, id(self), self.sock)
        times = q.int("times")
        self.faulty = times is None or self.n <= times

        if method in ("GET", "HEAD"):
            return self.serve_data(wants_close)
        if method in ("PUT", "POST"):
            return self.serve_upload(wants_close)
        self.drain_body()
        return self.simple(405, b"method not allowed\n", headers=[("Allow", "GET, HEAD, PUT, POST")],
                           close=wants_close)

    # -- shared checks (auth, redirect, delay, status faults)

    def precheck(self) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """The response that replaces normal service, if a knob says so."""
        q = self.q
        delay = q.float("delay")
        if delay:
            STOP.wait(delay)
        auth = q.str("auth")
        auth_sha = q.str("authsha256")
        if auth is not None or auth_sha is not None:
            given = self.headers.get("authorization") or ""
            if auth is not None:
                ok = given == "Basic " + base64.b64encode(auth.encode()).decode()
            else:
                try:
                    plain = base64.b64decode(given[6:], validate=True) if given.startswith("Basic ") else None
                except ValueError:
                    plain = None
                ok = plain is not None and hashlib.sha256(plain).hexdigest() == auth_sha.lower()
            if not ok:
                return 401, [("WWW-Authenticate", 'Basic realm="faultserver"')], b"unauthorized\n"
        code = q.int("code", 302)
        chain = q.int("chain", 0)
        if chain and chain > 0 and self.faulty:
            host = self.headers.get("host", "127.0.0.1")
            loc = f"http://{host}{self.path}?{q.replaced('chain', str(chain - 1))}"
            return code, [("Location", loc)], b"redirect\n"
        redirect = q.latin1("redirect")
        if redirect is not None and self.faulty:
            if redirect == "self":
                host = self.headers.get("host", "127.0.0.1")
                redirect = f"http://{host}{self.target}"
            return code, [("Location", redirect)], b"redirect\n"
        status = q.int("status")
        if status is None and self.method == "GET" and self.faulty:
            # A range that starts past byte 0: a segmented download's further connections.
            rng = (self.headers.get("range") or "").strip()
            if rng.startswith("bytes=") and rng[6:7].isdigit() and not rng[6:].startswith("0-"):
                status = q.int("rangestatus")
        if status is not None and self.faulty:
            hs = []
            ra = q.str("retryafter")
            if ra is not None:
                hs.append(("Retry-After", ra))
            rad = q.float("retryafterdate")
            if rad is not None:
                hs.append(("Retry-After", http_date(math.ceil(time.time()) + rad)))
            return status, hs, f"fault status {status}\n".encode()
        return None

    # -- GET / HEAD: deterministic content

    def serve_data(self, wants_close: bool) -> bool:
        q = self.q
        head_only = self.method == "HEAD"
        if q.flag("garbage") and self.faulty:
            # Not HTTP at all: one line of text, then the connection closes.
            self.send(b"garbage, not HTTP\r\n")
            self.entry["end"] = time.time()
            self.entry["done"] = True
            self.close_now()
            return False
        early = self.precheck()
        if early is not None:
            status, hs, body = early
            return self.simple(status, body, headers=hs, close=wants_close, head_only=head_only)

        size = q.int("size", 1024)
        seed = q.str("seed", "0")
        eff_seed = f"{seed}.{self.n}" if q.flag("change") else seed
        generation = self.n if q.flag("change") else 0
        change_after = q.int("changeafter")
        if change_after is not None and self.n > change_after:
            # A new version from request changeafter+1 on (validators change too).
            eff_seed, generation = f"{seed}.v2", 2
        etag_size, etag_seed = size, eff_seed
        shrink_after = q.int("shrinkafter")
        if shrink_after is not None and self.n > shrink_after:
            # From request shrinkafter+1 on the file is shorter (shrinkto bytes) and its bytes
            # differ, but the validators stay the first version's: an inconsistent server.
            size, eff_seed = q.int("shrinkto", size // 2), f"{seed}.short"
        etag = None if q.has("etag") and not q.flag("etag") else etag_for(etag_size, etag_seed)
        if generation and q.flag("dropetag"):
            etag = None  # dropetag=1: a new version comes without an ETag
        if etag and q.flag("weaketag"):
            etag = "W/" + etag
        lastmod = None
        if not (q.has("lastmod") and not q.flag("lastmod")):
            # samelastmod=1: a new version keeps the first one's date (a file replaced within the
            # same second): only its ETag tells the versions apart.
            lastmod = http_date(last_modified_for(seed, 0 if q.flag("samelastmod") else generation))
        self.entry["seed"] = eff_seed
        self.entry["etag"] = etag
        self.entry["lastModified"] = lastmod

        hs: list[tuple[str, str]] = [("Content-Type", q.latin1("ctype") or "application/octet-stream")]
        if etag:
            hs.append(("ETag", etag))
        if lastmod:
            hs.append(("Last-Modified", lastmod))
        cd = q.latin1("cd")
        if cd is not None:
            hs.append(("Content-Disposition", cd))
        norange = q.flag("norange")
        hs.append(("Accept-Ranges", "none" if norange else "bytes"))
        nolength = q.flag("nolength")
        close = wants_close or nolength

        # gzip variant: whole body compressed, Range ignored.
        accept = self.headers.get("accept-encoding", "")
        if q.flag("gzip") and accepts_gzip(accept):
            body = gzip.compress(data_bytes(size, eff_seed), mtime=0)
            hs = [h for h in hs if h[0] not in ("ETag", "Accept-Ranges")]
            if etag:
                hs.append(("ETag", etag[:-1] + '-gz"'))
            hs += [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
            if not nolength:
                hs.append(("Content-Length", str(len(body))))
            return self.send_body(200, hs, [body], len(body), close, head_only)

        status, start, end = 200, 0, size
        rng = self.headers.get("range")
        if q.int("ignorerange") == self.n:
            rng = None  # this one request (by number) ignores Range: a whole 200
        if rng is not None and not norange:
            parsed = parse_range(rng, size)
            if parsed is not None:
                if_range = self.headers.get("if-range")
                honour = True
                if if_range is not None and not q.flag("ignoreifrange"):
                    if if_range.startswith('"') or if_range.startswith("W/"):
                        # Strong comparison: a weak validator never matches.
                        honour = etag is not None and not etag.startswith("W/") and if_range == etag
                    else:
                        honour = lastmod is not None and if_range == lastmod
                if honour:
                    if parsed == "unsatisfiable":
                        hs = [h for h in hs if h[0] != "Content-Type"]
                        hs += [("Content-Range", f"bytes */{size}")]
                        return self.simple(416, b"", headers=hs, close=close, head_only=head_only)
                    start, end = parsed
                    if (cap := q.int("rangecap")) is not None:
                        end = min(end, start + cap)  # fewer bytes than asked, as RFC 9110 allows
                    if (shift := q.int("rangeshift")) is not None and start > 0:
                        start = min(start + shift, end - 1)  # another range than asked (a broken cache)
                    status = 206
                    hs.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
        if vary := q.latin1("vary"):
            hs.append(("Vary", vary))
        if not nolength:
            hs.append(("Content-Length", str(end - start)))
        return self.send_body(status, hs, data_chunks(eff_seed, start, end), end - start, close, head_only)

    def send_body(self, status, hs, chunks, length, close, head_only) -> bool:
        q = self.q
        head = {"status": status, "responseHeaders": dict(hs)}
        if head_only or length == 0:
            head.update(end=time.time(), done=True)
        self.send_recorded(self.head_bytes(status, hs, close=close), head)
        if head_only:
            return not close
        drop = q.int("drop") if self.faulty else None
        stall = q.int("stall") if self.faulty else None
        stallfor = q.float("stallfor", 30.0)
        bps = q.int("slow")
        trickle = q.float("trickle") if self.faulty else None
        piece = 16384 if not bps else max(1, min(16384, bps // 20))
        if trickle:
            piece = 1
        started = time.monotonic()
        sent = 0
        for chunk in chunks:
            view = memoryview(chunk)
            while len(view):
                if STOP.is_set():
                    raise Dropped()
                take = min(piece, len(view))
                if drop is not None:
                    take = min(take, drop - sent)
                if stall is not None and sent < stall:
                    take = min(take, stall - sent)
                if take > 0:
                    updates = {"sent": sent + take}
                    if sent + take == length and (stall is None or stall > length):
                        updates.update(end=time.time(), done=True)  # the last bytes
                    self.send_recorded(view[:take], updates)
                    sent += take
                    view = view[take:]
                if drop is not None and sent >= drop:
                    self.entry["dropped"] = True
                    self.entry["end"] = time.time()
                    self.close_now(rst=q.flag("rst"))
                if stall is not None and sent >= stall and not self.entry["stalled"]:
                    self.entry["stalled"] = True
                    STOP.wait(stallfor)
                    started = time.monotonic() - (sent / bps if bps else 0)
                if trickle:
                    STOP.wait(trickle)  # one byte every `trickle` seconds: slower than 1 byte/s
                else:
                    self.pace(started, sent, bps)
        if not self.entry["done"]:
            self.entry["end"] = time.time()
            self.entry["done"] = True
        if (trailing := q.int("trailing")) and not close:
            # Bytes past the declared length, after the client has taken the response: they wait
            # on the kept-alive connection for whatever request it carries next.
            STOP.wait(0.05)
            self.send(b"x" * trailing)
        if close:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return False
        return True

    # -- PUT / POST: uploads

    def body_framing(self) -> tuple[int | None, bool]:
        te = self.headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            return None, True
        cl = self.headers.get("content-length")
        return (int(cl) if cl is not None else 0), False

    def read_body(self, sink, drop: int | None = None, bps: int | None = None) -> bool:
        """Reads the request body into ``sink(bytes)``; False if the client went away early."""
        length, chunked = self.body_framing()
        received = 0
        started = time.monotonic()
        piece = 65536 if not bps else max(1, min(65536, bps // 20))

        def take(n: int) -> bytes:
            nonlocal received
            if drop is not None:
                n = min(n, drop - received)
            data = self.rfile.read(n) if n > 0 else b""
            received += len(data)
            if data:
                sink(data)
            if drop is not None and received >= drop:
                self.entry["dropped"] = True
                self.entry["end"] = time.time()
                self.close_now(rst=self.q.flag("rst"))
            self.pace(started, received, bps)
            return data

        if not chunked:
            remaining = length or 0
            while remaining > 0:
                data = take(min(piece, remaining))
                if not data:
                    return False
                remaining -= len(data)
            return True
        while True:
            line = self.rfile.readline(1024)
            if not line:
                return False
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = self.rfile.readline(65537)
                    if not trailer or trailer in (b"\r\n", b"\n"):
                        return bool(trailer)
            remaining = size
            while remaining > 0:
                data = take(min(piece, remaining))
                if not data:
                    return False
                remaining -= len(data)
            self.rfile.readline(1024)  # the CRLF after the chunk

    def drain_body(self) -> None:
        try:
            length, chunked = self.body_framing()
        except ValueError:
            return
        if chunked or length:
            self.read_body(lambda b: None)

    def serve_upload(self, wants_close: bool) -> bool:
        q = self.q
        length, chunked = self.body_framing()
        ctype = self.headers.get("content-type")
        record = {
            "method": self.method,
            "contentType": ctype,
            "contentLength": length if not chunked else None,
            "chunked": chunked,
            "expect": self.headers.get("expect"),
            "size": 0,
            "sha256": None,
            "complete": False,
            "parts": None,
            "multipartComplete": None,
            "multipartErrors": None,
        }
        self.entry["upload"] = record
        hasher = hashlib.sha256()
        parser = None
        if ctype and ctype.lower().startswith("multipart/form-data"):
            _, params = parse_params(ctype)
            if params.get("boundary"):
                parser = MultipartParser(params["boundary"].encode("latin-1"))

        def sink(data: bytes) -> None:
            record["size"] += len(data)
            hasher.update(data)
            if parser is not None:
                parser.feed(data)

        def finish_record() -> None:
            record["sha256"] = hasher.hexdigest()
            if parser is not None:
                record["parts"] = parser.parts
                record["multipartComplete"] = parser.complete
                record["multipartErrors"] = parser.errors

        expect = (self.headers.get("expect") or "").lower() == "100-continue"
        early = self.precheck()
        if early is not None:
            status, hs, body = early
            if expect:
                # Answer before the body is sent; the unread body makes the connection unusable.
                return self.simple(status, body, headers=hs, close=True)
            ok = self.read_body(sink)
            record["complete"] = ok
            finish_record()
            if not ok:
                return False
            return self.simple(status, body, headers=hs, close=wants_close)

        if q.int("early") and self.faulty:
            # The final answer before the body is read (a server that does not want it), then
            # the connection closed with the body unread — after a lingering close, as nginx
            # makes: closed at once, the unread body made the kernel send a reset, which could
            # reach the client before it read the answer (it then saw only a send failure).
            finish_record()
            self.simple(q.int("respstatus", 201), b"early\n", close=True)
            self.linger_close()
            return False
        if expect:
            self.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        drop = q.int("drop") if self.faulty else None
        try:
            ok = self.read_body(sink, drop=drop, bps=q.int("slow"))
        except Dropped:
            finish_record()
            raise
        finish_record()
        record["complete"] = ok
        if not ok:
            self.entry["end"] = time.time()
            return False
        status = q.int("respstatus", 201)
        answer = {"key": q.str("key", ""), "n": self.n, "path": self.path, **record}
        payload = json.dumps(answer, default=str)
        pad = q.int("respsize")
        if pad and len(payload) < pad:
            answer["pad"] = "x" * (pad - len(payload) - 10)
            payload = json.dumps(answer, default=str)
        return self.simple(status, payload.encode(), ctype="application/json",
                           headers=[("X-Upload-Sha256", record["sha256"])], close=wants_close)


def accepts_gzip(accept: str) -> bool:
    for item in accept.split(","):
        coding, params = parse_params(item.strip())
        if coding.lower() in ("gzip", "x-gzip", "*"):
            try:
                if float(params.get("q", "1")) > 0:
                    return True
            except ValueError:
                return True
    return False


def parse_range(value: str, size: int):
    """Parses a single `bytes=` range. Returns (start, end_exclusive), "unsatisfiable", or None
    when the header is to be ignored (bad syntax or several ranges)."""
    value = value.strip()
    if not value.lower().startswith("bytes="):
        return None
    spec = value[6:].strip()
    if "," in spec:
        return None
    first, dash, last = spec.partition("-")
    if not dash:
        return None
    first, last = first.strip(), last.strip()
    try:
        if first == "":
            if not last:
                return None
            suffix = int(last)
            if suffix <= 0 or size == 0:
                return "unsatisfiable"
            return max(0, size - suffix), size
        start = int(first)
        end = int(last) + 1 if last else size
    except ValueError:
        return None
    if start < 0 or (last and end <= start):
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="aftransfer's fault-injecting HTTP/1.1 test server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)

    server = Server((args.host, args.port), Handler)

    def stop(signum, frame):
        if not STOP.is_set():
            STOP.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"PORT={server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        with STATE.lock:
            conns = list(STATE.connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
