#!/usr/bin/env python3
"""Benchmarks aftransfer against curl and aria2c, all measured in the same run (stdlib only).

Called by scripts/bench, which installs the tools and builds the release binaries. Environment:
  BENCH_BIN           directory holding the release aftransferd and aftransfer (required)
  BENCH_CASES         which cases, comma-separated (default big,small,queue)
  BENCH_KEEP          1 keeps the temp dir (default 0)
 big: one large file
  BENCH_SIZE_MB       size of the generated file in MiB (default 1024)
  BENCH_RUNS          timed runs per tool (default 3)
  BENCH_UPLOAD        0 skips the upload bench (default 1)
 small: many small files, 16 at a time
  BENCH_SMALL_SIZES   numbers of files, one sub-case each (default 200,2000)
  BENCH_SMALL_RUNS    runs per tool and size (default 2)
  BENCH_SMALL_KB      size of each file in KiB (default 16)
  BENCH_SMALL_BUDGET  seconds before an aftransfer run is killed and failed (default 600)
  BENCH_SMALL_SETTLE  seconds to wait before the small case's first run (default 60; 0 skips)
  BENCH_PERF          DIR: `perf record -g` the daemon during each aftransfer run, into DIR
                      (for profiling only: perf distorts the timings of those runs)
 resumable: a 1 GiB upload cut at 90 % (issue 8), to our IETF interop-8 server
  BENCH_RESUMABLE_MB  size of the upload in MiB (default 1024)
 segmented: the big file from nginx with `limit_rate 20m` per connection
  BENCH_SEG_RUNS      runs per tool (default 1; curl alone takes size / 20 MiB/s)
 queue: n jobs queued behind busy slots
  BENCH_QUEUE_SIZES   queue sizes, one sub-case each (default 1000,10000,100000)
  BENCH_QUEUE_BUSY    busy slots = the daemon's --max-active (default 2)
  BENCH_STEP_BUDGET   seconds per step (enqueue, list, each status) before it is killed (default 120)
  BENCH_STATUS_RUNS   `status ID` calls per probe, median reported (default 7)
  BENCH_IDLE_S        seconds over which the idle daemon's CPU is measured (default 10)

big: serves a generated file from nginx on 127.0.0.1 (a free port) and times each client from its
start to its exit. Peak memory: the child's ru_maxrss from wait4(2) (via GNU time) for curl and
aria2c; for aftransfer, the daemon's VmHWM from /proc/PID/status read just before it is stopped
(a fresh daemon and home per run). Every output's sha256 is checked once, after its run; a wrong
file fails the bench (exit 1). The page cache cannot be dropped here, so the source is read once
before the first run, and `sync` runs (untimed) before every run so no run pays for the previous
one's dirty pages.

small: N generated files from the same nginx; `curl --parallel --parallel-max 16 -K CONFIG`,
`aria2c -i LIST -j16` and `aftransfer download -i LIST -d DIR --wait` against a fresh
`aftransferd --max-active 16`, interleaved; the daemon's CPU (/proc/PID/stat) per job; every file's
sha256 checked. A reference row, "file-work floor (ref)", does only the file work SPEC asks of each
finished download (scripts/bench-floor.c: copy, fdatasync, rename, shared directory fsync; 16
threads), when a C compiler is found.

queue: a fresh `aftransferd --max-active B` whose B slots hold downloads that trickle at 64 B/s
(nginx limit_rate), then one `download -i` of n URLs that are never fetched; times the enqueue,
`list --json` (parsed and counted), `status ID` of a queued and a running job, reads VmHWM and the
daemon's CPU over an idle interval, then times `pause` and `resume` of every queued job (one
command each) with the daemon's VmHWM after each. A step over its budget is killed and reported as "> budget"
with how far it got; the bench always ends.

Everything started here is stopped by PID. See docs/benchmarks.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request as urllib_request

MIB = 1024 * 1024
DEVNULL = os.open(os.devnull, os.O_RDWR)
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
_tmp_dir: str | None = None  # the bench's temp dir, once made


class Failure(Exception):
    """A run produced a wrong result: the bench fails."""


# ---------------------------------------------------------------------------------------------
# processes


_started: list[subprocess.Popen] = []  # long-lived children (nginx, daemons), stopped at exit
_timed_pid: int | None = None  # the timed child (its own process group) while it runs


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 15.0) -> None:
    """Stops one child we started, by its PID: `sig`, then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in _started:
        _started.remove(proc)


def stop_all() -> None:
    global _timed_pid
    if _timed_pid is not None:  # interrupted in the middle of a timed run: GNU time and its child
        try:
            os.killpg(_timed_pid, signal.SIGKILL)
            os.waitpid(_timed_pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        _timed_pid = None
    for proc in list(reversed(_started)):
        stop(proc, grace=5.0)


def timed(argv: list[str], stdout: int = DEVNULL, stderr: int = DEVNULL,
          budget: float | None = None) -> dict:
    """Runs argv as a fresh child under GNU time; returns wall seconds, exit status, peak RSS
    (the child's ru_maxrss from wait4) and user+sys CPU seconds.

    With `budget` (seconds), a run still going after it is stopped: SIGKILL to the process group
    of GNU time and its child (the group's id is the PID we spawned). It then returns
    `killed: True`, `rc: None` and no RSS/CPU (GNU time dies with its child and reports nothing).

    Not os.wait4 on a child spawned from here: Linux carries the hiwater RSS of the address space
    a process exec()s from into its ru_maxrss, so every child of this Python (tens of MiB after
    hashing) would report at least Python's peak. GNU time forks from a ~2 MiB process."""
    fd, report = tempfile.mkstemp(prefix="time.", dir=_tmp_dir)
    os.close(fd)
    killed = threading.Event()
    timer = None
    try:
        full = [TIME, "-f", "%M %U %S", "-o", report, *argv]
        global _timed_pid
        t0 = time.perf_counter()
        pid = os.posix_spawn(
            TIME, full, os.environ, setpgroup=0,
            file_actions=[(os.POSIX_SPAWN_DUP2, DEVNULL, 0), (os.POSIX_SPAWN_DUP2, stdout, 1),
                          (os.POSIX_SPAWN_DUP2, stderr, 2)])
        _timed_pid = pid
        if budget is not None:
            def over_budget() -> None:
                killed.set()
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            timer = threading.Timer(budget, over_budget)
            timer.daemon = True
            timer.start()
        _, status, _ = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        if timer is not None:
            timer.cancel()
        _timed_pid = None
        with open(report) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
    finally:
        os.unlink(report)
    if killed.is_set() and os.WIFSIGNALED(status):  # not a timer that fired just as it exited
        return {"wall": wall, "rc": None, "killed": True, "maxrss": None, "cpu": None}
    maxrss_kib, utime, stime = lines[-1].split()
    return {
        "wall": wall,
        "rc": os.waitstatus_to_exitcode(status),
        "killed": False,
        "maxrss": int(maxrss_kib) * 1024,
        "cpu": float(utime) + float(stime),
    }


def proc_status(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def proc_cpu(pid: int) -> float:
    """user + system CPU seconds of a live process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------------
# files


def warm(path: str) -> None:
    """Reads a file once, so that it is in the page cache before anything is timed."""
    with open(path, "rb", buffering=0) as f:
        while f.read(8 * MIB):
            pass


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(4 * MIB)
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def generate(path: str, size: int) -> str:
    """Writes `size` random bytes and returns their sha256."""
    h = hashlib.sha256()
    written = 0
    with open(path, "wb") as f:
        while written < size:
            chunk = os.urandom(min(16 * MIB, size - written))
            f.write(chunk)
            h.update(chunk)
            written += len(chunk)
    return h.hexdigest()


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------------------------------
# nginx


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {work}/nginx/nginx.pid;
error_log {work}/nginx/error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format bench '$request_method $uri $status $request_length $content_length $bytes_sent';
  access_log {work}/nginx/access.log bench;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 30;
  client_body_temp_path {work}/nginx/cb; proxy_temp_path {work}/nginx/px;
  fastcgi_temp_path {work}/nginx/fc; uwsgi_temp_path {work}/nginx/uw; scgi_temp_path {work}/nginx/sc;
  server {{
    listen 127.0.0.1:{port};
    root {work}/www;
    client_max_body_size 0;
    # The upload sink: WebDAV PUT stores the body (temp file, then rename) so its sha256 can be
    # checked. (`return 201` would be cheaper, but nginx then discards the body unseen:
    # $request_length stays at the header size and nothing proves the bytes arrived.)
    location /dav/ {{ root {work}; dav_methods PUT; }}
    # Busy slots for the queue case: 64 bytes/s from the first byte (headers included; nginx
    # renews the allowance once a second), so a 1 MiB file takes 4.5 hours and the body's bytes
    # arrive every second, never "stalled" (< 1 byte/s for 30 s). Not sendfile: it sends whole
    # pages (a 4 KiB burst leaves the allowance negative for a minute); nor limit_rate_after (the
    # same overshoot).
    location /trickle/ {{ sendfile off; limit_rate 64; }}
    # The segmented case: a mirror that limits each connection (limit_rate per connection).
    location /limited/ {{ alias {work}/www/; limit_rate 20m; }}
  }}
}}
"""


def start_nginx(work: str) -> tuple[subprocess.Popen, int]:
    os.makedirs(f"{work}/nginx", exist_ok=True)
    os.makedirs(f"{work}/dav", exist_ok=True)
    os.chmod(f"{work}/dav", 0o777)  # nginx workers run as another user
    port = free_port()
    conf = f"{work}/nginx/nginx.conf"
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(work=work, port=port))
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", f"{work}/nginx"],
                            stdin=DEVNULL, stdout=DEVNULL, stderr=open(f"{work}/nginx/stderr", "w"))
    _started.append(proc)
    try:
        wait_port(port)
    except RuntimeError:
        stop(proc)
        sys.stderr.write(open(f"{work}/nginx/stderr").read())
        raise
    return proc, port


