"""Retries (SPEC "Retries and the network", issue 4 without namespaces): backoff, Retry-After,
classification, stalls, exhaustion and `retry` resuming from the part."""

import http.server
import re
import threading
import time

import pytest

from conftest import RFC3339_UTC, sha256_file


def range_start(header) -> int | None:
    m = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("status", [503, 429])
def test_retry_after_2_on_a_busy_server_waits_at_least_2_seconds(daemon, faultserver, key, status):
    dest = daemon.work / "ra.bin"
    with daemon.connect(timeout=30) as events:
        assert events.call("events.subscribe")["result"] == {"subscribed": True}
        id = daemon.download(faultserver.url(size=1000, seed=1, key=key, status=status, times=1, retryafter=2),
                             "-o", dest)
        states = []
        while not states or states[-1]["state"] not in ("completed", "failed", "cancelled"):
            msg = events.recv(timeout=30)
            assert msg is not None, "the daemon closed the event stream"
            if msg.get("method") == "transfer.state" and msg["params"]["id"] == id:
                states.append(msg["params"])
    waiting = [j for j in states if j["state"] == "waiting"]
    assert waiting, f"the job never waited: {[j['state'] for j in states]}"
    job = waiting[0]
    assert job["waitReason"] == "backoff"
    assert job["nextRetryAt"] is not None and RFC3339_UTC.match(job["nextRetryAt"])
    assert job["error"]["code"] == "http_status" and job["error"]["retryable"] is True
    assert job["httpStatus"] == status
    assert states[-1]["state"] == "completed", states[-1]
    log = faultserver.log(key)
    assert len(log) == 2
    gap = log[1]["time"] - log[0]["end"]
    assert gap >= 2.0 - 0.02, f"Retry-After: 2 was not honoured: retried after {gap:.3f}s"
    assert sha256_file(dest) == faultserver.sha256(1000, 1)


def test_retry_after_as_an_http_date_is_honoured(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=100, key=key, status=503, times=1, retryafterdate=3),
                         "-o", daemon.work / "rad")
    daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    gap = log[1]["time"] - log[0]["end"]
    assert gap >= 2.0, f"Retry-After (HTTP-date, >= 3 s ahead) was not honoured: retried after {gap:.3f}s"


def test_a_404_fails_at_once_with_http_status(daemon, faultserver, key):
    dest = daemon.work / "missing.bin"
    t0 = time.monotonic()
    id = daemon.download(faultserver.url(key=key, status=404), "-o", dest)
    job = daemon.wait_state(id, "failed", timeout=10)
    assert time.monotonic() - t0 < 5
    assert job["error"]["code"] == "http_status" and job["error"]["retryable"] is False
    assert job["httpStatus"] == 404 and job["attempts"] == 1
    time.sleep(1.0)
    assert len(faultserver.log(key)) == 1, "a 404 is not retried"
    assert not dest.exists()


@pytest.mark.parametrize("status", [400, 401, 403, 410, 501])
def test_statuses_that_are_not_retryable_fail_after_one_request(daemon, faultserver, key, status):
    id = daemon.download(faultserver.url(key=key, status=status), "-o", daemon.work / "x")
    job = daemon.wait_state(id, "failed", timeout=10)
    assert job["error"]["code"] == "http_status" and job["httpStatus"] == status
    time.sleep(0.8)
    assert len(faultserver.log(key)) == 1


