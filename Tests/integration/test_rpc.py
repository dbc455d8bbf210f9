"""The JSON-RPC interface (SPEC "The RPC", docs/rpc.md): methods, result shapes, notifications."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import RFC3339_UTC, STATES, assert_job_schema, is_int, sha256_file, wait_until


def add(daemon, **params) -> dict:
    return daemon.rpc_result("transfer.add", params)


def test_transfer_add_returns_the_job_object_with_the_spec_fields(daemon, faultserver, key):
    dest = daemon.work / "r.bin"
    job = add(daemon, url=faultserver.url(size=1000, seed=1, key=key), destination=str(dest))
    assert_job_schema(job)
    assert job["kind"] == "download" and job["method"] == "GET" and job["destination"] == str(dest)
    assert job["state"] in ("queued", "running", "completed")
    assert job["createdAt"] and job["error"] is None and job["insecure"] is False
    done = daemon.wait_state(job["id"], "completed")
    assert_job_schema(done)
    assert done["createdAt"] == job["createdAt"]
    assert sha256_file(dest) == faultserver.sha256(1000, 1)


def test_transfer_add_refuses_a_param_it_does_not_know(daemon, faultserver, key):
    # As the CLI refuses an unknown option: a misspelt "sha265" must not queue an unchecked download.
    resp = daemon.rpc("transfer.add", {"url": faultserver.url(size=10, key=key),
                                       "destination": str(daemon.work / "u.bin"), "sha265": "0" * 64})
    assert resp["error"]["code"] == -32602, resp
    assert resp["error"]["data"]["code"] == "invalid_request" and "sha265" in resp["error"]["message"], resp
    assert daemon.jobs() == []


def test_every_method_refuses_a_param_it_does_not_know_and_changes_nothing(daemon, faultserver, key):
    dest = daemon.work / "kept.bin"
    id = daemon.download(faultserver.url(size=10, key=key), "-o", dest)
    daemon.wait_state(id, "completed")
    cases = [
        ("transfer.remove", {"ids": [id], "deletefiles": True}, "deletefiles"),  # must not remove, keeping the file
        ("transfer.pause", {"ids": [id], "deleteFiles": True}, "deleteFiles"),  # remove's own member
        ("transfer.list", {"State": "failed"}, "State"),
        ("transfer.get", {"id": id, "x": 1}, "x"),
        ("transfer.curl", {"id": id, "x": 1}, "x"),
        ("transfer.setUrl", {"id": id, "url": faultserver.url(size=10, key=key), "keep": True}, "keep"),
        ("transfer.addMany", {"batchId": "Z", "requests": [{"url": faultserver.url(size=10, key=key),
                                                            "destination": str(daemon.work / "b.bin")}],
                              "final": False}, "batchId"),
        ("daemon.limits", {"downlaod": "1M"}, "downlaod"),
        ("events.subscribe", {"id": [id]}, "id"),
        ("daemon.status", {"verbose": True}, "verbose"),
        ("daemon.shutdown", {"now": True}, "now"),
    ]
    for method, params, unknown in cases:
        resp = daemon.rpc(method, params)
        assert resp.get("error", {}).get("code") == -32602, (method, resp)
        assert resp["error"]["data"]["code"] == "invalid_request", (method, resp)
        assert resp["error"]["message"] == f"unknown param {unknown}", (method, resp)
    assert [j["id"] for j in daemon.jobs()] == [id] and dest.exists()
    assert daemon.rpc_result("daemon.limits", {}) == daemon.rpc_result("daemon.limits")
    assert "result" in daemon.rpc("daemon.status")  # still running


def test_transfer_add_with_a_directory_takes_the_suggested_name(daemon, faultserver, key):
    job = add(daemon, url=faultserver.url("/n/suggested.bin", size=10, key=key), directory=str(daemon.work))
    done = daemon.wait_state(job["id"], "completed")
    assert done["destination"] == str(daemon.work / "suggested.bin")


def test_transfer_get_returns_what_status_json_prints(daemon, faultserver, key):
    job = add(daemon, url=faultserver.url(size=10, key=key), destination=str(daemon.work / "g"))
    daemon.wait_state(job["id"], "completed")
    got = daemon.rpc_result("transfer.get", {"id": job["id"]})
    assert_job_schema(got)
    assert got == daemon.job(job["id"])


def test_transfer_list_returns_every_job_oldest_first_and_filters_by_state(daemon, faultserver, key):
    a = add(daemon, url=faultserver.url(size=10, key=key), destination=str(daemon.work / "a"))
    b = add(daemon, url=faultserver.url(key=key + "x", status=404), destination=str(daemon.work / "b"))
    daemon.wait_state(a["id"], "completed")
    daemon.wait_state(b["id"], "failed")
    jobs = daemon.rpc_result("transfer.list")
    assert [j["id"] for j in jobs] == [a["id"], b["id"]]
    for j in jobs:
        assert_job_schema(j)
    assert [j["id"] for j in daemon.rpc_result("transfer.list", {"state": "failed"})] == [b["id"]]
    assert [j["id"] for j in daemon.jobs("--state", "completed")] == [a["id"]]


def test_control_methods_return_the_jobs_acted_on_and_each_refusal(daemon, faultserver, key):
    running = add(daemon, url=faultserver.url(size=1_000_000, key=key, slow=100_000),
                  destination=str(daemon.work / "run"))
    done = add(daemon, url=faultserver.url(size=10, key=key + "d"), destination=str(daemon.work / "done"))
    daemon.wait_state(done["id"], "completed")
    daemon.wait_state(running["id"], "running")
    result = daemon.rpc_result("transfer.pause", {"ids": [running["id"], done["id"], 424242]})
    assert set(result) == {"jobs", "refused"}
    assert [j["id"] for j in result["jobs"]] == [running["id"]]
    assert result["jobs"][0]["state"] == "paused"
    assert_job_schema(result["jobs"][0])
    refused = {r["id"]: r for r in result["refused"]}
    assert set(refused) == {done["id"], 424242}
    for r in result["refused"]:
        assert set(r) == {"id", "state", "message"}, f"a refusal is {{id, state, message}} (state null when unknown): {r}"
        assert isinstance(r["message"], str) and r["message"]
    assert refused[done["id"]]["state"] == "completed" and refused[424242]["state"] is None
    result = daemon.rpc_result("transfer.resume", {"ids": [done["id"]]})
    assert result["jobs"] == [] and [r["id"] for r in result["refused"]] == [done["id"]]
    result = daemon.rpc_result("transfer.cancel", {"ids": [running["id"]]})
    assert result["jobs"][0]["state"] == "cancelled" and result["refused"] == []
    result = daemon.rpc_result("transfer.retry", {"ids": [running["id"]]})
    assert result["jobs"][0]["state"] in ("queued", "running")
    daemon.wait_state(running["id"], "running")
    result = daemon.rpc_result("transfer.remove", {"ids": [running["id"], done["id"]], "deleteFiles": True})
    assert sorted(j["id"] for j in result["jobs"]) == sorted([running["id"], done["id"]])
    assert daemon.rpc_result("transfer.list") == []
    assert not (daemon.work / "done").exists(), "deleteFiles deletes a completed download"
    assert not (daemon.work / "run.aftpart").exists()
    assert not (daemon.work / "run").exists()


def test_daemon_status_reports_the_documented_fields(daemon):
    st = daemon.rpc_result("daemon.status")
    for k in ("pid", "version", "home", "socket", "network", "maxActive", "jobs", "startedAt"):
        assert k in st, f"daemon.status lacks {k}: {st}"
    assert st["pid"] == daemon.pid
    assert isinstance(st["version"], str) and st["version"]
    assert st["home"] == str(daemon.home) and st["socket"] == str(daemon.socket)
    assert st["network"] in ("reachable", "unreachable")
    assert st["maxActive"] == 4
    assert isinstance(st["jobs"], dict) and all(k in STATES and is_int(v) for k, v in st["jobs"].items())
    assert RFC3339_UTC.match(st["startedAt"])


def test_events_subscribe_streams_progress_and_state_notifications(daemon, faultserver, key):
    with daemon.connect(timeout=20) as c:
        resp = c.call("events.subscribe")
        assert resp["result"] == {"subscribed": True}, resp
        job = add(daemon, url=faultserver.url(size=300_000, seed=5, key=key, slow=150_000),
                  destination=str(daemon.work / "ev.bin"))
        states, progress = [], []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = c.recv(timeout=20)
            assert msg is not None, "the daemon closed the subscription"
            assert msg.get("jsonrpc") == "2.0" and "id" not in msg, msg
            params = msg["params"]
            assert_job_schema(params)
            if params["id"] != job["id"]:
                continue
            if msg["method"] == "transfer.state":
                states.append(params["state"])
                if params["state"] == "completed":
                    # Already written to the database when told, updatedAt to the millisecond.
                    stored = daemon.rpc_result("transfer.get", {"id": job["id"]})
                    assert stored["state"] == "completed", stored
                    assert params["updatedAt"] == stored["updatedAt"] >= params["completedAt"], (params, stored)
                    break
            else:
                assert msg["method"] == "transfer.progress", msg
                progress.append((time.monotonic(), params["bytes"]))
        assert states and states[-1] == "completed", states
        assert "running" in states, states
        assert len(progress) >= 2, "progress notifications while the job transfers"
        span = progress[-1][0] - progress[0][0]
        assert len(progress) <= 4 * span + 4, f"{len(progress)} progress notes in {span:.2f}s (at most ~4/s)"
        assert [b for _, b in progress] == sorted(b for _, b in progress)


def test_a_subscription_can_be_limited_to_some_jobs(daemon, faultserver, key):
    a = add(daemon, url=faultserver.url(size=10, key=key, delay=1), destination=str(daemon.work / "a"))
    with daemon.connect(timeout=10) as c:
        assert c.call("events.subscribe", {"ids": [a["id"]]})["result"] == {"subscribed": True}
        b = add(daemon, url=faultserver.url(size=10, key=key + "b"), destination=str(daemon.work / "b"))
        seen = set()
        while True:
            msg = c.recv(timeout=10)
            seen.add(msg["params"]["id"])
            if msg["method"] == "transfer.state" and msg["params"]["state"] == "completed":
                break
        assert seen == {a["id"]}, f"notifications for unsubscribed jobs: {seen}"
    daemon.wait_state(b["id"], "completed")


@pytest.mark.daemon_args("--max-active", "1")
def test_a_subscriber_is_told_of_every_removal_with_the_jobs_last_object(daemon, faultserver, key):
    running = add(daemon, url=faultserver.url(size=10_000_000, key=key, slow=100_000),
                  destination=str(daemon.work / "running"))
    daemon.wait_state(running["id"], "running")
    queued = add(daemon, url=faultserver.url(size=10, key=key + "q"), destination=str(daemon.work / "queued"))
    paused = add(daemon, url=faultserver.url(size=10, key=key + "p"), destination=str(daemon.work / "paused"))
    daemon.rpc_result("transfer.pause", {"ids": [paused["id"]]})
    with daemon.connect(timeout=10) as c:
        assert c.call("events.subscribe")["result"] == {"subscribed": True}
        daemon.rpc_result("transfer.remove", {"ids": [queued["id"], paused["id"], running["id"]]})
        told = []
        while len([m for m in told if m["method"] == "transfer.removed"]) < 3:
            msg = c.recv(timeout=10)
            assert msg is not None, f"no notification of every removal: {told}"
            told.append(msg)
    said = [(m["method"], m["params"]["id"], m["params"]["state"]) for m in told if m["method"] != "transfer.progress"]
    assert said == [
        ("transfer.removed", queued["id"], "queued"),
        ("transfer.removed", paused["id"], "paused"),
        ("transfer.state", running["id"], "cancelled"),
        ("transfer.removed", running["id"], "cancelled"),
    ], said
    assert daemon.jobs() == []


def test_wait_on_a_job_another_client_removes_ends_at_once(daemon, faultserver, key):
    id = add(daemon, url=faultserver.url(size=10_000_000, key=key, slow=100_000),
             destination=str(daemon.work / "x"))["id"]
    daemon.rpc_result("transfer.pause", {"ids": [id]})
    waiter = subprocess.Popen([daemon.cli_exe, "wait", str(id), "--home", str(daemon.home), "--no-autostart"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=daemon.env)
    try:
        time.sleep(1.0)  # subscribed and caught up
        daemon.rpc_result("transfer.remove", {"ids": [id]})
        removed_at = time.monotonic()
        out, err = waiter.communicate(timeout=15)
        took = time.monotonic() - removed_at
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 1 and "removed" in err, (waiter.returncode, err)
    assert took < 1.0, f"wait noticed the removal after {took:.2f} s"


def test_a_subscription_may_decline_the_news_of_new_jobs(daemon, faultserver, key):
    """`events.subscribe {"added": false}`: no `transfer.state` for a job's creation (the client
    that queued it has it from the answer), every later change as before."""
    def states_until_completed(c, ids):
        seen = {i: [] for i in ids}
        done = set()
        while done != set(ids):
            msg = c.recv(timeout=10)
            assert msg is not None, "the daemon closed the subscription"
            p = msg["params"]
            if msg["method"] == "transfer.state" and p["id"] in seen:
                seen[p["id"]].append(p["state"])
                if p["state"] == "completed":
                    done.add(p["id"])
        return seen

    with daemon.connect(timeout=10) as every, daemon.connect(timeout=10) as changes:
        assert every.call("events.subscribe")["result"] == {"subscribed": True}
        assert changes.call("events.subscribe", {"added": False})["result"] == {"subscribed": True}
        one = add(daemon, url=faultserver.url(size=10, key=key, delay=0.3), destination=str(daemon.work / "one"))
        many = daemon.rpc_result("transfer.addMany", {"requests": [
            {"kind": "download", "url": faultserver.url(size=10, key=f"{key}-{n}", delay=0.3),
             "destination": str(daemon.work / f"many-{n}")} for n in range(3)]})
        ids = [one["id"]] + [j["id"] for j in many["jobs"]]
        told = states_until_completed(every, ids)
        declined = states_until_completed(changes, ids)
    for i in ids:
        assert told[i][0] == "queued" and told[i][-1] == "completed", told
        assert declined[i] == told[i][1:], f"job {i}: {declined[i]} beside {told[i]}"
        assert "running" in declined[i], declined


def test_any_json_rpc_id_is_echoed(daemon):
    # JSON-RPC 2.0: an id is a string, a number or null, and the answer carries the same value.
    with daemon.connect(timeout=10) as c:
        for raw, expected in ((b'"abc"', "abc"), (b"7", 7), (b"-3", -3), (b"1.5", 1.5), (b"null", None),
                              (b"9223372036854775808", 9223372036854775808)):
            c.send_raw(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"daemon.status"}\n')
            resp = c.recv()
            assert "result" in resp and resp["id"] == expected, (raw, resp)
        c.send_raw(b'{"jsonrpc":"2.0","id":[1],"method":"daemon.status"}\n')
        resp = c.recv()
        assert resp["error"]["code"] == -32600 and resp["id"] is None, resp


def test_daemon_shutdown_answers_then_exits_0(daemon):
    resp = daemon.rpc("daemon.shutdown", id=3)
    assert resp.get("result") == {} and resp["id"] == 3, resp
    rc = daemon.proc.wait(timeout=5)
    assert rc == 0, f"exit status {rc}"


def test_a_subscriber_is_told_of_the_jobs_a_stopping_daemon_queues_again(daemon, faultserver, key):
    job = add(daemon, url=faultserver.url(size=5_000_000, key=key, slow=100_000), destination=str(daemon.work / "s"))
    daemon.wait_state(job["id"], "running")
    with daemon.connect(timeout=10) as c:
        assert c.call("events.subscribe", {"ids": [job["id"]]})["result"] == {"subscribed": True}
        assert daemon.rpc("daemon.shutdown").get("result") == {}
        states = []
        while (msg := c.recv(timeout=10)) is not None:
            if msg.get("method") == "transfer.state":
                states.append(msg["params"]["state"])
    assert daemon.proc.wait(timeout=5) == 0
    assert states == ["queued"], f"the stopping daemon queued the job again without a word: {states}"


def test_a_burst_of_300_clients_connecting_at_once_is_answered_on_every_connection(daemon):
    # Stopped, the daemon accepts nothing: the whole burst waits in the listen queue, which must
    # hold it (a full queue refuses a non-blocking connect with EAGAIN).
    os.kill(daemon.pid, signal.SIGSTOP)
    socks = []
    try:
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            socks.append(s)
            s.settimeout(10)
            s.connect(str(daemon.socket))
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    try:
        for n, s in enumerate(socks):
            s.sendall(json.dumps({"jsonrpc": "2.0", "id": n, "method": "daemon.status"}).encode() + b"\n")
        for n, s in enumerate(socks):
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                assert chunk, f"connection {n} closed without an answer"
                buf += chunk
            resp = json.loads(buf)
            assert resp["id"] == n and resp["result"]["pid"] == daemon.pid, resp
    finally:
        for s in socks:
            s.close()


def _half_closed_exchange(daemon, payload: bytes, timeout: float = 30) -> bytes:
    """Sends ``payload``, closes the sending side (as `echo … | socat -` and `nc` do), and reads
    until the daemon closes the connection."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(str(daemon.socket))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        out = bytearray()
        while chunk := s.recv(65536):
            out += chunk
        return bytes(out)