def access_log(work: str) -> list[list[str]]:
    with open(f"{work}/nginx/access.log") as f:
        return [line.split() for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------
# aftransfer


class Daemon:
    """A fresh aftransferd with its own home, started before the timed CLI call."""

    def __init__(self, bin_dir: str, home: str, args: tuple[str, ...] = ()):
        self.bin_dir = bin_dir
        self.home = home
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.log = open(f"{home}.daemon.log", "w")
        self.proc = subprocess.Popen([f"{bin_dir}/aftransferd", "--home", home, *args],
                                     stdin=DEVNULL, stdout=self.log, stderr=self.log)
        _started.append(self.proc)
        deadline = time.monotonic() + 20
        while True:
            r = subprocess.run(self.cli("daemon", "status"), stdout=DEVNULL, stderr=DEVNULL)
            if r.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"aftransferd did not come up (see {home}.daemon.log)")
            time.sleep(0.05)
        self.idle_rss = proc_status(self.proc.pid, "VmRSS")

    def cli(self, *args: str) -> list[str]:
        return [f"{self.bin_dir}/aftransfer", *args, "--home", self.home, "--no-autostart"]

    def run(self, *args: str, log: str | None = None, out: str | None = None,
            budget: float | None = None) -> dict:
        """Times one CLI call; adds the daemon's CPU seconds spent meanwhile and its VmHWM.

        stdout goes to `out` if given (else to `log`), stderr to `log`. With `budget`, a call still
        running after that many seconds is killed (see `timed`): `killed` is then True, and `cpu`
        counts the daemon only."""
        self.check_alive()
        cpu0 = proc_cpu(self.proc.pid)
        fds = []
        def open_w(path: str) -> int:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            fds.append(fd)
            return fd
        err = open_w(log) if log else DEVNULL
        stdout = open_w(out) if out else err
        try:
            r = timed(self.cli(*args), stdout=stdout, stderr=err, budget=budget)
        finally:
            for fd in fds:
                os.close(fd)
        self.check_alive()
        r["daemon_cpu"] = proc_cpu(self.proc.pid) - cpu0
        r["cli_maxrss"] = r["maxrss"]
        r["cli_cpu"] = r["cpu"]
        r["cpu"] = (r["cpu"] or 0.0) + r["daemon_cpu"]
        r["maxrss"] = proc_status(self.proc.pid, "VmHWM")  # just before stopping it
        r["rss_anon"] = proc_status(self.proc.pid, "RssAnon")
        r["rss_file"] = proc_status(self.proc.pid, "RssFile")
        r["idle_rss"] = self.idle_rss
        return r

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise Failure(f"aftransferd exited with status {self.proc.returncode} "
                          f"(see {self.home}.daemon.log)")

    def cpu(self) -> float:
        self.check_alive()
        return proc_cpu(self.proc.pid)

    def stop(self) -> None:
        stop(self.proc)
        self.log.close()


# ---------------------------------------------------------------------------------------------
# the bench


def fmt_mib(n: float) -> str:
    return f"{n / MIB:.1f}"


