"""Fixtures for aftransfer's end-to-end tests: real processes, real sockets, real servers.

What is here (all reusable by any test file in this directory):

- ``bin_dir`` (session): where ``aftransferd`` and ``aftransfer`` are. ``$AFT_BIN_DIR``, else
  ``swift build --show-bin-path`` in the repo root. Nothing is built here: ``scripts/test`` builds.
- ``faultserver`` (session): our fault-injecting HTTP server (``Tests/faultserver``), with
  ``url(path, **knobs)``, ``log(key)``, ``reset(key)``, ``data(size, seed)``, ``sha256(size, seed)``.
  More servers (e.g. inside a network namespace): ``FaultServer(host=..., prefix=("ip", "netns",
  "exec", NS))``; stop them with ``.stop()`` (the finalizer checks they are gone). Its ``log()``
  is fetched over HTTP from this process, so the server must be reachable from here to use it.
- ``key`` (function): a fresh faultserver key for this test (scopes its counters and log).
- ``nginx`` (session): a real nginx on 127.0.0.1 serving a temp docroot, with
  ``make_file(name, size) -> sha256``, ``url(name, rate=None)``, ``log()``.
- ``daemon`` (function): a started ``aftransferd --home HOME`` in a fresh temp dir, whose options
  come from ``@pytest.mark.daemon_args(...)``; ``daemon_factory`` makes more (or unstarted) ones:
  ``daemon_factory(args=(...), start=False, prefix=("ip", "netns", "exec", "ns1"))``.
  A ``Daemon`` has ``cli(...)``, ``rpc(...)``, ``download(...)``, ``job(id)``, ``jobs()``,
  ``wait_state(id, states)``, ``stop()``, ``kill9()``, ``restart()``, ``start()``.

Every process started here is stopped by its PID at teardown (SIGTERM, then SIGKILL after 5 s),
and a session finalizer fails the run if any of them, or any process naming one of our temp
dirs on its command line (an autostarted daemon), survives.

Per-test timeouts use SIGALRM (``@pytest.mark.timeout(N)``; default ``$AFT_TEST_TIMEOUT`` or
120 s for the test body, 60 s for setup, 30 s for teardown), so nothing hangs the suite.

Helpers importable by tests: ``from conftest import sha256_file, assert_job_schema, ...``.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import itertools
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTSERVER_DIR = REPO / "Tests" / "faultserver"
NGINX_TEMPLATE = REPO / "Tests" / "nginx" / "nginx.conf.template"

sys.path.insert(0, str(FAULTSERVER_DIR))
import faultserver as fsmod  # noqa: E402  (the same PRNG the server uses)

DEFAULT_TIMEOUT = float(os.environ.get("AFT_TEST_TIMEOUT", "120"))
KEEP_TMP = os.environ.get("AFT_KEEP_TMP") == "1"

STATES = ("queued", "running", "waiting", "paused", "completed", "failed", "cancelled")
TERMINAL = ("completed", "failed", "cancelled")
ERROR_CODES = (
    "network", "timeout", "http_status", "tls", "redirect", "checksum", "destination_exists",
    "destination_missing_dir", "disk_full", "io", "source_changed", "invalid_request", "cancelled",
)
JOB_KEYS = (
    "id", "kind", "url", "method", "state", "destination", "bytes", "total", "fraction", "rate",
    "eta", "attempts", "httpStatus", "error", "waitReason", "nextRetryAt", "insecure", "sha256",
    "createdAt", "updatedAt", "completedAt", "history", "connections",
    "hook",  # issue 10: the last ending's --on-end hook
)
HISTORY_KEYS = (
    "attempt", "startedAt", "endedAt", "httpStatus", "bytes", "nameLookup", "connect", "tls",
    "firstByte", "total", "error",
)
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
              "ALL_PROXY", "NO_PROXY", "ftp_proxy", "FTP_PROXY")

# Everything this session started, for the finalizer.
_PROCESSES: list[tuple[subprocess.Popen, str]] = []
_TEMP_ROOTS: list[str] = []
_URLOPEN = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# MARK: - Plain helpers


def sha256_file(path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_random_file(path, size: int) -> str:
    """Writes ``size`` random bytes to ``path``; returns their SHA-256."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            chunk = os.urandom(min(left, 1 << 20))
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def make_temp_root(prefix: str = "aft-") -> Path:
    """A short private temp dir (Unix socket paths must stay under 108 bytes)."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    _TEMP_ROOTS.append(root)
    return Path(root)


def clean_env(extra: dict | None = None) -> dict:
    """The environment for our children: no proxies, no inherited aftransfer settings."""
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env.pop("AFTRANSFER_HOME", None)
    env.pop("AFTRANSFER_SOCKET", None)
    env["LC_ALL"] = env.get("LC_ALL", "C.UTF-8")
    if extra:
        env.update(extra)
    return env


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    """Polls ``predicate`` until it returns a truthy value; fails naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def http_get(url: str, timeout: float = 10, headers: dict | None = None, method: str = "GET"):
    """(status, headers, body) of a GET (or ``method``), without raising on HTTP errors."""
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with _URLOPEN.open(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def assert_job_schema(job: dict) -> None:
    """Checks a job object against SPEC "The job object (JSON)": exact field names and types."""
    assert isinstance(job, dict), f"job is not an object: {job!r}"
    expected = set(JOB_KEYS) | ({"response", "uploadUrl", "resumable"} if job.get("kind") == "upload" else set())
    assert set(job) == expected, (
        f"job fields differ from SPEC: missing {sorted(expected - set(job))}, "
        f"extra {sorted(set(job) - expected)}"
    )
    assert is_int(job["id"]), job["id"]
    assert job["kind"] in ("download", "upload"), job["kind"]
    assert isinstance(job["url"], str) and job["url"], job["url"]
    assert isinstance(job["method"], str) and job["method"], job["method"]
    assert job["state"] in STATES, job["state"]
    assert job["destination"] is None or isinstance(job["destination"], str), job["destination"]
    if job["destination"] is not None:
        assert job["destination"].startswith("/"), f"destination is not absolute: {job['destination']}"
    assert is_int(job["bytes"]) and job["bytes"] >= 0, job["bytes"]
    assert job["total"] is None or (is_int(job["total"]) and job["total"] >= 0), job["total"]
    if job["total"] is None:
        assert job["fraction"] is None, f"fraction must be null while total is unknown: {job}"
    assert job["fraction"] is None or (is_number(job["fraction"]) and 0 <= job["fraction"] <= 1), job["fraction"]
    assert is_number(job["rate"]) and job["rate"] >= 0, job["rate"]
    if job["state"] != "running":
        assert job["rate"] == 0, f"rate must be 0 when not running: {job['state']} {job['rate']}"
    assert job["eta"] is None or (is_number(job["eta"]) and job["eta"] >= 0), job["eta"]
    assert is_int(job["attempts"]) and job["attempts"] >= 0, job["attempts"]
    assert job["httpStatus"] is None or is_int(job["httpStatus"]), job["httpStatus"]
    assert_error_schema(job["error"])
    assert job["waitReason"] in (None, "backoff", "offline", "disk"), job["waitReason"]
    if job["state"] != "waiting":
        assert job["waitReason"] is None, f"waitReason outside waiting: {job}"
    assert job["nextRetryAt"] is None or RFC3339_UTC.match(job["nextRetryAt"]), job["nextRetryAt"]
    assert isinstance(job["insecure"], bool), job["insecure"]
    assert job["hook"] is None or (set(job["hook"]) == {"exitStatus", "output"} and is_int(job["hook"]["exitStatus"])
                                   and isinstance(job["hook"]["output"], str)), job["hook"]
    assert job["sha256"] is None or re.fullmatch(r"[0-9a-f]{64}", job["sha256"]), job["sha256"]
    assert isinstance(job["createdAt"], str) and RFC3339_UTC.match(job["createdAt"]), job["createdAt"]
    assert isinstance(job["updatedAt"], str) and RFC3339_UTC.match(job["updatedAt"]), job["updatedAt"]
    assert job["completedAt"] is None or RFC3339_UTC.match(job["completedAt"]), job["completedAt"]
    if job["state"] == "completed":
        assert job["completedAt"] is not None, "completed job without completedAt"
    assert isinstance(job["history"], list), job["history"]
    for h in job["history"]:
        assert isinstance(h, dict) and set(h) == set(HISTORY_KEYS), (
            f"history entry fields differ from SPEC: {sorted(h) if isinstance(h, dict) else h}"
        )
        assert is_int(h["attempt"]) and h["attempt"] >= 1, h
        assert RFC3339_UTC.match(h["startedAt"]), h
        assert h["endedAt"] is None or RFC3339_UTC.match(h["endedAt"]), h
        assert h["httpStatus"] is None or is_int(h["httpStatus"]), h
        assert is_int(h["bytes"]) and h["bytes"] >= 0, h
        for k in ("nameLookup", "connect", "tls", "firstByte", "total"):
            assert h[k] is None or (is_number(h[k]) and h[k] >= 0), (k, h)
        assert_error_schema(h["error"])
    if job["kind"] == "upload":
        r = job["response"]
        assert r is None or (isinstance(r, dict) and set(r) == {"status", "headers", "body"}), r
        assert job["uploadUrl"] is None or isinstance(job["uploadUrl"], str), job["uploadUrl"]
        assert job["resumable"] in (None, "ietf", "tus"), job["resumable"]


def assert_error_schema(err) -> None:
    if err is None:
        return
    assert isinstance(err, dict) and set(err) == {"code", "message", "retryable"}, (
        f"error object fields differ from SPEC: {err}"
    )
    assert err["code"] in ERROR_CODES, f"unknown error code {err['code']!r}"
    assert isinstance(err["message"], str), err
    assert isinstance(err["retryable"], bool), err


def proc_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return out


def processes_mentioning(needle: str) -> list[int]:
    """PIDs (not ours) whose command line contains ``needle``."""
    out = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmd and proc_alive(int(entry)):
            out.append(int(entry))
    return out


def stop_process(proc: subprocess.Popen, grace: float = 5.0, sig=signal.SIGTERM) -> int:
    """Stops one of our children by PID: ``sig``, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait(timeout=10)


def spawn(cmd, what: str, **kwargs) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, **kwargs)
    _PROCESSES.append((proc, what))
    return proc


# MARK: - Timeouts (SIGALRM)


class TestTimeout(Exception):
    """Raised in the test when its time is up."""


def _timeout_for(item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker and marker.args:
        return float(marker.args[0])
    return DEFAULT_TIMEOUT


def _with_alarm(seconds: float, what: str):
    def handler(signum, frame):
        raise TestTimeout(f"{what} took longer than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return old


def _clear_alarm(old) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    old = _with_alarm(60, f"setup of {item.name}")
    try:
        yield
    finally:
        _clear_alarm(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    old = _with_alarm(_timeout_for(item), item.name)
    try:
        yield
    finally:
        _clear_alarm(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    old = _with_alarm(30, f"teardown of {item.name}")
    try:
        yield
    finally:
        _clear_alarm(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        for d in getattr(item, "_aft_daemons", []):
            report.sections.append((f"daemon {d.name} output ({d.log_path})", d.log_tail()))


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit (SIGALRM)")
    config.addinivalue_line("markers", "daemon_args(*args): extra aftransferd flags for `daemon`")


def pytest_sessionfinish(session, exitstatus):
    leftovers = []
    for proc, what in _PROCESSES:
        if proc.poll() is None:
            leftovers.append(f"{what} (pid {proc.pid})")
            stop_process(proc, grace=2)
    for root in _TEMP_ROOTS:
        for pid in processes_mentioning(root):
            leftovers.append(f"pid {pid} mentioning {root}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for root in _TEMP_ROOTS:
        if not KEEP_TMP:
            shutil.rmtree(root, ignore_errors=True)
    if leftovers:
        sys.stderr.write("\nprocesses left behind by the tests (now killed):\n  "
                         + "\n  ".join(leftovers) + "\n")
        if session.exitstatus == 0:
            session.exitstatus = 1


# MARK: - Binaries


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    env = os.environ.get("AFT_BIN_DIR")
    if env:
        path = Path(env)
    else:
        try:
            out = subprocess.run(["swift", "build", "--show-bin-path"], cwd=REPO, capture_output=True,
                                 text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.fail(f"cannot find the binaries: set AFT_BIN_DIR ({e})")
        path = Path(out.stdout.strip())
    for name in ("aftransferd", "aftransfer"):
        if not (path / name).is_file():
            pytest.fail(f"{path / name} does not exist: build first (scripts/test does), "
                        "or point AFT_BIN_DIR at the build's bin dir")
    return path


# MARK: - The fault server


class FaultServer:
    """Our fault-injecting server, running as a child process for the whole session."""

    _counter = itertools.count(1)

    def __init__(self, host: str = "127.0.0.1", prefix=()) -> None:
        """Starts the server on ``host`` (any free port); ``prefix`` wraps the command, e.g.
        ``("ip", "netns", "exec", "ns-server")`` to run it inside a network namespace."""
        self.root = make_temp_root("aft-fs-")
        self.log_path = self.root / "faultserver.log"
        self._log = open(self.log_path, "wb")
        self.proc = spawn(
            [*map(str, prefix), sys.executable, str(FAULTSERVER_DIR / "faultserver.py"), "--host", host,
             "--port", "0"],
            "faultserver", stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
            env=clean_env(),
        )
        line = b""
        deadline = time.monotonic() + 10
        while not line.endswith(b"\n"):
            r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                raise RuntimeError("faultserver did not print PORT= in 10 s")
            ch = os.read(self.proc.stdout.fileno(), 1)
            if not ch:
                raise RuntimeError(f"faultserver exited: {self.log_path.read_text()}")
            line += ch
        m = re.match(rb"PORT=(\d+)", line)
        assert m, line
        self.port = int(m.group(1))
        self.host = host
        self.base = f"http://{host}:{self.port}"

    def new_key(self, hint: str = "k") -> str:
        hint = re.sub(r"[^A-Za-z0-9]+", "-", hint)[-40:]
        return f"{hint}-{next(self._counter)}-{uuid.uuid4().hex[:6]}"

    def url(self, path: str = "/data", host: str | None = None, **knobs) -> str:
        """A URL on this server; knobs become the query (values are percent-encoded)."""
        query = "&".join(f"{k}={urllib.parse.quote(str(v), safe='')}" for k, v in knobs.items()
                         if v is not None)
        return f"http://{host or self.host}:{self.port}{path}" + (f"?{query}" if query else "")

    def log(self, key: str) -> list[dict]:
        """Every request of ``key``: method, headers, range, ifRange, status, sent, upload…"""
        status, _, body = http_get(f"{self.base}/_log?key={urllib.parse.quote(key)}")
        assert status == 200
        return json.loads(body)

    def requests(self, key: str) -> list[dict]:
        return self.log(key)

    def reset(self, key: str) -> None:
        req = urllib.request.Request(f"{self.base}/_reset?key={urllib.parse.quote(key)}", method="POST",
                                     data=b"")
        _URLOPEN.open(req, timeout=10).read()

    @staticmethod
    def data(size: int, seed="0") -> bytes:
        return fsmod.data_bytes(size, str(seed))

    @staticmethod
    def sha256(size: int, seed="0") -> str:
        return fsmod.data_sha256(size, str(seed))

    @staticmethod
    def etag(size: int, seed="0") -> str:
        return fsmod.etag_for(size, str(seed))

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


@pytest.fixture(scope="session")
def faultserver():
    server = FaultServer()
    yield server
    server.stop()


@pytest.fixture
def key(request, faultserver) -> str:
    """A fresh faultserver key for this test."""
    return faultserver.new_key(request.node.name[:40])


# MARK: - nginx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """A real nginx serving ``docroot`` on 127.0.0.1:port (Range, ETag, If-Range)."""

    def __init__(self) -> None:
        exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if exe is None:
            pytest.fail("nginx is not installed (scripts/install-deps installs nginx-light)")
        self.prefix = make_temp_root("aft-ngx-")
        self.docroot = self.prefix / "www"
        self.docroot.mkdir()
        (self.prefix / "tmp").mkdir()
        self.tls = make_test_certificates(self.prefix / "tls")
        last_error = ""
        for _ in range(5):
            self.port = _free_port()
            self.tls_port = _free_port() if self.tls else None
            self.h2_port = _free_port() if self.tls else None
            conf = NGINX_TEMPLATE.read_text()
            if not self.tls:
                conf = re.sub(r"(?s)\n[ \t]*# TLS-BEGIN.*?# TLS-END[^\n]*", "", conf)
            for k, v in {"PREFIX": str(self.prefix), "DOCROOT": str(self.docroot), "PORT": str(self.port),
                         "TLS_PORT": str(self.tls_port), "H2_PORT": str(self.h2_port), "USER": "user root;" if os.geteuid() == 0 else ""}.items():
                conf = conf.replace("{{" + k + "}}", v)
            (self.prefix / "nginx.conf").write_text(conf)
            self.proc = spawn(
                [exe, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"),
                 "-e", str(self.prefix / "error.log")],
                "nginx", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            if self._wait_ready():
                break
            stop_process(self.proc)
            last_error = (self.prefix / "error.log").read_text(errors="replace")
        else:
            pytest.fail(f"nginx did not start: {last_error}")
        self.workers = children_of(self.proc.pid)
        self.base = f"http://127.0.0.1:{self.port}"
        self.tls_base = f"https://127.0.0.1:{self.tls_port}" if self.tls else None

    def h2_url(self, name: str, rate: int | None = None) -> str:
        """An https URL of ``name`` on the HTTP/2 server (skips the test without certificates)."""
        if not self.tls:
            pytest.skip("no openssl: nginx runs without TLS")
        q = f"?rate={rate}" if rate is not None else ""
        return f"https://127.0.0.1:{self.h2_port}/{urllib.parse.quote(name)}{q}"

    def tls_url(self, name: str, host: str = "127.0.0.1") -> str:
        """An https URL of ``name`` (skips the test when no certificate could be made)."""
        if not self.tls:
            pytest.skip("no openssl: nginx runs without TLS")
        return f"https://{host}:{self.tls_port}/{urllib.parse.quote(name)}"

    def _wait_ready(self) -> bool:
        return wait_port_open(self.proc, self.port, timeout=10)

    def make_file(self, name: str, size: int) -> str:
        """Creates ``docroot/name`` with ``size`` random bytes; returns its SHA-256."""
        path = self.docroot / name
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = write_random_file(path, size)
        os.chmod(path, 0o644)
        return digest

    def url(self, name: str, rate: int | None = None, after: int | None = None, host="127.0.0.1") -> str:
        q = {k: v for k, v in (("rate", rate), ("after", after)) if v is not None}
        return f"http://{host}:{self.port}/{urllib.parse.quote(name)}" + (
            "?" + urllib.parse.urlencode(q) if q else "")

    def log(self, name: str | None = None, at_least: int = 0) -> list[dict]:
        """nginx's access log (JSON lines), optionally only the requests of ``/name``.

        nginx writes a request's line after its last byte has gone out, so a client that has its
        whole answer can read the log before the line is there: ``at_least`` waits (up to 10 s)
        for that many entries."""
        path = self.prefix / "access.log"
        deadline = time.monotonic() + 10
        while True:
            text = path.read_text() if path.exists() else ""
            entries = [json.loads(line) for line in text.splitlines() if line.strip()]
            if name is not None:
                want = "/" + urllib.parse.quote(name)
                entries = [e for e in entries if e["uri"].split("?")[0] == want]
            if len(entries) >= at_least or time.monotonic() > deadline:
                return entries
            time.sleep(0.01)

    def stop(self) -> None:
        stop_process(self.proc)
        for pid in self.workers:
            if proc_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class Certificates:
    """A test CA and a server certificate (127.0.0.1, localhost) it signed, as PEM files."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca = directory / "ca.crt"
        self.ca_key = directory / "ca.key"
        self.server = directory / "server.crt"
        self.server_key = directory / "server.key"
        self.chain = directory / "server-chain.crt"
        self.other_ca = directory / "other-ca.crt"

    def pubkey_pin(self, cert: Path | None = None) -> str:
        """`sha256//BASE64` of the certificate's public key (curl's --pinnedpubkey form)."""
        pub = subprocess.run(["openssl", "x509", "-in", str(cert or self.server), "-pubkey", "-noout"],
                             capture_output=True, check=True).stdout
        der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True,
                             check=True).stdout
        return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()


