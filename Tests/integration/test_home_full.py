"""The home's file system full (SPEC "Disk full and other faults"): the daemon keeps running and
transferring, requests that would add or change a job are refused (exit 2, a message naming the
disk), nothing stored is lost, and work is accepted again once space is free, without a restart.

The home is a small tmpfs mounted for the test (root only; skipped elsewhere), always unmounted
in teardown after the daemon is stopped."""

from __future__ import annotations

import os

import pytest

from conftest import sha256_file, wait_until
from test_disk_full import Tmpfs

MiB = 1024 * 1024


@pytest.fixture
def full_home(daemon_factory):
    """A daemon whose home is a 16 MiB tmpfs; yields (daemon, tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    d = daemon_factory(start=False)
    d.home.mkdir(parents=True, exist_ok=True)
    fs = Tmpfs(16 * MiB, path=d.home)
    try:
        d.start()
        yield d, fs
    finally:
        d.cleanup()
        fs.unmount()


def test_a_full_home_refuses_new_work_keeps_transferring_and_loses_nothing(full_home, faultserver, key):
    daemon, fs = full_home
    size = 3 * MiB
    kept = [daemon.download(faultserver.url("/data", size=10, seed=f"h{i}", key=key), "-o",
                            daemon.work / f"small{i}") for i in range(5)]
    for id in kept:
        daemon.wait_state(id, "completed", timeout=20)
    paused = daemon.download(faultserver.url("/data", size=size, seed="paused", slow=MiB, key=key), "-o",
                             daemon.work / "paused.bin")
    assert daemon.cli("pause", str(paused)).rc == 0
    running = daemon.download(faultserver.url("/data", size=size, seed="running", slow=MiB, key=key), "-o",
                              daemon.work / "running.bin")
    daemon.wait_bytes(running, 256 * 1024, timeout=20)
    before = {j["id"]: j["state"] for j in daemon.jobs()}

    fs.fill()
    refused = daemon.cli("download", faultserver.url("/data", size=10, seed="refused", key=key), "-o",
                         daemon.work / "refused.bin")
    assert refused.rc == 2, f"an add on a full home must exit 2: {refused}"
    assert "disk" in refused.err and str(daemon.home) in refused.err, refused
    assert refused.out.strip() == ""
    r = daemon.cli("resume", str(paused))
    assert r.rc == 2 and "disk" in r.err, r
    assert daemon.job(paused)["state"] == "paused", "a refused resume changed nothing"
    limits = daemon.cli("limit", "--json").out
    r = daemon.cli("limit", "--download", "1M")
    assert r.rc == 2 and "disk" in r.err and str(daemon.home) in r.err, f"limit is refused as any change: {r}"
    assert daemon.cli("limit", "--json").out == limits, "a refused limit changed nothing"

    # The running transfer goes on and completes (its file is on another disk).
    done = daemon.wait_state(running, "completed", timeout=30)
    assert sha256_file(daemon.work / "running.bin") == faultserver.sha256(size, "running")
    assert done["sha256"] == faultserver.sha256(size, "running")
    assert daemon.running, "the daemon must keep running on a full home"
    listed = {j["id"]: j["state"] for j in daemon.jobs()}
    assert set(listed) == set(before), "no job may appear or vanish while the home is full"

    fs.unfill()
    new = daemon.download(faultserver.url("/data", size=10, seed="after", key=key), "-o", daemon.work / "after")
    daemon.wait_state(new, "completed", timeout=20)
    assert daemon.cli("resume", str(paused)).rc == 0
    daemon.wait_state(paused, "completed", timeout=30)

    # Nothing lost: after a restart every job is there in the state it was in.
    states = {j["id"]: j["state"] for j in daemon.jobs()}
    daemon.restart()
    assert {j["id"]: j["state"] for j in daemon.jobs()} == states
    assert all(s == "completed" for s in states.values()), states


def test_a_queue_drains_while_the_home_is_full(full_home, faultserver, key):
    # SPEC: on a full home, transfers go on. Every finished file is a commit; the write-ahead log
    # grew by each one (about 36 KiB) until the 1 MiB reserve was gone, ~30 files later, and the
    # queue stood still until space came back.
    daemon, fs = full_home
    n = 150
    lst = daemon.work / "list.txt"
    lst.write_text("".join(faultserver.url(f"/q/f{i}.bin", size=16 * 1024, seed=f"q{i}", key=key) + "\n"
                           for i in range(n)))
    target = daemon.work / "out"
    target.mkdir()
    gate = daemon.download(faultserver.url("/data", size=MiB, seed="gate", slow=MiB // 2, key=key), "-o",
                           daemon.work / "gate.bin", "--priority", "9")
    daemon.wait_bytes(gate, 1, timeout=20)
    ids = [int(i) for i in daemon.cli("download", "-i", lst, "-d", target, check=0).out.split()]
    fs.fill()
    for id in ids:
        daemon.wait_state(id, "completed", timeout=60)
    assert all(sha256_file(target / f"f{i}.bin") == faultserver.sha256(16 * 1024, f"q{i}") for i in range(n))
    fs.unfill()
    # Back to normal commits once there is room, without waiting for a request that changes a job.
    wait_until(lambda: "reserve" in daemon.log_text() and "restored" in daemon.log_text(), 10,
               "the reserve made again once the home has room")
    states = {j["id"]: j["state"] for j in daemon.jobs()}
    daemon.restart()
    assert {j["id"]: j["state"] for j in daemon.jobs()} == states


def test_a_daemon_killed_while_its_home_is_full_keeps_every_job(full_home, faultserver, key):
    daemon, fs = full_home
    ids = [daemon.download(faultserver.url("/data", size=10, seed=f"k{i}", key=key), "-o",
                           daemon.work / f"k{i}") for i in range(5)]
    for id in ids:
        daemon.wait_state(id, "completed", timeout=20)
    slow = daemon.download(faultserver.url("/data", size=2 * MiB, seed="kslow", slow=MiB, key=key), "-o",
                           daemon.work / "kslow.bin")
    daemon.wait_bytes(slow, 128 * 1024, timeout=20)
    fs.fill()
    assert daemon.cli("download", faultserver.url("/data", size=10, seed="x", key=key)).rc == 2
    daemon.kill9()
    fs.unfill()
    daemon.start()
    jobs = {j["id"]: j for j in daemon.jobs()}
    assert set(jobs) == set(ids) | {slow}
    daemon.wait_state(slow, "completed", timeout=30)
    assert sha256_file(daemon.work / "kslow.bin") == faultserver.sha256(2 * MiB, "kslow")


@pytest.mark.daemon_args("--max-active", "1")
def test_pausing_a_running_and_a_queued_job_at_once_starts_neither(daemon, faultserver, key):
    # Control commands write their rows before acting; the slot the first id frees must not
    # start the second id in between.
    running = daemon.download(faultserver.url("/data", size=5 * MiB, seed="a", slow=MiB, key=key), "-o",
                              daemon.work / "a")
    daemon.wait_state(running, "running")
    queued = daemon.download(faultserver.url("/data", size=10, seed="b", key=key), "-o", daemon.work / "b")
    assert daemon.job(queued)["state"] == "queued"
    r = daemon.cli("pause", str(running), str(queued))
    assert r.rc == 0, r
    for id in (running, queued):
        assert daemon.job(id)["state"] == "paused"
    assert daemon.job(queued)["attempts"] == 0, "the queued job was started before its pause"
    assert daemon.cli("resume", str(queued)).rc == 0
    daemon.wait_state(queued, "completed")
    assert daemon.job(running)["state"] == "paused"