class Bench:
    def __init__(self) -> None:
        self.bin = os.environ["BENCH_BIN"]
        self.size = int(os.environ.get("BENCH_SIZE_MB", "1024")) * MIB
        self.runs = int(os.environ.get("BENCH_RUNS", "3"))
        self.do_upload = os.environ.get("BENCH_UPLOAD", "1") != "0"
        self.work = tempfile.mkdtemp(prefix="aftransfer-bench.")
        global _tmp_dir
        _tmp_dir = self.work
        os.chmod(self.work, 0o755)  # nginx workers run as another user
        self.results: dict[str, list[dict]] = {}
        self.order: list[str] = []
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.upload_skipped: str | None = None
        self.cases = [c.strip() for c in os.environ.get("BENCH_CASES", "big,small,queue").split(",") if c.strip()]
        for c in self.cases:
            if c not in ("big", "small", "queue", "resumable", "segmented"):
                raise SystemExit(
                    f"bench.py: unknown case {c!r} in BENCH_CASES (big, small, queue, resumable, segmented)")
        self.budget = float(os.environ.get("BENCH_STEP_BUDGET", "120"))

    # -- bookkeeping

    def record(self, name: str, run: dict) -> None:
        if name not in self.results:
            self.results[name] = []
            self.order.append(name)
        self.results[name].append(run)

    def fail(self, msg: str) -> None:
        print(f"  FAILED: {msg}", flush=True)
        self.failures.append(msg)

    def check_file(self, name: str, path: str) -> bool:
        if not os.path.exists(path):
            self.fail(f"{name}: no output file {path}")
            return False
        got = sha256_of(path)
        if got != self.want:
            self.fail(f"{name}: sha256 {got} != {self.want} ({os.path.getsize(path)} bytes)")
            return False
        return True

    def say(self, name: str, i: int, r: dict) -> None:
        extra = ""
        if "cli_maxrss" in r:
            extra = f", CLI {fmt_mib(r['cli_maxrss'])} MiB, daemon idle {fmt_mib(r['idle_rss'])} MiB"
        print(f"  {name:<34} run {i + 1}: {r['wall']:7.3f} s  {self.size / MIB / r['wall']:8.1f} MiB/s"
              f"  peak {fmt_mib(r['maxrss'])} MiB  cpu {r['cpu']:.2f} s{extra}", flush=True)

    # -- setup

    def setup(self) -> None:
        """nginx on a free port of 127.0.0.1, serving `www/` (and the trickle, and the DAV sink)."""
        self.www = f"{self.work}/www"
        os.makedirs(self.www)
        os.chmod(self.www, 0o755)
        self.out_dir = f"{self.work}/out"
        os.makedirs(self.out_dir)
        os.makedirs(f"{self.work}/lists")
        self.nginx, self.port = start_nginx(self.work)
        self.base = f"http://127.0.0.1:{self.port}"

    def setup_big(self) -> None:
        self.src = f"{self.www}/bench.bin"
        print(f"== generating {self.size // MIB} MiB in {self.work}", flush=True)
        self.want = generate(self.src, self.size)
        os.chmod(self.src, 0o644)
        self.url = f"{self.base}/bench.bin"
        # warm-up: the source in the page cache (it cannot be dropped), nginx's first request done
        print("== warm-up read of the source and one request", flush=True)
        warm(self.src)
        subprocess.run(["curl", "-s", "-o", "/dev/null", self.url], check=True)

    # -- downloads

    def download_runs(self) -> None:
        out = f"{self.out_dir}/bench.bin"
        tools = [
            ("curl", lambda i: timed(["curl", "-s", "-o", out, self.url])),
            # a reference, not a competitor: curl plus the fdatasync aftransfer owes its crash safety
            ("curl + fdatasync (ref)", lambda i: timed(
                ["sh", "-c", 'curl -s -o "$0" "$1" && exec sync -d "$0"', out, self.url])),
            ("aria2c -x1 -s1", lambda i: timed(
                ["aria2c", "-x1", "-s1", "--file-allocation=none", "-d", self.out_dir, "-o", "bench.bin",
                 self.url])),
            ("aria2c -x4 -s4", lambda i: timed(
                ["aria2c", "-x4", "-s4", "--file-allocation=none", "-d", self.out_dir, "-o", "bench.bin",
                 self.url])),
            ("aftransfer", lambda i: self.aftransfer_download(i, out)),
        ]
        print(f"== downloads: {self.runs} runs each, {self.url}", flush=True)
        self.interleave(tools, self.runs, out)

    def interleave(self, tools, runs: int, out: str) -> None:
        """Runs each tool (name, fn(i) -> result) `runs` times, interleaved (curl, aria2c,
        aftransfer, curl, ...) so a slow phase of the machine hits all; checks and records each."""
        for i in range(runs):
            for name, fn in tools:
                remove(out)
                remove(out + ".aria2")
                os.sync()
                r = fn(i)
                if r is None:
                    continue
                if r["rc"] != 0:
                    self.fail(f"{name} run {i + 1}: exit status {r['rc']}")
                    continue
                self.say(name, i, r)
                if self.check_file(name, out):
                    self.record(name, r)
                remove(out)

    def aftransfer_download(self, i: int, out: str, url: str | None = None, extra: tuple[str, ...] = (),
                            tag: str = "dl") -> dict:
        """One `aftransfer download URL -o OUT --sha256 HEX --wait` on a fresh daemon."""
        home = f"{self.work}/home-{tag}-{i}"
        d = Daemon(self.bin, home)
        try:
            return d.run("download", url or self.url, "-o", out, "--sha256", self.want, *extra, "--wait",
                         log=f"{home}.cli.log")
        finally:
            d.stop()

    # -- segmented (issue 9): a server that limits each connection

    def segmented_runs(self) -> None:
        """curl, `aria2c -x8 -s8` and `aftransfer download -x 8` of the big file from nginx with
        `limit_rate 20m` per connection, interleaved."""
        if not hasattr(self, "want"):
            self.setup_big()
        url = f"{self.base}/limited/bench.bin"
        out = f"{self.out_dir}/bench.bin"
        runs = int(os.environ.get("BENCH_SEG_RUNS", "1"))
        tools = [
            ("limited: curl", lambda i: timed(["curl", "-s", "-o", out, url])),
            ("limited: aria2c -x8 -s8", lambda i: timed(
                ["aria2c", "-x8", "-s8", "--file-allocation=none", "-d", self.out_dir, "-o", "bench.bin", url])),
            ("limited: aftransfer -x 8", lambda i: self.aftransfer_download(i, out, url, ("-x", "8"), "seg")),
        ]
        print(f"== segmented: {runs} runs each, {url} (limit_rate 20m per connection)", flush=True)
        self.interleave(tools, runs, out)

    def segmented_report(self) -> None:
        print()
        print(f"Results: {self.size // MIB} MiB from nginx with limit_rate 20m per connection")
        print()
        print("| tool | runs | mean wall (s) | MiB/s | CPU user+sys (s) | peak RSS (MiB) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name in [n for n in self.order if n.startswith("limited: ")]:
            s = self.stats(name)
            print(f"| {name[9:]} | {s['n']} | {s['mean']:.3f} | {self.size / MIB / s['mean']:.0f} "
                  f"| {s['cpu']:.2f} | {fmt_mib(s['rss'])} |")
        a = self.stats("limited: aftransfer -x 8")
        for other in ("limited: aria2c -x8 -s8", "limited: curl"):
            b = self.stats(other)
            if a and b:
                print(f"\naftransfer -x 8 / {other[9:]}: {a['mean'] / b['mean']:.2f}× wall")
        print(flush=True)

    # -- uploads

    def upload_works(self) -> str | None:
        """None if `aftransfer upload` works, else why the upload bench is skipped."""
        r = subprocess.run([f"{self.bin}/aftransfer", "upload", "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"`aftransfer upload --help` exited {r.returncode}: {(r.stderr or r.stdout).strip()[:200]}"
        # a small file through the daemon to the checked (DAV) sink
        small = f"{self.work}/small.bin"
        with open(small, "wb") as f:
            f.write(os.urandom(3 * MIB + 17))
        home = f"{self.work}/home-up-probe"
        d = Daemon(self.bin, home)
        try:
            r = d.run("upload", small, f"http://127.0.0.1:{self.port}/dav/probe.bin", "--wait",
                      log=f"{home}.cli.log")
        finally:
            d.stop()
        if r["rc"] != 0:
            return (f"`aftransfer upload FILE URL --wait` exited {r['rc']}: "
                    f"{open(home + '.cli.log', errors='replace').read().strip()[-300:]}")
        stored = f"{self.work}/dav/probe.bin"
        if not os.path.exists(stored) or sha256_of(stored) != sha256_of(small):
            return "a 3 MiB probe upload arrived wrong or not at all"
        remove(stored)
        return None

    def check_upload(self, name: str, uri: str) -> bool:
        """nginx's access log line for `uri` (201, every body byte read) and the stored file's sha256."""
        lines = [l for l in access_log(self.work) if len(l) >= 6 and l[1] == uri]
        ok = True
        if not lines:
            self.fail(f"{name}: no request for {uri} in nginx's access log")
            ok = False
        else:
            method, _, status, req_len, content_len, _ = lines[-1][:6]
            if status != "201" or content_len != str(self.size) or int(req_len) < self.size:
                self.fail(f"{name}: {method} {uri} -> {status}, request_length {req_len}, "
                          f"content_length {content_len} (want 201 and >= {self.size})")
                ok = False
        stored = f"{self.work}{uri}"
        ok = ok and self.check_file(name, stored)
        remove(stored)
        return ok

    def upload_runs(self) -> None:
        why = self.upload_works()
        if why:
            self.upload_skipped = why
            print(f"== upload bench skipped: {why}", flush=True)
            return
        base = f"http://127.0.0.1:{self.port}"
        print(f"== uploads: {self.runs} runs each, PUT to {base}/dav/ (nginx WebDAV stores the body)", flush=True)
        for i in range(self.runs):
            os.sync()
            uri = f"/dav/curl-{i}.bin"
            r = timed(["curl", "-s", "-T", self.src, base + uri])
            if r["rc"] != 0:
                self.fail(f"curl -T run {i + 1}: exit status {r['rc']}")
            else:
                self.say("curl -T (upload)", i, r)
                if self.check_upload("curl -T", uri):
                    self.record("curl -T (upload)", r)
            os.sync()
            uri = f"/dav/aft-{i}.bin"
            home = f"{self.work}/home-up-{i}"
            d = Daemon(self.bin, home)
            try:
                r = d.run("upload", self.src, base + uri, "--wait", log=f"{home}.cli.log")
            finally:
                d.stop()
            if r["rc"] != 0:
                self.fail(f"aftransfer upload run {i + 1}: exit status {r['rc']} (see {home}.cli.log)")
            else:
                self.say("aftransfer upload", i, r)
                if self.check_upload("aftransfer upload", uri):
                    self.record("aftransfer upload", r)

    # -- report

    def stats(self, name: str) -> dict | None:
        runs = self.results.get(name)
        if not runs:
            return None
        walls = [r["wall"] for r in runs]
        return {
            "n": len(runs),
            "mean": statistics.fmean(walls),
            "min": min(walls),
            "rss": statistics.fmean(r["maxrss"] for r in runs),
            "cpu": statistics.fmean(r["cpu"] for r in runs),
            "cli_rss": statistics.fmean(r["cli_maxrss"] for r in runs) if "cli_maxrss" in runs[0] else None,
            "idle_rss": statistics.fmean(r["idle_rss"] for r in runs) if "idle_rss" in runs[0] else None,
            "rss_anon": statistics.fmean(r["rss_anon"] for r in runs) if "rss_anon" in runs[0] else None,
            "rss_file": statistics.fmean(r["rss_file"] for r in runs) if "rss_file" in runs[0] else None,
        }

    def report(self) -> None:
        print()
        print(f"Results: {self.size // MIB} MiB from nginx on 127.0.0.1, {self.runs} runs each "
              f"(wall from start to exit; MiB/s from the mean; peak RSS: ru_maxrss of the child, "
              f"aftransfer: the daemon's VmHWM)")
        print()
        print("| tool | runs | mean wall (s) | min (s) | MiB/s | CPU user+sys (s) | peak RSS (MiB) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name in self.order:
            s = self.stats(name)
            print(f"| {name} | {s['n']} | {s['mean']:.3f} | {s['min']:.3f} | {self.size / MIB / s['mean']:.0f} "
                  f"| {s['cpu']:.2f} | {fmt_mib(s['rss'])} |")
        print()
        for name in self.order:
            s = self.stats(name)
            if s["cli_rss"] is not None:
                print(f"{name}: daemon RSS idle before the transfer {fmt_mib(s['idle_rss'])} MiB; at the end "
                      f"{fmt_mib(s['rss_anon'])} MiB anonymous + {fmt_mib(s['rss_file'])} MiB file-backed "
                      f"(mapped libraries); the CLI's own peak {fmt_mib(s['cli_rss'])} MiB; CPU = daemon + CLI.")
        print()
        print("| ratio | wall (mean) | wall (min) | peak RSS |")
        print("| --- | ---: | ---: | ---: |")
        pairs = [("aftransfer", "curl"), ("aftransfer", "curl + fdatasync (ref)"),
                 ("aftransfer", "aria2c -x1 -s1"), ("aftransfer", "aria2c -x4 -s4"),
                 ("aftransfer upload", "curl -T (upload)")]
        for a, b in pairs:
            sa, sb = self.stats(a), self.stats(b)
            if sa and sb:
                label = f"{a}/{b}".replace(" (upload)", "")
                print(f"| {label} | {sa['mean'] / sb['mean']:.2f}× | {sa['min'] / sb['min']:.2f}× "
                      f"| {sa['rss'] / sb['rss']:.2f}× |")
        if self.upload_skipped:
            print(f"\nUpload bench skipped: {self.upload_skipped}")
        print(flush=True)

    # -- many small files (issue "The engine, rebuilt": 2,000 × 16 KiB, 16 slots)

    SMALL_TOOLS = ("curl --parallel", "aria2c -j16", "aftransfer")
    # A reference, not a competitor: the file work SPEC asks of each finished download (create,
    # write, fdatasync, rename, the directory's fsync shared as aftransferd shares it), in C on 16
    # threads, copying the files nginx serves: no network, no database, no events. Left out when
    # no C compiler is found.
    FLOOR = "file-work floor (ref)"

    def small_setup(self) -> None:
        self.small_sizes = [int(x) for x in os.environ.get("BENCH_SMALL_SIZES", "200,2000").split(",") if x.strip()]
        self.small_runs_n = int(os.environ.get("BENCH_SMALL_RUNS", "2"))
        self.small_bytes = int(os.environ.get("BENCH_SMALL_KB", "16")) * 1024
        self.small_budget = float(os.environ.get("BENCH_SMALL_BUDGET", "600"))
        self.small_results: dict[tuple[int, str], list[dict]] = {}
        self.small_killed: dict[tuple[int, str], list[dict]] = {}
        nmax = max(self.small_sizes)
        d = f"{self.www}/small"
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        print(f"== generating {nmax} files of {self.small_bytes // 1024} KiB in {d}", flush=True)
        self.small_sha: list[str] = []
        for i in range(nmax):
            data = os.urandom(self.small_bytes)
            path = f"{d}/{self.small_name(i)}"
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, 0o644)
            self.small_sha.append(hashlib.sha256(data).hexdigest())
        subprocess.run(["curl", "-s", "-o", "/dev/null", self.small_url(0)], check=True)
        self.small_floor = None
        cc = shutil.which("cc") or shutil.which("clang") or shutil.which("gcc")
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-floor.c")
        if cc and os.path.exists(source):
            exe = f"{self.work}/bench-floor"
            r = subprocess.run([cc, "-O2", "-pthread", "-o", exe, source], capture_output=True, text=True)
            if r.returncode == 0:
                self.small_floor = exe
            else:
                print(f"  (no file-work floor: {cc} failed: {r.stderr.strip()[:200]})", flush=True)
        else:
            print("  (no file-work floor: no C compiler)", flush=True)
        self.small_tools = self.SMALL_TOOLS + ((self.FLOOR,) if self.small_floor else ())

    @staticmethod
    def small_name(i: int) -> str:
        return f"f{i:06d}.bin"

    def small_url(self, i: int) -> str:
        return f"{self.base}/small/{self.small_name(i)}"

    def check_small(self, name: str, n: int, out: str) -> bool:
        """Every one of the n files present with the right sha256, and nothing else left over."""
        bad: list[str] = []
        for i in range(n):
            path = f"{out}/{self.small_name(i)}"
            try:
                got = sha256_of(path)
            except FileNotFoundError:
                bad.append(f"{self.small_name(i)} missing")
                continue
            if got != self.small_sha[i]:
                bad.append(f"{self.small_name(i)} wrong ({os.path.getsize(path)} bytes)")
        extra = sorted(set(os.listdir(out)) - {self.small_name(i) for i in range(n)})
        if extra:
            bad.append(f"{len(extra)} extra files, e.g. {extra[0]}")
        if bad:
            self.fail(f"{name} N={n}: {len(bad)} problems: {'; '.join(bad[:3])}")
            return False
        return True

    def small_curl(self, n: int, lst: str, out: str, i: int) -> dict:
        cfg = f"{self.work}/lists/curl-{n}-{i}.cfg"
        with open(cfg, "w") as f:
            for j in range(n):
                f.write(f'url = "{self.small_url(j)}"\noutput = "{out}/{self.small_name(j)}"\n')
        os.sync()
        return timed(["curl", "-s", "--parallel", "--parallel-max", "16", "-K", cfg])

    def small_floor_run(self, n: int, lst: str, out: str, i: int) -> dict:
        return timed([self.small_floor, f"{self.www}/small", out, str(n), "16"])

    def small_aria2c(self, n: int, lst: str, out: str, i: int) -> dict:
        return timed(["aria2c", "-i", lst, "-j16", "--file-allocation=none", "-d", out])

    def small_aftransfer(self, n: int, lst: str, out: str, i: int) -> dict:
        home = f"{self.work}/home-small-{n}-{i}"
        d = Daemon(self.bin, home, ("--max-active", "16"))
        perf = None
        perf_dir = os.environ.get("BENCH_PERF")
        if perf_dir:  # profile the daemon during the call (this distorts its timings)
            os.makedirs(perf_dir, exist_ok=True)
            data = os.path.abspath(f"{perf_dir}/perf-small-{n}-{i}.data")
            perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-p", str(d.proc.pid), "-o", data],
                                    stdin=DEVNULL, stdout=DEVNULL, stderr=open(f"{home}.perf.log", "w"))
            _started.append(perf)
            time.sleep(1)  # perf attached before the clock starts
        try:
            r = d.run("download", "-i", lst, "-d", out, "--wait", log=f"{home}.cli.log", budget=self.small_budget)
        finally:
            if perf is not None:
                stop(perf, sig=signal.SIGINT, grace=60)
                print(f"  (perf attached to the daemon: {data})", flush=True)
            d.stop()
        if not os.environ.get("BENCH_KEEP") == "1":
            shutil.rmtree(home, ignore_errors=True)
        return r

    def small_runs(self) -> None:
        fns = {"curl --parallel": self.small_curl, "aria2c -j16": self.small_aria2c,
               "aftransfer": self.small_aftransfer, self.FLOOR: self.small_floor_run}
        kept: list[str] = []
        settle = float(os.environ.get("BENCH_SMALL_SETTLE", "60"))
        if settle > 0:
            # ext4 without a journal makes every file created within 30 s of a deletion scan the
            # recently deleted inodes (35 s while the inode table's block is dirty, and deleting
            # thousands of files takes seconds itself): a build or another bench just before made
            # the first runs' file work cost up to twice as much, for every tool (docs/benchmarks.md,
            # sixth and tenth sessions; 35 s of waiting was not enough). The outputs are deleted only
            # at the end (below).
            print(f"== waiting {settle:.0f} s for recent deletions to age (ext4 without a journal)", flush=True)
            time.sleep(settle)
        for n in self.small_sizes:
            lst = f"{self.work}/lists/small-{n}.txt"  # one URL a line, for aria2c -i and aftransfer -i
            with open(lst, "w") as f:
                f.writelines(self.small_url(j) + "\n" for j in range(n))
            print(f"== many small files: N={n} × {self.small_bytes // 1024} KiB, 16 at a time, "
                  f"{self.small_runs_n} runs each", flush=True)
            for i in range(self.small_runs_n):
                for name in self.small_tools:
                    out = f"{self.out_dir}/small-{n}-{name.split()[0]}-{i}"
                    os.makedirs(out)
                    os.sync()
                    r = fns[name](n, lst, out, i)
                    if r.get("killed"):
                        print(f"  {name:<18} N={n} run {i + 1}: > {self.small_budget:.0f} s budget, killed", flush=True)
                        self.small_killed.setdefault((n, name), []).append(r)
                        self.fail(f"{name} N={n} run {i + 1}: over the {self.small_budget:.0f} s budget")
                    elif r["rc"] != 0:
                        self.fail(f"{name} N={n} run {i + 1}: exit status {r['rc']}")
                    else:
                        extra = ""
                        if "daemon_cpu" in r:
                            extra = (f"  daemon cpu {r['daemon_cpu'] * 1000 / n:.2f} ms/job, "
                                     f"VmHWM {fmt_mib(r['maxrss'])} MiB")
                        print(f"  {name:<18} N={n} run {i + 1}: {r['wall']:7.3f} s  {r['wall'] * 1000 / n:6.2f} ms/job"
                              f"  cpu {r['cpu'] * 1000 / n:.2f} ms/job{extra}", flush=True)
                        if self.check_small(name, n, out):
                            self.small_results.setdefault((n, name), []).append(r)
                    kept.append(out)
        # Outputs are deleted only at the end: this file system (ext4 without a journal) makes
        # every file created within 30 s of a deletion scan for recently deleted inodes, which
        # charged the next tool for the previous one's cleanup (a third of aftransferd's CPU in
        # a profile when it ran right after aria2c's output was deleted).
        for out in kept:
            shutil.rmtree(out, ignore_errors=True)

    def small_stats(self, n: int, name: str) -> dict | None:
        runs = self.small_results.get((n, name))
        if not runs:
            return None
        walls = [r["wall"] for r in runs]
        s = {"n": len(runs), "mean": statistics.fmean(walls), "min": min(walls),
             "cpu": statistics.fmean(r["cpu"] for r in runs),
             "rss": statistics.fmean(r["maxrss"] for r in runs)}
        if "daemon_cpu" in runs[0]:
            s["daemon_cpu"] = statistics.fmean(r["daemon_cpu"] for r in runs)
            s["cli_cpu"] = statistics.fmean(r["cli_cpu"] for r in runs)
            s["cli_rss"] = statistics.fmean(r["cli_maxrss"] for r in runs)
        return s

    def small_report(self) -> None:
        kib = self.small_bytes // 1024
        for n in self.small_sizes:
            print()
            print(f"Many small files: {n} × {kib} KiB from nginx on 127.0.0.1, 16 at a time "
                  f"(aftransferd --max-active 16), {self.small_runs_n} runs each; wall from the client's "
                  f"start to its exit; CPU = user+sys of the client (aftransfer: daemon + CLI)")
            print()
            print("| tool | runs | mean wall (s) | min (s) | ms/job (mean) | CPU ms/job | peak RSS (MiB) |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name in self.small_tools:
                s = self.small_stats(n, name)
                k = len(self.small_killed.get((n, name), []))
                if s:
                    print(f"| {name} | {s['n']} | {s['mean']:.3f} | {s['min']:.3f} | {s['mean'] * 1000 / n:.2f} "
                          f"| {s['cpu'] * 1000 / n:.2f} | {fmt_mib(s['rss'])} |")
                if k:
                    print(f"| {name} | {k} | > {self.small_budget:.0f} (killed) | | | | |")
            a = self.small_stats(n, "aftransfer")
            if a:
                print()
                print(f"aftransfer: daemon CPU {a['daemon_cpu'] * 1000 / n:.2f} ms/job (target ≤ 0.4), "
                      f"CLI CPU {a['cli_cpu'] * 1000 / n:.2f} ms/job; peak RSS = daemon VmHWM, "
                      f"the CLI's own peak {fmt_mib(a['cli_rss'])} MiB.")
            print()
            print("| ratio | wall (mean) | wall (min) | target |")
            print("| --- | ---: | ---: | ---: |")
            for b, target in (("aria2c -j16", "≤ 0.3×"), ("curl --parallel", "")):
                sb = self.small_stats(n, b)
                if a and sb:
                    print(f"| aftransfer/{b} | {a['mean'] / sb['mean']:.2f}× | {a['min'] / sb['min']:.2f}× | {target} |")
            f, ar = self.small_stats(n, self.FLOOR), self.small_stats(n, "aria2c -j16")
            if f and ar:
                print(f"| {self.FLOOR}/aria2c -j16 | {f['mean'] / ar['mean']:.2f}× | {f['min'] / ar['min']:.2f}× | |")
        if len(self.small_sizes) > 1:
            print()
            print(f"How the cost grows with N ({kib} KiB files, 16 at a time; means of the runs):")
            print()
            print("| N | aftransfer wall (s) | ms/job | daemon CPU ms/job | CLI CPU ms/job | aria2c ms/job "
                  "| curl ms/job | aftransfer/aria2c |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for n in self.small_sizes:
                a = self.small_stats(n, "aftransfer")
                b = self.small_stats(n, "aria2c -j16")
                c = self.small_stats(n, "curl --parallel")
                if a:
                    cells = [f"{a['mean']:.3f}", f"{a['mean'] * 1000 / n:.2f}", f"{a['daemon_cpu'] * 1000 / n:.2f}",
                             f"{a['cli_cpu'] * 1000 / n:.2f}"]
                elif self.small_killed.get((n, "aftransfer")):
                    cells = [f"> {self.small_budget:.0f}", "", "", ""]
                else:
                    cells = ["—", "", "", ""]
                cells += [f"{b['mean'] * 1000 / n:.2f}" if b else "—", f"{c['mean'] * 1000 / n:.2f}" if c else "—",
                          f"{a['mean'] / b['mean']:.2f}×" if a and b else "—"]
                print(f"| {n} | " + " | ".join(cells) + " |")
            print("| target (2,000) | | | ≤ 0.4 | | | | ≤ 0.3× |")
        print(flush=True)

    # -- a big queue behind busy slots (issue "The engine, rebuilt": 100,000 jobs)

    def queue_runs(self) -> None:
        sizes = [int(x) for x in os.environ.get("BENCH_QUEUE_SIZES", "1000,10000,100000").split(",") if x.strip()]
        self.queue_busy = int(os.environ.get("BENCH_QUEUE_BUSY", "2"))
        self.status_runs = int(os.environ.get("BENCH_STATUS_RUNS", "7"))
        self.idle_s = float(os.environ.get("BENCH_IDLE_S", "10"))
        d = f"{self.www}/trickle"
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        with open(f"{d}/slow.bin", "wb") as f:
            f.write(os.urandom(MIB))
        os.chmod(f"{d}/slow.bin", 0o644)
        self.queue_results: list[dict] = []
        for n in sizes:
            print(f"== queue: {n} jobs behind {self.queue_busy} busy slots (--max-active {self.queue_busy}), "
                  f"budget {self.budget:.0f} s per step", flush=True)
            res = {"n": n}
            self.queue_results.append(res)
            try:
                self.queue_case(n, res)
            except Failure as e:
                self.fail(f"queue n={n}: {e}")
                res["error"] = str(e)

    def queue_case(self, n: int, res: dict) -> None:
        busy = self.queue_busy
        home = f"{self.work}/home-queue-{n}"
        qdir = f"{self.out_dir}/queue-{n}"
        os.makedirs(qdir)
        d = Daemon(self.bin, home, ("--max-active", str(busy)))
        try:
            # 1. busy slots: downloads that trickle at 64 B/s, running before anything is measured
            busy_ids: list[int] = []
            for k in range(busy):
                r = subprocess.run(d.cli("download", f"{self.base}/trickle/slow.bin", "-o", f"{qdir}/busy-{k}.bin"),
                                   capture_output=True, text=True, timeout=self.budget)
                if r.returncode != 0:
                    raise Failure(f"queueing busy download {k}: exit {r.returncode}: {r.stderr.strip()[:200]}")
                busy_ids.append(int(r.stdout.split()[-1]))
            deadline = time.monotonic() + 30
            while True:
                states = [self.job_state(d, i) for i in busy_ids]
                if all(s == "running" for s in states):
                    break
                if time.monotonic() > deadline:
                    raise Failure(f"busy downloads not running after 30 s: {states}")
                time.sleep(0.2)
            time.sleep(1)  # let the first checkpoints of the busy slots pass
            res["busy_ids"] = busy_ids

            # 2. enqueue n jobs with one `download -i` (URLs never fetched: they wait behind the slots)
            lst = f"{self.work}/lists/queue-{n}.txt"
            with open(lst, "w") as f:
                f.writelines(f"{self.base}/q/{j:07d}.bin\n" for j in range(n))
            os.sync()
            r = d.run("download", "-i", lst, "-d", qdir, out=f"{home}.enqueue.out", log=f"{home}.enqueue.log",
                      budget=self.budget)
            res["enqueue"] = r
            if r["killed"]:
                print(f"  enqueue: > {self.budget:.0f} s budget, killed", flush=True)
            elif r["rc"] != 0:
                raise Failure(f"enqueue exited {r['rc']} (see {home}.enqueue.log)")
            else:
                with open(f"{home}.enqueue.out") as f:
                    ids = [l for l in f.read().split() if l.strip()]
                if len(ids) != n:
                    raise Failure(f"enqueue printed {len(ids)} ids, want {n}")
                res["queued"] = n
                print(f"  enqueue: {r['wall']:.3f} s ({n / r['wall']:.0f} jobs/s), daemon CPU "
                      f"{r['daemon_cpu'] * 1000 / n:.2f} ms/job, daemon VmHWM {fmt_mib(r['maxrss'])} MiB, "
                      f"CLI peak {fmt_mib(r['cli_maxrss'])} MiB", flush=True)

            # 3. list --json: parses, n + busy entries (or k + busy after a killed enqueue)
            out = f"{home}.list.json"
            r = d.run("list", "--json", out=out, log=f"{home}.list.log", budget=self.budget)
            res["list"] = r
            queued_ids: list[int] = []
            if r["killed"]:
                print(f"  list --json: > {self.budget:.0f} s budget, killed", flush=True)
            elif r["rc"] != 0:
                raise Failure(f"list --json exited {r['rc']} (see {home}.list.log)")
            else:
                res["list_bytes"] = os.path.getsize(out)
                with open(out) as f:
                    try:
                        jobs = json.load(f)
                    except ValueError as e:
                        raise Failure(f"list --json is not JSON: {e}")
                if not isinstance(jobs, list):
                    raise Failure(f"list --json is a {type(jobs).__name__}, not an array")
                res["entries"] = len(jobs)
                states: dict[str, int] = {}
                for j in jobs:
                    states[j.get("state", "?")] = states.get(j.get("state", "?"), 0) + 1
                    if "/q/" in str(j.get("url", "")):
                        queued_ids.append(int(j["id"]))
                res["states"] = states
                if "queued" not in res:
                    res["queued"] = len(queued_ids)  # how far the killed enqueue got
                if len(jobs) != res["queued"] + busy:
                    self.fail(f"queue n={n}: list --json has {len(jobs)} entries, want {res['queued']} + {busy}")
                print(f"  list --json: {r['wall']:.3f} s, {res['list_bytes'] / MIB:.1f} MiB, {len(jobs)} entries "
                      f"{states}, CLI peak {fmt_mib(r['cli_maxrss'])} MiB", flush=True)
                odd = [j for j in jobs if j.get("state") not in ("queued", "running")]
                if odd:  # a busy slot came free and a queued job ran: the figures are not what they claim
                    first = odd[0]
                    self.fail(f"queue n={n}: {len(odd)} jobs neither queued nor running, e.g. id "
                                      f"{first.get('id')} {first.get('state')}: {json.dumps(first.get('error'))[:300]}")
                del jobs
                if os.environ.get("BENCH_KEEP") != "1":
                    remove(out)
            if "queued" not in res:
                res["queued"] = None  # unknown: both the enqueue and the list ran over budget

            # 4. status ID: a queued job (the last one queued) and a running one; median of several
            probes = [("running", busy_ids[0])]
            if queued_ids:
                probes.insert(0, ("queued", max(queued_ids)))
            for label, job_id in probes:
                walls = []
                over = False
                for _ in range(self.status_runs):
                    r = d.run("status", str(job_id), budget=self.budget)
                    if r["killed"]:
                        over = True
                        break
                    if r["rc"] != 0:
                        raise Failure(f"status {job_id} exited {r['rc']}")
                    walls.append(r["wall"])
                res[f"status_{label}"] = None if over else statistics.median(walls)
                res[f"status_{label}_all"] = walls
                print(f"  status {job_id} ({label}): " +
                      (f"> {self.budget:.0f} s budget" if over else
                       f"median {statistics.median(walls) * 1000:.1f} ms of {len(walls)} "
                       f"(min {min(walls) * 1000:.1f}, max {max(walls) * 1000:.1f})"), flush=True)

            # 5. memory, then CPU over a quiet interval
            res["vmhwm"] = proc_status(d.proc.pid, "VmHWM")
            res["vmrss"] = proc_status(d.proc.pid, "VmRSS")
            time.sleep(1)
            c0 = d.cpu()
            time.sleep(self.idle_s)
            res["idle_cpu"] = d.cpu() - c0
            res["busy_states"] = [self.job_state(d, i) for i in busy_ids]
            if any(s != "running" for s in res["busy_states"]):
                self.fail(f"queue n={n}: busy slots at the end: {res['busy_states']} (want all running)")
            print(f"  daemon VmHWM {fmt_mib(res['vmhwm'])} MiB, VmRSS {fmt_mib(res['vmrss'])} MiB; "
                  f"CPU over {self.idle_s:.0f} s idle: {res['idle_cpu']:.2f} s; busy slots {res['busy_states']}",
                  flush=True)

            # 6. one control command on every queued job: `pause` them all, then `resume` them all
            # (after the figures above, so the queue's own VmHWM is measured first)
            if queued_ids:
                for verb in ("pause", "resume"):
                    r = d.run(verb, *map(str, queued_ids), out=f"{home}.{verb}.out", log=f"{home}.{verb}.log",
                              budget=self.budget)
                    if r["killed"]:
                        res[verb] = None
                        print(f"  {verb} of {len(queued_ids)} jobs: > {self.budget:.0f} s budget", flush=True)
                        break
                    if r["rc"] != 0:
                        raise Failure(f"{verb} of every queued job exited {r['rc']} (see {home}.{verb}.log)")
                    res[verb] = r
                    print(f"  {verb} of {len(queued_ids)} jobs: {r['wall']:.3f} s, daemon VmHWM "
                          f"{fmt_mib(r['maxrss'])} MiB, CLI peak {fmt_mib(r['cli_maxrss'])} MiB", flush=True)
        finally:
            d.stop()
            if not os.environ.get("BENCH_KEEP") == "1":
                shutil.rmtree(home, ignore_errors=True)
                shutil.rmtree(qdir, ignore_errors=True)

    def job_state(self, d: Daemon, job_id: int) -> str:
        r = subprocess.run(d.cli("status", str(job_id), "--json"), capture_output=True, text=True,
                           timeout=self.budget)
        if r.returncode != 0:
            return f"exit {r.returncode}"
        return json.loads(r.stdout).get("state", "?")

    def queue_report(self) -> None:
        b = self.budget
        print()
        print(f"A big queue: n jobs queued with one `download -i` behind {self.queue_busy} busy slots "
              f"(aftransferd --max-active {self.queue_busy}; the busy downloads trickle at 64 B/s); "
              f"every step has a budget of {b:.0f} s; status: median of {self.status_runs} calls")
        print()
        print("| n | enqueue (s) | jobs/s | daemon CPU ms/job | list --json (s) | list (MiB) | entries "
              "| status queued, median (ms) | status running, median (ms) | daemon VmHWM after enqueue / at end (MiB) "
              f"| CPU over idle {self.idle_s:.0f} s (s) | pause all: s / daemon VmHWM (MiB) "
              f"| resume all: s / VmHWM (MiB) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for res in self.queue_results:
            n = res["n"]
            e = res.get("enqueue")
            k = res.get("queued")
            if e is None:
                enq, rate, cpu = "—", "", ""
            elif e["killed"]:
                enq = f"> {b:.0f} ({k if k is not None else '?'} of {n} queued)"
                rate = f"{k / e['wall']:.0f}" if k else ""
                cpu = f"{e['daemon_cpu'] * 1000 / k:.2f}" if k else ""
            else:
                enq, rate, cpu = f"{e['wall']:.2f}", f"{n / e['wall']:.0f}", f"{e['daemon_cpu'] * 1000 / n:.2f}"
            l = res.get("list")
            if l is None:
                lst = "—"
            elif l["killed"]:
                lst = f"> {b:.0f}"
            else:
                lst = f"{l['wall']:.3f}"
            def ms(key: str) -> str:
                if key not in res:
                    return "—"
                if res[key] is None:
                    return f"> {b * 1000:.0f}"
                return f"{res[key] * 1000:.1f} (max {max(res[key + '_all']) * 1000:.0f})"
            cells = [f"{n:,}", enq, rate, cpu, lst,
                     f"{res['list_bytes'] / MIB:.1f}" if "list_bytes" in res else "—",
                     f"{res['entries']:,}" if "entries" in res else "—",
                     ms("status_queued"), ms("status_running"),
                     (f"{fmt_mib(e['maxrss'])} / " if e else "") + (fmt_mib(res["vmhwm"]) if "vmhwm" in res else "—"),
                     f"{res['idle_cpu']:.2f}" if "idle_cpu" in res else "—"]
            for verb in ("pause", "resume"):
                v = res.get(verb)
                cells.append("—" if verb not in res else f"> {b:.0f}" if v is None else
                             f"{v['wall']:.2f} / {fmt_mib(v['maxrss'])}")
            print("| " + " | ".join(cells) + " |")
        print("| target (100,000) | ≤ 5 | | | ≤ 1 | | | ≤ 50 | ≤ 50 | ≤ 128 (at end) | ≈ 0 | | |")
        for note in self.notes:
            print(f"note: {note}")
        print(flush=True)

    def run(self) -> int:
        try:
            self.setup()
            for case in self.cases:
                try:
                    if case == "big":
                        self.setup_big()
                        self.download_runs()
                        if self.do_upload:
                            self.upload_runs()
                        else:
                            self.upload_skipped = "BENCH_UPLOAD=0"
                        self.report()
                    elif case == "small":
                        self.small_setup()
                        self.small_runs()
                        self.small_report()
                    elif case == "segmented":
                        self.segmented_runs()
                        self.segmented_report()
                    elif case == "queue":
                        self.queue_runs()
                        self.queue_report()
                    elif case == "resumable":
                        resumable_case(self)
                except Failure as e:
                    self.fail(f"{case}: {e}")
            if self.failures:
                print("\nVERIFICATION FAILED:")
                for f in self.failures:
                    print(f"  - {f}")
        finally:
            stop_all()
            if os.environ.get("BENCH_KEEP") == "1":
                print(f"(kept {self.work})")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        return 1 if self.failures else 0


# ---------------------------------------------------------------------------------------------
# resumable: an upload cut at 90 % (issue 8)


def resumable_case(bench: Bench) -> None:
    """A BENCH_RESUMABLE_MB (1024) MiB upload to our IETF interop-8 server
    (Tests/resumableserver/ietfserver.py) whose connection is cut once the server holds 90 % of it:
    `--resumable auto` (HEAD, then PATCH of the last 10 %), `--resumable off` (the plain upload
    starts again from byte 0), `curl -T` uncut, and `auto` cut twice (45 % and 90 %) for the
    daemon's VmHWM. Bytes sent are what the server received, from its /_stats; every stored upload's
    sha256 is checked. The server waits 0.3 s before each cut and the retry waits ~0.5 s: both are
    in the walls of the cut runs."""
    size = int(os.environ.get("BENCH_RESUMABLE_MB", "1024")) * MIB
    work = f"{bench.work}/resumable"
    store = f"{work}/server"
    os.makedirs(store)
    src = f"{work}/upload.bin"
    print(f"== resumable: generating {size // MIB} MiB", flush=True)
    want = generate(src, size)
    warm(src)
    server_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "resumableserver",
                             "ietfserver.py")
    port = free_port()
    log = open(f"{work}/server.log", "w")
    server = subprocess.Popen([sys.executable, server_py, "--port", str(port), "--dir", store], stdin=DEVNULL,
                              stdout=DEVNULL, stderr=log)
    _started.append(server)
    wait_port(port)
    base = f"http://127.0.0.1:{port}/up"
    rows: list[tuple[str, float, int, float | None, str]] = []

    def stats(key: str) -> dict:
        with urllib_request.urlopen(f"http://127.0.0.1:{port}/_stats?key={key}", timeout=30) as r:
            return json.loads(r.read())

    def verify(name: str, key: str) -> int | None:
        st = stats(key)
        done = [u for u in st["uploads"] if u["complete"]]
        if len(done) != 1 or done[0]["sha256"] != want:
            bench.fail(f"resumable {name}: the server holds no complete upload with the file's sha256")
            return None
        for name_ in os.listdir(store):
            remove(f"{store}/{name_}")
        return st["received"]

    def aft(name: str, mode: str, drops: str | None) -> None:
        key = f"{mode}-{len(rows)}"
        q = f"?key={key}" + (f"&drop={drops}" if drops else "")
        home = f"{work}/home-{len(rows)}"
        os.sync()
        d = Daemon(bench.bin, home)
        try:
            r = d.run("upload", src, base + q, "--resumable", mode, "--wait", log=f"{home}.cli.log")
        finally:
            d.stop()
        if r["rc"] != 0:
            bench.fail(f"resumable {name}: exit status {r['rc']} (see {home}.cli.log)")
            return
        sent = verify(name, key)
        if sent is not None:
            rows.append((name, r["wall"], sent, r["maxrss"], f"{r['cpu']:.2f}"))
            print(f"  {name:<40} {r['wall']:7.2f} s  sent {sent / MIB:8.1f} MiB  daemon VmHWM "
                  f"{fmt_mib(r['maxrss'])} MiB", flush=True)

    cut = str(size * 9 // 10)
    try:
        aft("aftransfer --resumable auto, cut at 90 %", "auto", cut)
        aft("aftransfer --resumable off, cut at 90 %", "off", cut)
        os.sync()
        key = "curl"
        r = timed(["curl", "-s", "-o", "/dev/null", "-T", src, f"{base}?key={key}&no104=1"])
        if r["rc"] != 0:
            bench.fail(f"resumable curl -T: exit status {r['rc']}")
        else:
            sent = verify("curl -T", key)
            if sent is not None:
                rows.append(("curl -T, uncut", r["wall"], sent, r["maxrss"], f"{r['cpu']:.2f}"))
                print(f"  {'curl -T, uncut':<40} {r['wall']:7.2f} s  sent {sent / MIB:8.1f} MiB", flush=True)
        aft("aftransfer --resumable auto, cut at 45 % and 90 %", "auto", f"{size * 45 // 100},{cut}")
    finally:
        stop(server)
        log.close()
        remove(src)
    print()
    print(f"Results: a {size // MIB} MiB upload to our IETF interop-8 server on 127.0.0.1 whose connection is cut "
          f"once it holds 90 % (sent: bytes the server received; peak RSS: the daemon's VmHWM, curl's ru_maxrss)")
    print()
    print("| run | wall (s) | sent (MiB) | sent / file | peak RSS (MiB) | CPU user+sys (s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, wall, sent, rss, cpu in rows:
        print(f"| {name} | {wall:.2f} | {sent / MIB:.1f} | {sent / size:.2f} | "
              f"{fmt_mib(rss) if rss else '—'} | {cpu} |")
    print("| target | | | auto ≤ 1.0 + the cut append | ≤ 64 (VmHWM, two cuts) | |")
    print(flush=True)


def main() -> int:
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    if "BENCH_BIN" not in os.environ:
        print("bench.py: set BENCH_BIN (run scripts/bench)", file=sys.stderr)
        return 2
    try:
        return Bench().run()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
