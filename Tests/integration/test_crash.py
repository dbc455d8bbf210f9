"""Crash safety (issue 2): concurrent downloads, `kill -9` at random moments, restart; every file
byte-identical, every job completed exactly once, no destination ever holding wrong bytes.

The random seed is printed (and taken from $AFT_CRASH_SEED when set) so a failure can be replayed.
"""

import hashlib
import json
import os
import random
import socket
import threading
import time

import pytest

from conftest import sha256_file, wait_until


class DestinationWatcher(threading.Thread):
    """Watches destination paths: whenever one exists it must have the expected size, and each
    new version of it (inode, mtime, size) is hashed and must have the expected digest."""

    def __init__(self, expected: dict) -> None:
        super().__init__(daemon=True)
        self.expected = expected  # path -> (size, sha256)
        self.seen = {}
        self.violations = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            for path, (size, digest) in self.expected.items():
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                version = (st.st_ino, st.st_mtime_ns, st.st_size)
                if st.st_size != size:
                    self.violations.append(f"{path} held {st.st_size} bytes, expected {size}")
                if self.seen.get(path) != version:
                    self.seen[path] = version
                    try:
                        got = sha256_file(path)
                    except FileNotFoundError:
                        continue
                    if got != digest:
                        self.violations.append(f"{path} held wrong bytes (sha256 {got})")
            self.stop_event.wait(0.01)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


@pytest.mark.timeout(240)
def test_concurrent_downloads_survive_repeated_kill_9_byte_identical_and_complete_exactly_once(
        daemon, faultserver, nginx, key):
    seed = int(os.environ.get("AFT_CRASH_SEED", str(int(time.time() * 1000) % 1_000_000)))
    print(f"AFT_CRASH_SEED={seed}")
    rng = random.Random(seed)

    # (url, size, sha256, destination, log key or nginx name)
    specs = []
    for i, (size, bps) in enumerate([(1_500_000, 400_000), (2_000_000, 500_000), (1_000_000, 300_000)]):
        k = f"{key}-{i}"
        specs.append((faultserver.url(f"/crash/f{i}.bin", size=size, seed=100 + i, key=k, slow=bps), size,
                      faultserver.sha256(size, 100 + i), daemon.work / f"f{i}.bin", ("fs", k)))
    k = f"{key}-nolen"
    specs.append((faultserver.url("/crash/nolen.bin", size=900_000, seed=200, key=k, slow=300_000, nolength=1),
                   900_000, faultserver.sha256(900_000, 200), daemon.work / "nolen.bin", ("fs", k)))
    for i in range(2):
        name = f"crash/n{i}-{key}.bin"
        size = 2 * 1024 * 1024 + i
        digest = nginx.make_file(name, size)
        specs.append((nginx.url(name, rate=450_000), size, digest, daemon.work / f"n{i}.bin", ("nginx", name)))

    watcher = DestinationWatcher({str(dest): (size, digest) for _, size, digest, dest, _ in specs})
    watcher.start()
    try:
        ids = [daemon.download(url, "-o", dest) for url, _, _, dest, _ in specs]
        for round in range(5):
            time.sleep(rng.uniform(0.2, 1.6))
            daemon.kill9()
            time.sleep(rng.uniform(0.0, 0.3))
            daemon.start()
        for id in ids:
            daemon.wait_state(id, "completed", timeout=120)
    finally:
        watcher.stop()

    assert not watcher.violations, "a destination held wrong bytes:\n" + "\n".join(watcher.violations[:10])
    jobs = daemon.jobs()
    assert sorted(j["id"] for j in jobs) == sorted(ids), "no job may be lost or duplicated"
    for (url, size, digest, dest, _), id in zip(specs, ids):
        assert sha256_file(dest) == digest, f"{dest} is not byte-identical"
        job = daemon.job(id)
        assert job["state"] == "completed" and job["bytes"] == size and job["sha256"] == digest
    assert not [p for p in os.listdir(daemon.work) if p.endswith(".aftpart")], os.listdir(daemon.work)

    # Exactly once: after another crash and restart, nothing runs again and nothing changes.
    before = {id: daemon.job(id)["completedAt"] for id in ids}
    inodes = {str(dest): os.stat(dest).st_ino for _, _, _, dest, _ in specs}
    fs_counts = {src[1]: len(faultserver.log(src[1])) for *_, src in specs if src[0] == "fs"}
    nginx_count = len(nginx.log())
    daemon.kill9()
    daemon.start()
    time.sleep(1.5)
    for id in ids:
        assert daemon.job(id)["completedAt"] == before[id], f"job {id} completed twice"
    for _, _, _, dest, _ in specs:
        assert os.stat(dest).st_ino == inodes[str(dest)], f"{dest} was written again"
    for k, n in fs_counts.items():
        assert len(faultserver.log(k)) == n, f"a completed job requested {k} again"
    assert len(nginx.log()) == nginx_count, "a completed job requested nginx again"


def test_a_job_acknowledged_by_download_survives_an_immediate_kill_9(daemon, faultserver, key):
    dest = daemon.work / "ack.bin"
    id = daemon.download(faultserver.url(size=50_000, seed=7, key=key, delay=0.5), "-o", dest)
    daemon.kill9()
    daemon.start()
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(50_000, 7)
    assert [j["id"] for j in daemon.jobs()] == [id]


