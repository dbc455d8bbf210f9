"""Resumable uploads (issue 8, SPEC "Resumable uploads"): the IETF draft (interop 8) against our
server (Tests/resumableserver/ietfserver.py) and tus 1.0 against tuspyserver (PyPI) under uvicorn,
which nobody here wrote. Every case uses real processes on 127.0.0.1."""

import json
import os
import random
import re
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import (REPO, clean_env, http_get, make_temp_root, sha256_file, spawn, stop_process, wait_port_open,
                      wait_until, write_random_file)

SERVER_DIR = REPO / "Tests" / "resumableserver"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class IetfServer:
    """Our interop-8 server as a child process, for the whole module."""

    _n = 0

    def __init__(self) -> None:
        self.root = make_temp_root("aft-ietf-")
        self._log = open(self.root / "ietfserver.log", "wb")
        self.proc = spawn([sys.executable, str(SERVER_DIR / "ietfserver.py"), "--port", "0", "--dir",
                           str(self.root)], "ietfserver", stdout=subprocess.PIPE, stderr=self._log,
                          stdin=subprocess.DEVNULL, env=clean_env())
        r, _, _ = select.select([self.proc.stdout], [], [], 10)
        assert r, "ietfserver did not start"
        line = self.proc.stdout.readline().decode()
        m = re.match(r"PORT=(\d+)", line)
        assert m, line
        self.base = f"http://127.0.0.1:{m.group(1)}"

    def key(self) -> str:
        IetfServer._n += 1
        return f"k{IetfServer._n}-{random.randrange(1 << 30)}"

    def url(self, key: str, **knobs) -> str:
        q = {"key": key, **{k: v for k, v in knobs.items() if v is not None}}
        return f"{self.base}/up?" + urllib.parse.urlencode(q)

    def stats(self, key: str) -> dict:
        status, _, body = http_get(f"{self.base}/_stats?key={key}")
        assert status == 200
        return json.loads(body)

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


class TusServer:
    """tuspyserver 4.x (a FastAPI router) under uvicorn, on a free port."""

    def __init__(self) -> None:
        try:
            import tuspyserver  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            pytest.fail("tuspyserver and uvicorn are not installed (scripts/install-deps installs them)")
        self.root = make_temp_root("aft-tus-")
        self.files = self.root / "files"
        self.files.mkdir()
        self._log = open(self.root / "uvicorn.log", "wb")
        for _ in range(5):
            self.port = _free_port()
            self.proc = spawn([sys.executable, "-m", "uvicorn", "tusapp:app", "--app-dir", str(SERVER_DIR),
                               "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "info"],
                              "uvicorn", stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL,
                              env=clean_env({"AFT_TUS_DIR": str(self.files)}))
            if self._ready():
                break
            stop_process(self.proc)
        else:
            pytest.fail("uvicorn did not start: " + (self.root / "uvicorn.log").read_text())
        self.base = f"http://127.0.0.1:{self.port}/files"

    def _ready(self) -> bool:
        return wait_port_open(self.proc, self.port, timeout=15)

    def uploads(self) -> dict:
        """id -> (size of its data file, its .info as a dict)."""
        out = {}
        for p in self.files.iterdir():
            if p.suffix == "" and p.is_file():
                info = self.files / (p.name + ".info")
                out[p.name] = (p.stat().st_size, json.loads(info.read_text()) if info.exists() else None)
        return out

    def log(self) -> str:
        return (self.root / "uvicorn.log").read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def ietf():
    s = IetfServer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tus():
    s = TusServer()
    yield s
    s.stop()


def upload_headers(req: dict) -> dict:
    return {k: v for k, v in req["headers"].items() if k.startswith("upload-") or k in ("content-type", "repr-digest",
                                                                                         "content-length")}


def the_upload(stats: dict, uid: str) -> dict:
    return next(u for u in stats["uploads"] if u["id"] == uid)


def upload_id(job: dict) -> str:
    return job["uploadUrl"].rsplit("/", 1)[1]


# MARK: - IETF draft, interop 8


def test_an_ietf_upload_cut_twice_resumes_from_the_server_offset_and_sends_every_byte_once(daemon, ietf):
    src = daemon.work / "cut.bin"
    digest = write_random_file(src, 3_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="1000000,2000000"))
    job = daemon.wait_state(id, "completed", timeout=60)
    assert job["resumable"] == "ietf" and job["uploadUrl"].startswith(ietf.base + "/res/")
    assert job["bytes"] == 3_000_000 and job["sha256"] == digest
    st = ietf.stats(key)
    up = the_upload(st, upload_id(job))
    assert up["complete"] and up["sha256"] == digest
    assert up["received"] == 3_000_000, "a byte range the server had acknowledged was sent again"
    reqs = [(r["method"], upload_headers(r)) for r in st["requests"]]
    methods = [m for m, _ in reqs]
    # libcurl may resend a PATCH cut on a reused connection at once (its rewind starts from the
    # append's first byte); the server answers it 409, and the client asks again.
    assert methods[:3] == ["PUT", "HEAD", "PATCH"] and methods[-2:] == ["HEAD", "PATCH"], methods
    first = reqs[0][1]
    assert first["upload-draft-interop-version"] == "8" and first["upload-complete"] == "?1"
    assert first["upload-length"] == "3000000"
    patches = [h for m, h in reqs if m == "PATCH"]
    assert {p["upload-offset"] for p in patches} == {"1000000", "2000000"}
    assert patches[0]["upload-offset"] == "1000000" and patches[-1]["upload-offset"] == "2000000"
    assert all(p["content-type"] == "application/partial-upload" for p in patches)
    assert all(int(p["content-length"]) == 3000000 - int(p["upload-offset"]) for p in patches)
    assert all(p["upload-complete"] == "?1" for p in patches)
    # One history entry per request of the resumed upload.
    assert len(job["history"]) in (len(methods), len(methods) - 1)  # a libcurl resend is one entry
    assert job["history"][-1]["httpStatus"] == 200 and job["history"][-2]["httpStatus"] == 204
    assert job["response"]["status"] == 200 and json.loads(job["response"]["body"])["sha256"] == digest


