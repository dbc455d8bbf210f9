#!/usr/bin/env python3
"""A test server for resumable uploads, IETF draft-ietf-httpbis-resumable-upload interop 8
(Python standard library only).

Creation: PUT or POST to any path other than /res/ and /_...: the server sends `104` with
`Location: /res/ID` (unless `no104`), then reads the body; `Upload-Complete: ?1` with all of
`Upload-Length` completes the upload (`201`, a JSON body with its size and sha256). HEAD /res/ID
gives `Upload-Offset` (and `Upload-Complete`, `Upload-Limit` when `advertise`); PATCH /res/ID
(`application/partial-upload`, `Upload-Offset`) appends; DELETE /res/ID terminates.

Knobs, in the creation request's query (they stay with the upload):
  key=K         groups the upload's requests and bytes for /_stats?key=K
  no104=1       a plain server: no 104, the body is stored, 201
  limit=N       appends (and the creation's body) larger than N get 413 + Upload-Limit
  advertise=1   Upload-Limit: max-append-size=N in the 104 and in HEAD (with limit)
  drop=A,B,...  cut the connection once the upload holds A bytes (then B, ...), once each
  stall=A       once the upload holds A bytes, stop reading for 6 s (once), then cut
  conflict=N    the first N PATCHes get 409
  expire=404|410  after a cut connection, the upload is gone: its URL answers 404 or 410
  rate=B        read the body at about B bytes per second
  fail5xx=N     the first N HEADs get 503
  early=A,B,... once the upload holds A bytes (then B, ...), stop reading the request's body and
                answer it 200 with no upload header (Connection: close), once each
  earlyoffset=1 ... with Upload-Offset (what it kept) and Upload-Complete: ?0
  slowbody=S    the answer that completes the upload sends its headers, then its body S seconds later
  failcomplete=N  the first N requests that complete the upload keep every byte (the upload is
                complete, as HEAD says) but are answered 500 "processing failed"
  failappend=N  the first N appends that would complete the upload are read whole but keep none of
                their bytes, and are answered 503 (HEAD then gives the offset before them)

An offset query (HEAD) or a new append ends any append still being read for that upload (a client
that asks has given the old request up; the server may not have seen its connection close yet): the
old request's bytes read after that are not appended, and its connection is cut.

GET /_stats?key=K: {"received": body bytes received, "requests": [...], "uploads": [...]}.
Prints PORT=N on stdout once listening.
"""

import argparse
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
UPLOADS = {}  # id -> dict
STATS = {}  # key -> {"received": int, "requests": [..]}
KNOBS = {}  # key -> the one-time faults left
COUNTER = [0]
DIR = [None]


