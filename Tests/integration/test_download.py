"""Downloads end to end (SPEC "Downloads", "The CLI"): real daemon, real CLI, real servers."""

import json
import os
import re
import time
import unicodedata
import urllib.parse

import pytest

from conftest import assert_job_schema, sha256_bytes, sha256_file, wait_until


# Unicode's Bidi_Control: they reorder how a name reads (README: dropped as control characters are).
BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def spec_sanitize(name: str) -> str:
    """SPEC's file-name sanitizing, as a reference for expected names."""
    s = name.replace("/", "_").replace("\\", "_")
    s = "".join(ch for ch in s if unicodedata.category(ch) != "Cc" and ch not in BIDI_CONTROLS)
    s = s.lstrip(". ")
    s = s.encode()[:255].decode("utf-8", "ignore")
    return "download" if s in ("", ".", "..") else s


def no_part_files(directory) -> bool:
    return not [p for p in os.listdir(directory) if p.endswith(".aftpart")]


# MARK: - The basics


def test_a_download_from_nginx_completes_with_the_exact_bytes(daemon, nginx):
    digest = nginx.make_file("basic/five.bin", 5 * 1024 * 1024 + 17)
    dest = daemon.work / "five.bin"
    id = daemon.download(nginx.url("basic/five.bin"), "-o", dest)
    job = daemon.wait_state(id, "completed", timeout=60)
    assert sha256_file(dest) == digest
    assert_job_schema(job)
    assert job["kind"] == "download" and job["method"] == "GET"
    assert job["destination"] == str(dest)
    assert job["bytes"] == job["total"] == 5 * 1024 * 1024 + 17
    assert job["fraction"] == 1
    assert job["sha256"] == digest
    assert job["httpStatus"] == 200
    assert job["error"] is None and job["completedAt"] is not None
    assert job["rate"] == 0
    assert job["attempts"] >= 1 and len(job["history"]) == job["attempts"]
    assert no_part_files(daemon.work)


def test_a_running_jobs_open_history_entry_shows_its_status_and_bytes_so_far(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=4_000_000, key=key, slow=200_000), "-o", daemon.work / "open.bin")
    wait_until(lambda: daemon.job(id)["bytes"] > 400_000, 20, "some bytes")
    for command in (("status", str(id), "--json"), ("list", "--json")):
        out = daemon.cli_json(*command)
        job = out if isinstance(out, dict) else next(j for j in out if j["id"] == id)
        assert job["state"] == "running", job
        entry = job["history"][-1]
        assert len(job["history"]) == job["attempts"] == 1 and entry["endedAt"] is None, job["history"]
        assert entry["httpStatus"] == job["httpStatus"] == 200, job
        assert entry["bytes"] == job["bytes"] > 400_000, job
    # Checkpoints change the job (once a second while bytes flow): its updatedAt moves on.
    before = daemon.job(id)["updatedAt"]
    time.sleep(2.2)
    after = daemon.job(id)
    assert after["state"] == "running" and after["updatedAt"] > before, (before, after)
    daemon.cli("cancel", str(id))


def test_an_international_host_name_is_fetched_as_curl_fetches_it(daemon, faultserver, key):
    # libcurl converts the name with libidn2 (xn--bcher-kva.localhost); *.localhost is loopback.
    url = faultserver.url(size=1000, key=key, host="bücher.localhost")
    id = daemon.download(url, "-o", daemon.work / "idn.bin")
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["url"] == url and (daemon.work / "idn.bin").stat().st_size == 1000
    assert faultserver.log(key)[0]["headers"]["host"].startswith("xn--bcher-kva.localhost:"), faultserver.log(key)


def test_download_prints_the_new_jobs_id_alone_on_stdout(daemon, faultserver, key):
    r = daemon.cli("download", faultserver.url(size=10, key=key), "-o", daemon.work / "a", check=0)
    assert re.fullmatch(r"\d+\n?", r.out), f"stdout is not an id alone: {r.out!r}"
    job = daemon.job(int(r.out))
    assert job["id"] == int(r.out)


def test_download_with_json_prints_the_job_object(daemon, faultserver, key):
    dest = daemon.work / "j.bin"
    job = daemon.cli_json("download", faultserver.url(size=1000, key=key), "-o", dest, "--json")
    assert_job_schema(job)
    assert job["kind"] == "download" and job["destination"] == str(dest)
    assert job["state"] in ("queued", "running", "completed")
    assert job["url"] == faultserver.url(size=1000, key=key)


def test_download_wait_shows_progress_on_stderr_and_exits_0(daemon, faultserver, key):
    dest = daemon.work / "w.bin"
    r = daemon.cli("download", faultserver.url(size=300_000, seed=2, key=key, slow=300_000), "-o", dest,
                   "--wait", check=0)
    lines = r.out.splitlines()
    assert lines and re.fullmatch(r"\d+", lines[0]), f"--wait must print the id first: {r}"
    assert r.err.strip(), "--wait shows progress on stderr"
    assert sha256_file(dest) == faultserver.sha256(300_000, 2)


