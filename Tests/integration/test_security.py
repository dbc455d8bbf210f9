"""SPEC "Security" end to end: TLS verification and pinning, redirect rules, credentials that never
leave their origin nor reach the output, private files, and peers of another uid.

Certificates are made at test time with the `openssl` CLI (a private CA, a server certificate for
127.0.0.1 and localhost, one for another name, and an unrelated CA). The HTTPS server is our fault
server behind stdlib `ssl` (Tests/integration/tls/tlsfaultserver.py): one process with a plain
and a TLS listener sharing one request log, so every test can see what reached the server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import conftest
from conftest import assert_job_schema, http_get, make_temp_root, sha256_file, spawn, stop_process, wait_until

TLS_DIR = Path(__file__).resolve().parent / "tls"


# MARK: - Certificates and the HTTPS fault server


def openssl(*args, cwd) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"openssl {' '.join(args)} failed:\n{p.stderr}"


def make_ca(dir: Path, name: str) -> None:
    """`name.key` + a self-signed CA certificate `name.pem`."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "3", "-subj", f"/CN=aftransfer test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=dir)


def make_leaf(dir: Path, name: str, ca: str, sans: str) -> None:
    """`name.key` + `name.pem` signed by CA `ca`, valid for `sans`; `name-chain.pem` = leaf + CA."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=dir)
    (dir / f"{name}.ext").write_text(
        f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "3", "-extfile", f"{name}.ext", cwd=dir)
    (dir / f"{name}-chain.pem").write_text((dir / f"{name}.pem").read_text() + (dir / f"{ca}.pem").read_text())


def pubkey_pin(dir: Path, key: str) -> str:
    """`sha256//BASE64` of the DER SubjectPublicKeyInfo of `key` (curl's --pinnedpubkey form)."""
    der = subprocess.run(["openssl", "pkey", "-in", str(dir / key), "-pubout", "-outform", "DER"],
                         capture_output=True, timeout=30, check=True).stdout
    return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()


class TLSServers:
    """Certificates in `dir`, and three fault servers, each a plain and a TLS listener sharing one
    log: "server" (`port`, `tls_port`: a certificate for 127.0.0.1 and localhost from `ca`),
    "wrongname" (a certificate for another name from `ca`), "other" (a certificate for 127.0.0.1
    and localhost from `otherca`). Each TLS listener sends its leaf and its CA."""

    def __init__(self) -> None:
        if shutil.which("openssl") is None:
            pytest.skip("the openssl CLI is not installed (needed to make test certificates)")
        self.dir = make_temp_root("aft-tls-")
        os.chmod(self.dir, 0o755)
        make_ca(self.dir, "ca")
        make_ca(self.dir, "otherca")
        make_leaf(self.dir, "server", "ca", "DNS:localhost,IP:127.0.0.1")
        make_leaf(self.dir, "wrongname", "ca", "DNS:elsewhere.invalid")
        make_leaf(self.dir, "other", "otherca", "DNS:localhost,IP:127.0.0.1")
        make_leaf(self.dir, "server2", "ca", "DNS:localhost,IP:127.0.0.1")
        for p in self.dir.iterdir():
            os.chmod(p, 0o644)
        self.ca = self.dir / "ca.pem"
        self.other_ca = self.dir / "otherca.pem"
        self.server_cert = self.dir / "server.pem"
        self.other_cert = self.dir / "other.pem"
        self.server_pin = pubkey_pin(self.dir, "server.key")
        self.other_pin = pubkey_pin(self.dir, "other.key")
        self.both_cas = self.dir / "both-cas.pem"
        self.both_cas.write_text(self.ca.read_text() + self.other_ca.read_text())
        os.chmod(self.both_cas, 0o644)
        self.procs = []
        self.ports = {name: self._start(name) for name in ("server", "wrongname", "other")}
        # "switching": the server's certificate on its first TLS connection, then server2's (same CA).
        self.ports["switching"] = self._start("server", "server2")
        self.switching_port = self.ports["switching"][1]
        self.port, self.tls_port = self.ports["server"]
        self.wrongname_port = self.ports["wrongname"][1]
        self.other_port = self.ports["other"][1]

    def _start(self, name: str, later: str | None = None) -> tuple[int, int]:
        log = open(self.dir / f"{name}{later or ''}-server.log", "wb")
        extra = ["--later-cert", str(self.dir / f"{later}-chain.pem"), "--later-key", str(self.dir / f"{later}.key")] \
            if later else []
        proc = spawn([sys.executable, str(TLS_DIR / "tlsfaultserver.py"), "--cert", str(self.dir / f"{name}-chain.pem"),
                      "--key", str(self.dir / f"{name}.key"), *extra], f"tlsfaultserver {name}",
                     stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=conftest.clean_env())
        log.close()
        self.procs.append(proc)
        line = proc.stdout.readline().decode()
        m = re.match(r"PORT=(\d+) TLSPORT=(\d+)", line)
        assert m, f"tlsfaultserver did not start: {line!r} {(self.dir / f'{name}-server.log').read_text()}"
        return int(m.group(1)), int(m.group(2))

    @staticmethod
    def _query(knobs: dict) -> str:
        q = "&".join(f"{k}={urllib.parse.quote(str(v), safe='')}" for k, v in knobs.items() if v is not None)
        return f"?{q}" if q else ""

    def https(self, path="/data", host="127.0.0.1", port=None, **knobs) -> str:
        return f"https://{host}:{port or self.tls_port}{path}" + self._query(knobs)

    def http(self, path="/data", host="127.0.0.1", **knobs) -> str:
        return f"http://{host}:{self.port}{path}" + self._query(knobs)

    def log(self, key: str, server: str = "server") -> list[dict]:
        """The request log of `key` on `server` (both of its listeners)."""
        status, _, body = http_get(f"http://127.0.0.1:{self.ports[server][0]}/_log?key={urllib.parse.quote(key)}")
        assert status == 200
        return json.loads(body)

    def stop(self) -> None:
        for p in self.procs:
            stop_process(p)


@pytest.fixture(scope="session")
def tls():
    servers = TLSServers()
    yield servers
    servers.stop()


def expect_failed(daemon, id: int, code: str, timeout: float = 15) -> dict:
    """Waits for `failed` with error `code`, not retryable, after exactly one attempt."""
    job = daemon.wait_state(id, ("failed", "completed"), timeout=timeout)
    assert job["state"] == "failed", f"expected a {code} failure: {json.dumps(job, indent=1)}"
    assert job["error"]["code"] == code, f"expected error {code}: {json.dumps(job, indent=1)}"
    assert job["error"]["retryable"] is False, job["error"]
    assert job["attempts"] == 1, f"a {code} failure must not be retried: {json.dumps(job, indent=1)}"
    assert job["waitReason"] is None and job["nextRetryAt"] is None, job
    assert_job_schema(job)
    return job


def test_certificate_pinning_applies_to_every_range_connection_and_fails_with_tls(daemon, tls, faultserver):
    # The "switching" server shows the pinned certificate on its first connection only; a range
    # connection that meets another one (same CA) fails the job with `tls`, not libcurl's
    # "aborted by callback" (`network`), and sends nothing.
    key = faultserver.new_key("pincert-ranges")
    url = tls.https(size=8 * 1024 * 1024, key=key, port=tls.switching_port)
    id = daemon.download(url, "-x", "4", "-o", daemon.work / "r.bin", "--cacert", tls.ca,
                         "--pin-cert", tls.server_cert)
    job = expect_failed(daemon, id, "tls")
    assert job["error"]["retryable"] is False, job
    assert [e["range"] for e in tls.log(key, "switching")] == ["bytes=0-"], tls.log(key, "switching")


def test_a_connection_reset_during_the_tls_handshake_is_a_retried_network_error(daemon):
    # SPEC: resets are retried; TLS failures are not. A server that resets the connection during
    # the handshake judged no certificate.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    done = threading.Event()

    def reset_each():
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.recv(1024)  # the ClientHello
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # an RST

    server = threading.Thread(target=reset_each, daemon=True)
    server.start()
    try:
        id = daemon.download(f"https://127.0.0.1:{port}/x.bin", "-o", daemon.work / "x.bin", "--retries", "1")
        job = daemon.wait_state(id, "failed", timeout=30)
    finally:
        done.set()
        server.join(5)
        listener.close()
    assert job["error"]["code"] == "network" and job["attempts"] == 2, job
    assert [h["error"]["code"] for h in job["history"]] == ["network", "network"], job["history"]


def no_body_on_disk(dest: Path) -> bool:
    part = Path(str(dest) + ".aftpart")
    return not dest.exists() and (not part.exists() or part.stat().st_size == 0)


# MARK: - TLS verification


def test_an_https_download_from_an_unknown_ca_fails_with_tls_at_once_without_retries(daemon, tls, faultserver):
    key = faultserver.new_key("tls-unknown-ca")
    dest = daemon.work / "x.bin"
    t0 = time.monotonic()
    id = daemon.download(tls.https(size=5000, key=key), "-o", dest)
    job = expect_failed(daemon, id, "tls")
    assert time.monotonic() - t0 < 10, "a tls failure must end the job quickly (no backoff)"
    assert len(job["history"]) == 1 and job["history"][0]["error"]["code"] == "tls", job["history"]
    assert job["insecure"] is False
    assert tls.log(key) == [], "no request may be sent over a connection that failed verification"
    assert no_body_on_disk(dest)


def test_an_https_download_with_cacert_completes_and_is_not_marked_insecure(daemon, tls, faultserver):
    key = faultserver.new_key("tls-cacert")
    dest = daemon.work / "ok.bin"
    id = daemon.download(tls.https(size=300_000, seed=7, key=key), "-o", dest, "--cacert", tls.ca)
    job = daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(300_000, 7)
    assert job["insecure"] is False
    assert daemon.jobs()[0]["insecure"] is False
    assert "NOT VERIFIED" not in daemon.cli("status", id, check=0).out
    assert job["history"][-1]["tls"] is not None and job["history"][-1]["tls"] > 0, job["history"]


def test_a_cacert_with_the_path_relative_to_the_cli_works(daemon, tls, faultserver):
    key = faultserver.new_key("tls-relative")
    shutil.copy(tls.ca, daemon.work / "ca.pem")
    id = daemon.download(tls.https(size=100, key=key), "-o", "rel.bin", "--cacert", "ca.pem")
    daemon.wait_state(id, "completed", timeout=30)


def test_a_cacert_of_another_ca_fails_with_tls(daemon, tls, faultserver):
    key = faultserver.new_key("tls-other-ca")
    id = daemon.download(tls.https(size=100, key=key), "-o", daemon.work / "o.bin", "--cacert", tls.other_ca)
    expect_failed(daemon, id, "tls")
    assert tls.log(key) == []


def test_a_certificate_for_another_host_name_fails_with_tls_even_from_a_trusted_ca(daemon, tls, faultserver):
    key = faultserver.new_key("tls-wrong-name")
    id = daemon.download(tls.https(size=100, key=key, port=tls.wrongname_port), "-o", daemon.work / "n.bin",
                         "--cacert", tls.ca)
    expect_failed(daemon, id, "tls")


def test_insecure_completes_and_status_shows_that_tls_was_not_verified(daemon, tls, faultserver):
    key = faultserver.new_key("tls-insecure")
    dest = daemon.work / "i.bin"
    id = daemon.download(tls.https(size=4000, seed=3, key=key), "-o", dest, "--insecure")
    job = daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(4000, 3)
    assert job["insecure"] is True
    assert_job_schema(job)
    assert [j["insecure"] for j in daemon.jobs() if j["id"] == id] == [True]
    text = daemon.cli("status", id, check=0).out
    assert re.search(r"insecure", text, re.I), f"`status` must show --insecure:\n{text}"
    assert "--insecure" in daemon.cli("curl", id, check=0).out


def test_a_verified_job_never_reuses_the_connection_of_an_insecure_one(daemon, tls, faultserver):
    key = faultserver.new_key("tls-reuse-insecure")
    first = daemon.download(tls.https(size=1000, key=key), "-o", daemon.work / "a.bin", "--insecure")
    daemon.wait_state(first, "completed", timeout=30)
    second = daemon.download(tls.https(size=1000, key=key), "-o", daemon.work / "b.bin")
    job = expect_failed(daemon, second, "tls")
    assert job["insecure"] is False
    assert len(tls.log(key)) == 1, "the verified job sent a request over the insecure job's connection"


# MARK: - Public-key pinning


def test_the_right_public_key_pin_succeeds(daemon, tls, faultserver):
    key = faultserver.new_key("pin-right")
    dest = daemon.work / "p.bin"
    id = daemon.download(tls.https(size=20_000, seed=1, key=key), "-o", dest, "--cacert", tls.ca,
                         "--pin-pubkey", tls.server_pin)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(20_000, 1)


def test_a_wrong_public_key_pin_fails_with_tls_even_on_a_server_already_connected(daemon, tls, faultserver):
    key = faultserver.new_key("pin-wrong")
    # A completed unpinned job leaves a connection to the same server in libcurl's cache.
    warm = daemon.download(tls.https(size=100, key=key), "-o", daemon.work / "warm.bin", "--cacert", tls.ca)
    daemon.wait_state(warm, "completed", timeout=30)
    dest = daemon.work / "w.bin"
    id = daemon.download(tls.https(size=20_000, key=key), "-o", dest, "--cacert", tls.ca,
                         "--pin-pubkey", tls.other_pin)
    expect_failed(daemon, id, "tls")
    assert len(tls.log(key)) == 1, "a request was sent to a server whose key does not match the pin"
    assert no_body_on_disk(dest)


def test_several_pins_succeed_when_one_of_them_is_right(daemon, tls, faultserver):
    key = faultserver.new_key("pin-several")
    wrong = "sha256//" + base64.b64encode(b"\x01" * 32).decode()
    id = daemon.download(tls.https(size=1000, key=key), "-o", daemon.work / "s.bin", "--cacert", tls.ca,
                         "--pin-pubkey", f"{wrong};{tls.other_pin};{tls.server_pin}")
    daemon.wait_state(id, "completed", timeout=30)
    id2 = daemon.download(tls.https(size=1000, key=key), "-o", daemon.work / "s2.bin", "--cacert", tls.ca,
                          "--pin-pubkey", f"{wrong};{tls.other_pin}")
    expect_failed(daemon, id2, "tls")


# MARK: - Certificate pinning


def test_pinning_the_servers_certificate_succeeds_also_after_an_unpinned_job_to_that_server(daemon, tls, faultserver):
    key = faultserver.new_key("pincert-leaf")
    warm = daemon.download(tls.https(size=100, key=key), "-o", daemon.work / "warm.bin", "--cacert", tls.ca)
    daemon.wait_state(warm, "completed", timeout=30)
    dest = daemon.work / "c.bin"
    id = daemon.download(tls.https(size=50_000, seed=5, key=key), "-o", dest, "--cacert", tls.ca,
                         "--pin-cert", tls.server_cert)
    job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
    assert job["state"] == "completed", f"a chain holding the pinned certificate must pass: {json.dumps(job, indent=1)}"
    assert sha256_file(dest) == faultserver.sha256(50_000, 5)


def test_pinning_the_ca_certificate_that_the_server_sends_in_its_chain_succeeds(daemon, tls, faultserver):
    key = faultserver.new_key("pincert-ca")
    id = daemon.download(tls.https(size=1000, key=key), "-o", daemon.work / "ca.bin", "--cacert", tls.ca,
                         "--pin-cert", tls.ca)
    daemon.wait_state(id, "completed", timeout=30)


def test_pinning_another_certificate_fails_with_tls_before_any_request_or_body(daemon, tls, faultserver):
    key = faultserver.new_key("pincert-wrong")
    dest = daemon.work / "bad.bin"
    id = daemon.download(tls.https(size=200_000, key=key), "-o", dest, "--cacert", tls.ca,
                         "--pin-cert", tls.other_cert, "--user", "u:pinsecret", "-H", "Cookie: sid=pinned")
    job = expect_failed(daemon, id, "tls")
    assert job["bytes"] == 0, job
    assert no_body_on_disk(dest), os.listdir(daemon.work)
    assert tls.log(key) == [], (
        "the request (with its credentials) reached a server whose chain lacks the pinned certificate: "
        f"{tls.log(key)}")


def test_certificate_pinning_applies_to_every_redirect_hop(daemon, tls, faultserver):
    key = faultserver.new_key("pincert-hops")
    # Both servers are trusted (--cacert holds both CAs); only the first one's chain holds the pin.
    target = tls.https(size=1000, key=key, port=tls.other_port, host="localhost")
    id = daemon.download(tls.https(key=key, redirect=target), "-o", daemon.work / "h.bin", "--cacert", tls.both_cas,
                         "--pin-cert", tls.server_cert)
    job = expect_failed(daemon, id, "tls")
    assert [e["status"] for e in tls.log(key)] == [302], tls.log(key)
    assert tls.log(key, "other") == [], "the second hop's request reached a server that fails the pin"
    assert job["history"][0]["error"]["code"] == "tls"


def test_a_cacert_bundle_trusts_every_ca_in_it(daemon, tls, faultserver):
    key = faultserver.new_key("tls-bundle")
    for port in (tls.tls_port, tls.other_port):
        id = daemon.download(tls.https(size=100, key=key, port=port), "-o", daemon.work / f"{port}.bin",
                             "--cacert", tls.both_cas)
        daemon.wait_state(id, "completed", timeout=30)


# MARK: - Redirects


def test_an_https_to_http_redirect_is_refused_with_redirect(daemon, tls, faultserver):
    key = faultserver.new_key("redir-downgrade")
    target = tls.http(size=100, key=key)
    id = daemon.download(tls.https(key=key, redirect=target), "-o", daemon.work / "d.bin", "--cacert", tls.ca)
    expect_failed(daemon, id, "redirect")
    log = tls.log(key)
    assert len(log) == 1 and log[0]["status"] == 302, f"the http target must never be requested: {log}"


def test_an_http_to_https_redirect_is_followed(daemon, tls, faultserver):
    key = faultserver.new_key("redir-upgrade")
    target = tls.https(size=3000, seed=9, key=key)
    dest = daemon.work / "u.bin"
    id = daemon.download(tls.http(key=key, redirect=target), "-o", dest, "--cacert", tls.ca)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(3000, 9)


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/x"])
def test_a_redirect_to_a_scheme_other_than_http_or_https_is_refused(daemon, faultserver, target):
    key = faultserver.new_key("redir-scheme")
    dest = daemon.work / "f.bin"
    id = daemon.download(faultserver.url(key=key, redirect=target), "-o", dest)
    expect_failed(daemon, id, "redirect")
    assert no_body_on_disk(dest)


def test_ten_redirects_are_followed_and_the_eleventh_is_refused(daemon, faultserver):
    key = faultserver.new_key("redir-ten")
    ok = daemon.download(faultserver.url(size=100, key=key, chain=10), "-o", daemon.work / "ten.bin")
    job = daemon.wait_state(ok, "completed", timeout=30)
    assert job["attempts"] == 1
    assert len(faultserver.log(key)) == 11
    key2 = faultserver.new_key("redir-eleven")
    bad = daemon.download(faultserver.url(size=100, key=key2, chain=11), "-o", daemon.work / "eleven.bin")
    expect_failed(daemon, bad, "redirect")
    assert len(faultserver.log(key2)) == 11, "at most 10 redirects are followed"


def test_a_redirect_loop_ends_with_redirect(daemon, faultserver):
    key = faultserver.new_key("redir-loop")
    id = daemon.download(faultserver.url(key=key, redirect="self"), "-o", daemon.work / "loop.bin")
    expect_failed(daemon, id, "redirect")
    assert len(faultserver.log(key)) <= 11


def secret_headers(entry: dict) -> dict:
    h = entry["headers"]
    return {k: h.get(k) for k in ("authorization", "cookie")}


def test_a_redirect_to_another_host_name_drops_user_authorization_and_cookie(daemon, tls, faultserver):
    # localhost resolves to the same address and port: only the name differs (as curl judges).
    key = faultserver.new_key("redir-host-user")
    target = tls.http(size=100, key=key, host="localhost")
    id = daemon.download(tls.http(key=key, redirect=target), "-o", daemon.work / "u.bin",
                         "--user", "alice:hostpw", "-H", "Cookie: sid=xyz")
    daemon.wait_state(id, "completed", timeout=30)
    first, second = tls.log(key)
    assert first["host"].startswith("127.0.0.1") and second["host"].startswith("localhost")
    assert first["authorization"] == "Basic " + base64.b64encode(b"alice:hostpw").decode()
    assert first["headers"].get("cookie") == "sid=xyz"
    assert secret_headers(second) == {"authorization": None, "cookie": None}, second["headers"]

    key2 = faultserver.new_key("redir-host-hdr")
    target = tls.http(size=100, key=key2, host="localhost")
    id = daemon.download(tls.http(key=key2, redirect=target), "-o", daemon.work / "h.bin",
                         "-H", "Authorization: Bearer hosttok", "-H", "Cookie: sid=xyz")
    daemon.wait_state(id, "completed", timeout=30)
    first, second = tls.log(key2)
    assert secret_headers(first) == {"authorization": "Bearer hosttok", "cookie": "sid=xyz"}, first["headers"]
    assert secret_headers(second) == {"authorization": None, "cookie": None}, second["headers"]


def test_a_redirect_to_another_port_and_scheme_drops_credentials(daemon, tls, faultserver):
    key = faultserver.new_key("redir-port")
    target = tls.https(size=100, key=key)
    id = daemon.download(tls.http(key=key, redirect=target), "-o", daemon.work / "p.bin", "--cacert", tls.ca,
                         "--user", "bob:portpw", "-H", "Authorization: Bearer porttok", "-H", "Cookie: a=b")
    daemon.wait_state(id, "completed", timeout=30)
    first, second = tls.log(key)
    assert first["headers"].get("cookie") == "a=b" and first["authorization"] is not None
    assert secret_headers(second) == {"authorization": None, "cookie": None}, second["headers"]


def test_credentials_stay_dropped_when_a_later_redirect_returns_to_the_first_host(daemon, tls, faultserver):
    key = faultserver.new_key("redir-back")
    back = tls.http(size=100, key=key)
    via_localhost = tls.http(key=key, host="localhost", redirect=back)
    id = daemon.download(tls.http(key=key, redirect=via_localhost), "-o", daemon.work / "b.bin",
                         "--user", "carol:backpw", "-H", "Cookie: c=d")
    daemon.wait_state(id, "completed", timeout=30)
    log = tls.log(key)
    assert len(log) == 3
    assert log[0]["authorization"] is not None
    for entry in log[1:]:
        assert secret_headers(entry) == {"authorization": None, "cookie": None}, entry["headers"]


def test_a_same_origin_redirect_keeps_user_authorization_and_cookie(daemon, tls, faultserver):
    key = faultserver.new_key("redir-same")
    target = tls.http("/elsewhere/file.bin", size=100, key=key)
    id = daemon.download(tls.http(key=key, redirect=target, code=301), "-o", daemon.work / "s.bin",
                         "--user", "dave:samepw", "-H", "Cookie: e=f")
    daemon.wait_state(id, "completed", timeout=30)
    basic = "Basic " + base64.b64encode(b"dave:samepw").decode()
    log = tls.log(key)
    assert [e["authorization"] for e in log] == [basic, basic]
    assert [e["headers"].get("cookie") for e in log] == ["e=f", "e=f"]

    key2 = faultserver.new_key("redir-same-hdr")
    target = tls.https("/elsewhere/file.bin", size=100, key=key2)
    id = daemon.download(tls.https(key=key2, redirect=target), "-o", daemon.work / "s2.bin", "--cacert", tls.ca,
                         "-H", "Authorization: Bearer sametok")
    daemon.wait_state(id, "completed", timeout=30)
    assert [e["authorization"] for e in tls.log(key2)] == ["Bearer sametok", "Bearer sametok"]


# MARK: - Secrets are never printed


SECRETS = ("secretpw", "tok123", "sid=abc", "pw2")


def hexsha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def queue_jobs_with_secrets(daemon, faultserver) -> tuple[dict, dict]:
    """Queues, and waits for, one job per kind of secret (plus a failing one carrying all of them).
    Returns ({name: id}, {what was printed: text}); checks that every request authenticated."""
    keys = {n: faultserver.new_key(f"sec-{n}") for n in ("user", "hdr", "lower", "url", "fail")}
    printed: dict[str, str] = {}
    ids: dict[str, int] = {}

    r = daemon.cli("download", faultserver.url(size=1000, key=keys["user"], authsha256=hexsha("u:secretpw")),
                   "-o", daemon.work / "user.bin", "--user", "u:secretpw", "--json", check=0)
    printed["download --user --json"] = r.out + r.err
    ids["user"] = json.loads(r.out)["id"]
    r = daemon.cli("download", faultserver.url(size=1000, key=keys["hdr"]), "-o", daemon.work / "hdr.bin",
                   "-H", "Authorization: Bearer tok123", "-H", "Cookie: sid=abc", "--wait", check=0)
    printed["download -H --wait"] = r.out + r.err
    ids["hdr"] = int(r.out.split()[0])
    ids["lower"] = daemon.download(faultserver.url(size=1000, key=keys["lower"]), "-o", daemon.work / "lower.bin",
                                   "-H", "authorization: Bearer tok123", "-H", "COOKIE: sid=abc")
    url_cred = faultserver.url(size=1000, key=keys["url"], authsha256=hexsha("u:pw2")).replace("http://", "http://u:pw2@")
    ids["url"] = daemon.download(url_cred, "-o", daemon.work / "url.bin")
    # A failing job too: its error message and log lines must not carry the secrets either.
    fail_url = faultserver.url(key=keys["fail"], status=404).replace("http://", "http://u:pw2@")
    ids["fail"] = daemon.download(fail_url, "-o", daemon.work / "fail.bin", "--user", "u:secretpw",
                                  "-H", "Authorization: Bearer tok123", "-H", "Cookie: sid=abc")
    for name, id in ids.items():
        daemon.wait_state(id, "failed" if name == "fail" else "completed", timeout=30)

    # The requests still authenticated: the server saw the credentials.
    assert faultserver.log(keys["user"])[0]["authorization"] == "Basic " + base64.b64encode(b"u:secretpw").decode()
    assert faultserver.log(keys["url"])[0]["authorization"] == "Basic " + base64.b64encode(b"u:pw2").decode()
    for name in ("hdr", "lower"):
        hdr = faultserver.log(keys[name])[0]["headers"]
        assert hdr.get("authorization") == "Bearer tok123" and hdr.get("cookie") == "sid=abc", hdr
    return ids, printed


def test_passwords_authorization_and_cookies_never_appear_in_output_or_logs(daemon, faultserver):
    ids, outputs = queue_jobs_with_secrets(daemon, faultserver)
    outputs["list"] = daemon.cli("list", check=0).out
    outputs["list --json"] = daemon.cli("list", "--json", check=0).out
    for id in ids.values():
        for args in (("status", id), ("status", id, "--json"), ("curl", id), ("wait", id)):
            r = daemon.cli(*args)
            outputs[" ".join(map(str, args))] = r.out + r.err
    outputs["rpc transfer.list"] = json.dumps(daemon.rpc_result("transfer.list"))
    daemon.stop()  # the log is complete once the daemon has exited
    outputs["daemon log"] = daemon.log_text()
    assert outputs["daemon log"].strip(), "the daemon wrote no log at all"

    leaks = [f"{secret!r} in {where}" for where, text in outputs.items() for secret in SECRETS if secret in text]
    assert not leaks, "secrets printed:\n" + "\n".join(leaks) + "\n\n" + "\n".join(
        f"--- {w}\n{t}" for w, t in outputs.items() if any(s in t for s in SECRETS))
    # The job object's URL has user:password removed (SPEC "The job object").
    for job in json.loads(outputs["list --json"]):
        assert "@" not in urllib.parse.urlsplit(job["url"]).netloc, job["url"]


def test_curl_shows_three_stars_where_each_secret_was(daemon, faultserver):
    ids, _ = queue_jobs_with_secrets(daemon, faultserver)
    curl = {name: daemon.cli("curl", id, check=0).out for name, id in ids.items()}
    assert re.search(r"u:\*\*\*", curl["user"]), curl["user"]
    for name in ("hdr", "lower", "fail"):
        assert re.search(r"(?i)authorization: \*\*\*", curl[name]), curl[name]
        assert re.search(r"(?i)cookie: \*\*\*", curl[name]), curl[name]
    assert re.search(r"u:\*\*\*", curl["fail"]), curl["fail"]
    for name, text in curl.items():
        assert not any(s in text for s in SECRETS), text
    assert "***" in curl["url"], f"the URL's password must show as *** in `curl` (it was dropped): {curl['url']}"


# MARK: - Uploads over TLS


def test_an_upload_over_https_with_a_pinned_certificate_arrives(daemon, tls, faultserver):
    key = faultserver.new_key("up-pin")
    src = daemon.work / "up.bin"
    digest = conftest.write_random_file(src, 100_000)
    id = daemon.upload(src, tls.https("/upload", key=key), "--cacert", tls.ca, "--pin-cert", tls.server_cert,
                       "--pin-pubkey", tls.server_pin)
    daemon.wait_state(id, "completed", timeout=30)
    [entry] = tls.log(key)
    assert entry["upload"]["sha256"] == digest and entry["upload"]["complete"] is True, entry["upload"]


def test_an_upload_to_a_server_failing_the_pinned_certificate_sends_nothing(daemon, tls, faultserver):
    key = faultserver.new_key("up-pin-bad")
    src = daemon.work / "up.bin"
    conftest.write_random_file(src, 100_000)
    id = daemon.upload(src, tls.https("/upload", key=key), "--cacert", tls.ca, "--pin-cert", tls.other_cert,
                       "--user", "u:uppw")
    job = expect_failed(daemon, id, "tls")
    assert job["bytes"] == 0, job
    assert tls.log(key) == [], f"the upload reached a server that fails the pin: {tls.log(key)}"


def test_a_tus_upload_over_https_never_goes_on_over_http(daemon, tls, faultserver):
    # SPEC: never https→http. A tus server whose creation answer points at an http upload URL
    # would have the file sent in clear: refused, nothing sent there.
    key = faultserver.new_key("tus-downgrade")
    src = daemon.work / "t.bin"
    src.write_bytes(os.urandom(50_000))
    target = tls.http("/files/1", key=key)
    id = daemon.upload(src, tls.https("/upload", key=key, redirect=target, code=201), "--resumable", "tus",
                       "--cacert", tls.ca)
    job = expect_failed(daemon, id, "redirect")
    assert job["uploadUrl"] is None, job
    assert [e["method"] for e in tls.log(key)] == ["POST"], tls.log(key)


def test_an_upload_redirected_from_https_to_http_is_refused(daemon, tls, faultserver):
    key = faultserver.new_key("up-downgrade")
    src = daemon.work / "up.txt"
    src.write_text("hello")
    id = daemon.upload(src, tls.https("/upload", key=key, redirect=tls.http("/upload", key=key), code=307),
                       "--cacert", tls.ca)
    expect_failed(daemon, id, "redirect")
    assert len(tls.log(key)) == 1, tls.log(key)


# MARK: - Files and peers


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_home_socket_database_wal_and_lock_are_private(daemon, faultserver):
    key = faultserver.new_key("modes")
    id = daemon.download(faultserver.url(size=1000, key=key), "-o", daemon.work / "m.bin")
    daemon.wait_state(id, "completed", timeout=30)
    home = daemon.home
    assert mode(home) == 0o700, oct(mode(home))
    assert stat.S_ISSOCK(os.stat(daemon.socket).st_mode)
    assert mode(daemon.socket) == 0o600, oct(mode(daemon.socket))
    assert mode(daemon.database) == 0o600, oct(mode(daemon.database))
    wal = Path(str(daemon.database) + "-wal")
    assert wal.exists(), "the database is in WAL mode: its -wal file exists while the daemon runs"
    for extra in ("-wal", "-shm"):
        p = Path(str(daemon.database) + extra)
        if p.exists():
            assert mode(p) == 0o600, f"{p}: {oct(mode(p))}"
    lock = home / "aftransferd.lock"
    assert lock.exists(), os.listdir(home)
    assert mode(lock) == 0o600, oct(mode(lock))
    # Nothing in home is readable by others.
    for p in home.iterdir():
        assert mode(p) & 0o077 == 0, f"{p} is {oct(mode(p))}"


def test_an_autostarted_daemons_home_and_log_are_private(daemon_factory):
    d = daemon_factory(start=False)
    d.cli("list", autostart=True, check=0)
    wait_until(lambda: (d.home / "aftransferd.log").exists(), 10, "the autostarted daemon's log")
    assert mode(d.home) == 0o700
    assert mode(d.home / "aftransferd.log") == 0o600, oct(mode(d.home / "aftransferd.log"))
    d.cli("daemon", "stop", check=0)


def test_files_an_older_or_hand_made_home_left_open_are_made_private(daemon_factory):
    # `open` keeps an existing file's mode: the lock, the reserve and the autostart log of a home
    # whose files were left readable are made 0600 again, as the database already was.
    d = daemon_factory(start=False)
    d.home.mkdir(parents=True)
    loose = ["aftransferd.lock", "aftransferd.reserve", "aftransferd.log", "transfers.sqlite"]
    for name in loose:
        (d.home / name).touch()
    os.chmod(d.home, 0o755)
    for name in loose:
        os.chmod(d.home / name, 0o644)
    (d.home / "transfers.sqlite").unlink()  # an empty file is no database
    d.cli("list", autostart=True, check=0)
    wait_until(lambda: d.socket.exists(), 10, "the autostarted daemon's socket")
    assert mode(d.home) == 0o700
    for name in ["aftransferd.lock", "aftransferd.reserve", "aftransferd.log", "transfers.sqlite"]:
        assert mode(d.home / name) == 0o600, f"{name}: {oct(mode(d.home / name))}"
    d.cli("daemon", "stop", check=0)


SETPRIV = shutil.which("setpriv")

PEER_CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({"connect": "refused", "errno": e.errno, "error": str(e)})); sys.exit(0)
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n')
except OSError as e:
    print(json.dumps({"connect": "ok", "answer": "", "error": str(e)})); sys.exit(0)
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    print(json.dumps({"connect": "ok", "answer": data.decode("utf-8", "replace"), "error": "timeout"})); sys.exit(0)
except OSError as e:
    print(json.dumps({"connect": "ok", "answer": data.decode("utf-8", "replace"), "error": str(e)})); sys.exit(0)
