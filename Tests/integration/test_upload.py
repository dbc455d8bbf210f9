"""Uploads end to end (SPEC "Uploads", issue 3), verified on the server side by what arrived."""

import hashlib
import json
import os
import time

import pytest

from conftest import assert_job_schema, sha256_bytes, sha256_file, wait_until, write_random_file


def last_upload(faultserver, key) -> dict:
    log = faultserver.log(key)
    assert log, "the server saw no request"
    return log[-1]


def test_a_put_upload_streams_the_file_and_arrives_byte_identical(daemon, faultserver, key):
    src = daemon.work / "payload.bin"
    size = 3 * 1024 * 1024 + 5
    digest = write_random_file(src, size)
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key), "--wait", check=0, timeout=60)
    id = int(r.out.split()[0])
    entry = last_upload(faultserver, key)
    up = entry["upload"]
    assert entry["method"] == "PUT"
    assert up["complete"] and up["size"] == size and up["sha256"] == digest
    assert up["contentLength"] == size and not up["chunked"], "a file upload sends a Content-Length"
    assert up["contentType"] == "application/octet-stream"
    job = daemon.job(id)
    assert_job_schema(job)
    assert job["kind"] == "upload" and job["method"] == "PUT" and job["state"] == "completed"
    assert job["destination"] == str(src)
    assert job["bytes"] == job["total"] == size and job["fraction"] == 1
    assert job["sha256"] == digest and job["httpStatus"] == 201
    resp = job["response"]
    assert resp is not None and resp["status"] == 201
    assert json.loads(resp["body"])["sha256"] == digest
    assert any(k.lower() == "content-type" for k in resp["headers"]), resp["headers"]


def test_a_post_upload_arrives_with_a_content_type_guessed_from_the_extension(daemon, faultserver, key):
    src = daemon.work / "data.json"
    src.write_text(json.dumps({"hello": "world"}))
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--method", "POST")
    job = daemon.wait_state(id, "completed")
    entry = last_upload(faultserver, key)
    assert entry["method"] == "POST" and job["method"] == "POST"
    assert entry["upload"]["sha256"] == sha256_file(src)
    ctype = entry["upload"]["contentType"] or ""
    assert ctype.startswith("application/json"), f"Content-Type {ctype!r}"


def test_a_post_upload_of_an_unknown_type_is_never_sent_as_form_urlencoded(daemon, faultserver, key):
    src = daemon.work / "blob.zzz-unknown"
    write_random_file(src, 1000)
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--method", "POST")
    daemon.wait_state(id, "completed")
    assert last_upload(faultserver, key)["upload"]["contentType"] == "application/octet-stream"


def test_the_users_content_type_header_wins(daemon, faultserver, key):
    src = daemon.work / "table.json"
    src.write_text("a,b\n1,2\n")
    id = daemon.upload(src, faultserver.url("/upload", key=key), "-H", "Content-Type: text/csv")
    daemon.wait_state(id, "completed")
    assert last_upload(faultserver, key)["upload"]["contentType"] == "text/csv"


def test_a_multipart_upload_with_two_files_and_two_fields(daemon, faultserver, key):
    png = daemon.work / "photo.png"
    txt = daemon.work / "notes.txt"
    png_digest = write_random_file(png, 300_000)
    txt.write_text("some notes\n" * 1000)
    id = daemon.upload("--form", f"image=@{png};type=image/x-custom", "--form", f"doc=@{txt};filename=renamed.txt",
                       "--form", "title=Holiday", "--form", "note=two words",
                       faultserver.url("/upload", key=key))
    job = daemon.wait_state(id, "completed", timeout=30)
    entry = last_upload(faultserver, key)
    up = entry["upload"]
    assert entry["method"] == "POST" and job["method"] == "POST"
    assert up["contentType"].startswith("multipart/form-data; boundary=")
    assert up["multipartComplete"] and not up["multipartErrors"], up
    parts = up["parts"]
    assert [p["name"] for p in parts] == ["image", "doc", "title", "note"]
    image, doc, title, note = parts
    assert (image["filename"], image["contentType"], image["size"], image["sha256"]) == (
        "photo.png", "image/x-custom", 300_000, png_digest)
    assert doc["filename"] == "renamed.txt" and doc["size"] == txt.stat().st_size
    assert doc["sha256"] == sha256_file(txt) and (doc["contentType"] or "").startswith("text/plain")
    assert title["filename"] is None and title["value"] == "Holiday"
    assert note["filename"] is None and note["value"] == "two words"
    assert_job_schema(job)
    assert job["destination"] is None
    assert job["total"] == up["size"] and job["bytes"] == up["size"], "bytes/total are of the whole encoded body"
    assert job["sha256"] == up["sha256"], "sha256 is of the whole encoded body"