def test_a_creation_answered_upload_complete_0_before_the_body_ended_sends_the_rest(daemon, ietf):
    # A small upload: the kernel's buffers took the whole body before the answer came, so only
    # the answer's own Upload-Complete: ?0 and Upload-Offset say the server kept part of it.
    src = daemon.work / "early-small.bin"
    digest = write_random_file(src, 3_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, early="500000", earlyoffset=1))
    job = daemon.wait_state(id, "completed", timeout=60)
    up = the_upload(ietf.stats(key), upload_id(job))
    assert up["complete"] and up["sha256"] == digest, up
    assert job["attempts"] == 1 and job["sha256"] == digest, job


@pytest.mark.parametrize("offset", [None, 1], ids=["bare", "with-upload-offset"])
def test_a_final_answer_before_the_body_ends_asks_the_offset_and_sends_the_rest(daemon, ietf, offset):
    # README: a server that answers 2xx before it has read the whole body has not got it; a
    # resumable upload asks the server's offset and sends the rest. The creation's early 200 was
    # taken as the upload's end (bytes and sha256 of the whole file, completed; the server held
    # 1,000,000 bytes).
    src = daemon.work / "early.bin"
    size = 24_000_000  # more than the loopback's socket buffers hold: libcurl cannot hand it all over
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, early="1000000", earlyoffset=offset))
    job = daemon.wait_state(id, "completed", timeout=60)
    st = ietf.stats(key)
    up = the_upload(st, upload_id(job))
    methods = [r["method"] for r in st["requests"]]
    assert up["complete"] and up["sha256"] == digest, up
    assert up["received"] == size, "a byte range the server had kept was sent again"
    assert methods == ["PUT", "HEAD", "PATCH"], methods
    assert st["requests"][2]["headers"]["upload-offset"] == "1000000"
    assert job["bytes"] == size and job["sha256"] == digest and job["attempts"] == 1, job
    assert [h["httpStatus"] for h in job["history"]] == [200, 204, 200], job["history"]


@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_mid_ietf_upload_several_times_leaves_the_exact_bytes_on_the_server(daemon, ietf):
    size = 8 * 1024 * 1024  # 4 s at 2 MiB/s: the three kills come before the end
    src = daemon.work / "k9.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--limit-rate", "2M")
    rng = random.Random(int(time.time()))
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the upload URL from the 104")
    for _ in range(3):
        time.sleep(rng.uniform(0.3, 0.7))
        daemon.kill9()
        daemon.start()
        assert daemon.job(id)["uploadUrl"], "the upload URL was not kept across kill -9"
    job = daemon.wait_state(id, "completed", timeout=90)
    st = ietf.stats(key)
    up = the_upload(st, upload_id(job))
    assert up["complete"] and up["sha256"] == digest and up["offset"] == size
    # Our server keeps the bytes of a cut append, so nothing may arrive twice at this upload.
    assert up["received"] == size
    # Uploads abandoned before their 104 was stored are cut creations: all bytes add up to at most
    # the file plus those.
    others = sum(u["received"] for u in st["uploads"] if u["id"] != up["id"])
    assert st["received"] == size + others
    assert len(st["uploads"]) <= 2
    offsets = [int(r["headers"]["upload-offset"]) for r in st["requests"] if r["method"] == "PATCH"]
    assert offsets == sorted(offsets) and len(offsets) >= 1, offsets
    assert job["sha256"] == digest


@pytest.mark.timeout(120)
def test_kill_9_mid_ietf_upload_to_a_slow_server_resumes_exactly_without_its_old_bytes_arriving_late(
        daemon, ietf):
    """The server reads at 300 KB/s: most of the body the daemon wrote sits in the kernel's
    queues when it is killed. The daemon's connections reset on close, so the server never gets
    them; what it had already buffered is given up when the restart asks for the offset."""
    size = 3_000_000
    src = daemon.work / "slow.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, rate=300_000))
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the upload URL from the 104")
    time.sleep(2)
    daemon.kill9()
    daemon.start()
    job = daemon.wait_state(id, ["completed", "failed"], timeout=60)
    assert job["state"] == "completed", job["error"]
    up = the_upload(ietf.stats(key), upload_id(job))
    assert up["complete"] and up["sha256"] == digest and up["offset"] == size