@pytest.mark.daemon_args("--max-active", "1")
def test_a_client_that_closes_its_sending_side_still_gets_every_answer_whole(daemon, faultserver, key):
    """docs/rpc.md's `echo … | socat - UNIX-CONNECT:…`: socat half-closes when its input ends.
    Answers far larger than the socket's buffer (a list of 600 jobs, 300 lists pipelined) must
    all arrive, whole and in order, before the daemon closes; a last line without its newline
    is a request too."""
    pad = "p" * 300
    daemon.rpc_result("transfer.addMany", {"requests": [
        {"kind": "download", "url": faultserver.url(f"/h/{i}.bin", size=10, key=key, slow=1, pad=pad),
         "destination": str(daemon.work / f"h{i}")} for i in range(600)]}, timeout=60)
    one = _half_closed_exchange(daemon, b'{"jsonrpc":"2.0","id":2,"method":"transfer.list"}\n')
    assert one.endswith(b"\n") and len(json.loads(one)["result"]) == 600, one[-200:]
    many = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"transfer.list","params":{"limit":50}}\n' % i
                    for i in range(300))
    lines = _half_closed_exchange(daemon, many + b'{"jsonrpc":"2.0","id":"last","method":"daemon.status"}')
    answers = [json.loads(line) for line in lines.splitlines()]
    assert [a["id"] for a in answers] == list(range(300)) + ["last"]
    assert all(len(a["result"]) == 50 for a in answers[:300])
    assert answers[-1]["result"]["jobs"]["queued"] >= 598


