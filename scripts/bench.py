#!/usr/bin/env python3
"""Benchmarks aftransfer against curl and aria2c, all measured in the same run (stdlib only).

Called by scripts/bench, which installs the tools and builds the release binaries. Environment:
  BENCH_BIN       directory holding the release aftransferd and aftransfer (required)
  BENCH_SIZE_MB   size of the generated file in MiB (default 1024)
  BENCH_RUNS      timed runs per tool (default 3)
  BENCH_UPLOAD    0 skips the upload bench (default 1)
  BENCH_KEEP      1 keeps the temp dir (default 0)

Serves a generated file from nginx on 127.0.0.1 (a free port) and times each client from its
start to its exit. Peak memory: the child's ru_maxrss from wait4(2) (via GNU time) for curl and
aria2c; for aftransfer, the daemon's VmHWM from /proc/PID/status read just before it is stopped
(a fresh daemon and home per run). Every output's sha256 is checked once, after its run; a wrong
file fails the bench (exit 1). The page cache cannot be dropped here, so the source is read once
before the first run, and `sync` runs (untimed) before every run so no run pays for the previous
one's dirty pages. Everything started here is stopped by PID. See docs/benchmarks.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

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


def timed(argv: list[str], stdout: int = DEVNULL, stderr: int = DEVNULL) -> dict:
    """Runs argv as a fresh child under GNU time; returns wall seconds, exit status, peak RSS
    (the child's ru_maxrss from wait4) and user+sys CPU seconds.

    Not os.wait4 on a child spawned from here: Linux carries the hiwater RSS of the address space
    a process exec()s from into its ru_maxrss, so every child of this Python (tens of MiB after
    hashing) would report at least Python's peak. GNU time forks from a ~2 MiB process."""
    fd, report = tempfile.mkstemp(prefix="time.", dir=_tmp_dir)
    os.close(fd)
    try:
        full = [TIME, "-f", "%M %U %S", "-o", report, *argv]
        global _timed_pid
        t0 = time.perf_counter()
        pid = os.posix_spawn(
            TIME, full, os.environ, setpgroup=0,
            file_actions=[(os.POSIX_SPAWN_DUP2, DEVNULL, 0), (os.POSIX_SPAWN_DUP2, stdout, 1),
                          (os.POSIX_SPAWN_DUP2, stderr, 2)])
        _timed_pid = pid
        _, status, _ = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        _timed_pid = None
        with open(report) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
    finally:
        os.unlink(report)
    maxrss_kib, utime, stime = lines[-1].split()
    return {
        "wall": wall,
        "rc": os.waitstatus_to_exitcode(status),
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
events {{ worker_connections 256; }}
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

    def __init__(self, bin_dir: str, home: str):
        self.bin_dir = bin_dir
        self.home = home
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.log = open(f"{home}.daemon.log", "w")
        self.proc = subprocess.Popen([f"{bin_dir}/aftransferd", "--home", home],
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

    def run(self, *args: str, log: str | None = None) -> dict:
        """Times one CLI call; adds the daemon's CPU seconds spent meanwhile and its VmHWM."""
        cpu0 = proc_cpu(self.proc.pid)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if log else DEVNULL
        try:
            r = timed(self.cli(*args), stdout=out, stderr=out)
        finally:
            if log:
                os.close(out)
        r["cli_maxrss"] = r["maxrss"]
        r["cli_cpu"] = r["cpu"]
        r["cpu"] += proc_cpu(self.proc.pid) - cpu0
        r["maxrss"] = proc_status(self.proc.pid, "VmHWM")  # just before stopping it
        r["rss_anon"] = proc_status(self.proc.pid, "RssAnon")
        r["rss_file"] = proc_status(self.proc.pid, "RssFile")
        r["idle_rss"] = self.idle_rss
        return r

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
        www = f"{self.work}/www"
        os.makedirs(www)
        os.chmod(www, 0o755)
        self.src = f"{www}/bench.bin"
        print(f"== generating {self.size // MIB} MiB in {self.work}", flush=True)
        self.want = generate(self.src, self.size)
        os.chmod(self.src, 0o644)
        self.nginx, self.port = start_nginx(self.work)
        self.url = f"http://127.0.0.1:{self.port}/bench.bin"
        self.out_dir = f"{self.work}/out"
        os.makedirs(self.out_dir)
        # warm-up: the source in the page cache (it cannot be dropped), nginx's first request done
        print("== warm-up read of the source and one request", flush=True)
        with open(self.src, "rb", buffering=0) as f:
            while f.read(8 * MIB):
                pass
        subprocess.run(["curl", "-s", "-o", "/dev/null", self.url], check=True)

    # -- downloads

    def download_runs(self) -> None:
        out = f"{self.out_dir}/bench.bin"
        tools = [
            ("curl", lambda: timed(["curl", "-s", "-o", out, self.url])),
            # a reference, not a competitor: curl plus the fdatasync aftransfer owes its crash safety
            ("curl + fdatasync (ref)", lambda: timed(
                ["sh", "-c", 'curl -s -o "$0" "$1" && exec sync -d "$0"', out, self.url])),
            ("aria2c -x1 -s1", lambda: timed(
                ["aria2c", "-x1", "-s1", "--file-allocation=none", "-d", self.out_dir, "-o", "bench.bin",
                 self.url])),
            ("aria2c -x4 -s4", lambda: timed(
                ["aria2c", "-x4", "-s4", "--file-allocation=none", "-d", self.out_dir, "-o", "bench.bin",
                 self.url])),
            ("aftransfer", None),
        ]
        print(f"== downloads: {self.runs} runs each, {self.url}", flush=True)
        # interleaved (curl, aria2c, aftransfer, curl, ...) so a slow phase of the machine hits all
        for i in range(self.runs):
            for name, fn in tools:
                remove(out)
                remove(out + ".aria2")
                os.sync()
                if fn is not None:
                    r = fn()
                else:
                    r = self.aftransfer_download(i, out)
                if r is None:
                    continue
                if r["rc"] != 0:
                    self.fail(f"{name} run {i + 1}: exit status {r['rc']}")
                    continue
                self.say(name, i, r)
                if self.check_file(name, out):
                    self.record(name, r)
                remove(out)

    def aftransfer_download(self, i: int, out: str) -> dict:
        home = f"{self.work}/home-dl-{i}"
        d = Daemon(self.bin, home)
        try:
            return d.run("download", self.url, "-o", out, "--wait", log=f"{home}.cli.log")
        finally:
            d.stop()

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
        if self.failures:
            print("\nVERIFICATION FAILED:")
            for f in self.failures:
                print(f"  - {f}")

    def run(self) -> int:
        try:
            self.setup()
            self.download_runs()
            if self.do_upload:
                self.upload_runs()
            else:
                self.upload_skipped = "BENCH_UPLOAD=0"
            self.report()
        finally:
            stop_all()
            if os.environ.get("BENCH_KEEP") == "1":
                print(f"(kept {self.work})")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        return 1 if self.failures else 0


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