def test_response_saves_the_response_body_to_a_file(daemon, faultserver, key):
    src = daemon.work / "r.bin"
    digest = write_random_file(src, 10_000)
    out = daemon.work / "response.json"
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--response", out)
    daemon.wait_state(id, "completed")
    answer = json.loads(out.read_text())
    assert answer["sha256"] == digest and answer["size"] == 10_000


def test_response_into_a_new_directory_or_over_a_file_needs_create_dirs_or_replace(daemon, faultserver, key):
    # The refusals name --create-dirs and --replace: upload takes them, for the --response file.
    src = daemon.work / "r2.bin"
    digest = write_random_file(src, 5_000)
    nested = daemon.work / "new" / "dir" / "response.json"
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key), "--response", nested)
    assert r.rc == 2 and "--create-dirs" in r.err, r
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--response", nested, "--create-dirs")
    daemon.wait_state(id, "completed")
    assert json.loads(nested.read_text())["sha256"] == digest
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key), "--response", nested)
    assert r.rc == 2 and "--replace" in r.err, r
    nested.write_text("old")
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--response", nested, "--replace")
    daemon.wait_state(id, "completed")
    assert json.loads(nested.read_text())["sha256"] == digest
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key), "--replace")
    assert r.rc == 2 and "--response" in r.err, r


def test_a_response_file_is_held_as_a_downloads_destination_is(daemon, faultserver, key):
    # One file, one job: an upload's --response shared with a download (or another upload) once
    # mixed both into one .aftpart and corrupted the completed download.
    src = daemon.work / "slow.bin"
    write_random_file(src, 300_000)
    held = daemon.work / "held.json"
    up = daemon.upload(src, faultserver.url("/upload", key=key + "u"), "--response", held, "--limit-rate", "20K",
                       "--resumable", "off")
    r = daemon.cli("download", faultserver.url(size=1000, key=key + "d"), "-o", held)
    assert r.rc == 2 and "another job" in r.err, r
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key + "u2"), "--response", held, "--replace")
    assert r.rc == 2 and "another job" in r.err, r
    lst = daemon.work / "list.txt"
    lst.write_text(f"{faultserver.url(size=10, key=key + 'l')}\t{held.name}\n")
    r = daemon.cli("download", "-i", lst, "-d", daemon.work)
    assert r.rc == 2 and "another job" in r.err, r
    # And the other way round: a download's destination is no upload's response file.
    target = daemon.work / "target.bin"
    down = daemon.download(faultserver.url(size=3_000_000, key=key + "x", slow=100_000), "-o", target)
    r = daemon.cli("upload", src, faultserver.url("/upload", key=key + "u3"), "--response", target, "--replace")
    assert r.rc == 2 and "another job" in r.err, r
    assert [j["id"] for j in daemon.jobs()] == [up, down]
    daemon.cli("cancel", str(up), str(down))


def test_without_response_the_first_64_kib_of_the_body_are_kept(daemon, faultserver, key):
    src = daemon.work / "big-answer.bin"
    write_random_file(src, 100)
    id = daemon.upload(src, faultserver.url("/upload", key=key, respsize=200_000))
    job = daemon.wait_state(id, "completed")
    body = job["response"]["body"]
    assert body.startswith('{"key"') and 60_000 <= len(body.encode()) <= 65536, len(body.encode())