@pytest.mark.parametrize("status", [408, 500, 502, 504])
def test_retryable_statuses_are_retried_to_success(daemon, faultserver, key, status):
    dest = daemon.work / "rs.bin"
    id = daemon.download(faultserver.url(size=2000, seed=status, key=key, status=status, times=1), "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=20)
    assert [e["status"] for e in faultserver.log(key)] == [status, 200]
    assert job["attempts"] == 2 and len(job["history"]) == 2
    assert job["history"][0]["httpStatus"] == status and job["history"][0]["error"]["code"] == "http_status"
    assert sha256_file(dest) == faultserver.sha256(2000, status)


def test_backoff_doubles_between_attempts_within_the_jitter(daemon, faultserver, key):
    id = daemon.download(faultserver.url(key=key, status=500), "-o", daemon.work / "b", "--retries", "3")
    job = daemon.wait_state(id, "failed", timeout=30)
    log = faultserver.log(key)
    assert len(log) == 4, "--retries 3 means at most 4 attempts"
    assert job["attempts"] == 4 and len(job["history"]) == 4
    assert job["error"]["code"] == "http_status"
    for k in (1, 2, 3):
        base = 0.5 * 2 ** (k - 1)
        gap = log[k]["time"] - log[k - 1]["end"]
        assert base * 0.75 - 0.05 <= gap <= base * 1.25 + 0.5, f"retry {k}: waited {gap:.3f}s, expected ~{base}s"


def test_retries_0_means_a_single_attempt(daemon, faultserver, key):
    id = daemon.download(faultserver.url(key=key, status=503), "-o", daemon.work / "z", "--retries", "0")
    job = daemon.wait_state(id, "failed", timeout=10)
    time.sleep(1.0)
    assert len(faultserver.log(key)) == 1 and job["attempts"] == 1


def test_a_dropped_connection_resumes_with_range(daemon, faultserver, key):
    size = 600_000
    dest = daemon.work / "drop.bin"
    # About 2.5 s of flowing bytes before the drop: checkpoints happened.
    id = daemon.download(faultserver.url(size=size, seed=21, key=key, slow=100_000, drop=250_000, times=1),
                         "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=40)
    log = faultserver.log(key)
    assert len(log) == 2 and log[0]["dropped"]
    start = range_start(log[1]["range"])
    assert start is not None and 0 < start <= 250_000, f"retry must resume from the checkpoint: {log[1]['range']}"
    assert log[1]["ifRange"] == faultserver.etag(size, 21)
    assert log[1]["status"] == 206
    assert sha256_file(dest) == faultserver.sha256(size, 21)
    assert job["history"][0]["error"] is not None and job["history"][0]["error"]["retryable"] is True


@pytest.mark.daemon_args("--stall-timeout", "2")
def test_a_stalled_transfer_ends_as_a_timeout_and_recovers(daemon, faultserver, key):
    size = 900_000
    dest = daemon.work / "stall.bin"
    t0 = time.monotonic()
    id = daemon.download(faultserver.url(size=size, seed=22, key=key, slow=300_000, stall=600_000,
                                         stallfor=60, times=1), "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=40)
    assert time.monotonic() - t0 < 20, "the stall was not detected within the stall timeout"
    log = faultserver.log(key)
    assert len(log) == 2 and log[0]["stalled"]
    start = range_start(log[1]["range"])
    assert start is not None and 0 < start <= 600_000, log[1]["range"]
    assert job["history"][0]["error"]["code"] == "timeout"
    assert job["history"][0]["error"]["retryable"] is True
    assert sha256_file(dest) == faultserver.sha256(size, 22)


@pytest.mark.daemon_args("--stall-timeout", "3")
def test_a_trickle_under_1_byte_a_second_is_a_stall_though_it_is_never_silent(daemon, faultserver, key):
    # SPEC: "under 1 byte/s for 30 s" (here 3 s): one byte every 1.5 s is never silent for the
    # window, yet under 1 byte/s.
    dest = daemon.work / "trickle.bin"
    t0 = time.monotonic()
    id = daemon.download(faultserver.url(size=1000, seed=23, key=key, trickle=1.5, times=1), "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=40)
    assert time.monotonic() - t0 < 20, "the trickle was not ended as a stall"
    assert job["history"][0]["error"]["code"] == "timeout", job["history"]
    assert job["history"][0]["error"]["retryable"] is True
    assert sha256_file(dest) == faultserver.sha256(1000, 23)


def test_when_retries_are_exhausted_the_job_fails_and_retry_resumes_from_the_part(daemon, faultserver, key):
    size = 1_000_000
    dest = daemon.work / "ex.bin"
    # Three dropped attempts (1 + --retries 2), each ~1.25 s of bytes; the fourth request succeeds.
    id = daemon.download(faultserver.url(size=size, seed=23, key=key, slow=200_000, drop=250_000, times=3),
                         "-o", dest, "--retries", "2")
    job = daemon.wait_state(id, "failed", timeout=40)
    assert job["attempts"] == 3
    log = faultserver.log(key)
    assert len(log) == 3
    part = daemon.work / "ex.bin.aftpart"
    assert part.exists() and part.stat().st_size > 0, "a failed download keeps its part so retry can resume"
    kept = job["bytes"]
    assert kept > 0
    daemon.cli("retry", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert len(log) == 4
    start = range_start(log[3]["range"])
    assert start is not None and start > 0, f"retry of a failed download resumes its part: {log[3]['range']}"
    # From its last checkpoint: at most about a second (200 KB here) behind what was on disk.
    assert kept - 300_000 <= start <= kept, f"resumed from {start}, the failed job had {kept} bytes"
    assert log[3]["status"] == 206
    assert sha256_file(dest) == faultserver.sha256(size, 23)


def test_pause_and_cancel_work_on_a_waiting_job_and_a_paused_job_spends_no_retries(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=100, key=key, status=503, times=1, retryafter=5),
                         "-o", daemon.work / "pw")
    daemon.wait_state(id, "waiting")
    daemon.cli("pause", id, check=0)
    job = daemon.wait_state(id, "paused")
    attempts = job["attempts"]
    time.sleep(5.5)  # past the Retry-After timer
    job = daemon.job(id)
    assert job["state"] == "paused" and job["attempts"] == attempts
    assert len(faultserver.log(key)) == 1, "a paused job must not be retried by its timer"
    daemon.cli("resume", id, check=0)
    daemon.wait_state(id, "completed", timeout=20)

    other = daemon.download(faultserver.url(size=100, key=key + "c", status=503, retryafter=30),
                            "-o", daemon.work / "cw")
    daemon.wait_state(other, "waiting")
    daemon.cli("cancel", other, check=0)
    job = daemon.wait_state(other, "cancelled")
    assert job["waitReason"] is None and job["nextRetryAt"] is None


def test_bytes_an_earlier_answer_left_on_a_kept_connection_cost_the_next_job_one_retry_only(daemon, faultserver, key):
    # The first answer sends 100 bytes past its Content-Length; libcurl keeps the connection and
    # the next job's request reads them as its answer ("HTTP/0.9"). That job is not to blame: it
    # is retried on a new connection, as after a reset, and completes.
    first = daemon.download(faultserver.url(size=30_000, key=key + "a", trailing=100), "-o", daemon.work / "a")
    daemon.wait_state(first, "completed")
    time.sleep(0.3)
    second = daemon.download(faultserver.url(size=1000, seed=2, key=key + "b"), "-o", daemon.work / "b")
    job = daemon.wait_state(second, ("completed", "failed"), timeout=30)
    assert job["state"] == "completed", job
    assert (daemon.work / "b").stat().st_size == 1000
    errors = [h["error"] for h in job["history"]]
    assert len(errors) <= 2 and errors[-1] is None, job["history"]
    if len(errors) == 2:
        assert errors[0]["code"] == "network" and errors[0]["retryable"] is True, errors


@pytest.mark.daemon_args("--max-active", "1")
def test_an_attempt_after_leftovers_on_a_kept_connection_goes_out_on_a_new_one(daemon, faultserver, key):
    """Every answer leaves bytes past its length on its connection. The job that reads them fails
    its attempt; its retry must not go out on another such connection (the one the job queued
    behind it just used), or with `--retries 1` it fails for good: it takes a new connection."""
    ids = [daemon.download(faultserver.url(size=20_000, seed=i, key=f"{key}{i}", trailing=100), "-o",
                           daemon.work / f"t{i}", "--retries", "1") for i in range(4)]
    for i, id in enumerate(ids):
        job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
        assert job["state"] == "completed", job["history"]
        assert sha256_file(daemon.work / f"t{i}") == faultserver.sha256(20_000, i)


def test_a_partial_answer_without_the_files_start_to_a_plain_request_fails_at_once(daemon, faultserver, key):
    # A 206 with no Content-Range, though nothing but the whole file was asked for: asking again
    # gets the same, so it is not retried (it once was, nine times over, "starting over").
    id = daemon.download(faultserver.url(size=1000, key=key, status=206), "-o", daemon.work / "p")
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["attempts"] == 1 and job["error"]["code"] == "http_status", job
    assert job["error"]["retryable"] is False and job["httpStatus"] == 206, job
    assert len(faultserver.log(key)) == 1
    assert not (daemon.work / "p").exists() and not (daemon.work / "p.aftpart").exists()


def test_a_refused_connection_is_retried_and_then_fails_with_network(daemon):
    import socket as _socket

    with _socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    id = daemon.download(f"http://127.0.0.1:{port}/x", "-o", daemon.work / "refused", "--retries", "2")
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["attempts"] == 3, "--retries 2: three attempts"
    assert job["error"]["code"] == "network"
    assert job["httpStatus"] is None
    assert all(h["error"] is not None and h["error"]["code"] == "network" for h in job["history"])
    assert job["history"][0]["error"]["retryable"] is True


class _LateCloser(http.server.BaseHTTPRequestHandler):
    """Answers on a kept-alive connection, then closes it 0.3 s later as a server's keep-alive
    timeout does: a request sent on it meanwhile is never read, and the close resets it."""
    protocol_version = "HTTP/1.1"
    body = bytes(range(256)) * 4

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)
        self.wfile.flush()
        time.sleep(0.3)
        self.close_connection = True


@pytest.mark.daemon_args("--max-active", "1")
def test_a_kept_alive_connection_the_server_resets_as_it_is_reused_is_replaced_without_spending_a_retry(daemon):
    """curl's own way ("Connection died, retrying a fresh connect"): the server never saw the
    request, so it is sent on a new connection — not a `network` error, and with `--retries 0`
    not a failed job."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LateCloser)
    server.daemon_threads = True
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        ids = [daemon.download(f"{base}/f{i}", "-o", daemon.work / f"f{i}", "--retries", "0") for i in range(4)]
        for id in ids:
            job = daemon.wait_state(id, ["completed", "failed"], timeout=30)
            assert job["state"] == "completed", job["error"]
            assert job["attempts"] == 1 and len(job["history"]) == 1, job["history"]
        for i in range(4):
            assert (daemon.work / f"f{i}").read_bytes() == _LateCloser.body
        assert sorted(server.seen) == [f"/f{i}" for i in range(4)], "each request reached the server once"
    finally:
        server.shutdown()
        server.server_close()