def test_pause_and_resume_continue_an_ietf_upload_from_the_server_offset(daemon, ietf):
    size = 3 * 1024 * 1024
    src = daemon.work / "pause.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--limit-rate", "2M")
    daemon.wait_bytes(id, 1024 * 1024)
    daemon.cli("pause", id, check=0)
    daemon.wait_state(id, "paused")
    time.sleep(0.3)
    daemon.cli("resume", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    up = the_upload(st, upload_id(job))
    assert up["sha256"] == digest and up["received"] == size
    assert [r["method"] for r in st["requests"]] == ["PUT", "HEAD", "PATCH"]
    assert int(st["requests"][2]["headers"]["upload-offset"]) >= 1024 * 1024 - 600_000


@pytest.mark.parametrize("conflicts", [1, 6])
def test_409s_to_appends_ask_again_and_never_spend_a_retry(daemon, ietf, conflicts):
    # SPEC: a 409 spends no retry, however many come. The cut spends the one retry (--retries 1);
    # a 409 that spent one would fail the job. After three 409s in a row the client waits before
    # asking again: 0.5 s, 1 s, 2 s.
    src = daemon.work / f"c{conflicts}.bin"
    digest = write_random_file(src, 400_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="100000", conflict=str(conflicts)), "--retries", "1")
    job = daemon.wait_state(id, "completed", timeout=60)
    st = ietf.stats(key)
    methods = [r["method"] for r in st["requests"]]
    assert methods == ["PUT"] + ["HEAD", "PATCH"] * (conflicts + 1), methods
    assert the_upload(st, upload_id(job))["sha256"] == digest
    assert job["attempts"] == 2
    heads = [r["t"] for r in st["requests"] if r["method"] == "HEAD"]
    gaps = [round(b - a, 2) for a, b in zip(heads, heads[1:])]
    assert all(g < 0.45 for g in gaps[:3]), gaps  # the first three 409s: asked again at once
    assert [g >= w - 0.05 for g, w in zip(gaps[3:], [0.5, 1, 2])] == [True] * len(gaps[3:]), gaps


def test_while_409s_keep_coming_bytes_is_the_servers_offset_not_the_refused_appends(daemon, ietf):
    src = daemon.work / "c100.bin"
    write_random_file(src, 2_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="500000", conflict="100"), "--retries", "1")
    # Past the first three 409s, the daemon waits between asks: bytes must show 500000 then.
    wait_until(lambda: len([r for r in ietf.stats(key)["requests"] if r["method"] == "PATCH"]) >= 5, 30,
               "the waits between asks")
    # A poll may land while an append is on the wire (its bytes sent so far, until its 409): that
    # lasts milliseconds, not the seconds the daemon waits between asks.
    seen = []
    for _ in range(8):
        job = daemon.job(id)
        assert job["state"] == "running", job
        seen.append(job["bytes"])
        time.sleep(0.25)
    assert seen.count(500_000) >= 6, seen
    assert not any(a != 500_000 and b != 500_000 for a, b in zip(seen, seen[1:])), seen
    daemon.cli("cancel", id, check=0)


def test_a_413_with_upload_limit_makes_appends_no_larger_than_max_append_size(daemon, ietf):
    size = 2_600_000
    src = daemon.work / "chunks.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, limit=1_000_000), "--retries", "0")
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    assert [r["method"] for r in st["requests"]] == ["PUT", "HEAD", "PATCH", "PATCH", "PATCH"]
    patches = [upload_headers(r) for r in st["requests"] if r["method"] == "PATCH"]
    assert [p["content-length"] for p in patches] == ["1000000", "1000000", "600000"]
    assert [p["upload-complete"] for p in patches] == ["?0", "?0", "?1"]
    assert [p["upload-offset"] for p in patches] == ["0", "1000000", "2000000"]
    assert the_upload(st, upload_id(job))["sha256"] == digest
    assert job["attempts"] == 1 and len(job["history"]) == 5


def test_an_upload_limit_learnt_from_the_104_is_kept_from_the_start(daemon, ietf):
    src = daemon.work / "adv.bin"
    digest = write_random_file(src, 1_200_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, limit=500_000, advertise=1, drop="300000"))
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    lengths = [int(r["headers"]["content-length"]) for r in st["requests"] if r["method"] == "PATCH"]
    assert lengths and max(lengths) <= 500_000, lengths
    assert the_upload(st, upload_id(job))["sha256"] == digest