def test_a_rejected_upload_fails_with_http_status(daemon, faultserver, key):
    src = daemon.work / "x.bin"
    write_random_file(src, 100)
    id = daemon.upload(src, faultserver.url("/upload", key=key, status=403))
    job = daemon.wait_state(id, "failed")
    assert job["error"]["code"] == "http_status" and job["httpStatus"] == 403


def test_a_connection_dropped_mid_upload_is_retried_from_byte_zero(daemon, faultserver, key):
    src = daemon.work / "drop.bin"
    size = 2 * 1024 * 1024
    digest = write_random_file(src, size)
    id = daemon.upload(src, faultserver.url("/upload", key=key, drop=700_000, times=1))
    job = daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert len(log) == 2
    assert log[0]["dropped"] and not log[0]["upload"]["complete"]
    assert log[1]["upload"]["complete"] and log[1]["upload"]["size"] == size and log[1]["upload"]["sha256"] == digest
    assert "content-range" not in log[1]["headers"], "an upload restarts from byte 0"
    assert job["attempts"] == 2 and job["bytes"] == size


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_a_503_then_success_is_retried_for_put_and_post(daemon, faultserver, key, method):
    src = daemon.work / "s.bin"
    digest = write_random_file(src, 200_000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, status=503, times=1), "--method", method)
    daemon.wait_state(id, "completed", timeout=30)
    log = faultserver.log(key)
    assert [e["status"] for e in log] == [503, 201]
    assert log[1]["upload"]["sha256"] == digest


def test_retries_0_never_sends_an_upload_twice(daemon, faultserver, key):
    src = daemon.work / "once.bin"
    write_random_file(src, 1000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, status=503), "--method", "POST", "--retries", "0")
    daemon.wait_state(id, "failed")
    time.sleep(1.0)
    assert len(faultserver.log(key)) == 1


def test_a_source_that_changed_since_enqueue_fails_with_source_changed(daemon, faultserver, key):
    src = daemon.work / "changing.bin"
    write_random_file(src, 50_000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, status=503, times=1, retryafter=5))
    daemon.wait_state(id, "waiting")
    with open(src, "ab") as f:
        f.write(b"more bytes")
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["error"]["code"] == "source_changed" and job["error"]["retryable"] is False
    assert len(faultserver.log(key)) == 1


def test_a_source_changed_after_it_was_read_but_before_the_answer_fails_with_source_changed(
        daemon, faultserver, key):
    # The whole file is handed to the socket long before the slow server has read it; a change in
    # place (same size, new mtime) then must not give the job a digest of bytes never sent.
    src = daemon.work / "late.bin"
    write_random_file(src, 4_000_000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=1_000_000), "--resumable", "off")
    deadline = time.monotonic() + 20
    while True:
        job = daemon.job(id)
        assert job["state"] in ("queued", "running"), job
        if job["state"] == "running" and job["bytes"] == 4_000_000:
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    with open(src, "r+b") as f:
        f.seek(3_900_000)
        f.write(b"\0" * 10)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "source_changed" and job["sha256"] is None, job


def test_retries_0_sends_an_upload_once_even_when_a_reused_connection_dies_without_an_answer(
        daemon, faultserver, key):
    # libcurl would rewind the body and send it again on a fresh connection, unseen; the daemon
    # does not let it: the attempt fails, and with --retries 0 the server sees one request.
    src = daemon.work / "once.bin"
    write_random_file(src, 100_000)
    warm = daemon.upload(src, faultserver.url("/upload", key=key + "-warm"), "--resumable", "off")
    daemon.wait_state(warm, "completed")
    id = daemon.upload(src, faultserver.url("/upload", key=key, drop=100_000), "--resumable", "off",
                       "--method", "POST", "--retries", "0")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert len(faultserver.log(key)) == 1, faultserver.log(key)
    assert job["attempts"] == 1 and len(job["history"]) == 1, job
    assert job["error"]["code"] == "network", job["error"]
    # With retries, the same fault is an attempt like any reset: retried, counted, recorded.
    id = daemon.upload(src, faultserver.url("/upload", key=key + "-again", drop=100_000, times=1),
                       "--resumable", "off", "--method", "POST", "--retries", "2")
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["attempts"] == 2 and len(faultserver.log(key + "-again")) == 2, job