def test_download_wait_json_prints_only_the_final_job_object(daemon, faultserver, key):
    dest = daemon.work / "wj.bin"
    r = daemon.cli("download", faultserver.url(size=5000, seed=4, key=key), "-o", dest, "--wait", "--json",
                   check=0)
    job = json.loads(r.out)
    assert_job_schema(job)
    assert job["state"] == "completed" and job["sha256"] == faultserver.sha256(5000, 4)


def test_download_wait_exits_1_when_the_job_fails(daemon, faultserver, key):
    r = daemon.cli("download", faultserver.url(key=key, status=404), "-o", daemon.work / "nf", "--wait")
    assert r.rc == 1, r


def test_a_relative_output_path_is_resolved_against_the_cli_working_directory(daemon, faultserver, key, tmp_path):
    cwd = daemon.work / "cwd"
    (cwd / "sub").mkdir(parents=True)
    id = daemon.download(faultserver.url(size=100, key=key), "-o", "sub/rel.bin", cwd=cwd)
    job = daemon.wait_state(id, "completed")
    assert job["destination"] == str(cwd / "sub" / "rel.bin")
    assert (cwd / "sub" / "rel.bin").stat().st_size == 100


def test_without_output_the_file_goes_to_the_working_directory(daemon, faultserver, key):
    cwd = daemon.work / "here"
    cwd.mkdir()
    id = daemon.download(faultserver.url("/files/report.bin", size=123, key=key), cwd=cwd)
    job = daemon.wait_state(id, "completed")
    assert job["destination"] == str(cwd / "report.bin")
    assert os.listdir(cwd) == ["report.bin"]


def test_create_dirs_creates_missing_parent_directories(daemon, faultserver, key):
    dest = daemon.work / "a" / "b" / "c" / "deep.bin"
    id = daemon.download(faultserver.url(size=1000, seed=1, key=key), "-o", dest, "--create-dirs")
    daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(1000, 1)


def test_replace_overwrites_an_existing_file(daemon, faultserver, key):
    dest = daemon.work / "old.bin"
    dest.write_bytes(b"old content")
    id = daemon.download(faultserver.url(size=1000, seed=1, key=key), "-o", dest, "--replace")
    daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(1000, 1)


@pytest.mark.parametrize("spelling", ["link/same.bin", "d/../d/same.bin", "d//same.bin"])
def test_another_spelling_of_an_unfinished_jobs_file_is_refused(daemon, faultserver, key, spelling):
    # Through a symbolic link to the directory, `..` or `//`: the same file. Both jobs wrote one
    # part, and one completed with the other's bytes.
    (daemon.work / "d").mkdir()
    (daemon.work / "link").symlink_to(daemon.work / "d")
    first = daemon.download(faultserver.url(size=400_000, seed="a", key=key, slow=100_000), "-o",
                            daemon.work / "d" / "same.bin")
    r = daemon.cli("download", faultserver.url(size=1000, seed="b", key=key + "b"), "-o",
                   f"{daemon.work}/{spelling}")
    assert r.rc == 2 and f"another job downloads to {daemon.work}/d/same.bin" in r.err, r
    assert [j["id"] for j in daemon.jobs()] == [first]
    daemon.wait_state(first, "completed", timeout=30)
    assert sha256_file(daemon.work / "d" / "same.bin") == faultserver.sha256(400_000, "a")


def test_two_lines_of_a_list_naming_one_file_through_a_link_name_the_earlier_line(daemon, faultserver, key):
    # Found by an outside audit: the clash was worded "another job downloads to PATH", naming no
    # job (there was none): the daemon names the earlier request (as for a list sent in parts),
    # which the CLI turns into its line.
    (daemon.work / "ln").mkdir()
    (daemon.work / "ln" / "self").symlink_to(".")
    listing = daemon.work / "urls.txt"
    listing.write_text(f"{faultserver.url(key=key)}\tn1\n{faultserver.url(key=key + 'b')}\tself/n1\n")
    r = daemon.cli("download", "-i", listing, "-d", daemon.work / "ln")
    assert r.rc == 2 and f"line 2: destination: {daemon.work}/ln/n1 is also the file of line 1" in r.err, r
    resp = daemon.rpc("transfer.addMany", {"requests": [
        {"url": faultserver.url(key=key), "destination": str(daemon.work / "ln" / "n1")},
        {"url": faultserver.url(key=key + "b"), "destination": str(daemon.work / "ln" / "self" / "n1")}]})
    assert resp["error"]["message"] == f"request 1: destination: {daemon.work}/ln/n1 is also the file of request 0", resp
    assert resp["error"]["data"]["index"] == 1, resp
    assert daemon.jobs() == []


def test_dotdot_after_a_link_is_the_parent_of_the_links_target_as_for_the_kernel(daemon, faultserver, key):
    # The CLI took `link/../x` out as text (to `x` beside the link); the kernel, curl and the
    # daemon put it in the target's parent.
    (daemon.work / "real" / "deep").mkdir(parents=True)
    (daemon.work / "link").symlink_to("real/deep")
    id = daemon.download(faultserver.url(size=10, key=key), "-o", "link/../up.bin")
    job = daemon.wait_state(id, "completed")
    assert job["destination"] == str(daemon.work / "real" / "up.bin"), job
    assert (daemon.work / "real" / "up.bin").exists() and not (daemon.work / "up.bin").exists()