def test_a_subscriber_that_closes_its_sending_side_keeps_getting_events(daemon, faultserver, key):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(15)
        s.connect(str(daemon.socket))
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe"}\n')
        s.shutdown(socket.SHUT_WR)
        reader = s.makefile("rb")
        assert json.loads(reader.readline())["result"] == {"subscribed": True}
        id = add(daemon, url=faultserver.url(size=10, key=key), destination=str(daemon.work / "e"))["id"]
        while True:
            line = reader.readline()
            assert line, "the daemon closed a subscription whose client had only stopped sending"
            msg = json.loads(line)
            if msg.get("method") == "transfer.state" and msg["params"]["state"] == "completed":
                assert msg["params"]["id"] == id
                break


@pytest.mark.daemon_args("--max-active", "1")
def test_a_stopping_daemon_lets_a_slow_reader_take_its_answers_whole(daemon, faultserver, key):
    """SIGTERM while a client has answers waiting unread: the daemon gives it a moment (at most
    a second) to read them, and never leaves it a line cut in the middle."""
    pad = "p" * 300
    daemon.rpc_result("transfer.addMany", {"requests": [
        {"kind": "download", "url": faultserver.url(f"/s/{i}.bin", size=10, key=key, slow=1, pad=pad),
         "destination": str(daemon.work / f"s{i}")} for i in range(300)]}, timeout=60)
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(15)
        s.connect(str(daemon.socket))
        s.sendall(b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"transfer.list"}\n' % i for i in range(20)))
        time.sleep(0.5)  # answers pile up unread: the kernel's buffer, then the daemon's queue
        daemon.proc.send_signal(signal.SIGTERM)
        out = bytearray()
        while chunk := s.recv(65536):
            out += chunk
    assert daemon.proc.wait(timeout=10) == 0
    assert out.endswith(b"\n"), f"a line was cut: ...{bytes(out[-120:])!r}"
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    assert ids == list(range(len(ids))) and len(ids) >= 2, ids