def test_uploads_follow_307_and_308_and_send_the_body_again(daemon, faultserver, key):
    for code in (307, 308):
        k = f"{key}-{code}"
        src = daemon.work / f"r{code}.bin"
        digest = write_random_file(src, 300_000)
        target = faultserver.url("/upload-final", key=k)
        id = daemon.upload(src, faultserver.url("/upload", key=k, redirect=target, code=code))
        daemon.wait_state(id, "completed", timeout=20)
        log = faultserver.log(k)
        assert log[-1]["path"] == "/upload-final" and log[-1]["method"] == "PUT"
        assert log[-1]["upload"]["sha256"] == digest


def test_other_redirects_of_an_upload_fail_with_redirect(daemon, faultserver, key):
    src = daemon.work / "r302.bin"
    write_random_file(src, 1000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, redirect=faultserver.url("/elsewhere", key=key),
                                            code=302))
    job = daemon.wait_state(id, "failed")
    assert job["error"]["code"] == "redirect"
    assert all(e["path"] == "/upload" for e in faultserver.log(key)), "a 302 of an upload must not be followed"


def test_upload_progress_counts_bytes_sent(daemon, faultserver, key):
    src = daemon.work / "prog.bin"
    size = 8 * 1024 * 1024
    write_random_file(src, size)
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=2_000_000))
    job = daemon.wait_bytes(id, 1)
    seen = []
    while job["state"] != "completed":
        assert job["total"] == size
        if job["state"] == "running":
            seen.append(job)
        time.sleep(0.2)
        job = daemon.job(id)
        assert job["state"] in ("running", "completed"), job
    assert any(0 < j["bytes"] < size and 0 < j["fraction"] < 1 for j in seen), "progress while sending"
    assert job["bytes"] == size


@pytest.mark.timeout(120)
def test_an_upload_survives_kill_9_of_the_daemon(daemon, faultserver, key):
    src = daemon.work / "k9.bin"
    size = 6 * 1024 * 1024
    digest = write_random_file(src, size)
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=1_500_000))
    daemon.wait_state(id, "running")
    time.sleep(1.5)
    daemon.kill9()
    daemon.start()
    daemon.wait_state(id, "completed", timeout=60)
    log = faultserver.log(key)
    assert len(log) >= 2
    assert not log[0]["upload"]["complete"]
    final = log[-1]["upload"]
    assert final["complete"] and final["size"] == size and final["sha256"] == digest


def test_the_body_of_an_upload_cut_by_kill_9_never_reaches_the_server_whole(daemon, faultserver, key):
    """The daemon's upload connections reset on close: the body bytes still queued in the kernel
    when it dies are dropped, not delivered to the server after it has gone."""
    src = daemon.work / "cut.bin"
    size = 1_500_000
    write_random_file(src, size)
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=300_000), "--method", "POST")
    daemon.wait_state(id, "running")
    time.sleep(1.0)
    daemon.kill9()
    # Without the reset the server reads the rest from the kernel's queues (5 s at this pace).
    time.sleep(6)
    first = faultserver.log(key)[0]["upload"]
    assert not first["complete"] and first["size"] < size, first