@pytest.mark.parametrize("gone", [404, 410])
def test_an_expired_upload_url_starts_the_upload_over(daemon, ietf, gone):
    src = daemon.work / "exp.bin"
    digest = write_random_file(src, 1_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="400000", expire=gone))
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    methods = [r["method"] for r in st["requests"]]
    assert methods[:3] == ["PUT", "HEAD", "PUT"], methods
    assert len(st["uploads"]) == 2
    assert the_upload(st, upload_id(job))["sha256"] == digest
    assert job["attempts"] == 3  # the cut, then the HEAD that found the URL gone: each a retry


def test_a_server_without_104_gets_a_plain_upload_restarted_from_byte_0(daemon, ietf):
    src = daemon.work / "plain.bin"
    digest = write_random_file(src, 800_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, no104=1, drop="300000"))
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["resumable"] is None and job["uploadUrl"] is None
    st = ietf.stats(key)
    assert [r["method"] for r in st["requests"]] == ["PUT", "PUT"]
    assert all(r["headers"]["content-length"] == "800000" for r in st["requests"])
    assert [u["sha256"] for u in st["uploads"] if u["complete"]] == [digest]


def test_resumable_off_sends_no_upload_header(daemon, ietf):
    src = daemon.work / "off.bin"
    digest = write_random_file(src, 100_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--resumable", "off")
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    assert len(st["requests"]) == 1
    assert not [k for k in st["requests"][0]["headers"] if k.startswith("upload-")]
    assert job["resumable"] is None and job["uploadUrl"] is None and job["sha256"] == digest
    curl = daemon.cli("curl", id, check=0).out
    assert "Upload-" not in curl


def _deletes(ietf, key) -> list:
    return [r for r in ietf.stats(key)["requests"] if r["method"] == "DELETE"]


@pytest.mark.parametrize("first", ["cancel", "remove"])
def test_cancel_or_remove_sends_delete_to_the_upload_url_once(daemon, ietf, first):
    # A running upload cancelled (then removed), or removed at once: one DELETE either way.
    src = daemon.work / f"{first}.bin"
    write_random_file(src, 4 * 1024 * 1024)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--limit-rate", "1M")
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the upload URL")
    daemon.wait_bytes(id, 200_000)
    daemon.cli(first, id, check=0)
    if first == "cancel":
        daemon.wait_state(id, "cancelled")
    wait_until(lambda: _deletes(ietf, key), 10, "the DELETE")
    if first == "cancel":
        daemon.cli("remove", id, check=0)
    time.sleep(1)
    deletes = _deletes(ietf, key)
    assert len(deletes) == 1 and deletes[0]["headers"]["upload-draft-interop-version"] == "8", deletes
    assert all(u["deleted"] for u in ietf.stats(key)["uploads"])


def test_a_104_location_is_resolved_against_the_url_that_answered_after_a_redirect(daemon, ietf, faultserver):
    # The job's URL answers 307 to the IETF server; its 104 says `Location: /res/uN`, which lives
    # there, not on the first host: the upload resumes there after a cut.
    src = daemon.work / "redirected.bin"
    digest = write_random_file(src, 1_500_000)
    key = ietf.key()
    target = ietf.url(key, drop="500000")
    url = faultserver.url("/upload", key=key, redirect=target, code=307)
    id = daemon.upload(src, url, "--retries", "2")
    job = daemon.wait_state(id, "completed", timeout=60)
    assert job["uploadUrl"].startswith(ietf.base + "/res/"), job["uploadUrl"]
    st = ietf.stats(key)
    assert [r["method"] for r in st["requests"]] == ["PUT", "HEAD", "PATCH"]
    assert the_upload(st, upload_id(job))["sha256"] == digest


def test_a_tus_creation_answered_without_a_location_fails_at_once(daemon, faultserver, key):
    # Not a tus server: a 201 without `Location`. SPEC: a status outside the retryable list is
    # not retried; the job fails after its one POST.
    src = daemon.work / "notus.bin"
    write_random_file(src, 10_000)
    id = daemon.upload(src, faultserver.url("/upload", key=key), "--resumable", "tus")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["attempts"] == 1 and not job["error"]["retryable"], job["error"]
    assert [e["method"] for e in faultserver.log(key)] == ["POST"]


def test_a_source_changed_between_appends_fails_the_job_with_source_changed(daemon, ietf):
    src = daemon.work / "changed.bin"
    write_random_file(src, 2 * 1024 * 1024)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--limit-rate", "1M")
    daemon.wait_bytes(id, 300_000)
    daemon.cli("pause", id, check=0)
    daemon.wait_state(id, "paused")
    with open(src, "r+b") as f:
        f.seek(100)
        f.write(b"changed")
    daemon.cli("resume", id, check=0)
    deadline = time.monotonic() + 30
    while True:
        job = daemon.job(id)
        if job["state"] == "failed" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert job["state"] == "failed" and job["error"]["code"] == "source_changed", job
    assert not [r for r in ietf.stats(key)["requests"] if r["method"] == "PATCH"]


def test_a_source_changed_between_two_appends_of_one_attempt_ends_it_without_a_made_up_request(daemon, ietf):
    # The first request is cut at 500,000 bytes; every append then gets a 409, and after three
    # of them the daemon waits between asks: the file changes in such a wait, so the next append
    # is not sent. The attempt's end was written as one more request, with the offset query's
    # status and timings copied into it.
    src = daemon.work / "between.bin"
    write_random_file(src, 2_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="500000", conflict="100"), "--retries", "1")
    wait_until(lambda: [r["method"] for r in ietf.stats(key)["requests"]].count("PATCH") >= 5, 30,
               "the waits between asks")
    os.utime(src, (time.time() + 5, time.time() + 5))
    job = daemon.wait_state(id, ("failed", "completed"), timeout=30)
    assert job["state"] == "failed" and job["error"]["code"] == "source_changed", job
    methods = [r["method"] for r in ietf.stats(key)["requests"]]
    assert methods[-1] == "HEAD", methods  # asked the offset, then sent nothing
    second = [e for e in job["history"] if e["attempt"] == 2]
    *sent, last = second
    assert len(sent) == methods.count("HEAD") + methods.count("PATCH"), (methods, second)
    assert all(e["httpStatus"] is not None and e["total"] is not None for e in sent), sent
    assert last["httpStatus"] is None and last["total"] is None and last["firstByte"] is None, last
    assert last["error"]["code"] == "source_changed" and last["bytes"] == 500_000, last
    assert job["bytes"] == 500_000, job
    # The job's httpStatus is the last response's (the offset query's), not null (an outside audit).
    assert job["httpStatus"] == sent[-1]["httpStatus"], (job["httpStatus"], sent[-1])


