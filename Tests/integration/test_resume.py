"""Resume (SPEC "Downloads"): Range + If-Range from the last checkpoint, never splicing versions."""

import os
import re
import time

import pytest

from conftest import http_get, sha256_file, wait_until


def range_start(header) -> int | None:
    m = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(m.group(1)) if m else None


def test_a_download_that_is_killed_mid_transfer_resumes_with_range(daemon, nginx):
    size, rate = 3 * 1024 * 1024, 600 * 1024
    digest = nginx.make_file("resume/killed.bin", size)
    etag = http_get(nginx.url("resume/killed.bin"))[1]["ETag"]
    dest = daemon.work / "killed.bin"
    id = daemon.download(nginx.url("resume/killed.bin", rate=rate), "-o", dest)
    seen = daemon.wait_bytes(id, 1_300_000, timeout=30)["bytes"]
    daemon.kill9()
    daemon.start()
    daemon.wait_state(id, "completed", timeout=60)
    assert sha256_file(dest) == digest
    assert not (daemon.work / "killed.bin.aftpart").exists()
    ranged = [e for e in nginx.log("resume/killed.bin") if e["range"]]
    assert ranged, "the restarted transfer must resume with Range"
    start = range_start(ranged[0]["range"])
    assert start is not None and start > 0, ranged[0]
    assert ranged[0]["ifRange"] == etag, f"If-Range must carry the ETag: {ranged[0]}"
    assert ranged[0]["status"] == 206
    # A checkpoint about once a second: a kill costs at most about a second of transfer.
    assert start >= seen - 2 * rate, f"resumed from {start}, but {seen} bytes had been reported"


def pause_after(daemon, id, at_least: int) -> dict:
    seen = daemon.wait_bytes(id, at_least)["bytes"]
    daemon.cli("pause", id, check=0)
    job = daemon.wait_state(id, "paused")
    # Pausing checkpoints what is on disk: a paused job never shows fewer bytes than it had.
    assert job["bytes"] >= seen, f"paused with bytes {job['bytes']}, but {seen} had been reported before"
    return job


def test_pause_keeps_the_part_and_resume_continues_with_range_and_if_range(daemon, faultserver, key):
    size = 600_000
    dest = daemon.work / "p.bin"
    id = daemon.download(faultserver.url(size=size, seed=11, key=key, slow=200_000), "-o", dest)
    job = pause_after(daemon, id, 100_000)
    part = daemon.work / "p.bin.aftpart"
    assert part.exists(), "a paused download keeps its part file"
    assert part.stat().st_size == job["bytes"], "bytes is what is on disk (checkpointed at pause)"
    time.sleep(1.0)
    again = daemon.job(id)
    assert again["state"] == "paused" and again["bytes"] == job["bytes"] and again["rate"] == 0
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(size, 11)
    log = faultserver.log(key)
    assert len(log) == 2
    assert range_start(log[1]["range"]) == job["bytes"], log[1]["range"]
    assert log[1]["ifRange"] == faultserver.etag(size, 11)
    assert log[1]["status"] == 206


