"""Disk full (SPEC "Disk full and other faults"): a download that runs out of space waits with
``waitReason`` "disk" (error ``disk_full``, retryable, no retry spent), keeps its part byte-exact,
and resumes byte-identical when space is free again, across a ``kill -9`` too.

The destination is a small tmpfs mounted for the test (root only; skipped elsewhere) and always
unmounted in the fixture's teardown."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_job_schema, make_temp_root, sha256_file, wait_until

MiB = 1024 * 1024


class Tmpfs:
    """A tmpfs of ``size`` bytes at a fresh directory (or, with ``kind="ext4"``, a loop-mounted
    ext4 image without reserved blocks; with ``kind="ramfs"``, a ramfs, which has no size and
    counts no blocks); ``fill()`` takes every free byte."""

    def __init__(self, size: int, kind: str = "tmpfs", path: Path | None = None) -> None:
        self.path = path or make_temp_root("aft-tmpfs-")
        self.image = None
        if kind == "ext4":
            self.image = make_temp_root("aft-img-") / "fs.img"
            with open(self.image, "wb") as f:
                f.truncate(size)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run(["mount", "-o", "loop", str(self.image), str(self.path)], check=True)
        elif kind == "ramfs":
            subprocess.run(["mount", "-t", "ramfs", "-o", "mode=0755", "ramfs", str(self.path)], check=True)
        else:
            mode = "0700" if path else "0755"
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", str(self.path)],
                           check=True)
        self.mounted = True
        self.filler = self.path / "filler"

    def free(self) -> int:
        s = os.statvfs(self.path)
        return s.f_bavail * s.f_frsize

    def fill(self) -> None:
        """Writes a filler file until the file system is full (ENOSPC)."""
        with open(self.filler, "ab", buffering=0) as f:
            block = b"\0" * 65536
            while True:
                try:
                    f.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(block) == 1:
                        break
                    block = block[: len(block) // 2]

    def unfill(self) -> None:
        self.filler.unlink(missing_ok=True)

    def resize(self, size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def unmount(self) -> None:
        if self.mounted:
            # A loop mount made by `mount -o loop` frees its loop device when unmounted.
            subprocess.run(["umount", str(self.path)], check=False)
            if os.path.ismount(self.path):
                subprocess.run(["umount", "-l", str(self.path)], check=False)
            self.mounted = False
        if self.image is not None:
            self.image.unlink(missing_ok=True)


@pytest.fixture
def tmpfs():
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made: list[Tmpfs] = []

    def make(size: int, kind: str = "tmpfs") -> Tmpfs:
        if kind == "ext4" and shutil.which("mkfs.ext4") is None:
            pytest.skip("mkfs.ext4 is not installed")
        t = Tmpfs(size, kind)
        made.append(t)
        return t

    try:
        yield make
    finally:
        for t in made:
            t.unmount()


@pytest.mark.parametrize("size", [10_000, 3_000_000], ids=["held", "streamed"])
def test_a_file_system_that_counts_no_blocks_is_written_to_not_waited_for(daemon, faultserver, key, tmpfs, size):
    """ramfs (and some FUSE file systems) report 0 blocks and 0 free: that means unknown, not
    full. Downloads of a known size go ahead instead of waiting for space forever."""
    fs = tmpfs(0, "ramfs")
    assert os.statvfs(fs.path).f_blocks == 0
    id = daemon.download(faultserver.url(size=size, key=key), "-o", fs.path / "f.bin")
    job = daemon.wait_state(id, ["completed", "waiting", "failed"], timeout=30)
    assert job["state"] == "completed", job
    assert sha256_file(fs.path / "f.bin") == faultserver.sha256(size)


def assert_waits_for_disk(job: dict) -> None:
    assert_job_schema(job)
    assert job["state"] == "waiting", job
    assert job["waitReason"] == "disk", job
    assert job["nextRetryAt"] is None, job
    assert job["error"]["code"] == "disk_full", job
    assert job["error"]["retryable"] is True, job
    assert "free" in job["error"]["message"], f"status must say how much space it waits for: {job}"


def assert_part_is_exact(part: Path, data: bytes) -> None:
    """The part holds a prefix of the content, byte for byte (nothing spliced, nothing torn)."""
    if not part.exists():
        return
    body = part.read_bytes()
    assert body == data[: len(body)], f"{part} is not a byte-exact prefix of the content"


@pytest.mark.parametrize("length,kind", [("content-length", "tmpfs"), ("no-length", "tmpfs"),
                                         ("content-length", "ext4")])
def test_a_download_that_runs_out_of_space_waits_for_disk_and_resumes_byte_identical(
        daemon, faultserver, key, tmpfs, length, kind):
    size = 6 * MiB
    fs = tmpfs(8 * MiB if kind == "tmpfs" else 16 * MiB, kind)
    knobs = {"size": size, "seed": f"disk-{length}-{kind}", "slow": 3 * MiB, "key": key}
    if length == "no-length":
        knobs["nolength"] = 1
    data = faultserver.data(size, knobs["seed"])
    dest = fs.path / "big.bin"
    part = fs.path / "big.bin.aftpart"
    # --retries 0: a failure that spent a retry would fail the job at once.
    id = daemon.download(faultserver.url("/data", **knobs), "-o", dest, "--retries", "0")
    daemon.wait_bytes(id, MiB, timeout=20)
    fs.fill()
    job = daemon.wait_state(id, "waiting", timeout=20)
    assert_waits_for_disk(job)
    if length == "no-length":
        assert "more than 1.0 MiB" in job["error"]["message"], job
    assert_part_is_exact(part, data)
    time.sleep(2.5)  # a watcher round finds no space: the job keeps waiting
    assert daemon.job(id)["state"] == "waiting"
    fs.unfill()
    done = daemon.wait_state(id, "completed", timeout=30)
    assert dest.read_bytes() == data, "the resumed file differs from the content"
    assert done["error"] is None
    assert done["attempts"] >= 2
    assert not part.exists()


def test_a_download_waiting_for_space_survives_kill_9_and_resumes_byte_identical(
        daemon, faultserver, key, tmpfs):
    size = 6 * MiB
    fs = tmpfs(8 * MiB)
    seed = "disk-kill"
    data = faultserver.data(size, seed)
    dest = fs.path / "k.bin"
    part = fs.path / "k.bin.aftpart"
    id = daemon.download(faultserver.url("/data", size=size, seed=seed, slow=3 * MiB, key=key), "-o", dest,
                         "--retries", "0")
    daemon.wait_bytes(id, MiB, timeout=20)
    fs.fill()
    assert_waits_for_disk(daemon.wait_state(id, "waiting", timeout=20))
    daemon.kill9()
    daemon.start()
    job = daemon.job(id)
    assert_waits_for_disk(job)
    assert_part_is_exact(part, data)
    assert job["bytes"] == part.stat().st_size, "after a restart the part is cut back to its checkpoint"
    fs.unfill()
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(size, seed)


def test_a_download_larger_than_the_free_space_waits_before_it_writes(daemon, faultserver, key, tmpfs):
    size = 6 * MiB
    fs = tmpfs(2 * MiB)
    dest = fs.path / "large.bin"
    id = daemon.download(faultserver.url("/data", size=size, seed="large", key=key), "-o", dest,
                         "--retries", "0")
    job = daemon.wait_state(id, "waiting", timeout=20)
    assert_waits_for_disk(job)
    assert "6.0 MiB" in job["error"]["message"], job
    assert job["total"] == size and job["fraction"] == 0, "the size is known: the waiting job shows it"
    part = fs.path / "large.bin.aftpart"
    assert not part.exists() or part.stat().st_size == 0, "nothing is written before the space is there"
    fs.resize(16 * MiB)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(size, "large")


def test_a_job_waiting_for_space_can_be_paused_resumed_and_cancelled(daemon, faultserver, key, tmpfs):
    fs = tmpfs(1 * MiB)
    dest = fs.path / "p.bin"
    id = daemon.download(faultserver.url("/data", size=4 * MiB, seed="p", key=key), "-o", dest)
    daemon.wait_state(id, "waiting", timeout=20)
    assert daemon.cli("pause", str(id)).rc == 0
    assert daemon.job(id)["state"] == "paused"
    assert daemon.cli("resume", str(id)).rc == 0
    assert_waits_for_disk(daemon.wait_state(id, "waiting", timeout=20))
    assert daemon.cli("cancel", str(id)).rc == 0
    assert daemon.job(id)["state"] == "cancelled"


def upload_with_response_on_a_full_disk(daemon, faultserver, key, fs, respsize, name, *extra):
    """An upload of 50,000 bytes whose answer of about `respsize` bytes goes to `name` on the full
    file system `fs`; returns its id."""
    fs.fill()
    src = daemon.work / f"{name}.src"
    src.write_bytes(os.urandom(50_000))
    return daemon.upload(src, faultserver.url("/upload", key=key, respsize=respsize), "--response",
                         fs.path / name, "--resumable", "off", *extra)


def test_an_upload_with_retries_0_is_not_sent_again_when_its_response_file_finds_the_disk_full(
        daemon, faultserver, key, tmpfs):
    # Waiting for space would send the body again: `--retries 0` is for endpoints that must never
    # see a request twice (SPEC), so the job fails instead; the server saw it once.
    fs = tmpfs(2 * MiB)
    id = upload_with_response_on_a_full_disk(daemon, faultserver, key, fs, 300_000, "resp.json", "--retries", "0")
    job = daemon.wait_state(id, ("failed", "waiting"), timeout=20)
    assert job["state"] == "failed" and job["error"]["code"] == "disk_full", job
    assert job["error"]["retryable"] is False and "--retries 0" in job["error"]["message"], job
    assert not job["error"]["message"].startswith("waiting for"), "a failed job waits for nothing"
    assert len(faultserver.log(key)) == 1
    assert not (fs.path / "resp.json").exists() and not (fs.path / "resp.json.aftpart").exists()


def test_an_upload_whose_response_file_finds_the_disk_full_waits_for_the_whole_response(
        daemon, faultserver, key, tmpfs):
    # The response's length is known (Content-Length): the job waits until all of it fits. It
    # waited for 1 MiB, as for an unknown size, and sent its body again and again while between.
    fs = tmpfs(4 * MiB)
    respsize = 3 * MiB
    id = upload_with_response_on_a_full_disk(daemon, faultserver, key, fs, respsize, "resp.bin")
    job = daemon.wait_state(id, "waiting", timeout=20)
    assert job["waitReason"] == "disk" and "3.0 MiB" in job["error"]["message"], job
    os.truncate(fs.filler, fs.filler.stat().st_size - 2 * MiB)  # 2 MiB free: not enough
    time.sleep(7)
    assert len(faultserver.log(key)) == 1, "sent again before its response could fit"
    assert daemon.job(id)["state"] == "waiting"
    fs.filler.unlink()
    daemon.wait_state(id, "completed", timeout=30)
    assert len(faultserver.log(key)) == 2 and (fs.path / "resp.bin").stat().st_size >= respsize


def test_a_file_size_limit_fails_the_one_job_that_reaches_it_and_the_daemon_goes_on(
        daemon_factory, faultserver, key):
    # `ulimit -f` on the daemon: a write past it fails with EFBIG. Its signal (SIGXFSZ) killed the
    # daemon, and killed it again on every restart while the limit held.
    limited = daemon_factory(prefix=("prlimit", f"--fsize={2 * MiB}", "--"))
    big = limited.download(faultserver.url("/data", size=3 * MiB, seed="fsize", key=key), "-o",
                           limited.work / "big.bin", "--retries", "0")
    job = limited.wait_state(big, ("failed", "completed"), timeout=30)
    assert limited.running, f"the daemon died at the file-size limit:\n{limited.log_tail()}"
    assert job["state"] == "failed" and job["error"]["code"] == "io", job
    assert "too large" in job["error"]["message"], job
    assert not (limited.work / "big.bin").exists()
    small = limited.download(faultserver.url("/data", size=100_000, seed="fsize-small", key=key), "-o",
                             limited.work / "small.bin")
    limited.wait_state(small, "completed", timeout=30)
    assert (limited.work / "small.bin").read_bytes() == faultserver.data(100_000, "fsize-small")


def test_a_file_size_limit_below_the_reserve_refuses_new_jobs_naming_the_limit_not_a_full_disk(
        daemon_factory, faultserver, key):
    # The 1 MiB reserve beside the database cannot be made under `ulimit -f 200`: every add was
    # refused as "the disk holding the job database is full (53 GiB free)".
    limited = daemon_factory(prefix=("prlimit", f"--fsize={200 * 1024}", "--"))
    r = limited.cli("download", faultserver.url(size=10, key=key), "-o", limited.work / "x.bin")
    assert r.rc == 2 and "file-size limit" in r.err and "is full" not in r.err, r
    assert limited.running and limited.jobs() == []