def test_sha256_mismatch_fails_with_checksum_before_any_request(daemon, ietf):
    src = daemon.work / "sum.bin"
    write_random_file(src, 300_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key), "--sha256", "0" * 64)
    deadline = time.monotonic() + 20
    while daemon.job(id)["state"] != "failed" and time.monotonic() < deadline:
        time.sleep(0.1)
    job = daemon.job(id)
    assert job["state"] == "failed" and job["error"]["code"] == "checksum", job
    assert ietf.stats(key)["requests"] == []


def test_sha256_is_sent_as_repr_digest_on_the_completing_request(daemon, ietf):
    import base64
    import hashlib
    src = daemon.work / "digest.bin"
    digest = write_random_file(src, 700_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="200000"), "--sha256", digest.upper())
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["sha256"] == digest
    st = ietf.stats(key)
    want = "sha-256=:" + base64.b64encode(bytes.fromhex(digest)).decode() + ":"
    assert st["requests"][-1]["method"] == "PATCH" and st["requests"][-1]["headers"]["repr-digest"] == want
    curl = daemon.cli("curl", id, check=0).out
    assert "Upload-Draft-Interop-Version: 8" in curl and "Upload-Complete: ?1" in curl
    assert "Upload-Length: 700000" in curl


# MARK: - tus 1.0 (tuspyserver)


def test_a_tus_upload_completes_with_the_exact_bytes(daemon, tus):
    src = daemon.work / "t.bin"
    digest = write_random_file(src, 1_500_000)
    before = set(tus.uploads())
    id = daemon.upload(src, tus.base, "--resumable", "tus")
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["resumable"] == "tus" and job["uploadUrl"].startswith(tus.base + "/")
    new = set(tus.uploads()) - before
    assert len(new) == 1
    uid = new.pop()
    assert sha256_file(tus.files / uid) == digest
    info = tus.uploads()[uid][1]
    assert info["size"] == 1_500_000 and info["offset"] == 1_500_000
    assert info["metadata"]["filename"] == "t.bin"
    assert job["response"]["status"] == 204 and job["response"]["headers"]["upload-offset"] == "1500000"
    # The log names the request sent first: tus creation is a POST (the job's method stays PUT).
    assert f"job={id} attempt 1: POST {tus.base}" in daemon.log_text(), daemon.log_tail(20)


@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_mid_tus_upload_several_times_resumes_one_upload(daemon, tus):
    size = 8 * 1024 * 1024  # 4 s at 2 MiB/s: the three kills come before the end
    src = daemon.work / "tk9.bin"
    digest = write_random_file(src, size)
    before = set(tus.uploads())
    id = daemon.upload(src, tus.base, "--resumable", "tus", "--limit-rate", "2M")
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the tus upload URL")
    rng = random.Random(int(time.time()))
    seen = []
    for _ in range(3):
        time.sleep(rng.uniform(0.3, 0.7))
        daemon.kill9()
        new = set(tus.uploads()) - before
        if new:
            seen.append(tus.uploads()[next(iter(new))][0])
        daemon.start()
    job = daemon.wait_state(id, "completed", timeout=90)
    new = set(tus.uploads()) - before
    assert len(new) == 1, "the upload was created again instead of resumed"
    uid = new.pop()
    assert job["uploadUrl"].endswith("/" + uid)
    assert sha256_file(tus.files / uid) == digest and job["sha256"] == digest
    assert seen == sorted(seen), seen
    patches = [line for line in tus.log().splitlines() if f"PATCH /files/{uid}" in line]
    heads = [line for line in tus.log().splitlines() if f"HEAD /files/{uid}" in line]
    # uvicorn logs only the requests it answered: the cut PATCHes are not there, the HEADs are.
    assert len(heads) >= 3 and len(patches) >= 1