@pytest.mark.timeout(120)
def test_kill_9_while_paused_and_while_waiting_keeps_each_state(daemon, faultserver, key):
    paused = daemon.download(faultserver.url(size=600_000, seed=8, key=key + "p", slow=200_000),
                             "-o", daemon.work / "p.bin")
    waiting = daemon.download(faultserver.url(size=1000, seed=9, key=key + "w", status=503, times=1,
                                              retryafter=8), "-o", daemon.work / "w.bin")
    daemon.wait_bytes(paused, 100_000)
    daemon.cli("pause", paused, check=0)
    kept = daemon.wait_state(paused, "paused")["bytes"]
    daemon.wait_state(waiting, "waiting")
    daemon.kill9()
    daemon.start()
    assert daemon.job(paused)["state"] == "paused" and daemon.job(paused)["bytes"] == kept
    daemon.wait_state(waiting, "completed", timeout=30)
    daemon.cli("resume", paused, check=0)
    daemon.wait_state(paused, "completed", timeout=30)
    assert sha256_file(daemon.work / "p.bin") == faultserver.sha256(600_000, 8)
    assert sha256_file(daemon.work / "w.bin") == faultserver.sha256(1000, 9)


@pytest.mark.timeout(240)
@pytest.mark.daemon_args("--max-active", "8")
@pytest.mark.parametrize("method", ["transfer.cancel", "transfer.remove"])
def test_kill_9_right_after_a_cancel_or_remove_leaves_no_part_after_the_restart(daemon, faultserver, key, method):
    # The rows change before the parts are deleted; a kill in between (well under a millisecond
    # wide) once left the parts for good. Each round kills 0-6 ms after the request is sent: before
    # the fix, a round in three or four left parts behind.
    for round in range(16):
        ids = [daemon.download(faultserver.url(size=20_000_000, seed=round, key=f"{key}{round}{i}", slow=300_000),
                               "-o", daemon.work / f"r{round}-{i}.bin") for i in range(6)]
        for id in ids:
            daemon.wait_bytes(id, 20_000)
        parts = [daemon.work / f"r{round}-{i}.bin.aftpart" for i in range(6)]
        assert all(p.exists() for p in parts)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(daemon.socket))
        c.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"ids": ids}}).encode() + b"\n")
        time.sleep(random.uniform(0, 0.006))
        daemon.kill9()
        c.close()
        daemon.start()
        time.sleep(0.3)  # the recovery's deletions are done before the socket answers; a margin
        left = [p.name for p in parts if p.exists()]
        states = {j["id"]: j["state"] for j in daemon.jobs()}
        for id, part in zip(ids, parts):
            if states.get(id) in (None, "cancelled"):
                assert not part.exists(), f"round {round}: {part.name} left by a {method} ({states})"
        # Jobs the kill came before are still running: end them for the next round.
        running = [id for id in ids if states.get(id) not in (None, "cancelled")]
        if running:
            daemon.rpc(method, {"ids": running})
        wait_until(lambda: not any(p.exists() for p in parts), 10, f"the parts of round {round} to go: {left}")


def test_kill_9_leaves_the_interrupted_attempt_in_history_with_its_status_bytes_and_last_checkpoint(
        daemon, faultserver, key):
    """README: a crash leaves a true history. The interrupted attempt's entry keeps the status of
    its response and the bytes of its last checkpoint, and ends at that checkpoint, not at the
    next start."""
    size = 4 * 1024 * 1024
    id = daemon.download(faultserver.url(size=size, key=key, slow=500_000), "-o", daemon.work / "h.bin")
    wait_until(lambda: daemon.job(id)["bytes"] >= 800_000, 20, "bytes past a checkpoint")
    time.sleep(1.2)  # a checkpoint (about once a second) has recorded them
    daemon.kill9()
    time.sleep(1.5)
    daemon.start()
    first = daemon.job(id)["history"][0]
    assert first["httpStatus"] == 200, first
    assert 0 < first["bytes"] < size, first
    assert first["endedAt"] is not None and first["startedAt"] <= first["endedAt"], first
    restarted = daemon.job(id)["history"][1]["startedAt"]
    gap = _seconds(restarted) - _seconds(first["endedAt"])
    assert gap >= 1.5, f"the entry ends at its last checkpoint, not at the restart ({gap:.3f} s before it): {first}"
    daemon.cli("cancel", str(id))


def _seconds(rfc3339: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_a_job_started_again_after_a_restart_has_the_updated_at_of_its_new_attempt(daemon, faultserver, key, stop):
    # An upload: nothing else is written while its attempt runs.
    src = daemon.work / "u.bin"
    src.write_bytes(os.urandom(4_000_000))
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=500_000), "--resumable", "off")
    daemon.wait_state(id, "running")
    time.sleep(0.5)
    daemon.kill9() if stop == "kill -9" else daemon.stop()
    time.sleep(1.0)
    daemon.start()
    job = wait_until(lambda: (lambda j: j if len(j["history"]) == 2 else None)(daemon.job(id)), 10, "attempt 2")
    assert job["state"] == "running"
    started = _seconds(job["history"][1]["startedAt"])
    # Not the stopped attempt's (over 1 s older); the change of state and the attempt's start are
    # stamped a few milliseconds apart, more on a loaded machine (6 ms seen in CI).
    assert _seconds(job["updatedAt"]) >= started - 0.5, (job["updatedAt"], job["history"][1]["startedAt"])
    daemon.cli("cancel", str(id))