def test_a_dangling_link_to_a_directory_still_to_be_made_names_its_target(daemon, faultserver, key):
    # Two jobs, one through the link, both with --create-dirs: the same file (they wrote one part).
    (daemon.work / "ln").symlink_to("nd")
    first = daemon.download(faultserver.url(size=400_000, seed="a", key=key, slow=100_000), "-o",
                            daemon.work / "nd" / "f.bin", "--create-dirs")
    r = daemon.cli("download", faultserver.url(size=10, key=key + "b"), "-o", daemon.work / "ln" / "f.bin",
                   "--create-dirs")
    assert r.rc == 2 and f"another job downloads to {daemon.work}/nd/f.bin" in r.err, r
    daemon.wait_state(first, "completed", timeout=30)
    assert sha256_file(daemon.work / "nd" / "f.bin") == faultserver.sha256(400_000, "a")


def test_a_file_that_appears_at_the_destination_during_the_transfer_fails_with_destination_exists(
        daemon, faultserver, key):
    dest = daemon.work / "race.bin"
    id = daemon.download(faultserver.url(size=400_000, key=key, slow=200_000), "-o", dest)
    daemon.wait_bytes(id, 1)
    dest.write_bytes(b"precious")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "destination_exists"
    assert job["error"]["retryable"] is False
    assert dest.read_bytes() == b"precious"