def test_cancel_of_a_tus_upload_terminates_it(daemon, tus):
    src = daemon.work / "tc.bin"
    write_random_file(src, 3 * 1024 * 1024)
    before = set(tus.uploads())
    id = daemon.upload(src, tus.base, "--resumable", "tus", "--limit-rate", "1M")
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the tus upload URL")
    daemon.wait_bytes(id, 200_000)
    uid = daemon.job(id)["uploadUrl"].rsplit("/", 1)[1]
    daemon.cli("cancel", id, check=0)
    daemon.wait_state(id, "cancelled")
    wait_until(lambda: uid not in tus.uploads(), 10, "tuspyserver to delete the upload")
    assert f"DELETE /files/{uid}" in tus.log()
    assert set(tus.uploads()) == before


def test_tus_refuses_form_uploads_and_resumable_refuses_unknown_modes(daemon, tus):
    src = daemon.work / "x.bin"
    write_random_file(src, 10)
    r = daemon.cli("upload", "--form", f"f=@{src}", tus.base, "--resumable", "tus")
    assert r.rc == 2 and "resumable" in r.err
    r = daemon.cli("upload", src, tus.base, "--resumable", "sometimes")
    assert r.rc == 2 and "resumable" in r.err
    resp = daemon.rpc("transfer.add", {"kind": "upload", "url": tus.base, "source": str(src), "resumable": "nope"})
    assert "error" in resp and "resumable" in resp["error"]["message"], resp


@pytest.mark.timeout(180)
def test_a_large_resumable_upload_cut_twice_keeps_the_daemon_memory_flat(daemon, ietf):
    size = 192 * 1024 * 1024
    src = daemon.work / "big.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop=f"{size * 45 // 100},{size * 9 // 10}"))
    job = daemon.wait_state(id, "completed", timeout=150)
    with open(f"/proc/{daemon.pid}/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    assert hwm <= 64 * 1024 * 1024, f"daemon VmHWM {hwm / 1048576:.1f} MiB"
    st = ietf.stats(key)
    up = the_upload(st, upload_id(job))
    assert up["sha256"] == digest and up["received"] == size and job["sha256"] == digest
    os.unlink(src)


def test_a_daemon_stop_mid_upload_and_a_503_to_the_offset_query_resume_the_same_upload(daemon, ietf):
    size = 3 * 1024 * 1024
    src = daemon.work / "stop.bin"
    digest = write_random_file(src, size)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, fail5xx=1), "--limit-rate", "2M")
    daemon.wait_bytes(id, 1024 * 1024)
    daemon.stop()
    daemon.start()
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    assert [r["method"] for r in st["requests"]] == ["PUT", "HEAD", "HEAD", "PATCH"]
    up = the_upload(st, upload_id(job))
    assert len(st["uploads"]) == 1 and up["sha256"] == digest and up["received"] == size
    assert [h["httpStatus"] for h in job["history"]] == [None, 503, 204, 200]


@pytest.mark.daemon_args("--stall-timeout", "1")
def test_a_stalled_append_ends_the_attempt_and_the_next_one_resumes_from_the_server_offset(daemon, ietf):
    src = daemon.work / "stall.bin"
    digest = write_random_file(src, 1_200_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, stall=500_000))
    job = daemon.wait_state(id, "completed", timeout=30)
    st = ietf.stats(key)
    assert [r["method"] for r in st["requests"]] == ["PUT", "HEAD", "PATCH"]
    assert st["requests"][2]["headers"]["upload-offset"] == "500000"
    assert the_upload(st, upload_id(job))["sha256"] == digest
    assert job["history"][0]["error"]["code"] == "timeout"


def test_a_tus_upload_the_server_forgot_starts_over_with_a_new_creation(daemon, tus):
    src = daemon.work / "forgot.bin"
    digest = write_random_file(src, 2 * 1024 * 1024)
    before = set(tus.uploads())
    id = daemon.upload(src, tus.base, "--resumable", "tus", "--limit-rate", "1M")
    wait_until(lambda: daemon.job(id).get("uploadUrl"), 10, "the tus upload URL")
    daemon.wait_bytes(id, 300_000)
    daemon.cli("pause", id, check=0)
    daemon.wait_state(id, "paused")
    first = daemon.job(id)["uploadUrl"].rsplit("/", 1)[1]
    wait_until(lambda: first in tus.uploads(), 10, "the first upload on the server")
    for p in tus.files.glob(first + "*"):
        p.unlink()
    daemon.cli("resume", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    second = job["uploadUrl"].rsplit("/", 1)[1]
    assert second != first and set(tus.uploads()) - before == {second}
    assert sha256_file(tus.files / second) == digest
    assert any(h["httpStatus"] == 404 for h in job["history"]), job["history"]


def test_the_response_of_the_completing_append_is_saved_with_response_file(daemon, ietf):
    src = daemon.work / "resp.bin"
    digest = write_random_file(src, 900_000)
    out = daemon.work / "reply.json"
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="300000"), "--response", out)
    job = daemon.wait_state(id, "completed", timeout=30)
    reply = json.loads(out.read_text())
    assert reply["sha256"] == digest and reply["size"] == 900_000
    assert job["response"]["status"] == 200 and job["response"]["body"] == ""
    assert not (daemon.work / "reply.json.aftpart").exists()