def test_an_upload_paused_on_a_connection_a_download_opened_resets_it_too(daemon, faultserver, key):
    """The reset holds for a kept-alive connection the upload reuses (opened by a GET here; a
    resumable upload's append reuses its offset query's), not only for one it opens."""
    first = daemon.download(faultserver.url(size=10, key=key + "g"), "-o", daemon.work / "g")
    daemon.wait_state(first, "completed")
    src = daemon.work / "reused.bin"
    size = 1_500_000
    write_random_file(src, size)
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=300_000), "--method", "POST",
                       "--resumable", "off")
    daemon.wait_state(id, "running")
    time.sleep(1.0)
    assert daemon.cli("pause", str(id)).rc == 0
    time.sleep(6)  # without the reset the server reads the rest from the kernel's queues
    first_upload = faultserver.log(key)[0]["upload"]
    assert not first_upload["complete"] and first_upload["size"] < size, first_upload


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_retries_0_upload_whose_request_was_under_way_is_not_sent_again_after_a_stop(daemon, faultserver, key, stop):
    """SPEC: `--retries 0` is for endpoints that must never see a request twice. The server
    waits 3 s before it reads the body, which the daemon has handed to the kernel whole: stopped
    then, the daemon cannot know whether the server got it, so the next start fails the job."""
    src = daemon.work / "once.bin"
    write_random_file(src, 100_000)
    response = daemon.work / "once.json"
    id = daemon.upload(src, faultserver.url("/upload", key=key, delay=3), "--method", "POST", "--retries", "0",
                       "--response", response)
    wait_until(lambda: daemon.job(id)["bytes"] == 100_000, 10, "the whole body handed over")
    part = daemon.work / "once.json.aftpart"
    assert part.exists() and part.stat().st_size == 0, "the response's part is made with the request"
    if stop == "kill -9":
        daemon.kill9()
    else:
        assert daemon.stop()[0] == 0
    daemon.start()
    job = daemon.wait_state(id, ["failed", "completed"], timeout=20)
    assert job["state"] == "failed", job
    assert job["error"]["code"] == "network" and not job["error"]["retryable"], job["error"]
    assert "--retries 0" in job["error"]["message"]
    # As after a failure the daemon saw (an outside audit found an empty part kept after a crash).
    assert not part.exists() and not response.exists()
    time.sleep(4)  # the first request has ended at the server by now
    assert len(faultserver.log(key)) == 1, "the upload was sent again"


def test_credentials_of_an_upload_are_sent_and_never_printed(daemon, faultserver, key):
    secret = "up-Kk44-secret"
    src = daemon.work / "a.bin"
    write_random_file(src, 100)
    id = daemon.upload(src, faultserver.url("/upload", key=key,
                                            authsha256=sha256_bytes(f"me:{secret}".encode())),
                       "--user", f"me:{secret}")
    daemon.wait_state(id, "completed")
    for args in (("status", id, "--json"), ("list", "--json"), ("curl", id)):
        r = daemon.cli(*args, check=0)
        assert secret not in r.out + r.err


# MARK: - Bad input


def test_bad_upload_input_is_refused_with_exit_2_and_nothing_queued(daemon, faultserver, key):
    url = faultserver.url("/upload", key=key)
    (daemon.work / "adir").mkdir()
    ok = daemon.work / "ok.txt"
    ok.write_text("x")
    cases = [
        ("upload", daemon.work / "missing.bin", url),
        ("upload", daemon.work / "adir", url),
        ("upload", ok, "ftp://127.0.0.1/x"),
        ("upload", ok, url, "--method", "DELETE"),
        ("upload", "--form", "novalue", url),
        ("upload", "--form", "=@" + str(ok), url),
        ("upload", "--form", f"f=@{daemon.work / 'missing.bin'}", url),
        ("upload", "--form", f"f=@{daemon.work / 'adir'}", url),
    ]
    for args in cases:
        r = daemon.cli(*args)
        assert r.rc == 2, f"{args}: {r}"
        assert r.err.strip()
    assert daemon.jobs() == []
    assert faultserver.log(key) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a mode-000 file")
def test_an_unreadable_file_is_refused(daemon, faultserver, key):
    src = daemon.work / "secret.bin"
    src.write_text("x")
    os.chmod(src, 0)
    assert daemon.cli("upload", src, faultserver.url("/upload", key=key)).rc == 2