def stats_for(key):
    return STATS.setdefault(key, {"received": 0, "requests": []})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ietfserver/1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # MARK: - helpers

    def reply(self, status, headers=None, body=b""):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def record(self, key):
        with LOCK:
            stats_for(key)["requests"].append(
                {"method": self.command, "path": self.path, "t": time.monotonic(),
                 "headers": {k.lower(): v for k, v in self.headers.items()}})

    def drain(self, n):
        """Reads and drops n bytes of a body we refuse (so the connection stays usable)."""
        left = n
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            left -= len(chunk)

    def receive_within_limit(self, up, length):
        """Reads the request's content into the upload; False when it could not (over the upload's
        limit: drained and answered 413; or the client went away)."""
        if up["limit"] and length > up["limit"]:
            self.drain(length)
            self.reply(413, {"Upload-Limit": self.limit_field(up)})
            return False
        return self.receive(up, length)

    def receive(self, up, length):
        """Appends up to `length` body bytes to the upload; False if the connection was cut, or
        if a later request to the upload superseded this one."""
        rate = up["rate"]
        left = length
        with LOCK:
            up["generation"] += 1
            mine = up["generation"]
        with open(up["path"], "ab") as f:
            while left > 0:
                want = min(left, 65536)
                stall = False
                with LOCK:
                    if up["knobs"]["drops"]:
                        want = min(want, max(0, up["knobs"]["drops"][0] - up["offset"]))
                    if up["knobs"]["stall"] is not None:
                        want = min(want, max(0, up["knobs"]["stall"] - up["offset"]))
                        if want == 0:
                            up["knobs"]["stall"] = None
                            stall = True
                early = False
                with LOCK:
                    if up["knobs"]["early"]:
                        want = min(want, max(0, up["knobs"]["early"][0] - up["offset"]))
                        if want == 0:
                            up["knobs"]["early"].pop(0)
                            early = True
                if early:
                    # A final answer before the body's end, saying nothing of what was kept.
                    f.flush()
                    self.close_connection = True
                    hs = {"Connection": "close", "Content-Type": "text/plain"}
                    if up["earlyoffset"]:
                        hs.update({"Upload-Offset": str(up["offset"]), "Upload-Complete": "?0"})
                    self.reply(200, hs, b"done early")
                    self.wfile.flush()
                    # A moment before closing: the client reads the answer (a close with its body
                    # unread resets the connection, and may throw the answer away with it).
                    time.sleep(0.3)
                    return False
                if stall:
                    f.flush()
                    time.sleep(6)
                    self.cut()
                    return False
                if want == 0:
                    with LOCK:
                        up["knobs"]["drops"].pop(0)
                        if up["expire"]:
                            up["gone"] = up["expire"]
                    f.flush()
                    self.cut()
                    return False
                chunk = self.rfile.read(want)
                if not chunk:
                    return False
                with LOCK:
                    superseded = up["generation"] != mine
                    if not superseded:
                        f.write(chunk)
                        f.flush()
                        up["offset"] += len(chunk)
                    up["received"] += len(chunk)
                    stats_for(up["key"])["received"] += len(chunk)
                if superseded:
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return False
                left -= len(chunk)
                if rate:
                    time.sleep(len(chunk) / rate)
        return True

    def cut(self):
        # A moment first: a client that is still sending has read the 104 by then (a cut right
        # away resets the connection, and a reset throws away what the client had not read).
        time.sleep(0.3)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def finish_upload(self, up, status):
        with open(up["path"], "rb") as f:
            digest = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        with LOCK:
            up["complete"] = True
            up["sha256"] = digest.hexdigest()
        with LOCK:
            fail = up["knobs"]["failcomplete"] > 0
            if fail:
                up["knobs"]["failcomplete"] -= 1
        if fail:
            self.reply(500, {"Content-Type": "text/plain"}, b"processing failed")
            return
        body = json.dumps({"id": up["id"], "size": up["offset"], "sha256": up["sha256"]}).encode()
        headers = {"Content-Type": "application/json", "Upload-Offset": str(up["offset"]),
                   "Upload-Complete": "?1", "Upload-Draft-Interop-Version": "8"}
        if up["slowbody"]:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(up["slowbody"])
            self.wfile.write(body)
            return
        self.reply(status, headers, body)

    def upload_of(self):
        path = urllib.parse.urlsplit(self.path).path
        if not path.startswith("/res/"):
            return None, None
        uid = path[len("/res/"):]
        with LOCK:
            return uid, UPLOADS.get(uid)

    def limit_field(self, up):
        return f"max-append-size={up['limit']}"

    # MARK: - creation

    def create(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        key = q.get("key", "default")
        self.record(key)
        length = int(self.headers.get("Content-Length", "0"))
        with LOCK:
            COUNTER[0] += 1
            uid = f"u{COUNTER[0]}"
            path = os.path.join(DIR[0], uid)
            open(path, "wb").close()
            # The one-time faults belong to the key: a new upload of the same key has none left.
            knobs = KNOBS.setdefault(key, {
                "drops": [int(x) for x in q.get("drop", "").split(",") if x],
                "conflicts": int(q.get("conflict", "0")), "fail5xx": int(q.get("fail5xx", "0")),
                "stall": int(q["stall"]) if "stall" in q else None,
                "early": [int(x) for x in q.get("early", "").split(",") if x],
                "failcomplete": int(q.get("failcomplete", "0")),
                "failappend": int(q.get("failappend", "0"))})
            up = {"id": uid, "key": key, "path": path, "offset": 0, "received": 0, "complete": False,
                  "deleted": False, "generation": 0,
                  "gone": None, "sha256": None, "length": None, "limit": int(q["limit"]) if "limit" in q else None,
                  "advertise": q.get("advertise") == "1", "knobs": knobs,
                  "earlyoffset": q.get("earlyoffset") == "1",
                  "expire": int(q["expire"]) if "expire" in q else None,
                  "rate": float(q.get("rate", "0")), "slowbody": float(q.get("slowbody", "0")), "interop": self.headers.get("Upload-Draft-Interop-Version")}
            UPLOADS[uid] = up
        if q.get("no104") == "1" or up["interop"] != "8":
            # A plain server: the body, then 201.
            up["expire"] = None
            if not self.receive(up, length):
                return
            self.finish_upload(up, 201)
            return
        if self.headers.get("Upload-Length"):
            up["length"] = int(self.headers["Upload-Length"])
        self.send_response_only(104, "Upload Resumption Supported")
        self.send_header("Location", f"/res/{uid}")
        self.send_header("Upload-Draft-Interop-Version", "8")
        if up["limit"] and up["advertise"]:
            self.send_header("Upload-Limit", self.limit_field(up))
        self.end_headers()
        self.wfile.flush()
        if not self.receive_within_limit(up, length):
            return
        if self.headers.get("Upload-Complete") == "?1" and (up["length"] is None or up["offset"] == up["length"]):
            self.finish_upload(up, 201)
        else:
            self.reply(201, {"Location": f"/res/{uid}", "Upload-Offset": str(up["offset"])})

    # MARK: - methods

    def do_PUT(self):
        self.create()

    def do_POST(self):
        if self.path.startswith("/_"):
            self.reply(404)
            return
        self.create()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/_stats":
            q = dict(urllib.parse.parse_qsl(url.query))
            key = q.get("key", "default")
            with LOCK:
                s = stats_for(key)
                ups = [{k: v for k, v in u.items() if k not in ("path", "knobs")} for u in UPLOADS.values()
                       if u["key"] == key]
                body = json.dumps({"received": s["received"], "requests": s["requests"], "uploads": ups}).encode()
            self.reply(200, {"Content-Type": "application/json"}, body)
            return
        self.reply(404)

    def gone_or_missing(self, up):
        if up is None or up["deleted"]:
            self.reply(404)
            return True
        if up["gone"]:
            self.reply(up["gone"])
            return True
        return False

    def do_HEAD(self):
        uid, up = self.upload_of()
        if up is not None:
            self.record(up["key"])
        if self.gone_or_missing(up):
            return
        with LOCK:
            up["generation"] += 1  # an append still being read is given up
        with LOCK:
            if up["knobs"]["fail5xx"] > 0:
                up["knobs"]["fail5xx"] -= 1
                fail = True
            else:
                fail = False
        if fail:
            self.reply(503)
            return
        h = {"Upload-Offset": str(up["offset"]), "Upload-Complete": "?1" if up["complete"] else "?0",
             "Upload-Draft-Interop-Version": "8", "Cache-Control": "no-store"}
        if up["length"] is not None:
            h["Upload-Length"] = str(up["length"])
        if up["limit"] and up["advertise"]:
            h["Upload-Limit"] = self.limit_field(up)
        self.reply(204, h)

    def do_PATCH(self):
        uid, up = self.upload_of()
        if up is not None:
            self.record(up["key"])
        length = int(self.headers.get("Content-Length", "0"))
        if self.gone_or_missing(up):
            self.drain(length)
            return
        if self.headers.get("Content-Type") != "application/partial-upload":
            self.drain(length)
            self.reply(415)
            return
        with LOCK:
            up["generation"] += 1  # an append still being read is given up before the offset is compared
            conflict = up["knobs"]["conflicts"] > 0
            if conflict:
                up["knobs"]["conflicts"] -= 1
        offset = int(self.headers.get("Upload-Offset", "-1"))
        if conflict or offset != up["offset"] or up["complete"]:
            self.drain(length)
            self.reply(409, {"Upload-Offset": str(up["offset"])})
            return
        with LOCK:
            refuse = self.headers.get("Upload-Complete") == "?1" and up["knobs"]["failappend"] > 0
            if refuse:
                up["knobs"]["failappend"] -= 1
        if refuse:
            self.drain(length)
            self.reply(503, {"Content-Type": "text/plain"}, b"try again")
            return
        if not self.receive_within_limit(up, length):
            return
        if self.headers.get("Upload-Complete") == "?1":
            if up["length"] is not None and up["offset"] != up["length"]:
                self.reply(400)
                return
            self.finish_upload(up, 200)
        else:
            self.reply(204, {"Upload-Offset": str(up["offset"]), "Upload-Complete": "?0"})

    def do_DELETE(self):
        uid, up = self.upload_of()
        if up is not None:
            self.record(up["key"])
        if up is None or up["deleted"]:
            self.reply(404)
            return
        with LOCK:
            up["deleted"] = True
        self.reply(204)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    DIR[0] = args.dir or tempfile.mkdtemp(prefix="aft-ietf-")
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"PORT={server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