def test_a_running_job_shows_the_status_of_its_attempts_response(daemon, faultserver, key):
    # SPEC: httpStatus is the last response status (the job object's example: running, 206).
    dest = daemon.work / "status.bin"
    id = daemon.download(faultserver.url(size=600_000, key=key, slow=150_000), "-o", dest)
    job = daemon.wait_bytes(id, 1)
    assert job["state"] == "running" and job["httpStatus"] == 200, job
    daemon.cli("pause", str(id), check=0)
    daemon.wait_state(id, "paused")
    daemon.cli("resume", str(id), check=0)
    deadline = time.monotonic() + 30
    while True:
        job = daemon.job(id)
        if job["state"] == "running" and job["httpStatus"] == 206:
            break
        assert job["state"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"the resumed attempt's 206 never showed: {job}"
        time.sleep(0.05)
    job = daemon.wait_state(id, "completed")
    assert job["httpStatus"] == 206
    assert sha256_file(dest) == faultserver.sha256(600_000)


def test_a_failed_job_shows_no_digest_even_when_an_earlier_attempt_finished_its_part(daemon, faultserver, key):
    # SPEC: sha256 is the finished file's. A part finished but not moved into place (a file
    # appeared at the destination), then damaged and found out by its checksum: no digest shows.
    dest = daemon.work / "tam.bin"
    part = daemon.work / "tam.bin.aftpart"
    id = daemon.download(faultserver.url(size=400_000, key=key, slow=400_000), "-o", dest,
                         "--sha256", faultserver.sha256(400_000))
    daemon.wait_bytes(id, 1)
    dest.write_bytes(b"x")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "destination_exists" and job["sha256"] is None, job
    assert part.stat().st_size == 400_000
    with open(part, "r+b") as f:
        f.seek(1000)
        f.write(b"ZZZZ")
    dest.unlink()
    daemon.cli("retry", str(id), check=0)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "checksum" and job["sha256"] is None, job
    assert not part.exists() and not dest.exists()


def test_sha256_that_matches_completes(daemon, faultserver, key):
    dest = daemon.work / "ok.bin"
    id = daemon.download(faultserver.url(size=70_000, seed=8, key=key), "-o", dest,
                         "--sha256", faultserver.sha256(70_000, 8))
    job = daemon.wait_state(id, "completed")
    assert job["sha256"] == faultserver.sha256(70_000, 8)


def test_a_sha256_mismatch_fails_with_checksum_deletes_the_part_and_retry_starts_from_zero(
        daemon, faultserver, key):
    dest = daemon.work / "bad.bin"
    id = daemon.download(faultserver.url(size=70_000, seed=8, key=key), "-o", dest, "--sha256", "0" * 64)
    job = daemon.wait_state(id, "failed")
    assert job["error"]["code"] == "checksum" and job["error"]["retryable"] is False
    assert not dest.exists(), "a file that failed its checksum must not be moved into place"
    assert not (daemon.work / "bad.bin.aftpart").exists(), "the part file is deleted after a checksum failure"
    daemon.cli("retry", id, check=0)
    daemon.wait_state(id, "failed")
    log = faultserver.log(key)
    assert len(log) == 2
    assert log[1]["range"] is None, f"retry after a checksum failure starts from zero: {log[1]['range']}"


def test_downloads_ask_for_identity_encoding(daemon, faultserver, key):
    dest = daemon.work / "plain.bin"
    id = daemon.download(faultserver.url(size=50_000, seed=6, key=key, gzip=1), "-o", dest)
    daemon.wait_state(id, "completed")
    log = faultserver.log(key)
    assert log[0]["acceptEncoding"] is not None and "identity" in log[0]["acceptEncoding"]
    assert "gzip" not in log[0]["acceptEncoding"]
    assert sha256_file(dest) == faultserver.sha256(50_000, 6)


def test_a_response_without_content_length_downloads_until_the_connection_closes(daemon, faultserver, key):
    dest = daemon.work / "nolen.bin"
    id = daemon.download(faultserver.url(size=200_000, seed=3, key=key, nolength=1), "-o", dest)
    job = daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(200_000, 3)
    assert job["bytes"] == 200_000


def test_the_destination_is_null_until_the_name_is_known(daemon, faultserver, key):
    d = daemon.work / "dir"
    d.mkdir()
    url = faultserver.url("/x/fromurl.bin", size=100, key=key, delay=3,
                          cd='attachment; filename="named.bin"')
    id = daemon.download(url, "-d", d)
    job = daemon.job(id)
    assert job["destination"] is None, f"destination before the response: {job['destination']}"
    job = daemon.wait_state(id, "completed")
    assert job["destination"] == str(d / "named.bin")


def test_limit_rate_slows_the_transfer(daemon, faultserver, key):
    dest = daemon.work / "slow.bin"
    t0 = time.monotonic()
    daemon.cli("download", faultserver.url(size=512 * 1024, key=key), "-o", dest, "--limit-rate", "128K",
               "--wait", check=0, timeout=60)
    elapsed = time.monotonic() - t0
    assert elapsed >= 3.0, f"512 KiB at 128K/s took {elapsed:.2f}s"


# MARK: - File names


HOSTILE = [
    ('attachment; filename="../../evil.txt"', "_.._evil.txt"),
    ('attachment; filename="/etc/passwd"', "_etc_passwd"),
    ('attachment; filename=".hidden"', "hidden"),
    ('attachment; filename=".."', "download"),
    ('attachment; filename="."', "download"),
    ('attachment; filename="  . spaced.txt"', "spaced.txt"),
    ('attachment; filename="a\x01b\x7fc.txt"', "abc.txt"),
    ("attachment; filename*=UTF-8''na%C3%AFve%20caf%C3%A9.txt; filename=\"fallback.txt\"", "naïve café.txt"),
    ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''pr%C3%A9f%C3%A9r%C3%A9.txt", "préféré.txt"),
    ("attachment; filename*=UTF-8''..%2F..%2Fup.txt", "_.._up.txt"),
    ("attachment; filename*=UTF-8''..%5C..%5Cback.txt", "_.._back.txt"),
    ("attachment; filename*=UTF-8''a%00b.txt", "ab.txt"),
    ("attachment; filename*=UTF-8''invoice%E2%80%AEfdp.exe", "invoicefdp.exe"),  # U+202E: "invoiceexe.pdf"
    ('attachment; filename=""', "fromurl.bin"),
    ('inline', "fromurl.bin"),
]


@pytest.mark.parametrize("cd,expected", HOSTILE, ids=[f"cd{i}" for i in range(len(HOSTILE))])
def test_content_disposition_names_are_sanitized_and_never_leave_the_directory(daemon, faultserver, key, cd,
                                                                                expected):
    assert spec_sanitize(expected) == expected or expected in ("fromurl.bin",)
    target = daemon.work / "inbox"
    target.mkdir()
    id = daemon.download(faultserver.url("/dl/fromurl.bin", size=321, seed=1, key=key, cd=cd), "-d", target)
    job = daemon.wait_state(id, "completed")
    assert os.listdir(target) == [expected]
    assert job["destination"] == str(target / expected)
    assert sha256_file(target / expected) == faultserver.sha256(321, 1)
    assert sorted(os.listdir(daemon.work)) == ["inbox"], "nothing may be written outside the directory"


@pytest.mark.parametrize("size,slow", [(100_000, None), (100_000, 40_000), (400_000, None)],
                         ids=["small", "small-slow", "large"])
def test_a_body_named_after_an_existing_file_fails_shows_the_name_and_leaves_no_part(daemon, faultserver, key,
                                                                                      size, slow):
    # A name known only from the headers (Content-Disposition) that is already taken: SPEC
    # `destination_exists`, the file untouched, nothing written beside it, and `destination` set
    # (SPEC: null only until the name is known). A large body is refused at its headers; a small
    # one is held in memory and the file looked for just before its part would be made; a slow
    # small one (written to its part after about a second) is looked for at that moment.
    target = daemon.work / "inbox"
    target.mkdir()
    (target / "taken.txt").write_bytes(b"precious")
    id = daemon.download(faultserver.url("/dl/other.bin", size=size, seed=3, key=key, slow=slow,
                                         cd='attachment; filename="taken.txt"'), "-d", target)
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "destination_exists" and job["error"]["retryable"] is False, job
    assert job["destination"] == str(target / "taken.txt"), job
    assert (target / "taken.txt").read_bytes() == b"precious"
    assert sorted(os.listdir(target)) == ["taken.txt"], "no part may be left beside the existing file"
    assert job["sha256"] is None, job
    assert job["bytes"] == 0, f"bytes counts what is on disk (nothing): {job['bytes']}"
    # Once the file is gone, `retry` fetches it under the recorded name.
    (target / "taken.txt").unlink()
    daemon.cli("retry", str(id), check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(target / "taken.txt") == faultserver.sha256(size, 3)


def test_a_very_long_suggested_name_is_cut_to_255_bytes(daemon, faultserver, key):
    target = daemon.work / "inbox"
    target.mkdir()
    name = "a" * 300 + ".bin"
    id = daemon.download(faultserver.url("/dl/x", size=10, key=key, cd=f'attachment; filename="{name}"'),
                         "-d", target)
    job = daemon.wait_state(id, "completed")
    [got] = os.listdir(target)
    assert len(got.encode()) <= 255 and got.startswith("a" * 200)
    assert job["destination"] == str(target / got)


def test_a_url_ending_in_a_slash_gets_the_name_download(daemon, faultserver, key):
    target = daemon.work / "inbox"
    target.mkdir()
    id = daemon.download(faultserver.url("/dir/", size=10, key=key), "-d", target)
    daemon.wait_state(id, "completed")
    assert os.listdir(target) == ["download"]


# MARK: - Lists


def test_a_list_file_queues_one_job_a_line_and_names_files_after_a_tab(daemon, faultserver, key):
    target = daemon.work / "many"
    target.mkdir()
    lst = daemon.work / "urls.txt"
    lst.write_text(f"{faultserver.url('/l/one.bin', size=100, seed=1, key=key)}\n"
                   f"{faultserver.url('/l/two.bin', size=200, seed=2, key=key)}\tnamed.bin\n")
    r = daemon.cli("download", "-i", lst, "-d", target, check=0)
    ids = r.out.split()
    assert len(ids) == 2 and all(re.fullmatch(r"\d+", i) for i in ids), f"one id a line: {r.out!r}"
    for i in ids:
        daemon.wait_state(int(i), "completed")
    assert sorted(os.listdir(target)) == ["named.bin", "one.bin"]
    assert sha256_file(target / "named.bin") == faultserver.sha256(200, 2)


# The second line: a scheme that is refused; a second TAB, which would end up inside the file's name.
@pytest.mark.parametrize("bad,says", [("ftp://127.0.0.1/nope", ""), ("{two}\tx\ty", "more than one TAB")],
                         ids=["scheme", "second-tab"])
def test_a_bad_line_in_a_list_refuses_the_whole_list(daemon, faultserver, key, bad, says):
    target = daemon.work / "many"
    target.mkdir()
    lst = daemon.work / "urls.txt"
    lst.write_text(f"{faultserver.url('/l/one.bin', size=100, key=key)}\tok.bin\n"
                   + bad.format(two=faultserver.url('/l/two.bin', size=100, key=key)) + "\n"
                   f"{faultserver.url('/l/three.bin', size=100, key=key)}\n")
    r = daemon.cli("download", "-i", lst, "-d", target)
    assert r.rc == 2, r
    assert re.search(r"\b2\b", r.err) and says in r.err, f"the refusal must name line 2: {r.err!r}"
    assert daemon.jobs() == []
    assert os.listdir(target) == []


# MARK: - Credentials and redirects


def test_basic_auth_reaches_the_server_and_the_password_is_never_printed(daemon, faultserver, key):
    secret = "pw-Zx81-secret"
    dest = daemon.work / "auth.bin"
    id = daemon.download(faultserver.url(size=100, key=key, authsha256=sha256_bytes(f"user:{secret}".encode())),
                         "-o", dest,
                         "--user", f"user:{secret}")
    job = daemon.wait_state(id, "completed")
    assert faultserver.log(key)[0]["authorization"].startswith("Basic ")
    for args in (("status", id), ("status", id, "--json"), ("list",), ("list", "--json"), ("curl", id)):
        r = daemon.cli(*args, check=0)
        assert secret not in r.out + r.err, f"`{' '.join(map(str, args))}` printed the password"
    assert "***" in daemon.cli("curl", id, check=0).out
    assert secret not in json.dumps(job)
    assert secret not in daemon.log_text(), "the daemon's log printed the password"


def test_authorization_and_cookie_headers_are_sent_but_shown_as_stars(daemon, faultserver, key):
    token, cookie = "tok-Qw93-secret", "ck-Lm27-secret"
    dest = daemon.work / "hdr.bin"
    id = daemon.download(faultserver.url(size=100, key=key), "-o", dest,
                         "-H", f"Authorization: Bearer {token}", "-H", f"Cookie: session={cookie}",
                         "-H", "X-Visible: yes")
    daemon.wait_state(id, "completed")
    entry = faultserver.log(key)[0]
    assert entry["authorization"] == f"Bearer {token}"
    assert entry["headers"]["cookie"] == f"session={cookie}"
    assert entry["headers"]["x-visible"] == "yes"
    for args in (("status", id), ("status", id, "--json"), ("list", "--json"), ("curl", id)):
        r = daemon.cli(*args, check=0)
        assert token not in r.out + r.err and cookie not in r.out + r.err, f"`{args}` printed a secret"
    curl = daemon.cli("curl", id, check=0).out
    assert "***" in curl and "X-Visible: yes" in curl and faultserver.url(size=100, key=key) in curl
    assert token not in daemon.log_text() and cookie not in daemon.log_text()


def test_credentials_in_the_url_are_used_and_removed_from_the_job(daemon, faultserver, key):
    secret = "url-Pp55-secret"
    url = faultserver.url(size=100, key=key, authsha256=sha256_bytes(f"me:{secret}".encode()))
    url = url.replace("http://", f"http://me:{secret}@")
    id = daemon.download(url, "-o", daemon.work / "u.bin")
    job = daemon.wait_state(id, "completed")
    assert secret not in job["url"] and "@" not in urllib.parse.urlsplit(job["url"]).netloc
    assert secret not in daemon.cli("curl", id, check=0).out


def test_a_redirect_chain_is_followed(daemon, faultserver, key):
    dest = daemon.work / "chain.bin"
    id = daemon.download(faultserver.url(size=1000, seed=2, key=key, chain=3), "-o", dest)
    daemon.wait_state(id, "completed")
    assert sha256_file(dest) == faultserver.sha256(1000, 2)
    assert [e["status"] for e in faultserver.log(key)] == [302, 302, 302, 200]


def test_a_redirect_to_a_host_that_never_answers_leaves_the_redirect_as_the_last_status(daemon, faultserver, key):
    # SPEC: httpStatus is the last response's status. The hop after a 302 failed before any
    # answer (here a refused connection; an outside audit saw it with a bad certificate), and the
    # job showed null.
    url = faultserver.url(key=key, redirect="http://127.0.0.1:1/nowhere", code=302)
    id = daemon.download(url, "-o", daemon.work / "r.bin", "--retries", "0")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "network", job
    assert job["httpStatus"] == 302 and job["history"][-1]["httpStatus"] == 302, job


def test_ten_redirects_are_followed_and_eleven_fail_with_redirect(daemon, faultserver, key):
    ok = daemon.download(faultserver.url(size=10, key=key + "a", chain=10), "-o", daemon.work / "ten")
    bad = daemon.download(faultserver.url(size=10, key=key + "b", chain=11), "-o", daemon.work / "eleven")
    daemon.wait_state(ok, "completed")
    job = daemon.wait_state(bad, "failed")
    assert job["error"]["code"] == "redirect" and job["error"]["retryable"] is False
    assert not (daemon.work / "eleven").exists()


def test_a_redirect_loop_fails_with_redirect(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=10, key=key, redirect="self"), "-o", daemon.work / "loop")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "redirect"
    assert len(faultserver.log(key)) <= 11


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/file.bin", "file:///etc/passwd"])
def test_a_redirect_to_another_scheme_fails_with_redirect(daemon, faultserver, key, target):
    dest = daemon.work / "x"
    id = daemon.download(faultserver.url(size=10, key=key, redirect=target), "-o", dest)
    job = daemon.wait_state(id, "failed")
    assert job["error"]["code"] == "redirect" and job["error"]["retryable"] is False
    assert not dest.exists()
    assert len(faultserver.log(key)) == 1


def test_a_reply_that_is_not_http_fails_as_network_not_redirect(daemon, faultserver, key):
    # libcurl reports "Received HTTP/0.9 when not allowed" with the code it also uses for a redirect
    # to another scheme; no redirect was involved here, so the error is the server's: network.
    dest = daemon.work / "garbage"
    id = daemon.download(faultserver.url(size=10, key=key, garbage=1), "-o", dest)
    job = daemon.wait_state(id, "failed")
    assert job["error"]["code"] == "network", job["error"]
    assert job["error"]["retryable"] is False and job["attempts"] == 1
    assert not dest.exists() and not (daemon.work / "garbage.aftpart").exists()


def test_credentials_are_not_sent_to_another_host_after_a_redirect(daemon, faultserver, key):
    other = faultserver.url(host="localhost", size=500, seed=3, key=key)
    id = daemon.download(faultserver.url(key=key, redirect=other), "-o", daemon.work / "r.bin",
                         "--user", "user:pw-Hh12")
    daemon.wait_state(id, "completed")
    log = faultserver.log(key)
    assert len(log) == 2
    assert log[0]["host"].startswith("127.0.0.1") and log[0]["authorization"] is not None
    assert log[1]["host"].startswith("localhost")
    assert log[1]["authorization"] is None, "credentials followed a redirect to another host name"
    assert sha256_file(daemon.work / "r.bin") == faultserver.sha256(500, 3)


# MARK: - Scheduling


@pytest.mark.daemon_args("--max-active", "2")
def test_at_most_max_active_transfers_run_at_once(daemon, faultserver, key):
    ids = [daemon.download(faultserver.url(size=150_000, seed=i, key=f"{key}-{i}", slow=100_000),
                           "-o", daemon.work / f"m{i}") for i in range(4)]
    most = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        jobs = daemon.jobs()
        running = sum(j["state"] == "running" for j in jobs)
        most = max(most, running)
        assert running <= 2, [j["state"] for j in jobs]
        if all(j["state"] == "completed" for j in jobs):
            break
        time.sleep(0.1)
    assert most == 2
    for i, id in enumerate(ids):
        assert daemon.job(id)["state"] == "completed"
        assert sha256_file(daemon.work / f"m{i}") == faultserver.sha256(150_000, i)
    spans = sorted((e["time"], e["end"]) for i in range(4) for e in faultserver.log(f"{key}-{i}"))
    for t, _ in spans:
        overlapping = sum(1 for s, e in spans if s <= t < e)
        assert overlapping <= 2, spans


@pytest.mark.daemon_args("--max-active", "3")
def test_a_job_keeps_its_slot_until_its_file_is_in_place(daemon, faultserver, key):
    # Small files spend most of their slot being synced and renamed after their last byte
    # (docs/benchmarks.md). The slot is held until the job is completed (README), so the committed
    # states, followed on the event stream (every change, in commit order, none missed as a poll
    # would), never show more than three jobs running, however briefly.
    n = 60
    out = daemon.work / "slots"
    out.mkdir()
    listing = daemon.work / "slots.txt"
    listing.write_text("".join(faultserver.url(f"/s{i}.bin", size=4096, seed=i, key=key) + "\n" for i in range(n)))
    with daemon.connect(timeout=60) as events:
        assert events.call("events.subscribe")["result"] == {"subscribed": True}
        daemon.cli("download", "-i", listing, "-d", out, check=True)
        states: dict[int, str] = {}
        most = 0
        while sum(s == "completed" for s in states.values()) < n:
            msg = events.recv(timeout=60)
            assert msg is not None, "the daemon closed the event stream"
            if msg.get("method") != "transfer.state":
                continue
            states[msg["params"]["id"]] = msg["params"]["state"]
            assert msg["params"]["state"] in ("queued", "running", "completed"), msg["params"]["error"]
            running = sum(s == "running" for s in states.values())
            assert running <= 3, sorted(states.items())
            most = max(most, running)
    assert most == 3
    for i in range(n):
        assert sha256_file(out / f"s{i}.bin") == faultserver.sha256(4096, i)


@pytest.mark.daemon_args("--max-active", "1")
def test_an_attempt_that_fails_as_it_starts_tells_running_then_its_failure_once(daemon, faultserver, key):
    # SPEC: a `transfer.state` after every state change. The attempt failed inside its start (its
    # directory could not be made any more), and subscribers got `failed` twice and no `running`.
    with daemon.connect(timeout=30) as events:
        assert events.call("events.subscribe")["result"] == {"subscribed": True}
        blocker = daemon.download(faultserver.url(size=100_000, key=f"{key}-b", slow=1000), "-o", daemon.work / "b")
        daemon.wait_state(blocker, "running")
        id = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "d" / "sub" / "x",
                             "--create-dirs")
        (daemon.work / "d").write_text("a file where the directory was to be made")
        daemon.cli("cancel", str(blocker), check=True)
        seen = []
        while not seen or seen[-1][0] != "failed":
            msg = events.recv(timeout=30)
            assert msg is not None, "the daemon closed the event stream"
            if msg.get("method") == "transfer.state" and msg["params"]["id"] == id:
                seen.append((msg["params"]["state"], msg["params"]["attempts"], len(msg["params"]["history"])))
        # A second `failed` came in the same write as the first, or right after it.
        try:
            while True:
                msg = events.recv(timeout=0.5)
                if msg is None:
                    break
                if msg.get("method") == "transfer.state" and msg["params"]["id"] == id:
                    seen.append((msg["params"]["state"], msg["params"]["attempts"], len(msg["params"]["history"])))
        except TimeoutError:
            pass
    assert seen == [("queued", 0, 0), ("running", 1, 1), ("failed", 1, 1)], seen
    job = daemon.job(id)
    assert job["error"]["code"] == "destination_missing_dir", job["error"]
    assert faultserver.log(key) == [], "the request was never sent"