@pytest.mark.parametrize("command", ["cancel", "pause"])
def test_a_command_after_the_completing_answer_began_waits_for_its_end(daemon, ietf, command):
    # Found by an outside audit: between the server's 2xx to the request that completed the upload
    # and the end of that answer, `cancel` was taken (and sent DELETE to the finished upload) and
    # `pause` was too (the resumed attempt's HEAD answer then replaced the server's response).
    src = daemon.work / f"{command}.bin"
    digest = write_random_file(src, 500_000)
    out = daemon.work / f"{command}.json"
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, slowbody="1.5"), "--response", out)
    wait_until(lambda: any(u["complete"] for u in ietf.stats(key)["uploads"]), 10, "the server to complete it")
    r = daemon.cli(command, id, check=2)
    assert f"cannot {command} job {id}: it is completed" in r.err, r
    job = daemon.wait_state(id, "completed", timeout=10)
    assert job["response"]["status"] == 201 and job["uploadUrl"] is not None
    assert json.loads(out.read_text())["sha256"] == digest
    assert [q["method"] for q in ietf.stats(key)["requests"]] == ["PUT"], "a DELETE or a HEAD followed"


def test_a_500_to_the_completing_request_sends_the_upload_again_rather_than_ending_well_on_a_head(daemon, ietf):
    # Found by an outside audit: the server kept every byte but answered 500; the retry's HEAD said
    # "complete" and the job ended completed, its response the HEAD's empty answer. The HEAD is
    # still asked (the server may have kept less: see the next test), but its "complete" is not
    # the end: the upload goes again, from a new first request.
    src = daemon.work / "fail.bin"
    digest = write_random_file(src, 300_000)
    out = daemon.work / "fail.json"
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, failcomplete="1"), "--response", out, "--retries", "2")
    job = daemon.wait_state(id, "completed", timeout=30)
    statuses = [h["httpStatus"] for h in job["history"]]
    assert statuses[0] == 500 and statuses[-1] == 201 and len(statuses) == 3, job["history"]
    assert job["response"]["status"] == 201
    assert json.loads(out.read_text())["sha256"] == digest
    methods = [q["method"] for q in ietf.stats(key)["requests"]]
    assert methods == ["PUT", "HEAD", "PUT"], methods
    uploads = ietf.stats(key)["uploads"]
    assert len(uploads) == 2 and job["uploadUrl"].endswith("/" + uploads[1]["id"])


def test_a_refused_offset_query_after_a_refused_completion_does_not_end_the_upload_on_a_head(daemon, ietf):
    # Found by an outside audit: the HEAD after the refusal got a 503, and the next attempt, which
    # looked only at the last request, took the next HEAD's "complete" as the end.
    src = daemon.work / "fail5.bin"
    digest = write_random_file(src, 200_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, failcomplete="1", fail5xx="1"), "--retries", "3")
    job = daemon.wait_state(id, "completed", timeout=30)
    assert [q["method"] for q in ietf.stats(key)["requests"]] == ["PUT", "HEAD", "HEAD", "PUT"]
    assert job["response"]["status"] == 201 and job["httpStatus"] == 201, job
    uploads = ietf.stats(key)["uploads"]
    assert len(uploads) == 2 and uploads[1]["sha256"] == digest, uploads
    assert "(to the offset query)" in job["history"][1]["error"]["message"], job["history"][1]
    assert "(to the request that completed the upload)" in job["history"][0]["error"]["message"]


def test_a_500_to_the_completing_request_with_no_retry_left_fails_and_its_retry_sends_the_upload_again(
        daemon_factory, ietf):
    # The refusal is known from the attempt's history entry, which a restart keeps.
    daemon = daemon_factory()
    src = daemon.work / "fail0.bin"
    write_random_file(src, 100_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, failcomplete="1"), "--retries", "0")
    job = daemon.wait_state(id, "failed", timeout=30)
    assert job["error"]["code"] == "http_status" and "500" in job["error"]["message"], job["error"]
    daemon.restart()
    daemon.cli("retry", id, check=0)
    job = daemon.wait_state(id, "completed", timeout=30)
    assert job["response"]["status"] == 201, job["response"]
    assert [q["method"] for q in ietf.stats(key)["requests"]] == ["PUT", "HEAD", "PUT"]


