"""Standing by (README, "Choices where the SPEC is silent"): while a slot's job is being put in
place, the next queued download's request goes out and its response is kept aside, not handed to
the job, until the job has the slot. The job stays queued meanwhile, and never more than
`--max-active` jobs run."""

import time
from datetime import datetime

import pytest

from conftest import sha256_file

BIG = 64 << 20  # its fdatasync and rename take long enough for the next request to be seen


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _follow(events, ids, until):
    """(id, state) of each `transfer.state` of ``ids`` in commit order (queued left out), until
    ``until`` has ended."""
    seen = []
    last = None
    while last not in ("completed", "failed", "cancelled"):
        msg = events.recv(timeout=60)
        assert msg is not None, "the daemon closed the event stream"
        if msg.get("method") != "transfer.state" or msg["params"]["id"] not in ids:
            continue
        state = msg["params"]["state"]
        if state != "queued":
            seen.append((msg["params"]["id"], state))
        if msg["params"]["id"] == until:
            last = state
    return seen


@pytest.mark.daemon_args("--max-active", "1")
@pytest.mark.parametrize("size", [
    5000,        # kept whole while it stands by
    1 << 20,     # past the 256 KiB kept: the rest waits in libcurl
], ids=["kept", "past-the-limit"])
def test_the_next_download_is_asked_for_while_a_finished_one_is_put_in_place_and_runs_only_after_it(
    daemon, nginx, faultserver, key, size
):
    digest = nginx.make_file(f"standby/{key}.bin", BIG)
    with daemon.connect(timeout=60) as events:
        assert events.call("events.subscribe")["result"] == {"subscribed": True}
        big = daemon.download(nginx.url(f"standby/{key}.bin"), "-o", daemon.work / "big.bin")
        small = daemon.download(faultserver.url(size=size, seed=3, key=key), "-o", daemon.work / "small.bin")
        seen = _follow(events, {big, small}, until=small)
    # One slot: the small job ran only once the big one had completed.
    assert seen == [(big, "running"), (big, "completed"), (small, "running"), (small, "completed")], seen
    log = faultserver.log(key)
    assert len(log) == 1, "one request: the one that stood by is the attempt's"
    big_job, small_job = daemon.job(big), daemon.job(small)
    assert log[0]["time"] < _epoch(big_job["completedAt"]), (
        "the small file was asked for while the big one was being put in place",
        log[0]["time"], big_job["completedAt"])
    assert small_job["attempts"] == 1 and len(small_job["history"]) == 1
    assert _epoch(small_job["history"][0]["startedAt"]) >= _epoch(big_job["completedAt"]), (
        "the attempt starts with the job, once the slot is free", small_job["history"][0], big_job["completedAt"])
    assert small_job["history"][0]["httpStatus"] == 200 and small_job["history"][0]["bytes"] == size
    assert sha256_file(daemon.work / "small.bin") == faultserver.sha256(size, 3)
    assert sha256_file(daemon.work / "big.bin") == digest


@pytest.mark.daemon_args("--max-active", "1")
@pytest.mark.parametrize("pacing", ["limit-rate", "daemon-wide-limit"])
def test_a_paced_download_is_asked_for_only_once_it_runs(daemon, nginx, faultserver, key, pacing):
    # Its response would be read ahead of its pace while it stood by: its own `--limit-rate`, or a
    # daemon-wide download limit in force (here far above what the big file needs).
    digest = nginx.make_file(f"standby/{key}.bin", BIG)
    opts = ("--limit-rate", "200k") if pacing == "limit-rate" else ()
    if pacing == "daemon-wide-limit":
        daemon.cli("limit", "--download", "4G", check=0)
    big = daemon.download(nginx.url(f"standby/{key}.bin"), "-o", daemon.work / "big.bin")
    small = daemon.download(faultserver.url(size=300_000, seed=3, key=key), "-o", daemon.work / "small.bin", *opts)
    daemon.wait_state(small, "completed", timeout=60)
    log = faultserver.log(key)
    assert len(log) == 1, log
    big_job, small_job = daemon.job(big), daemon.job(small)
    # completedAt has milliseconds; a standby's request would have gone out during the big file's
    # fdatasync and rename, long before.
    assert log[0]["time"] >= _epoch(big_job["completedAt"]) - 0.002, (
        "the paced download was asked for before it ran", log[0]["time"], big_job["completedAt"])
    if pacing == "limit-rate":
        took = _epoch(small_job["completedAt"]) - log[0]["time"]
        assert took >= 1.3, f"300,000 bytes at 200 KiB/s took {took:.2f} s"
    assert sha256_file(daemon.work / "small.bin") == faultserver.sha256(300_000, 3)
    assert sha256_file(daemon.work / "big.bin") == digest