@pytest.mark.daemon_args("--max-active", "1")
def test_higher_priority_runs_first_then_the_oldest(daemon, faultserver, key):
    blocker = daemon.download(faultserver.url(size=200_000, key=f"{key}-b", slow=200_000),
                              "-o", daemon.work / "blocker")
    daemon.wait_state(blocker, "running")
    low = daemon.download(faultserver.url(size=10, key=f"{key}-low"), "-o", daemon.work / "low",
                          "--priority", "-1")
    first_zero = daemon.download(faultserver.url(size=10, key=f"{key}-z1"), "-o", daemon.work / "z1")
    second_zero = daemon.download(faultserver.url(size=10, key=f"{key}-z2"), "-o", daemon.work / "z2",
                                  "--priority", "0")
    high = daemon.download(faultserver.url(size=10, key=f"{key}-high"), "-o", daemon.work / "high",
                           "--priority", "5")
    for id in (blocker, low, first_zero, second_zero, high):
        daemon.wait_state(id, "completed")
    started = {name: faultserver.log(f"{key}-{name}")[0]["time"] for name in ("high", "z1", "z2", "low")}
    order = sorted(started, key=started.get)
    assert order == ["high", "z1", "z2", "low"], started


def test_a_running_job_reports_bytes_total_fraction_rate_and_eta(daemon, faultserver, key):
    size = 1_000_000
    id = daemon.download(faultserver.url(size=size, key=key, slow=250_000), "-o", daemon.work / "prog.bin")
    daemon.wait_bytes(id, 350_000)
    job = daemon.job(id)
    assert_job_schema(job)
    assert job["state"] == "running" and job["total"] == size
    assert 0 < job["fraction"] < 1 and abs(job["fraction"] - job["bytes"] / size) < 0.05
    assert 100_000 < job["rate"] < 700_000, f"smoothed rate {job['rate']} for a 250 KB/s transfer"
    assert job["eta"] is not None and 0 < job["eta"] < 20, job["eta"]
    done = daemon.wait_state(id, "completed", timeout=30)
    assert done["rate"] == 0


