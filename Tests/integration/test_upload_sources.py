"""Each file of a multipart upload is checked on its own before every attempt (store migration v2):
a change that keeps the total size and leaves the newest mtime where it was is still caught."""
import os
import time

from conftest import write_random_file


def test_a_form_file_rewritten_with_the_same_size_and_an_older_mtime_fails_with_source_changed(
        daemon, faultserver, key):
    a = daemon.work / "a.bin"
    b = daemon.work / "b.bin"
    write_random_file(a, 40_000)
    write_random_file(b, 30_000)
    os.utime(b, (1_700_000_000, 1_700_000_000))          # b is the older file
    os.utime(a, (1_800_000_000, 1_800_000_000))          # a holds the newest mtime
    id = daemon.upload("--form", f"a=@{a}", "--form", f"b=@{b}", "--form", "note=hi",
                       faultserver.url("/upload", key=key, status=503, times=1, retryafter=3))
    daemon.wait_state(id, "waiting")
    write_random_file(b, 30_000)                           # same size, other bytes
    os.utime(b, (1_600_000_000, 1_600_000_000))          # mtime moved back, still not the newest
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["error"]["code"] == "source_changed" and job["error"]["retryable"] is False
    assert str(b) in job["error"]["message"]
    assert len(faultserver.log(key)) == 1                  # the changed body was never sent


def test_an_unchanged_form_is_sent_again_after_a_retry(daemon, faultserver, key):
    a = daemon.work / "a.bin"
    write_random_file(a, 40_000)
    id = daemon.upload("--form", f"a=@{a}", faultserver.url("/upload", key=key, status=503, times=1, retryafter=1))
    job = daemon.wait_state(id, "completed", timeout=20)
    assert job["attempts"] == 2


def test_a_form_file_changed_after_its_last_byte_was_read_fails_with_source_changed(daemon, faultserver, key):
    # As a plain upload's source is: looked at once the last byte was read for sending, before
    # the job is completed. The daemon has read all 20 KB at once; the server takes ~2 s.
    a = daemon.work / "late.bin"
    write_random_file(a, 20_000)
    id = daemon.upload("--form", f"a=@{a}", faultserver.url("/upload", key=key, slow=10_000))
    daemon.wait_state(id, "running")
    time.sleep(0.7)
    with open(a, "ab") as f:
        f.write(b"x")
    job = daemon.wait_state(id, ("failed", "completed"), timeout=20)
    assert job["state"] == "failed" and job["error"]["code"] == "source_changed", job
    assert str(a) in job["error"]["message"]