def test_a_5xx_to_the_completing_append_the_server_kept_nothing_of_resumes_from_its_offset(daemon, ietf):
    # Found by an outside audit: after a cut, the append that resumes is the completing one; a 503
    # to it (read whole, nothing kept) re-sent the whole file from a new upload. SPEC: after a 5xx,
    # HEAD gives the offset and the upload goes on from it.
    src = daemon.work / "resume5xx.bin"
    digest = write_random_file(src, 400_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="150000", failappend="1"))
    job = daemon.wait_state(id, "completed", timeout=60)
    methods = [q["method"] for q in ietf.stats(key)["requests"]]
    assert methods == ["PUT", "HEAD", "PATCH", "HEAD", "PATCH"], methods
    uploads = ietf.stats(key)["uploads"]
    assert len(uploads) == 1 and uploads[0]["sha256"] == digest, uploads
    assert job["response"]["status"] in (200, 201), job["response"]


def test_a_running_uploads_status_is_its_attempts_offset_answer_while_the_append_runs(daemon, ietf):
    # Found by an outside audit: README says a running job's httpStatus is its attempt's last
    # response status once it has one; while the append after a HEAD ran, it showed the last
    # ended attempt's (null after a cut).
    src = daemon.work / "st.bin"
    write_random_file(src, 800_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, drop="200000", rate="150000"))

    def appending():
        j = daemon.job(id)
        return j if j["state"] == "running" and j["attempts"] == 2 and len(j["history"]) >= 3 else None

    job = wait_until(appending, 30, "the second attempt's append")
    head = job["history"][-2]
    assert head["attempt"] == 2 and head["httpStatus"] in (200, 204), job["history"]
    assert job["httpStatus"] == head["httpStatus"], (job["httpStatus"], job["history"])
    assert job["history"][-1]["httpStatus"] is None, "the append in flight has no answer yet"
    daemon.wait_state(id, "completed", timeout=60)


def test_an_ietf_uploads_first_byte_is_its_answer_not_the_104(daemon, ietf):
    # The 104 comes before the body is read; the answer after it. Time to "first byte" was the
    # 104's (and, before that, libcurl's first byte *sent*): about 0 for a 2 s upload.
    src = daemon.work / "timed.bin"
    write_random_file(src, 1_000_000)
    key = ietf.key()
    id = daemon.upload(src, ietf.url(key, rate=500_000))
    job = daemon.wait_state(id, "completed", timeout=30)
    first = job["history"][0]
    assert job["uploadUrl"] and first["httpStatus"] in (200, 201, 204), job
    assert first["firstByte"] >= 1.2 and first["firstByte"] <= first["total"], first


@pytest.mark.parametrize("to_file", [False, True], ids=["kept", "response-file"])
def test_a_tus_server_that_answers_appends_without_an_offset_is_asked_and_its_answer_kept(daemon, to_file):
    # Found by outside audits: a PATCH answered 204 without Upload-Offset (tus 1.0 says MUST) was
    # taken as every byte kept, and the job completed with the server short of bytes; then, asked
    # with HEAD, the job's response became the HEAD's instead of the last PATCH's (SPEC).
    import http.server
    import threading
    held = {"data": b"", "length": None}
    requests = []

    class Tus(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, headers=(), body=b""):
            self.send_response(status)
            for name, value in [("Tus-Resumable", "1.0.0"), ("Content-Length", str(len(body))), *headers]:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_POST(self):
            requests.append("POST")
            held["length"] = int(self.headers["Upload-Length"])
            self.answer(201, [("Location", "/files/one")])

        def do_PATCH(self):
            requests.append("PATCH")
            body = self.rfile.read(int(self.headers["Content-Length"]))
            held["data"] += body[:300_000]  # keeps part of each append, and says nothing of it
            self.answer(200, [("X-Patch", "yes")], f"patched {len(held['data'])}".encode())

        def do_HEAD(self):
            requests.append("HEAD")
            self.answer(200, [("Upload-Offset", str(len(held["data"]))), ("Upload-Length", str(held["length"]))])

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        src = daemon.work / "tus-nooffset.bin"
        write_random_file(src, 1_000_000)
        answer = daemon.work / "answer.txt"
        extra = ("--response", answer) if to_file else ()
        id = daemon.upload(src, f"http://127.0.0.1:{server.server_port}/files", "--resumable", "tus", *extra)
        job = daemon.wait_state(id, ("completed", "failed"), timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    assert job["state"] == "completed", job
    assert held["data"] == src.read_bytes(), f"the server holds {len(held['data'])} bytes"
    assert requests[:3] == ["POST", "PATCH", "HEAD"], requests
    # The last PATCH's answer is the job's (SPEC), not the HEAD's that confirmed it.
    assert job["response"]["status"] == 200 and job["response"]["headers"].get("x-patch") == "yes", job["response"]
    if to_file:
        assert answer.read_text() == "patched 1000000"
    else:
        assert job["response"]["body"] == "patched 1000000", job["response"]
    # Asked after every append, at once (not as after a 409, ever more slowly).
    assert requests[1:] == ["PATCH", "HEAD"] * 4, requests
