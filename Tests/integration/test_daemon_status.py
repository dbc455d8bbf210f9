"""`daemon status` (issue 10): version, pid, uptime, home, socket, network, limits, jobs, active, rate."""

import time

from conftest import is_int, is_number


def test_that_daemon_status_json_has_every_field_of_the_spec(daemon, faultserver, key):
    ids = [daemon.download(faultserver.url(key=key, size=3_000_000, slow=200_000), "-o", str(daemon.work / f"s{i}"))
           for i in range(2)]
    for id in ids:
        daemon.wait_bytes(id, 100_000)
    time.sleep(0.6)
    st = daemon.cli_json("daemon", "status", "--json")
    for k in ("version", "pid", "uptime", "home", "socket", "network", "limits", "jobs", "active", "rate"):
        assert k in st, k
    assert st["version"] == "0.1.0" and st["pid"] == daemon.pid
    assert is_number(st["uptime"]) and 0 < st["uptime"] < 120
    assert st["home"] == str(daemon.home) and st["socket"] == str(daemon.socket)
    assert st["network"] in ("reachable", "unreachable")
    assert st["limits"] == {"download": None, "upload": None, "schedule": None}
    assert st["jobs"]["running"] == 2 and all(is_int(v) for v in st["jobs"].values())
    assert set(st["jobs"]) == {"queued", "running", "paused", "waiting", "completed", "failed", "cancelled"}
    assert st["active"] == 2
    assert is_number(st["rate"]) and 100_000 < st["rate"] < 1_000_000, st["rate"]
    text = daemon.cli("daemon", "status", check=0).out
    for word in ("0.1.0", str(daemon.pid), str(daemon.home), "Limits:", "download off", "2 running", "Active:",
                 "Rate:"):
        assert word in text, (word, text)
    later = daemon.cli_json("daemon", "status", "--json")
    assert later["uptime"] >= st["uptime"]
    for id in ids:
        daemon.cli("cancel", str(id), check=True)
    st = daemon.cli_json("daemon", "status", "--json")
    assert st["active"] == 0 and st["rate"] == 0 and st["jobs"]["cancelled"] == 2