print(json.dumps({"connect": "ok", "answer": data.decode("utf-8", "replace"), "error": None}))
"""


def run_as_nobody(socket_path: Path) -> dict:
    if SETPRIV is None:
        pytest.skip("setpriv is not installed: cannot run a client with another uid")
    if os.geteuid() != 0:
        pytest.skip("changing uid to nobody needs root")
    p = subprocess.run([SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                        PEER_CLIENT, str(socket_path)], capture_output=True, text=True, timeout=30,
                       env=conftest.clean_env(), cwd="/")
    assert p.returncode == 0, f"the nobody client failed: {p.stderr}"
    return json.loads(p.stdout)


def test_a_peer_of_another_uid_cannot_reach_the_socket_through_the_private_home(daemon):
    out = run_as_nobody(daemon.socket)
    assert out["connect"] == "refused", f"nobody connected to a private socket: {out}"


def test_a_peer_of_another_uid_is_refused_by_the_socket_files_mode_alone(daemon):
    # A copy of a socket in a directory others can traverse (`--socket` in a shared place), made
    # inside this test's temp dir: the socket's own mode 0600 must keep the other uid out.
    for p in (daemon.root, daemon.home):
        os.chmod(p, 0o711)
    try:
        out = run_as_nobody(daemon.socket)
    finally:
        os.chmod(daemon.home, 0o700)
    assert out["connect"] == "refused", f"nobody connected to the socket: {out}"
    assert out["errno"] == 13, out  # EACCES


def test_a_peer_of_another_uid_gets_no_answer_even_when_the_socket_file_is_open_to_it(daemon):
    # A copy of the situation where file modes do not protect the socket (all inside this test's
    # temp dir): the daemon itself must refuse the peer by its credentials (SO_PEERCRED).
    for p in (daemon.root, daemon.home):
        os.chmod(p, 0o711)
    os.chmod(daemon.socket, 0o666)
    try:
        out = run_as_nobody(daemon.socket)
    finally:
        os.chmod(daemon.home, 0o700)
        os.chmod(daemon.socket, 0o600)
    assert out["connect"] == "ok", f"the test could not open the path to nobody: {out}"
    assert out["answer"] == "", f"the daemon answered a peer with another uid: {out}"
    assert out["error"] != "timeout", f"the daemon left the other uid's connection open: {out}"
    # And it still serves its own user.
    assert "result" in daemon.rpc("daemon.status")
    assert daemon.running


def test_that_a_servers_escape_sequences_never_reach_the_terminal_as_such(daemon, key):
    # A hostile server's answer to an upload: `status` prints its body (up to 20 lines) for people,
    # with every control character shown as ^X, never written as is; `--json` keeps it exactly.
    import http.server
    import threading

    body = b"ok\n\x1b[1A\x1b[2K\x1b]0;owned\x07forged line\n"

    class Hostile(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        src = daemon.work / "up.txt"
        src.write_bytes(b"hello")
        id = daemon.upload(str(src), f"http://127.0.0.1:{server.server_address[1]}/up", "--resumable", "off")
        daemon.wait_state(id, "completed")
        assert daemon.job(id)["response"]["body"] == body.decode()
        out = daemon.cli("status", str(id), check=0).out
        assert "\x1b" not in out and "\x07" not in out, repr(out)
        assert "    ^[[1A^[[2K^[]0;owned^Gforged line" in out.splitlines(), out
    finally:
        server.shutdown()
        server.server_close()


def test_that_a_path_with_control_characters_reaches_the_terminal_escaped_in_messages_and_curl(
        daemon, faultserver, key):
    # Found by an outside audit: the daemon's refusal naming a destination, a list's refusals and
    # `curl ID` printed such a path (from a list file, say) with its escape sequences as they were.
    dest = daemon.work / "a\x1b[2J\x07b.bin"
    id = daemon.download(faultserver.url(key=key, size=400_000, slow=50_000), "-o", str(dest))
    r = daemon.cli("download", faultserver.url(key=key + "-2", size=10), "-o", str(dest), check=2)
    assert "\x1b" not in r.err and "\x07" not in r.err and "a^[[2J^Gb.bin" in r.err, repr(r.err)
    listed = daemon.work / "list.txt"
    listed.write_text(f"{faultserver.url(key=key + '-3', size=10)}\tx\x1b]0;t\x07\n"
                      f"{faultserver.url(key=key + '-4', size=10)}\tx\x1b]0;t\x07\n")
    r = daemon.cli("download", "-i", str(listed), "-d", str(daemon.work), check=2)
    assert "\x1b" not in r.err and "\x07" not in r.err and "x^[]0;t^G" in r.err, repr(r.err)
    out = daemon.cli("curl", str(id), check=0).out
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert "-o $'" + str(daemon.work) + "/a\\x1B[2J\\x07b.bin'" in out, out
    daemon.cli("cancel", str(id), check=True)


def test_that_the_daemons_refusals_show_control_characters_as_the_readme_says(daemon, faultserver, key):
    # Found by an outside audit: the daemon's checks wrote "?" for them (`x?]0;T?y.bin`), where the
    # README promises `^[` and `^G` as everywhere else.
    taken = daemon.work / "x\x1b]0;T\x07y.bin"
    taken.write_bytes(b"mine")
    r = daemon.cli("download", faultserver.url(key=key, size=10), "-o", str(taken), check=2)
    assert "x^[]0;T^Gy.bin already exists" in r.err, repr(r.err)
    missing = daemon.work / "no\x1b[1mdir" / "f.bin"
    r = daemon.cli("download", faultserver.url(key=key, size=10), "-o", str(missing), check=2)
    assert "no^[[1mdir does not exist" in r.err, repr(r.err)
    reply = daemon.rpc("transfer.add", {"kind": "download", "url": faultserver.url(key=key, size=10),
                                        "destination": str(taken)})
    assert "x^[]0;T^Gy.bin already exists" in reply["error"]["message"], reply
    assert taken.read_bytes() == b"mine"


@pytest.mark.parametrize("size", [1000, 600_000], ids=["small", "large"])
def test_a_link_at_the_parts_name_is_never_written_through(daemon, faultserver, key, size):
    # The bytes went to the link's target, outside the directory, and the link was renamed into
    # place as the download.
    victim = daemon.work / "victim.txt"
    victim.write_text("VICTIM")
    dest = daemon.work / "file.bin"
    os.symlink(victim, str(dest) + ".aftpart")
    id = daemon.download(faultserver.url(size=size, key=key), "-o", dest)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "io" and "symbolic link" in job["error"]["message"], job
    assert victim.read_text() == "VICTIM" and not dest.exists()
    assert os.path.islink(str(dest) + ".aftpart")


def test_a_link_at_an_upload_responses_parts_name_is_never_written_through(daemon, faultserver, key):
    victim = daemon.work / "victim.txt"
    victim.write_text("VICTIM")
    src = daemon.work / "src.bin"
    src.write_bytes(b"x" * 1000)
    resp = daemon.work / "resp.out"
    os.symlink(victim, str(resp) + ".aftpart")
    id = daemon.upload(src, faultserver.url("/up", key=key), "--response", resp)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert "symbolic link" in job["error"]["message"], job
    assert victim.read_text() == "VICTIM" and not resp.exists()


@pytest.mark.parametrize("size", [1000, 600_000], ids=["small", "large"])
def test_a_fifo_at_the_parts_name_fails_the_job_and_never_blocks_the_daemon(daemon, faultserver, key, size):
    # open(2) of a FIFO for writing waited for a reader on the daemon's loop: every RPC, and
    # SIGTERM, waited with it. Then (an outside audit) the failed attempt deleted the FIFO as an
    # empty part: README says nothing is touched; nor does `remove` of the job.
    dest = daemon.work / "ff.bin"
    fifo = str(dest) + ".aftpart"
    os.mkfifo(fifo)
    id = daemon.download(faultserver.url(size=size, key=key), "-o", dest)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "io" and "FIFO" in job["error"]["message"], job
    assert daemon.cli("daemon", "status", "--json", timeout=10).rc == 0
    assert daemon.download(faultserver.url(size=1000, key=key + "b"), "-o", daemon.work / "ok.bin")
    time.sleep(0.5)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was deleted"
    daemon.cli("remove", id, check=0)
    time.sleep(0.3)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "remove deleted the FIFO"


@pytest.mark.parametrize("to_host,keeps", [("localhost", False), ("127.0.0.1", True)])
def test_a_users_host_header_goes_only_to_the_jobs_own_host_as_in_curl(daemon, faultserver, key, to_host, keeps):
    # Found by an outside audit: `-H 'Host: example.test'` went along a redirect to another host,
    # which was then asked for the first one's site (curl sends it to the first host only).
    target = faultserver.url(host=to_host, size=10, key=key + "-t")
    id = daemon.download(faultserver.url(redirect=target, key=key), "-H", "Host: example.test",
                         "-o", daemon.work / "h.bin")
    daemon.wait_state(id, "completed")
    assert faultserver.log(key)[0]["host"] == "example.test"
    second = faultserver.log(key + "-t")[0]["host"]
    assert second == ("example.test" if keeps else f"{to_host}:{faultserver.port}"), second


def test_a_cli_of_another_user_is_told_so_at_once(daemon):
    # Found by an outside audit: the daemon closes another uid's connection without a word, and
    # the CLI said "aftransferd closed the connection" (`daemon stop` waited 10 s, then said the
    # daemon "did not stop"). The CLI reads the daemon's uid from the socket and says so, exit 3.
    import os
    import shutil
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the CLI as nobody")
    # Only the test's own directories (its root and below) that nobody cannot pass through yet.
    root = daemon.root
    opened = [p for p in (daemon.home, *daemon.home.parents)
              if (p == root or root in p.parents) and p.stat().st_mode & 0o001 == 0]
    modes = {p: p.stat().st_mode & 0o7777 for p in opened}
    try:
        for p in opened:
            p.chmod(modes[p] | 0o011)  # nobody passes through to the socket
        daemon.socket.chmod(0o666)
        for args in (("list",), ("daemon", "stop"), ("daemon", "status")):
            started = time.monotonic()
            r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", daemon.cli_exe, *args,
                                "--home", str(daemon.home), "--no-autostart"],
                               capture_output=True, text=True, timeout=30, env=daemon.env)
            assert r.returncode == 3, (args, r)
            assert "runs as another user (uid 0)" in r.stderr, (args, r.stderr)
            assert time.monotonic() - started < 5, args
    finally:
        daemon.socket.chmod(0o600)
        for p, m in modes.items():
            p.chmod(m)
    assert daemon.running and "result" in daemon.rpc("daemon.status")