def test_a_stopping_daemon_lets_a_client_that_keeps_reading_finish_a_long_list(daemon, faultserver, key):
    """Found by an outside audit: a streamed `transfer.list` of ~1 MB to a client reading 64 KiB
    every 0.1 s was cut mid-line a second after `daemon.shutdown`. A client that keeps reading
    gets up to 3 s in all."""
    pad = "p" * 500
    daemon.rpc_result("transfer.addMany", {"requests": [
        {"kind": "download", "url": faultserver.url(f"/s/{i}.bin", size=10, key=key, slow=1, pad=pad),
         "destination": str(daemon.work / f"s{i}")} for i in range(1000)]}, timeout=60)
    with socket.socket(socket.AF_UNIX) as s, daemon.connect(timeout=10) as other:
        s.settimeout(15)
        s.connect(str(daemon.socket))
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"transfer.list"}\n')
        out = bytearray(s.recv(65536))
        assert other.call("daemon.shutdown")["result"] == {}
        while chunk := s.recv(65536):
            out += chunk
            time.sleep(0.1)
    assert daemon.proc.wait(timeout=10) == 0
    assert len(out) > 700_000, len(out)
    assert out.endswith(b"\n"), f"the line was cut after {len(out)} bytes: ...{bytes(out[-80:])!r}"
    assert len(json.loads(out)["result"]) == 1000