# MARK: - Memory


@pytest.mark.timeout(300)
def test_a_1_gib_upload_keeps_the_daemons_peak_rss_under_64_mib(daemon, faultserver, key):
    src = daemon.work / "gig.bin"
    size = 1024 * 1024 * 1024
    with open(src, "wb") as f:
        f.truncate(size)  # sparse: the bytes are zeros, the disk stays free
    zeros = hashlib.sha256()
    chunk = bytes(1 << 20)
    for _ in range(1024):
        zeros.update(chunk)
    id = daemon.upload(src, faultserver.url("/upload", key=key))
    job = daemon.wait_state(id, "completed", timeout=240)
    with open(f"/proc/{daemon.pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    hwm_kib = int(status["VmHWM"].split()[0])
    print(f"daemon VmHWM after a 1 GiB upload: {hwm_kib / 1024:.1f} MiB")
    up = last_upload(faultserver, key)["upload"]
    assert up["size"] == size and up["sha256"] == zeros.hexdigest()
    assert job["bytes"] == size
    assert hwm_kib < 64 * 1024, f"daemon peak RSS {hwm_kib / 1024:.1f} MiB"


def test_a_relative_upload_source_is_resolved_against_the_working_directory(daemon, faultserver, key):
    cwd = daemon.work / "cwd"
    cwd.mkdir()
    digest = write_random_file(cwd / "rel.bin", 1000)
    r = daemon.cli("upload", "rel.bin", faultserver.url("/upload", key=key), cwd=cwd, check=0)
    job = daemon.wait_state(int(r.out), "completed")
    assert job["destination"] == str(cwd / "rel.bin")
    assert last_upload(faultserver, key)["upload"]["sha256"] == digest


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_a_final_2xx_before_the_whole_body_was_read_fails_the_job_once_never_sending_it_again(
        daemon, faultserver, key, method):
    # The server answered 201 and stopped reading: it acted on the request, and would again.
    # Sent again, a POST went out --retries + 1 times.
    src = daemon.work / "early.bin"
    write_random_file(src, 20 * 1024 * 1024)
    url = faultserver.url("/upload", key=key, early=1)
    id = daemon.upload(src, url, "--method", method, "--retries", "3", "--resumable", "off")
    job = daemon.wait_state(id, "failed", timeout=60)
    assert job["error"]["code"] == "network" and job["error"]["retryable"] is False, job["error"]
    assert "not sent again" in job["error"]["message"], job["error"]
    assert job["httpStatus"] == 201 and job["attempts"] == 1, job
    time.sleep(1.0)
    assert len(faultserver.log(key)) == 1, "the request was sent again"


def test_an_uploads_first_byte_is_the_first_byte_of_the_answer_not_of_the_body(daemon, faultserver, key):
    # libcurl 7.88 stamps CURLINFO_STARTTRANSFER_TIME when an upload's first byte is *sent*: the
    # history showed "first byte 0ms" for an upload whose answer came after 2 s.
    src = daemon.work / "timed.bin"
    src.write_bytes(os.urandom(2_000_000))
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=1_000_000), "--resumable", "off")
    job = daemon.wait_state(id, "completed", timeout=30)
    entry = job["history"][-1]
    assert entry["total"] >= 1.5, entry
    assert entry["firstByte"] >= 1.5 and entry["firstByte"] <= entry["total"], entry
    # A download's is still the time to its answer, well before its end.
    down = daemon.download(faultserver.url(size=1_000_000, key=key + "d", slow=500_000), "-o", daemon.work / "d.bin")
    entry = daemon.wait_state(down, "completed", timeout=30)["history"][-1]
    assert entry["firstByte"] < 0.5 and entry["total"] >= 1.5, entry