def make_test_certificates(directory: Path) -> Certificates | None:
    """Makes a CA, a server certificate it signs, and an unrelated CA; None without openssl."""
    if shutil.which("openssl") is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    c = Certificates(directory)

    def run(*args, **kw):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, cwd=directory, **kw)

    try:
        for name, cn in (("ca", "aftransfer test CA"), ("other-ca", "unrelated test CA")):
            run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3", "-subj", f"/CN={cn}",
                "-keyout", f"{name}.key", "-out", f"{name}.crt",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
        (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                           "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
        run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "3", "-out", "server.crt", "-extfile", "ext.cnf")
    except (subprocess.CalledProcessError, OSError):
        return None
    c.chain.write_bytes(c.server.read_bytes() + c.ca.read_bytes())
    for p in directory.iterdir():
        os.chmod(p, 0o644)
    return c


@pytest.fixture(scope="session")
def nginx():
    server = Nginx()
    yield server
    server.stop()


# MARK: - The daemon


class CliResult(collections.namedtuple("CliResult", "rc out err")):
    """(rc, stdout, stderr) of one CLI run."""

    def __str__(self) -> str:
        return f"exit {self.rc}\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"


def wait_port_open(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    """Waits until something accepts on 127.0.0.1:``port``; False if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class RpcConnection:
    """A raw JSON-lines connection to the daemon's socket."""

    def __init__(self, path, timeout: float = 10) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""
        self.next_id = 1

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, obj) -> None:
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def call(self, method: str, params=None, id=None):
        """Sends a request and returns its response object (skipping notifications)."""
        if id is None:
            id = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            resp = self.recv()
            if resp is None:
                raise AssertionError(f"daemon closed the connection after {method}")
            if "method" in resp and "id" not in resp:
                self.pending.append(resp)
                continue
            return resp

    @property
    def pending(self) -> list:
        if not hasattr(self, "_pending"):
            self._pending = []
        return self._pending

    def recv_line(self, timeout: float | None = None) -> bytes | None:
        if timeout is not None:
            self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                if self.buf:
                    line, self.buf = self.buf, b""
                    return line
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def recv(self, timeout: float | None = None):
        """The next JSON object from the daemon, or None at EOF."""
        if self.pending and timeout is None:
            return self.pending.pop(0)
        line = self.recv_line(timeout)
        return None if line is None else json.loads(line)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Daemon:
    """One ``aftransferd --home HOME`` for a test, plus helpers that drive it like a user."""

    def __init__(self, bin_dir: Path, args=(), prefix=(), env=None, name: str = "aftransferd",
                 root: Path | None = None) -> None:
        self.bin_dir = Path(bin_dir)
        self.root = root or make_temp_root()
        self.home = self.root / "home"
        self.socket = self.home / "aftransferd.sock"
        self.database = self.home / "transfers.sqlite"
        self.name = name
        self.args = [str(a) for a in args]
        self.prefix = [str(p) for p in prefix]
        self.env = clean_env({"XDG_STATE_HOME": str(self.root / "xdg"), **(env or {})})
        self.log_path = self.root / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.exit_codes: list[int] = []
        self.work = self.root / "work"
        self.work.mkdir(exist_ok=True)

    # -- lifecycle

    @property
    def daemon_exe(self) -> str:
        return str(self.bin_dir / "aftransferd")

    @property
    def cli_exe(self) -> str:
        return str(self.bin_dir / "aftransfer")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, extra=()) -> list[str]:
        return [*self.prefix, self.daemon_exe, "--home", str(self.home), *self.args, *extra]

    def start(self, wait: bool = True, timeout: float = 15, extra=()) -> "Daemon":
        assert not self.running, "daemon already running"
        log = open(self.log_path, "ab")
        log.write(f"=== start {' '.join(self.command(extra))} at {time.time():.3f}\n".encode())
        log.flush()
        self.proc = spawn(self.command(extra), f"aftransferd {self.home}", stdin=subprocess.DEVNULL,
                          stdout=log, stderr=log, env=self.env, start_new_session=True)
        log.close()
        # Reap it the moment it exits, as init would: a zombie still answers kill(pid, 0), and the
        # CLI's `daemon stop` must see it gone.
        threading.Thread(target=self.proc.wait, daemon=True).start()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"aftransferd exited with {self.proc.returncode} before its socket "
                                     f"answered:\n{self.log_tail()}")
            if self.socket.exists():
                try:
                    resp = self.rpc("daemon.status", timeout=2)
                    if "result" in resp:
                        return
                    last = resp
                except (OSError, ValueError, AssertionError) as e:
                    last = e
            time.sleep(0.05)
        raise AssertionError(f"aftransferd did not answer daemon.status within {timeout}s "
                             f"(last: {last!r}):\n{self.log_tail()}")

    def _reap(self) -> int:
        rc = self.proc.wait(timeout=10)
        self.exit_codes.append(rc)
        return rc

    def stop(self, grace: float = 5.0, sig=signal.SIGTERM) -> tuple[int, float]:
        """Sends ``sig`` (SIGTERM) and waits up to ``grace`` s, then SIGKILL. (returncode, seconds)."""
        if not self.running:
            return (self.proc.returncode if self.proc else 0), 0.0
        t0 = time.monotonic()
        rc = stop_process(self.proc, grace=grace, sig=sig)
        self.exit_codes.append(rc)
        return rc, time.monotonic() - t0

    def kill9(self) -> None:
        """``kill -9`` the daemon (by PID) and reap it."""
        if self.running:
            os.kill(self.proc.pid, signal.SIGKILL)
            self._reap()

    def restart(self, **kwargs) -> "Daemon":
        if self.running:
            self.stop()
        return self.start(**kwargs)

    def log_tail(self, lines: int = 200) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def cleanup(self) -> None:
        if self.running:
            self.stop()
        # An autostarted daemon for our home (pid from its command line): stop it by PID.
        for pid in processes_mentioning(str(self.home)):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                wait_until(lambda: not proc_alive(pid), 5, f"pid {pid} to exit")
            except AssertionError:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # -- the CLI

    def cli(self, *args, check=None, input=None, timeout: float = 30, cwd=None, env=None,
            autostart: bool = False, home: bool = True) -> CliResult:
        """Runs ``aftransfer ARGS --home HOME --no-autostart``; returns (rc, stdout, stderr).

        ``check``: an expected exit status (``True`` means 0); asserted with the output shown.
        """
        cmd = [self.cli_exe, *[str(a) for a in args]]
        if home:
            cmd += ["--home", str(self.home)]
        if not autostart:
            cmd.append("--no-autostart")
        run_env = dict(self.env)
        if env:
            run_env.update(env)
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, errors="replace",
                           timeout=timeout, cwd=cwd or self.work, env=run_env)
        result = CliResult(p.returncode, p.stdout, p.stderr)
        if check is not None and check is not False:
            want = 0 if check is True else check
            assert result.rc == want, f"`aftransfer {' '.join(map(str, args))}`: expected exit {want}, got {result}"
        return result

    def cli_json(self, *args, **kwargs):
        r = self.cli(*args, check=kwargs.pop("check", 0), **kwargs)
        try:
            return json.loads(r.out)
        except ValueError:
            raise AssertionError(f"`aftransfer {' '.join(map(str, args))}` did not print JSON: {r}")

    def download(self, url: str, *opts, check=0, **kwargs) -> int:
        """``aftransfer download URL OPTS``; returns the new job's id (printed alone on stdout)."""
        r = self.cli("download", url, *opts, check=check, **kwargs)
        out = r.out.strip()
        assert re.fullmatch(r"\d+", out), f"download did not print an id alone on stdout: {r}"
        return int(out)

    def upload(self, *args, check=0, **kwargs) -> int:
        r = self.cli("upload", *args, check=check, **kwargs)
        out = r.out.strip()
        assert re.fullmatch(r"\d+", out), f"upload did not print an id alone on stdout: {r}"
        return int(out)

    def job(self, id: int) -> dict:
        return self.cli_json("status", str(id), "--json")

    def jobs(self, *opts) -> list[dict]:
        return self.cli_json("list", "--json", *opts)

    def wait_state(self, id: int, states, timeout: float = 30, interval: float = 0.1) -> dict:
        """Polls ``status ID --json`` until the job is in one of ``states``; returns the job.
        Fails at once if the job ends in another terminal state."""
        if isinstance(states, str):
            states = (states,)
        deadline = time.monotonic() + timeout
        job = None
        while True:
            r = self.cli("status", str(id), "--json")
            if r.rc == 0:
                job = json.loads(r.out)
                if job["state"] in states:
                    return job
                if job["state"] in TERMINAL:
                    raise AssertionError(f"job {id} ended {job['state']}, expected {states}: "
                                         f"{json.dumps(job, indent=1)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"job {id} not in {states} after {timeout}s; last: "
                                     f"{json.dumps(job, indent=1) if job else r}")
            time.sleep(interval)

    def wait_bytes(self, id: int, at_least: int, timeout: float = 30) -> dict:
        """Polls until the job has at least ``at_least`` bytes (and is still not ended)."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(id)
            if job["bytes"] >= at_least:
                return job
            if job["state"] in TERMINAL or time.monotonic() > deadline:
                raise AssertionError(f"job {id} did not reach {at_least} bytes: {json.dumps(job, indent=1)}")
            time.sleep(0.05)

    # -- the RPC

    def connect(self, timeout: float = 10) -> RpcConnection:
        return RpcConnection(self.socket, timeout)

    def rpc(self, method: str, params=None, id=1, timeout: float = 10) -> dict:
        """One JSON-RPC request on a fresh connection; returns the whole response object."""
        with self.connect(timeout) as c:
            return c.call(method, params, id=id)

    def rpc_result(self, method: str, params=None, **kwargs):
        resp = self.rpc(method, params, **kwargs)
        assert "error" not in resp, f"{method} failed: {resp}"
        return resp["result"]


@pytest.fixture
def daemon_factory(request, bin_dir):
    """Makes daemons: ``daemon_factory(args=(), start=True, prefix=(), env=None)``."""
    made: list[Daemon] = []
    request.node._aft_daemons = made

    def make(args=(), start: bool = True, prefix=(), env=None, name=None, root=None) -> Daemon:
        d = Daemon(bin_dir, args=args, prefix=prefix, env=env, name=name or f"aftransferd{len(made) or ''}",
                   root=root)
        made.append(d)
        if start:
            d.start()
        return d

    yield make
    for d in made:
        d.cleanup()
    if not KEEP_TMP:
        for d in made:
            shutil.rmtree(d.root, ignore_errors=True)


@pytest.fixture
def daemon(request, daemon_factory) -> Daemon:
    """A started daemon in a fresh home; flags from ``@pytest.mark.daemon_args(...)``."""
    marker = request.node.get_closest_marker("daemon_args")
    return daemon_factory(args=marker.args if marker else ())
