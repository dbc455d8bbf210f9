"""The test servers themselves: the fault server's knobs and nginx's Range behaviour.

These need no daemon; they keep the ground the other tests stand on honest.
"""

import base64
import gzip
import hashlib
import json
import socket
import time
import urllib.parse

from conftest import fsmod, http_get, sha256_bytes


def raw_request(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Sends raw bytes and returns everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_the_fault_server_serves_deterministic_content_with_validators(faultserver, key):
    status, headers, body = http_get(faultserver.url(size=200_000, seed=3, key=key))
    assert status == 200
    assert body == faultserver.data(200_000, 3)
    assert sha256_bytes(body) == faultserver.sha256(200_000, 3)
    assert headers["ETag"] == faultserver.etag(200_000, 3)
    assert headers["Content-Length"] == "200000"
    assert "Last-Modified" in headers
    assert faultserver.data(10, 3) != faultserver.data(10, 4)


def test_the_fault_servers_log_holds_an_answer_once_the_client_has_it(faultserver, key):
    # Every other test reads the log right after its client has the response; the server must
    # record what it answered before the last byte goes out, not after (a CI run once saw a
    # 416 logged as None). Short answers, bodies and HEADs, many times over.
    for i in range(150):
        kind = i % 3
        url = faultserver.url(size=1000, seed=7, key=key)
        if kind == 0:
            status, _, _ = http_get(url, headers={"Range": "bytes=5000-"})
        elif kind == 1:
            status, _, body = http_get(url)
            assert len(body) == 1000
        else:
            status, _, _ = http_get(url, method="HEAD")
        last = faultserver.log(key)[-1]
        assert (last["status"], last["done"]) == (status, True), (i, last)
        assert last["sent"] == (1000 if kind == 1 else 0)


def test_the_fault_servers_peek_at_other_connections_never_blocks(monkeypatch):
    # The peek runs under the lock every handler takes. `select` can see a request that the
    # connection's own thread reads before the peek: the peek must then say "open" at once, not
    # wait for more bytes (the socket's timeout), which stood the whole server still.
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        monkeypatch.setattr(fsmod.select, "select", lambda r, w, x, t: (r, [], []))  # "readable", yet empty
        started = time.monotonic()
        assert fsmod.State.peer_closed(a) is False
        assert time.monotonic() - started < 1
        b.sendall(b"GET")
        assert fsmod.State.peer_closed(a) is False
        assert a.recv(3) == b"GET", "the peek leaves the bytes for the handler"
        b.close()
        assert fsmod.State.peer_closed(a) is True


def test_the_fault_server_honours_range_and_if_range(faultserver, key):
    url = faultserver.url(size=100_000, seed=5, key=key)
    etag = faultserver.etag(100_000, 5)
    status, headers, body = http_get(url, headers={"Range": "bytes=40000-"})
    assert status == 206
    assert headers["Content-Range"] == "bytes 40000-99999/100000"
    assert body == faultserver.data(100_000, 5)[40000:]
    status, _, body = http_get(url, headers={"Range": "bytes=40000-", "If-Range": etag})
    assert status == 206 and len(body) == 60000
    status, _, body = http_get(url, headers={"Range": "bytes=40000-", "If-Range": '"other"'})
    assert status == 200 and len(body) == 100_000
    status, headers, _ = http_get(url, headers={"Range": "bytes=100000-"})
    assert status == 416
    assert headers["Content-Range"] == "bytes */100000"
    log = faultserver.log(key)
    assert [e["range"] for e in log] == ["bytes=40000-"] * 3 + ["bytes=100000-"]
    assert [e["status"] for e in log] == [206, 206, 200, 416]
    assert log[1]["ifRange"] == etag


def test_the_fault_server_drops_the_first_requests_and_then_serves(faultserver, key):
    url = faultserver.url(size=50_000, key=key, drop=1000, times=1)
    raw = raw_request(faultserver.port, f"GET {url[len(faultserver.base):]} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Length: 50000" in head and len(body) == 1000
    status, _, body = http_get(url)
    assert status == 200 and len(body) == 50_000
    log = faultserver.log(key)
    assert [e["dropped"] for e in log] == [True, False]


def test_the_fault_server_changes_content_and_etag_on_every_request(faultserver, key):
    url = faultserver.url(size=1000, seed=9, key=key, change=1)
    _, h1, b1 = http_get(url)
    _, h2, b2 = http_get(url, headers={"Range": "bytes=10-", "If-Range": h1["ETag"]})
    assert h1["ETag"] != h2["ETag"] and b1 != b2
    assert b2 == faultserver.data(1000, "9.2")
    log = faultserver.log(key)
    assert log[1]["status"] == 200 and log[1]["seed"] == "9.2"


def test_the_fault_server_ignores_range_when_asked(faultserver, key):
    status, headers, body = http_get(faultserver.url(size=1000, key=key, norange=1),
                                     headers={"Range": "bytes=10-"})
    assert status == 200 and len(body) == 1000


def test_the_fault_server_fails_k_times_with_retry_after(faultserver, key):
    url = faultserver.url(key=key, status=503, times=2, retryafter=2)
    s1, h1, _ = http_get(url)
    s2, _, _ = http_get(url)
    s3, _, _ = http_get(url)
    assert (s1, s2, s3) == (503, 503, 200)
    assert h1["Retry-After"] == "2"


def test_the_fault_server_requires_basic_auth_when_asked(faultserver, key):
    url = faultserver.url(key=key, auth="user:pw")
    assert http_get(url)[0] == 401
    token = base64.b64encode(b"user:pw").decode()
    assert http_get(url, headers={"Authorization": f"Basic {token}"})[0] == 200


def test_the_fault_server_redirects_and_loops(faultserver, key):
    target = faultserver.url(host="localhost", key=key, size=10)
    raw = raw_request(faultserver.port, f"GET /data?key={key}&redirect={urllib.parse.quote(target, safe='')}"
                      f"&code=307 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 307") and f"Location: {target}".encode() in raw
    raw = raw_request(faultserver.port, f"GET /data?key={key}&chain=2 HTTP/1.1\r\nHost: h:1\r\n"
                      "Connection: close\r\n\r\n".encode())
    assert b"Location: http://h:1/data?key=" in raw and b"chain=1" in raw


def test_the_fault_server_serves_gzip_only_when_accepted(faultserver, key):
    url = faultserver.url(key=key, size=5000, seed=1, gzip=1)
    _, h, body = http_get(url, headers={"Accept-Encoding": "gzip"})
    assert h.get("Content-Encoding") == "gzip" and gzip.decompress(body) == faultserver.data(5000, 1)
    _, h, body = http_get(url, headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in h and body == faultserver.data(5000, 1)


def test_the_fault_server_sends_close_delimited_bodies_without_length(faultserver, key):
    raw = raw_request(faultserver.port, f"GET /data?key={key}&size=3000&nolength=1 HTTP/1.1\r\nHost: h\r\n\r\n"
                      .encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Length" not in head and len(body) == 3000


def test_the_fault_server_stalls_and_rate_limits(faultserver, key):
    t0 = time.monotonic()
    status, _, body = http_get(faultserver.url(key=key, size=2000, stall=1000, stallfor=1))
    assert status == 200 and len(body) == 2000 and time.monotonic() - t0 >= 0.9
    t0 = time.monotonic()
    http_get(faultserver.url(key=key, size=100_000, slow=100_000))
    assert time.monotonic() - t0 >= 0.8


def test_the_fault_server_records_uploads_and_multipart_parts(faultserver, key):
    payload = bytes(range(256)) * 1000
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
            b"Content-Type: image/png\r\n\r\n" + payload + b"\r\n--XyZ\r\n"
            b"Content-Disposition: form-data; name=\"field\"\r\n\r\nvalue\r\n--XyZ--\r\n")
    head = (f"POST /upload?key={key} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
            f"Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    raw = raw_request(faultserver.port, head + body)
    assert raw.startswith(b"HTTP/1.1 201")
    answer = json.loads(raw.partition(b"\r\n\r\n")[2])
    assert answer["size"] == len(body) and answer["sha256"] == sha256_bytes(body)
    parts = answer["parts"]
    assert [(p["name"], p["filename"], p["contentType"], p["size"]) for p in parts] == [
        ("file", "a.bin", "image/png", len(payload)), ("field", None, None, 5)]
    assert parts[0]["sha256"] == hashlib.sha256(payload).hexdigest() and parts[1]["value"] == "value"
    # chunked PUT
    chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    raw = raw_request(faultserver.port, f"PUT /upload?key={key} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                      f"Transfer-Encoding: chunked\r\n\r\n".encode() + chunked)
    answer = json.loads(raw.partition(b"\r\n\r\n")[2])
    assert answer["size"] == 11 and answer["sha256"] == sha256_bytes(b"hello world") and answer["chunked"]
    log = faultserver.log(key)
    assert log[0]["upload"]["complete"] and log[1]["upload"]["size"] == 11


def test_nginx_serves_real_ranges_and_if_range(nginx):
    digest = nginx.make_file("servers/r.bin", 100_000)
    url = nginx.url("servers/r.bin")
    status, headers, body = http_get(url)
    assert status == 200 and sha256_bytes(body) == digest
    etag = headers["ETag"]
    status, headers, body = http_get(url, headers={"Range": "bytes=1000-", "If-Range": etag})
    assert status == 206 and len(body) == 99_000
    status, _, body = http_get(url, headers={"Range": "bytes=1000-", "If-Range": '"nope"'})
    assert status == 200 and len(body) == 100_000
    assert http_get(url, headers={"Range": "bytes=100000-"})[0] == 416
    log = nginx.log("servers/r.bin", at_least=4)
    assert [e["status"] for e in log] == [200, 206, 200, 416]
    assert log[1]["range"] == "bytes=1000-" and log[1]["ifRange"] == etag