@pytest.mark.daemon_args("--max-active", "1")
def test_a_download_limit_set_while_a_request_stands_by_drops_it(daemon, nginx, faultserver, key):
    # The standby's request goes out while the big file is put in place; a limit set then drops
    # it (the job stays queued), and the job's one attempt asks again once it runs. The limit must
    # come within the big file's fdatasync and rename (tens of ms here): tried up to three times.
    nginx.make_file(f"standby/{key}.bin", 4 * BIG)
    with daemon.connect(timeout=60) as rpc:
        for n in range(3):
            assert "result" in rpc.call("daemon.limits", {"download": "off"})
            k = f"{key}-{n}"
            big = daemon.download(nginx.url(f"standby/{key}.bin"), "-o", daemon.work / f"big{n}.bin")
            small = daemon.download(
                faultserver.url(size=300_000, seed=3, key=k), "-o", daemon.work / f"small{n}.bin")
            deadline = time.monotonic() + 60
            while not faultserver.log(k):
                assert time.monotonic() < deadline, "the next download never stood by"
                time.sleep(0.002)
            assert "result" in rpc.call("daemon.limits", {"download": "4G"})
            limited_at = time.time()
            daemon.wait_state(small, "completed", timeout=60)
            big_job, small_job = daemon.job(big), daemon.job(small)
            if limited_at >= _epoch(big_job["completedAt"]):
                continue  # the big file was in place first: the window was missed
            log = faultserver.log(k)
            assert len(log) == 2, ("the request that stood by is dropped, and asked again once the job runs", log)
            assert log[1]["time"] >= _epoch(big_job["completedAt"]) - 0.002, (log, big_job["completedAt"])
            assert small_job["attempts"] == 1 and len(small_job["history"]) == 1, small_job
            assert sha256_file(daemon.work / f"small{n}.bin") == faultserver.sha256(300_000, 3)
            return
    pytest.fail("the limit never came while the big file was being put in place (three tries)")


@pytest.mark.daemon_args("--max-active", "1")
def test_a_request_that_fails_while_it_stands_by_is_its_attempts_failure_once_it_runs(daemon, nginx, faultserver, key):
    nginx.make_file(f"standby/{key}.bin", BIG)
    with daemon.connect(timeout=60) as events:
        assert events.call("events.subscribe")["result"] == {"subscribed": True}
        big = daemon.download(nginx.url(f"standby/{key}.bin"), "-o", daemon.work / "big.bin")
        # Not HTTP, and the connection closed: libcurl fails the request before any header.
        bad = daemon.download(faultserver.url(size=10, key=key, garbage=1), "-o", daemon.work / "bad.bin",
                              "--retries", "0")
        seen = _follow(events, {big, bad}, until=bad)
    assert seen == [(big, "running"), (big, "completed"), (bad, "running"), (bad, "failed")], seen
    log = faultserver.log(key)
    assert len(log) == 1, "--retries 0: one request, the one that stood by"
    assert log[0]["time"] < _epoch(daemon.job(big)["completedAt"])
    job = daemon.job(bad)
    assert job["attempts"] == 1 and len(job["history"]) == 1, job
    assert job["error"]["code"] == "network", job["error"]
    assert not (daemon.work / "bad.bin").exists() and not (daemon.work / "bad.bin.aftpart").exists()


@pytest.mark.daemon_args("--max-active", "2")
def test_queued_jobs_paused_and_resumed_while_others_finish_complete_once_byte_identical(daemon, nginx, key):
    """A command on a job standing by stops its request first; it is queued (then paused) as before."""
    n = 300
    out = daemon.work / "out"
    out.mkdir()
    digests = {i: nginx.make_file(f"standby-{key}/f{i}.bin", 6000 + 37 * i) for i in range(n)}
    listing = daemon.work / "list.txt"
    listing.write_text("".join(nginx.url(f"standby-{key}/f{i}.bin") + "\n" for i in range(n)))
    ids = [int(line) for line in daemon.cli("download", "-i", listing, "-d", out, check=True).out.split()]
    assert len(ids) == n
    for round in range(6):
        time.sleep(0.02 * round)
        queued = [j["id"] for j in daemon.jobs("--state", "queued")]
        if not queued:
            break
        daemon.cli("pause", *map(str, queued))
        daemon.cli("resume", *map(str, queued))
    for id in ids:
        daemon.wait_state(id, "completed", timeout=120)
    for i in range(n):
        assert sha256_file(out / f"f{i}.bin") == digests[i], f"f{i}.bin is not the server's file"
    assert sorted(p.name for p in out.iterdir()) == sorted(f"f{i}.bin" for i in range(n)), "nothing else left"
    for job in daemon.jobs():
        # A request abandoned by a command is no attempt: every attempt is in the history once.
        assert job["attempts"] == len(job["history"]) >= 1, (job["id"], job["attempts"], job["history"])