def test_authorization_and_cookie_headers_are_not_sent_to_another_host_after_a_redirect(daemon, faultserver, key):
    other = faultserver.url(host="localhost", size=100, key=key)
    id = daemon.download(faultserver.url(key=key, redirect=other), "-o", daemon.work / "h.bin",
                         "-H", "Authorization: Bearer tok-Rr61", "-H", "Cookie: s=ck-Rr61", "-H", "X-Plain: 1")
    daemon.wait_state(id, "completed")
    first, second = faultserver.log(key)
    assert first["authorization"] == "Bearer tok-Rr61" and first["headers"].get("cookie") == "s=ck-Rr61"
    assert second["host"].startswith("localhost")
    assert second["authorization"] is None, "an Authorization header followed a redirect to another host"
    assert "cookie" not in second["headers"], "a Cookie header followed a redirect to another host"


def _one_answer_server(answer: bytes):
    """A raw server on 127.0.0.1 that answers every request with `answer` and closes: (port, stop)."""
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    done = threading.Event()

    def serve():
        while not done.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(4096)
                    if not more:
                        break
                    data += more
                conn.sendall(answer)
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    def stop():
        done.set()
        t.join(5)

    return srv.getsockname()[1], stop


@pytest.mark.parametrize("size", [1000, 300_000], ids=["small", "large"])
def test_transfer_encoding_overrides_content_length_as_in_http(daemon, size):
    # Found by an outside audit: a chunked body with a Content-Length beside it (RFC 9112 §6.3: the
    # Transfer-Encoding wins; curl saves it whole) failed every attempt with "ended at 300000 of
    # 1234 bytes", downloading the whole file each time.
    body = os.urandom(size)
    chunks = b"".join(b"%x\r\n" % len(body[i:i + 7000]) + body[i:i + 7000] + b"\r\n"
                      for i in range(0, len(body), 7000))
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nTransfer-Encoding: chunked\r\n"
              b"Connection: close\r\n\r\n" + chunks + b"0\r\n\r\n")
    port, stop = _one_answer_server(answer)
    try:
        dest = daemon.work / "tecl.bin"
        id = daemon.download(f"http://127.0.0.1:{port}/tecl", "-o", dest, "--retries", "0")
        job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
        assert job["state"] == "completed", job["error"]
        assert dest.read_bytes() == body and job["total"] == size and job["attempts"] == 1
    finally:
        stop()


