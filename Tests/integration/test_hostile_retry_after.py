"""A server's Retry-After is honoured as a minimum, but a hostile value can neither crash the
daemon (timers and timestamps are integers underneath) nor park a job for more than a day."""
import datetime
import time


def test_an_absurd_retry_after_waits_at_most_a_day_and_the_daemon_carries_on(daemon, faultserver, key):
    url = faultserver.url(size=100, key=key, status=503, times=5, retryafter="9" * 400)
    id = daemon.download(url, "-o", daemon.work / "absurd.bin")
    job = daemon.wait_state(id, "waiting")
    # 400 nines is not a finite number: ignored, the ordinary backoff applies.
    assert job["waitReason"] == "backoff"
    assert job["error"]["code"] == "http_status" and job["error"]["retryable"] is True
    daemon.cli("pause", id, check=0)

    url = faultserver.url(size=100, key=key + "-b", status=503, times=5, retryafter="9" * 30)
    id2 = daemon.download(url, "-o", daemon.work / "huge.bin")
    job = daemon.wait_state(id2, "waiting")
    at = datetime.datetime.fromisoformat(job["nextRetryAt"].replace("Z", "+00:00")).timestamp()
    assert 86_000 < at - time.time() <= 86_400 * 1.01, job["nextRetryAt"]
    # Still answering, and both jobs intact.
    status = daemon.cli_json("daemon", "status", "--json")
    assert status["network"] in ("reachable", "unreachable")
    assert daemon.job(id)["state"] == "paused"