def test_a_source_deleted_or_moved_away_while_it_is_sent_completes_as_it_was_queued(daemon, faultserver, key):
    # The daemon reads from the descriptor it opened: the bytes sent are the file as queued, and
    # the server accepted them. The job failed with source_changed ("no longer exists") after
    # the server's 2xx. A file put in its place is still a change.
    for how in ("deleted", "moved"):
        src = daemon.work / f"{how}.bin"
        data = os.urandom(1_000_000)
        src.write_bytes(data)
        id = daemon.upload(src, faultserver.url("/upload", key=f"{key}{how}", slow=1_000_000), "--resumable", "off")
        daemon.wait_bytes(id, 100_000, timeout=20)
        if how == "deleted":
            src.unlink()
        else:
            src.rename(daemon.work / "elsewhere.bin")
        job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
        assert job["state"] == "completed", job
        assert job["sha256"] == hashlib.sha256(data).hexdigest(), job
        assert faultserver.log(f"{key}{how}")[-1]["upload"]["sha256"] == job["sha256"]
    src = daemon.work / "replaced.bin"
    src.write_bytes(os.urandom(1_000_000))
    id = daemon.upload(src, faultserver.url("/upload", key=f"{key}r", slow=1_000_000), "--resumable", "off")
    daemon.wait_bytes(id, 100_000, timeout=20)
    src.unlink()
    src.write_bytes(os.urandom(1_000_001))
    job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
    assert job["state"] == "failed" and job["error"]["code"] == "source_changed", job


def test_a_users_expect_100_continue_is_sent_as_curl_sends_it(daemon, faultserver, key):
    # The daemon's own empty Expect replaced the user's: accepted, silently not sent, while
    # `aftransfer curl` showed it.
    src = daemon.work / "expect.bin"
    src.write_bytes(os.urandom(50_000))
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--resumable", "off", "-H", "Expect: 100-continue")
    daemon.wait_state(id, "completed", timeout=20)
    assert faultserver.log(key)[-1]["upload"]["expect"] == "100-continue"
    assert "Expect:'" not in daemon.cli("curl", str(id), check=0).out
    plain = daemon.upload(src, faultserver.url("/upload", key=key + "p"), "--resumable", "off")
    daemon.wait_state(plain, "completed", timeout=20)
    assert faultserver.log(key + "p")[-1]["upload"]["expect"] is None


def test_a_response_file_that_appeared_meanwhile_keeps_the_servers_answer_in_the_part(daemon, faultserver, key):
    # The server accepted the upload; its answer is the only copy. It was deleted with the part.
    src = daemon.work / "late.bin"
    src.write_bytes(os.urandom(600_000))
    out = daemon.work / "answer.json"
    id = daemon.upload(src, faultserver.url("/upload", key=key, slow=300_000), "--resumable", "off",
                       "--response", out)
    daemon.wait_bytes(id, 50_000, timeout=20)
    out.write_text("mine\n")
    job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
    assert job["state"] == "failed" and job["error"]["code"] == "destination_exists", job
    assert out.read_text() == "mine\n", "the file that appeared is left alone"
    part = daemon.work / "answer.json.aftpart"
    assert str(part) in job["error"]["message"], job
    assert json.loads(part.read_text())["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()


@pytest.mark.daemon_args("--stall-timeout", "2")
def test_an_upload_never_answered_has_no_first_byte_in_its_history(daemon, faultserver, key):
    # Found by an outside audit: without an answer the entry took libcurl's time to the first
    # byte *sent* (libcurl 7.88), so `status` showed "first byte 1ms" for a server that never spoke.
    src = daemon.work / "unanswered.bin"
    write_random_file(src, 10_000)
    id = daemon.upload(src, faultserver.url("/upload", key=key, delay=20), "--retries", "0", "--resumable", "off")
    job = daemon.wait_state(id, ("failed", "completed"), timeout=30)
    assert job["state"] == "failed" and job["error"]["code"] == "timeout", job
    entry = job["history"][0]
    assert entry["httpStatus"] is None and entry["firstByte"] == 0, entry
