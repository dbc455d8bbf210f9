"""`aftransfer set-url ID URL` (issue 10): a renewed link for a download that is not running; the job
keeps its state and its part, and If-Range decides at the new URL whether the part still fits."""

from conftest import sha256_file, wait_until

SIZE = 400_000


def paused_with_part(daemon, faultserver, key, seed="0"):
    dest = daemon.work / "renewed.bin"
    id = daemon.download(faultserver.url(key=key, size=SIZE, seed=seed, slow=100_000), "-o", str(dest))
    daemon.wait_bytes(id, 50_000)
    daemon.cli("pause", str(id), check=True)
    job = daemon.wait_state(id, "paused")
    assert 0 < job["bytes"] < SIZE
    return id, dest


def test_that_set_url_on_a_paused_job_keeps_it_paused_and_resumes_with_if_range_at_the_new_url(
        daemon, faultserver, key):
    id, dest = paused_with_part(daemon, faultserver, key)
    new_key = key + "-renewed"
    new_url = faultserver.url("/signed", key=new_key, size=SIZE, sig="abc")
    job = daemon.cli_json("set-url", str(id), new_url, "--json")
    assert job["state"] == "paused" and job["url"] == new_url
    assert daemon.job(id)["state"] == "paused"
    assert faultserver.log(new_key) == []
    daemon.cli("resume", str(id), check=True)
    daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(SIZE)
    first = faultserver.log(new_key)[0]
    assert first["range"] and first["range"] != "bytes=0-", first
    assert first["ifRange"] == faultserver.etag(SIZE), first
    assert first["status"] == 206


def test_that_different_content_at_the_new_url_restarts_from_byte_0_never_spliced(daemon, faultserver, key):
    id, dest = paused_with_part(daemon, faultserver, key)
    new_key = key + "-other"
    daemon.cli("set-url", str(id), faultserver.url(key=new_key, size=SIZE, seed="other"), check=True)
    daemon.cli("resume", str(id), check=True)
    job = daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(SIZE, "other")
    assert job["sha256"] == faultserver.sha256(SIZE, "other")
    first = faultserver.log(new_key)[0]
    assert first["ifRange"] == faultserver.etag(SIZE) and first["status"] == 200


def test_that_a_failed_download_keeps_failed_until_retry_and_then_uses_the_new_url(daemon, faultserver, key):
    dest = daemon.work / "f.bin"
    id = daemon.download(faultserver.url(key=key, status=403), "-o", str(dest), "--retries", "0")
    daemon.wait_state(id, "failed")
    new_key = key + "-ok"
    daemon.cli("set-url", str(id), faultserver.url(key=new_key, size=1000), check=True)
    assert daemon.job(id)["state"] == "failed"
    daemon.cli("retry", str(id), check=True)
    daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(1000)


def test_that_set_url_is_refused_for_running_completed_unknown_jobs_uploads_and_bad_urls(
        daemon, faultserver, key):
    running = daemon.download(faultserver.url(key=key, size=SIZE, slow=50_000), "-o", str(daemon.work / "r"))
    daemon.wait_state(running, "running")
    good = faultserver.url(key=key, size=10)
    r = daemon.cli("set-url", str(running), good)
    assert r.rc == 2 and "running" in r.err, r
    done = daemon.download(faultserver.url(key=key, size=10), "-o", str(daemon.work / "d"))
    daemon.wait_state(done, "completed")
    assert daemon.cli("set-url", str(done), good).rc == 2
    assert daemon.cli("set-url", "999", good).rc == 2
    src = daemon.work / "src"
    src.write_bytes(b"x" * 10)
    up = daemon.upload(str(src), faultserver.url("/upload", key=key, status=500), "--retries", "0")
    daemon.wait_state(up, "failed")
    assert daemon.cli("set-url", str(up), good).rc == 2
    daemon.cli("pause", str(running), check=True)
    for bad in ("ftp://example.com/x", "not a url", "http://"):
        r = daemon.cli("set-url", str(running), bad)
        assert r.rc == 2, (bad, r)
    assert daemon.job(running)["url"].startswith(faultserver.base)
    resp = daemon.rpc("transfer.setUrl", {"id": running, "url": "file:///etc/passwd"})
    assert resp["error"]["code"] == -32602
    resp = daemon.rpc("transfer.setUrl", {"id": done, "url": good})
    assert resp["error"]["code"] == -32002
