"""A name lookup that hangs (a resolver whose server never answers) must not hold the daemon:
libcurl's threaded resolver waits for its thread when a transfer is taken away mid-lookup unless
told not to. The hang comes from an LD_PRELOAD shim (slowdns/slowdns.c) built here: no namespace,
mount or DNS server."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import make_temp_root

SHIM_SOURCE = Path(__file__).resolve().parent / "slowdns" / "slowdns.c"


@pytest.fixture(scope="module")
def slowdns():
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler for the LD_PRELOAD shim")
    out = make_temp_root("aft-slowdns-")
    lib = out / "libslowdns.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(SHIM_SOURCE), "-ldl"], check=True)
    yield {"LD_PRELOAD": str(lib), "SLOWDNS_SECONDS": "20"}
    shutil.rmtree(out, ignore_errors=True)


def _hanging(daemon_factory, slowdns):
    d = daemon_factory(env=slowdns)
    id = d.download("http://hang.slow-dns.test/x", "-o", d.work / "x")
    d.wait_state(id, "running")
    time.sleep(0.5)  # the lookup is under way on libcurl's resolver thread
    return d, id


def test_cancel_during_a_hanging_name_lookup_is_answered_at_once(daemon_factory, slowdns):
    d, id = _hanging(daemon_factory, slowdns)
    t0 = time.monotonic()
    d.cli("cancel", id, check=0)
    took = time.monotonic() - t0
    assert took < 2, f"cancel took {took:.1f} s (the loop waited for the lookup)"
    assert d.job(id)["state"] == "cancelled"
    t0 = time.monotonic()
    d.cli("daemon", "status", check=0)
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize("how", ["SIGTERM", "daemon stop"])
def test_the_daemon_stops_within_5_s_while_a_name_lookup_hangs(daemon_factory, slowdns, how):
    d, id = _hanging(daemon_factory, slowdns)
    t0 = time.monotonic()
    if how == "SIGTERM":
        rc, _ = d.stop(grace=15)
    else:
        assert d.cli("daemon", "stop", timeout=20).rc == 0
        d.proc.wait(timeout=15)
        rc = d.proc.returncode
    took = time.monotonic() - t0
    assert rc == 0 and took < 5, f"exit {rc} after {took:.1f} s (SPEC: within 5 s)"
    d.start()
    assert d.job(id)["state"] in ("queued", "running"), "queued again, no retry spent"
