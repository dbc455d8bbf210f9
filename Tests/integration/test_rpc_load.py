"""Load and fuzz (SPEC "Disk full and other faults", issue 11): 300 clients at once and a flood of
malformed JSON-RPC (wrong types, huge numbers, deep nesting, NUL bytes, invalid UTF-8, lone
surrogates), 100,000 messages in all, against a live daemon holding jobs in every state. Every
well-framed request is answered, every job is still there in the same state, and the daemon's file
descriptors come back to where they were. Bounded in time."""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time

import pytest

from conftest import assert_job_schema, wait_until

CLIENTS = 300
MESSAGES = 100_000
WINDOW = 64  # requests in flight per client


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def jobs_in_every_state(daemon, faultserver, key) -> dict[int, str]:
    """One job in each of the seven states (with --max-active 1), stable for a minute."""
    failed = daemon.download(faultserver.url("/data", size=10, seed="f", key=key, status=404), "-o",
                             daemon.work / "failed")
    daemon.wait_state(failed, "failed")
    waiting = daemon.download(faultserver.url("/data", size=10, seed="w", key=key, status=503, retryafter=600),
                              "-o", daemon.work / "waiting")
    daemon.wait_state(waiting, "waiting")
    completed = daemon.download(faultserver.url("/data", size=10, seed="d", key=key), "-o", daemon.work / "completed")
    daemon.wait_state(completed, "completed")
    running = daemon.download(faultserver.url("/data", size=50_000_000, seed="run", slow=20_000, key=key), "-o",
                              daemon.work / "running")
    daemon.wait_state(running, "running")
    # The one slot is taken: these stay queued until acted on.
    daemon.download(faultserver.url("/data", size=10, seed="q", key=key), "-o", daemon.work / "queued")
    paused = daemon.download(faultserver.url("/data", size=10, seed="p", key=key), "-o", daemon.work / "paused")
    assert daemon.cli("pause", str(paused)).rc == 0
    cancelled = daemon.download(faultserver.url("/data", size=10, seed="c", key=key), "-o",
                                daemon.work / "cancelled")
    assert daemon.cli("cancel", str(cancelled)).rc == 0
    states = {j["id"]: j["state"] for j in daemon.jobs()}
    assert sorted(states.values()) == sorted(
        ["running", "queued", "paused", "waiting", "failed", "cancelled", "completed"]), states
    return states


