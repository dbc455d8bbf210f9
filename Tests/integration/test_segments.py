"""Segmented downloads (SPEC Amendment 2, "Segmented downloads"): `--connections N` / `-x N`."""

import time

import pytest

from conftest import http_get, sha256_file, wait_until

MiB = 1024 * 1024


def ranged(entries):
    return [e for e in entries if e["range"]]


def test_x4_uses_four_connections_and_is_at_least_3x_faster_than_one(daemon, nginx):
    size, rate = 12 * MiB, 2 * MiB
    digest = nginx.make_file("seg/fast.bin", size)
    url = nginx.url("seg/fast.bin", rate=rate)
    t0 = time.monotonic()
    one = daemon.download(url, "-o", daemon.work / "one.bin")
    daemon.wait_state(one, "completed", timeout=60)
    t_one = time.monotonic() - t0
    t0 = time.monotonic()
    four = daemon.download(url, "-x", "4", "-o", daemon.work / "four.bin")
    peak = 0
    while True:
        job = daemon.job(four)
        peak = max(peak, job["connections"])
        if job["state"] == "completed":
            break
        assert job["state"] in ("queued", "running"), job
        time.sleep(0.1)
    t_four = time.monotonic() - t0
    assert sha256_file(daemon.work / "four.bin") == digest
    assert sha256_file(daemon.work / "one.bin") == digest
    assert peak == 4, f"at most {peak} connections were open"
    log = [e for e in nginx.log("seg/fast.bin") if e["time"] >= 0]
    assert len(ranged(log)) >= 4
    assert t_four * 3 <= t_one, f"-x 4 took {t_four:.1f} s, -x 1 {t_one:.1f} s"
    assert daemon.job(four)["connections"] == 0