def test_a_200_that_says_it_holds_only_the_files_end_is_refused_not_saved_as_the_file(daemon):
    # Found by an outside audit: a resumed download answered 200 with `Content-Range: bytes
    # 120000-299999/300000` and that tail completed as the whole file.
    tail = os.urandom(1000)
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Range: bytes 1000-1999/2000\r\n"
              b"ETag: \"t1\"\r\nConnection: close\r\n\r\n" + tail)
    port, stop = _one_answer_server(answer)
    try:
        dest = daemon.work / "tail.bin"
        id = daemon.download(f"http://127.0.0.1:{port}/tail", "-o", dest, "--retries", "0")
        job = daemon.wait_state(id, ("completed", "failed"), timeout=30)
        assert job["state"] == "failed" and job["error"]["code"] == "http_status", job
        assert "Content-Range" in job["error"]["message"] and not dest.exists()
    finally:
        stop()


def test_a_failed_download_with_nothing_to_resume_keeps_no_path_from_a_new_job(daemon, faultserver, key):
    # It failed at the end (the file appeared: destination_exists) with no byte kept, or on a 404:
    # its retry would start from zero, so it does not keep the path. The error's advice works:
    # a new job with --replace may take it; the failed job's retry then waits its turn (refused).
    d = daemon.work / "d"
    d.mkdir()
    (d / "x.bin").write_bytes(b"old")
    failed = daemon.download(faultserver.url(size=1000, key=key, cd='attachment; filename="x.bin"'), "-d", d)
    job = daemon.wait_state(failed, "failed")
    assert job["error"]["code"] == "destination_exists" and job["bytes"] == 0, job
    assert not (d / "x.bin.aftpart").exists()
    r = daemon.cli("download", faultserver.url(size=1000, seed="n", key=key + "n"), "-o", d / "x.bin",
                   "--replace", "--wait")
    assert r.rc == 0, r
    assert sha256_file(d / "x.bin") == faultserver.sha256(1000, "n")
    missing = daemon.download(faultserver.url("/nope", key=key + "m", status=404), "-o", d / "y.bin")
    assert daemon.wait_state(missing, "failed")["error"]["code"] == "http_status"
    holder = daemon.download(faultserver.url(size=400_000, key=key + "h", slow=100_000), "-o", d / "y.bin")
    r = daemon.cli("retry", missing)
    assert r.rc == 2 and f"job {holder} now writes to" in r.err, r
    # A failed download with data to resume keeps its path.
    kept = daemon.download(faultserver.url(size=2_000_000, key=key + "k", slow=200_000, drop=300_000),
                           "-o", d / "z.bin", "--retries", "0")
    job = daemon.wait_state(kept, "failed", timeout=30)
    assert job["bytes"] > 0, job
    r = daemon.cli("download", faultserver.url(size=10, key=key + "z"), "-o", d / "z.bin", "--replace")
    assert r.rc == 2 and f"another job downloads to {d}/z.bin (job {kept})" in r.err, r