def nasty_lines(rng: random.Random, n: int, first_id: int) -> list[tuple[bytes, bool]]:
    """(line, answered) pairs: a mix of good requests and every kind of bad input. Only ids far
    above the real jobs are ever named, so nothing a client sends can change a job."""
    out = []
    for i in range(n):
        rid = first_id + i
        k = rng.randrange(16)
        if k == 0:
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "daemon.status"}).encode()
        elif k == 1:
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "transfer.list", "params": {"limit": 3}}).encode()
        elif k == 2:
            line = json.dumps({"jsonrpc": "2.0", "id": str(rid), "method": "transfer.get",
                               "params": {"id": rng.choice([1, 2, 3, 10**9])}}).encode()
        elif k == 3:  # wrong types
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": rng.choice(["transfer.pause", "transfer.get",
                               "transfer.list", "transfer.add"]), "params": rng.choice(
                               [{"ids": "1"}, {"id": "x"}, {"limit": "ten"}, {"url": 5}, [1, 2], {"state": 7}])}).encode()
        elif k == 4:  # huge numbers
            line = (b'{"jsonrpc":"2.0","id":%d,"method":"transfer.pause","params":{"ids":[%s]}}'
                    % (rid, rng.choice([b"1e400", b"123456789012345678901234567890", b"-9223372036854775809",
                                        b"9223372036854775807", b"1.5"])))
        elif k == 5:  # deep nesting
            depth = 100_000 if rng.randrange(20) == 0 else rng.choice([65, 100, 511, 600, 5000])
            line = (b'{"jsonrpc":"2.0","id":%d,"method":"transfer.list","params":{"x":' % rid
                    + b"[" * depth + b"]" * depth + b"}}")
        elif k == 6:  # NUL bytes
            line = b'{"jsonrpc":"2.0","id":%d,"method":"daemon.status\\u0000","params":{"a\\u0000":"\\u0000"}}' % rid
        elif k == 7:  # raw NUL and control bytes
            line = b'{"jsonrpc":"2.0","id":%d,\x00"method":"daemon.status"}\x01\x02' % rid
        elif k == 8:  # invalid UTF-8
            line = b'{"jsonrpc":"2.0","id":%d,"method":"transfer.get\xff\xfe","params":{"id":1}}' % rid
        elif k == 9:  # lone surrogates and odd unicode
            line = (b'{"jsonrpc":"2.0","id":%d,"method":"%s"}'
                    % (rid, rng.choice([b"\\ud800", b"\\udfff\\ud800", "\u202e\ufeff\U0001f4a5".encode()])))
        elif k == 10:  # not JSON at all
            line = rng.choice([b"{", b"}", b"nonsense", b"[1,2", b'{"a":}', b"\xc0\x80", b"null", b"42", b'"s"'])
        elif k == 11:  # not a request
            line = json.dumps(rng.choice([{"id": rid}, {"jsonrpc": "1.0", "id": rid, "method": "daemon.status"},
                                          {"jsonrpc": "2.0", "id": {"a": 1}, "method": "daemon.status"},
                                          {"jsonrpc": "2.0", "id": rid, "method": 7}])).encode()
        elif k == 12:  # refused adds (nothing queued)
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "transfer.add", "params": rng.choice([
                {"url": "ftp://x/y", "destination": "/tmp/no"}, {"url": "http://x/\u0000", "destination": "/tmp/n"},
                {"url": "http://127.0.0.1:1/x", "destination": "relative"}, {"kind": "teleport", "url": "http://x/"},
                {"url": "http://127.0.0.1:1/x", "destination": "/tmp/p", "priority": 10**30}])}).encode()
        elif k == 13:  # control commands on jobs that do not exist
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": rng.choice(
                ["transfer.pause", "transfer.resume", "transfer.cancel", "transfer.retry", "transfer.remove"]),
                "params": {"ids": [10**9 + rid]}}).encode()
        elif k == 14:  # unknown methods and odd params
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": rng.choice(
                ["nope", "", "transfer.", "daemon.shutdown.", "events.subscribe2"]), "params": None}).encode()
        else:  # bad batches
            line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "transfer.addMany", "params": rng.choice([
                {"requests": "x"}, {"requests": [{}]}, {"batch": 5, "requests": []},
                {"batch": "b", "final": "yes", "requests": []}])}).encode()
        out.append((line, True))
    return out


class Client(threading.Thread):
    def __init__(self, path, lines, deadline):
        super().__init__(daemon=True)
        self.path, self.lines, self.deadline = path, lines, deadline
        self.answers = 0
        self.error = None

    def run(self):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(max(1.0, self.deadline - time.monotonic()))
            s.connect(self.path)
            buf = b""
            sent = 0
            while self.answers < len(self.lines):
                if sent < len(self.lines) and sent - self.answers < WINDOW:
                    chunk = self.lines[sent:min(len(self.lines), self.answers + WINDOW)]
                    s.sendall(b"".join(line + b"\n" for line, _ in chunk))
                    sent += len(chunk)
                data = s.recv(1 << 16)
                if not data:
                    raise AssertionError(f"the daemon closed a client after {self.answers} answers")
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    resp = json.loads(line)
                    assert resp.get("jsonrpc") == "2.0" and ("result" in resp) != ("error" in resp), resp
                    self.answers += 1
            s.close()
        except Exception as e:  # reported by the test
            self.error = e