def _ms(stamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC stamp with optional milliseconds."""
    import datetime
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("kind", ["upload", "download"])
def test_removing_a_running_job_tells_its_cancellation_as_of_the_removal(daemon, faultserver, key, kind):
    # The last object of a running job being removed is `cancelled` now: its updatedAt is the
    # removal's instant, not the row's last change (for an upload: when its attempt started).
    if kind == "upload":
        src = daemon.work / "up.bin"
        src.write_bytes(os.urandom(3_000_000))
        job = daemon.rpc_result("transfer.add", {"url": faultserver.url("/upload", key=key, slow=100_000),
                                                 "kind": "upload", "source": str(src)})
    else:
        job = add(daemon, url=faultserver.url(size=10_000_000, key=key, slow=100_000),
                  destination=str(daemon.work / "down.bin"))
    daemon.wait_state(job["id"], "running")
    time.sleep(1.5)
    running = daemon.job(job["id"])
    with daemon.connect(timeout=10) as c:
        assert c.call("events.subscribe")["result"] == {"subscribed": True}
        before = time.time()
        answer = daemon.rpc_result("transfer.remove", {"ids": [job["id"]]})
        told = []
        while not any(m["method"] == "transfer.removed" for m in told):
            msg = c.recv(timeout=10)
            assert msg is not None, f"no removal told: {told}"
            if msg["method"] != "transfer.progress":
                told.append(msg)
    last = answer["jobs"][0]
    assert last["state"] == "cancelled", last
    assert last["updatedAt"] > running["updatedAt"], (running["updatedAt"], last["updatedAt"])
    assert _ms(last["updatedAt"]) >= before - 0.002, (before, last["updatedAt"])
    assert last["updatedAt"] >= last["history"][-1]["endedAt"], last["history"][-1]
    assert [(m["method"], m["params"]["state"], m["params"]["updatedAt"]) for m in told] == [
        ("transfer.state", "cancelled", last["updatedAt"]),
        ("transfer.removed", "cancelled", last["updatedAt"]),
    ], told


def test_a_paused_downloads_last_checkpoint_keeps_the_updated_at_its_answer_told(daemon, faultserver, key):
    # The checkpoint a pause makes lands after the answer; it changes nothing the job object
    # shows, so the row keeps the answer's (and the event's) updatedAt.
    job = add(daemon, url=faultserver.url(size=10_000_000, key=key, slow=200_000),
              destination=str(daemon.work / "p.bin"))
    daemon.wait_bytes(job["id"], 300_000)
    with daemon.connect(timeout=10) as c:
        assert c.call("events.subscribe")["result"] == {"subscribed": True}
        answer = daemon.rpc_result("transfer.pause", {"ids": [job["id"]]})["jobs"][0]
        told = None
        while told is None:
            msg = c.recv(timeout=10)
            assert msg is not None
            if msg["method"] == "transfer.state" and msg["params"]["state"] == "paused":
                told = msg["params"]
    time.sleep(1.0)  # the checkpoint's fdatasync and its commit
    stored = daemon.job(job["id"])
    assert answer["state"] == told["state"] == stored["state"] == "paused"
    assert answer["updatedAt"] == told["updatedAt"] == stored["updatedAt"], (answer, told, stored)
    assert answer["bytes"] == stored["bytes"], (answer["bytes"], stored["bytes"])
    daemon.restart()
    again = daemon.job(job["id"])
    assert again["updatedAt"] == answer["updatedAt"] and again["bytes"] == answer["bytes"], again


def test_a_subscription_read_with_a_command_is_answered_before_that_commands_events(daemon, faultserver, key):
    # Found by an outside audit: `events.subscribe` and `transfer.pause` in one write; the pause's
    # transfer.state came before the subscription's answer (rpc.md: answered in order, and from
    # then on the connection receives notifications).
    job = add(daemon, url=faultserver.url(size=5_000_000, key=key, slow=100_000),
              destination=str(daemon.work / "s.bin"))
    daemon.wait_state(job["id"], "running")
    with daemon.connect(timeout=10) as c:
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": "sub", "method": "events.subscribe"}).encode() + b"\n"
                   + json.dumps({"jsonrpc": "2.0", "id": "p", "method": "transfer.pause",
                                 "params": {"ids": [job["id"]]}}).encode() + b"\n")
        seen = []
        while not any(m.get("id") == "p" for m in seen):
            msg = c.recv(timeout=10)
            assert msg is not None, seen
            if msg.get("method") != "transfer.progress":
                seen.append(msg)
    said = [m.get("id") or (m["method"], m["params"]["state"]) for m in seen]
    assert said == ["sub", ("transfer.state", "paused"), "p"], said