def test_a_server_that_ignores_range_restarts_from_zero_without_splicing(daemon, faultserver, key):
    size = 500_000
    dest = daemon.work / "nr.bin"
    id = daemon.download(faultserver.url(size=size, seed=12, key=key, slow=200_000, norange=1), "-o", dest)
    pause_after(daemon, id, 100_000)
    daemon.cli("resume", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert log[1]["range"] is not None and log[1]["status"] == 200
    assert sha256_file(dest) == faultserver.sha256(size, 12)
    assert job["bytes"] == size


def test_content_that_changed_between_requests_is_downloaded_again_never_spliced(daemon, faultserver, key):
    size = 500_000
    dest = daemon.work / "ch.bin"
    id = daemon.download(faultserver.url(size=size, seed=13, key=key, slow=200_000, change=1), "-o", dest)
    pause_after(daemon, id, 100_000)
    daemon.cli("resume", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert log[1]["ifRange"] == log[0]["etag"], "a resumed request must carry If-Range"
    assert log[1]["status"] == 200 and log[1]["seed"] == "13.2"
    assert sha256_file(dest) == faultserver.sha256(size, "13.2"), "bytes of two versions were spliced"
    assert job["sha256"] == faultserver.sha256(size, "13.2")


def test_if_range_uses_last_modified_when_there_is_no_etag(daemon, faultserver, key):
    size = 500_000
    dest = daemon.work / "lm.bin"
    id = daemon.download(faultserver.url(size=size, seed=14, key=key, slow=200_000, etag=0), "-o", dest)
    pause_after(daemon, id, 100_000)
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert log[0]["etag"] is None
    assert log[1]["ifRange"] == log[0]["lastModified"], log[1]
    assert log[1]["status"] == 206
    assert sha256_file(dest) == faultserver.sha256(size, 14)


def test_content_changed_without_an_etag_is_caught_by_last_modified(daemon, faultserver, key):
    size = 500_000
    dest = daemon.work / "lmc.bin"
    id = daemon.download(faultserver.url(size=size, seed=15, key=key, slow=200_000, etag=0, change=1),
                         "-o", dest)
    pause_after(daemon, id, 100_000)
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert log[1]["status"] == 200
    assert sha256_file(dest) == faultserver.sha256(size, "15.2")


def test_a_part_that_is_already_whole_is_verified_on_416_not_failed(daemon, faultserver, key):
    size = 100_000
    dest = daemon.work / "whole.bin"
    # No length: the client cannot tell it has everything; the server then stalls with the socket open.
    url = faultserver.url(size=size, seed=16, key=key, nolength=1, stall=size, stallfor=20, times=1)
    id = daemon.download(url, "-o", dest, "--sha256", faultserver.sha256(size, 16))
    daemon.wait_bytes(id, size)
    daemon.cli("pause", id, check=0)
    daemon.wait_state(id, "paused")
    daemon.cli("resume", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert range_start(log[1]["range"]) == size and log[1]["status"] == 416
    assert sha256_file(dest) == faultserver.sha256(size, 16)
    assert job["bytes"] == size


def test_a_416_that_contradicts_the_known_length_starts_over_instead_of_completing_short(daemon, faultserver, key):
    # The first answer said 3,000,000 bytes; after the cut, a 416 says the file has as many bytes
    # as the part (under the same validators). The part is not whole: the download starts over.
    size, short = 3_000_000, 800_000
    dest = daemon.work / "shrunk.bin"
    url = faultserver.url(size=size, seed="sh", key=key, drop=short, times=1, shrinkafter=1, shrinkto=short)
    id = daemon.download(url, "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=60)
    log = faultserver.log(key)
    assert log[1]["range"] == f"bytes={short}-" and log[1]["status"] == 416, log[1]
    assert log[-1]["range"] is None and log[-1]["status"] == 200, log[-1]
    assert sha256_file(dest) == faultserver.sha256(short, "sh.short"), "a short part was taken as the whole file"
    assert job["total"] == short and job["bytes"] == short
    # Started over in the attempt that got the 416, as after a 200 to a range: no retry spent.
    assert job["attempts"] == 2 and len(log) == 3, (job, [(e["range"], e["status"]) for e in log])
    assert "HTTP 416: the remote file is now 800000 bytes, not 3000000: restarting from byte 0" in daemon.log_text()


@pytest.mark.parametrize("paused_at,answer", [(600_000, 416), (100_000, 206)], ids=["416", "206-of-another-length"])
def test_a_resumed_range_of_a_file_that_changed_length_starts_over_even_with_retries_0(
        daemon, faultserver, key, paused_at, answer):
    # Under the same validators the file is now 500,000 bytes: past the part's end a 416, inside
    # it a 206 whose total is not the part's file's. Either starts over in the same attempt (no
    # retry spent; a 416 failed a --retries 0 job and deleted its part), never splicing.
    size, short = 3_000_000, 500_000
    dest = daemon.work / "shrunk0.bin"
    url = faultserver.url(size=size, seed="s0", key=key, slow=1_000_000, shrinkafter=1, shrinkto=short)
    id = daemon.download(url, "-o", dest, "--retries", "0")
    pause_after(daemon, id, paused_at)
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=60)
    assert sha256_file(dest) == faultserver.sha256(short, "s0.short"), "bytes of two versions spliced"
    assert [(e["range"] is None, e["status"]) for e in faultserver.log(key)][1:] == [(False, answer), (True, 200)]


def test_a_paused_job_survives_a_daemon_restart_and_stays_paused(daemon, faultserver, key):
    size = 400_000
    dest = daemon.work / "pr.bin"
    id = daemon.download(faultserver.url(size=size, seed=17, key=key, slow=200_000), "-o", dest)
    job = pause_after(daemon, id, 50_000)
    daemon.restart()
    time.sleep(1.0)
    after = daemon.job(id)
    assert after["state"] == "paused" and after["bytes"] == job["bytes"]
    assert len(faultserver.log(key)) == 1, "a paused job must not start on its own after a restart"
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(size, 17)


# A cache that ignores If-Range answers the resumed request with a 206 of the new version
# (another ETag): the part is not continued with it; the whole new version is fetched. So with a
# weak ETag (an outside audit): it cannot go in If-Range, so the date does, which a version
# replaced within the same second keeps; its 206 is caught by its other ETag, not spliced.
@pytest.mark.parametrize("seed,knobs", [("sp", {"ignoreifrange": 1}), ("wk", {"weaketag": 1, "samelastmod": 1}),
                                        ("wd", {"weaketag": 1, "samelastmod": 1, "dropetag": 1})],
                         ids=["cache-ignoring-if-range", "weak-etag-same-date", "weak-etag-dropped-same-date"])
def test_a_206_of_another_version_is_never_spliced_the_download_starts_over(daemon, faultserver, key, seed, knobs):
    size = 3_000_000
    dest = daemon.work / "v2.bin"
    url = faultserver.url(size=size, seed=seed, key=key, drop=1_000_000, times=1, changeafter=1, **knobs)
    id = daemon.download(url, "-o", dest, "--retries", "1")
    job = daemon.wait_state(id, "completed", timeout=60)
    log = faultserver.log(key)
    assert log[1]["range"] == "bytes=1000000-" and log[1]["status"] == 206 and log[1]["seed"] == f"{seed}.v2"
    assert log[-1]["range"] is None and log[-1]["status"] == 200
    assert sha256_file(dest) == faultserver.sha256(size, f"{seed}.v2"), "bytes of two versions were spliced"
    assert job["sha256"] == faultserver.sha256(size, f"{seed}.v2") and job["attempts"] == 2


def test_the_same_with_last_modified_only(daemon, faultserver, key):
    size = 3_000_000
    dest = daemon.work / "lm2.bin"
    url = faultserver.url(size=size, seed="lm", key=key, drop=1_000_000, times=1, changeafter=1, ignoreifrange=1,
                          etag=0)
    id = daemon.download(url, "-o", dest, "--retries", "1")
    daemon.wait_state(id, "completed", timeout=60)
    log = faultserver.log(key)
    assert log[1]["ifRange"] == log[0]["lastModified"] and log[1]["status"] == 206
    assert sha256_file(dest) == faultserver.sha256(size, "lm.v2"), "bytes of two versions were spliced"


def test_a_part_without_a_validator_is_not_resumed_but_started_over(daemon, faultserver, key):
    # Neither ETag nor Last-Modified: no If-Range could protect a range, so none is asked for.
    size = 500_000
    dest = daemon.work / "nv.bin"
    id = daemon.download(faultserver.url(size=size, seed=17, key=key, slow=200_000, etag=0, lastmod=0, change=1),
                         "-o", dest)
    pause_after(daemon, id, 100_000)
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert log[1]["range"] is None and log[1]["status"] == 200, log[1]
    assert sha256_file(dest) == faultserver.sha256(size, "17.2"), "bytes of two versions were spliced"


def test_kill_9_while_a_206_of_another_version_starts_over_leaves_the_new_version_byte_for_byte(daemon, faultserver,
                                                                                                  key):
    # The restart from byte 0 rewrites the part: a crash in the middle of the new version's bytes
    # resumes them (with the new ETag) and never splices the old ones in.
    size = 4_000_000
    dest = daemon.work / "crash-v2.bin"
    url = faultserver.url(size=size, seed="kc", key=key, drop=1_000_000, times=1, changeafter=1,
                          ignoreifrange=1, slow=1_000_000)
    id = daemon.download(url, "-o", dest, "--retries", "3")
    wait_until(lambda: len(faultserver.log(key)) >= 3 and daemon.job(id)["bytes"] >= 1_500_000, 30,
               "the new version to be half-way")
    daemon.kill9()
    daemon.start()
    job = daemon.wait_state(id, "completed", timeout=60)
    assert sha256_file(dest) == faultserver.sha256(size, "kc.v2"), "bytes of two versions were spliced"
    assert job["sha256"] == faultserver.sha256(size, "kc.v2")


def test_kill_9_right_after_a_changed_file_starts_over_leaves_a_true_history(daemon, faultserver, key):
    # The resume gets a 200 (If-Range: the file changed) and the part starts over from byte 0; a
    # crash before the next checkpoint left that attempt at the old version's durable offset.
    size = 4_000_000
    dest = daemon.work / "restart-history.bin"
    url = faultserver.url(size=size, seed="rh", key=key, changeafter=1, slow=400_000)
    id = daemon.download(url, "-o", dest)
    wait_until(lambda: daemon.job(id)["bytes"] >= 1_000_000, 30, "a megabyte of the first version")
    daemon.cli("pause", str(id))
    paused = daemon.wait_state(id, "paused")["bytes"]
    assert paused >= 1_000_000
    daemon.cli("resume", str(id))
    wait_until(lambda: len(faultserver.log(key)) >= 2, 10, "the resumed request")
    time.sleep(0.3)
    daemon.kill9()
    daemon.start()
    job = daemon.job(id)
    crashed = job["history"][1]
    assert crashed["httpStatus"] == 200, job["history"]
    assert crashed["bytes"] < paused, f"the attempt that started over claims {crashed['bytes']} bytes: {job['history']}"
    job = daemon.wait_state(id, "completed", timeout=60)
    assert sha256_file(dest) == faultserver.sha256(size, "rh.v2")


def test_a_resume_answered_in_short_206s_asks_for_the_rest_in_the_same_attempt_and_survives_kill_9(
        daemon, faultserver, key):
    # RFC 9110 lets a server answer a range with less than was asked (`bytes A-C/T`). Each such
    # 206 ended the attempt as a partial transfer, a retry spent: a server that caps its answers
    # at 500,000 bytes failed a resumed 4 MiB download after two of them. The first request is cut
    # at 300,000 bytes (one retry); the resumed attempt is killed -9 half way and continued.
    size, cap = 4 * 1024 * 1024, 500_000
    url = faultserver.url(size=size, seed="capped", key=key, rangecap=cap, slow=1024 * 1024, drop=300_000, times=1)
    dest = daemon.work / "capped.bin"
    id = daemon.download(url, "-o", dest, "--retries", "2")
    daemon.wait_bytes(id, 1_600_000, timeout=30)
    daemon.kill9()
    daemon.start()
    job = daemon.wait_state(id, ("completed", "failed"), timeout=60)
    assert job["state"] == "completed", job
    assert sha256_file(dest) == faultserver.sha256(size, "capped")
    assert not (daemon.work / "capped.bin.aftpart").exists()
    log = faultserver.log(key)
    answers = [(range_start(e["range"]), e["status"]) for e in log]
    assert answers[0] == (None, 200) and all(status == 206 for _, status in answers[1:]), answers
    assert len(answers) >= 1 + (size - 300_000) // cap, answers  # every resumed byte in capped answers
    assert job["attempts"] <= 3, job  # the cut, the attempt killed, the one after the restart
    # The last attempt's timing covers all its capped requests (each ~0.5 s), not the last one's.
    last = job["history"][-1]
    assert last["total"] >= 1.0 and last["bytes"] == size, last
    assert all(e["error"] is None or e["error"]["code"] != "network" or "partial" not in e["error"]["message"]
               for e in job["history"][1:]), job["history"]


def test_bytes_written_into_a_failed_or_paused_part_are_cut_back_not_spliced_in(daemon, faultserver, key):
    # SPEC: a transfer continues from its last durable checkpoint. A restart cut the part back to
    # it; `retry` and `resume` in the same daemon continued from the part's size, so bytes that
    # something else appended to it were spliced into the finished file.
    size = 1_000_000
    url = faultserver.url(size=size, seed="spliced", key=key, drop=300_000, times=1)
    dest = daemon.work / "spliced.bin"
    part = daemon.work / "spliced.bin.aftpart"
    id = daemon.download(url, "-o", dest, "--retries", "0")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert part.stat().st_size == job["bytes"] == 300_000, job
    with open(part, "ab") as f:
        f.write(b"x" * 5000)
    daemon.cli("retry", str(id), check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert dest.read_bytes() == faultserver.data(size, "spliced")
    assert range_start(faultserver.log(key)[-1]["range"]) == 300_000

    slow = faultserver.url(size=size, seed="paused", key=key + "p", slow=200_000)
    dest = daemon.work / "paused.bin"
    id = daemon.download(slow, "-o", dest)
    daemon.wait_bytes(id, 200_000, timeout=30)
    daemon.cli("pause", str(id), check=0)
    held = daemon.wait_state(id, "paused", timeout=30)["bytes"]
    with open(daemon.work / "paused.bin.aftpart", "ab") as f:
        f.write(b"y" * 3000)
    daemon.cli("resume", str(id), check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert dest.read_bytes() == faultserver.data(size, "paused")
    assert range_start(faultserver.log(key + "p")[-1]["range"]) == held


def test_a_short_answer_then_a_shorter_file_writes_only_the_new_file(daemon, faultserver, key):
    # A small file held in memory: its first answer (`bytes=0-`, as -x 2 asks) is capped; the
    # request for the rest finds the file shorter (a 206 of another length: started over from
    # byte 0). The held bytes of the first answer were written under the new, shorter file, and
    # stayed past its end.
    size = 200_000
    url = faultserver.url(size=size, seed="held", key=key, rangecap=100_000, shrinkafter=1, shrinkto=50_000)
    dest = daemon.work / "held.bin"
    id = daemon.download(url, "-o", dest, "-x", "2", "--retries", "0")
    job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
    assert job["state"] == "completed", (job, [(e["range"], e["status"]) for e in faultserver.log(key)])
    assert dest.read_bytes() == faultserver.data(50_000, "held.short")


def test_a_206_of_another_range_than_asked_starts_over_in_the_same_attempt(daemon, faultserver, key):
    # README: an answer that cannot be spliced on the part starts the download over from byte 0
    # in the same attempt, spending no retry. A 206 from another offset than asked failed the
    # attempt instead (a retry spent: with --retries 0 the job failed and its part was gone).
    size = 600_000
    url = faultserver.url(size=size, seed="shifted", key=key, drop=200_000, times=1, rangeshift=1000)
    dest = daemon.work / "shifted.bin"
    id = daemon.download(url, "-o", dest, "--retries", "1")
    job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
    assert job["state"] == "completed" and job["attempts"] == 2, job
    assert dest.read_bytes() == faultserver.data(size, "shifted")
    assert [(range_start(e["range"]), e["status"]) for e in faultserver.log(key)] == [
        (None, 200), (200_000, 206), (None, 200)]