@pytest.mark.timeout(120)
@pytest.mark.daemon_args("--max-active", "1")
def test_three_hundred_clients_and_a_flood_of_malformed_requests_change_nothing(daemon, faultserver, key):
    states = jobs_in_every_state(daemon, faultserver, key)
    pid = daemon.pid
    time.sleep(0.5)
    fds_before = fd_count(pid)
    rss_before = rss_kib(pid)
    rng = random.Random(11)
    per_client = MESSAGES // CLIENTS
    deadline = time.monotonic() + 60
    clients = [Client(str(daemon.socket), nasty_lines(rng, per_client + (1 if i < MESSAGES % CLIENTS else 0),
                                                     1 + i * 10_000), deadline) for i in range(CLIENTS)]
    assert sum(len(c.lines) for c in clients) == MESSAGES
    t0 = time.monotonic()
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=max(0.1, deadline - time.monotonic()))
    elapsed = time.monotonic() - t0
    stuck = [c for c in clients if c.is_alive()]
    assert not stuck, f"{len(stuck)} clients still waiting for answers after {elapsed:.1f}s"
    errors = [c.error for c in clients if c.error]
    assert not errors, f"{len(errors)} clients failed, first: {errors[0]!r}"
    assert sum(c.answers for c in clients) == MESSAGES, "every well-framed request is answered"
    assert daemon.running, "the daemon must survive the flood"
    print(f"{MESSAGES} messages from {CLIENTS} clients in {elapsed:.1f}s; "
          f"RSS {rss_before} KiB before, {rss_kib(pid)} KiB after")

    after = {j["id"]: j["state"] for j in daemon.jobs()}
    assert after == states, "every job is still there, in the same state"
    for j in daemon.jobs():
        assert_job_schema(j)
    wait_until(lambda: fd_count(pid) <= fds_before, 10,
               f"the daemon's fds to come back to {fds_before} (now {fd_count(pid)})")
    # Memory: the flood's buffers are given back once the clients are gone (the heap is trimmed
    # half a second after the last one leaves); some allocator slack is allowed.
    wait_until(lambda: rss_kib(pid) < rss_before + 24 * 1024, 10,
               f"the daemon's memory to come back near {rss_before} KiB (now {rss_kib(pid)} KiB)")
    print(f"RSS {rss_kib(pid)} KiB once the clients are gone")


def test_a_client_that_does_not_read_its_answers_is_not_read_either(daemon_factory, faultserver, key):
    # 400 `transfer.list` requests in one write, none of their answers read (~250 KB each): the
    # daemon stops reading that client once a megabyte of answers waits, instead of holding 100 MB
    # of them; everyone else is served meanwhile, and the client gets every answer, in order, once
    # it reads.
    d = daemon_factory(args=("--max-active", "1"))
    lst = d.work / "list.txt"
    lst.write_text("".join(f"{faultserver.url('/data', size=10, seed=i, key=key, slow=1)}\n" for i in range(300)))
    assert d.cli("download", "-i", lst, "-d", d.work).rc == 0
    pid = d.cli_json("daemon", "status", "--json")["pid"]
    before = rss_kib(pid)
    flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    flood.connect(str(d.socket))
    requests = 400
    flood.sendall(b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"transfer.list"}\n' % i for i in range(requests)))
    time.sleep(2)
    started = time.monotonic()
    assert "result" in d.rpc("daemon.status", timeout=5)
    assert time.monotonic() - started < 1, "another client waited behind the flood"
    grown = rss_kib(pid) - before
    assert grown < 40_000, f"the daemon holds {grown} KiB of answers nobody reads"
    flood.settimeout(60)
    answers, pending = [], b""
    while len(answers) < requests:
        chunk = flood.recv(1 << 20)
        assert chunk, f"the connection closed after {len(answers)} answers"
        pending += chunk
        *lines, pending = pending.split(b"\n")
        answers += [json.loads(line) for line in lines if line]
    flood.close()
    assert [a["id"] for a in answers] == list(range(requests))
    assert all(len(a["result"]) == 300 for a in answers)
