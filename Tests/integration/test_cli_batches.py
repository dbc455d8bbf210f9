"""The CLI's side of SPEC "Scale", against a stand-in daemon that speaks the wire contract exactly:
`download -i` through `transfer.addMany` (one message, or parts of one batch under 900 KiB), a
refusal's index turned back into the list's line, and `list --json` copied from the socket as it
streams. These run without the real daemon's side of the contract; `test_cli.py` has the same
cases end to end."""

import json
import socket
import subprocess
import threading

import pytest

from conftest import clean_env, make_temp_root

LINE_LIMIT = 900 * 1024


def job(id, url="http://127.0.0.1:9/x", state="queued"):
    return {
        "id": id, "kind": "download", "url": url, "method": "GET", "state": state, "destination": None,
        "bytes": 0, "total": None, "fraction": None, "rate": 0, "eta": None, "attempts": 0,
        "httpStatus": None, "error": None, "waitReason": None, "nextRetryAt": None, "insecure": False,
        "sha256": None, "createdAt": "2026-11-23T20:00:00Z", "updatedAt": "2026-11-23T20:00:00Z",
        "completedAt": None, "history": [],
    }


def encode(obj) -> bytes:
    """As the daemon writes: sorted keys, compact, one line."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode() + b"\n"


class FakeDaemon:
    """A Unix-socket stand-in for aftransferd: records every request line (with its connection
    and length) and answers `daemon.status`, `transfer.add`, `transfer.addMany` and
    `transfer.list` by the contract. ``refuse`` = (index, code) refuses that request of a list."""

    def __init__(self, refuse=None, listing=()):
        self.root = make_temp_root("aftfake-")
        self.path = str(self.root / "fake.sock")
        self.refuse = refuse
        self.listing = list(listing)
        self.received = []  # (connection number, line length, message)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.threads = []
        self.connections = 0
        self.accepter = threading.Thread(target=self._accept, daemon=True)
        self.accepter.start()

    def close(self):
        self.server.close()
        for t in self.threads:
            t.join(5)

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn, number):
        try:
            self._answer(conn, number)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI pipelines a list's parts and stops reading at the first refusal

    def _answer(self, conn, number):
        buf = b""
        batch = None
        next_id = 1
        with conn:
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    self.received.append((number, len(line) + 1, msg))
                    method, params, rid = msg["method"], msg.get("params") or {}, msg["id"]
                    if method == "daemon.status":
                        result = {"pid": 1, "version": "0", "home": "/nowhere", "socket": self.path,
                                  "network": "reachable", "maxActive": 4, "jobs": {}, "startedAt": "x"}
                    elif method == "transfer.add":
                        result = job(next_id, params["url"])
                        next_id += 1
                    elif method == "transfer.addMany":
                        if batch is None or "batch" not in params:
                            batch = {"id": params.get("batch"), "requests": []}
                        assert params.get("batch") == batch["id"], "one batch id for all parts"
                        start = len(batch["requests"])
                        batch["requests"] += params["requests"]
                        if self.refuse and start <= self.refuse[0] < len(batch["requests"]):
                            conn.sendall(encode({"jsonrpc": "2.0", "id": rid, "error": {
                                "code": -32602, "message": "refused here",
                                "data": {"code": self.refuse[1], "index": self.refuse[0]}}}))
                            batch = None
                            continue
                        if "batch" in params and not params["final"]:
                            result = {"batch": batch["id"], "received": len(batch["requests"])}
                        else:
                            result = {"jobs": [job(next_id + i, r["url"]) for i, r in enumerate(batch["requests"])]}
                            next_id += len(batch["requests"])
                            batch = None
                    elif method == "transfer.list":
                        jobs = self.listing
                        if "state" in params:
                            jobs = [j for j in jobs if j["state"] == params["state"]]
                        if "limit" in params:
                            jobs = jobs[: params["limit"]]
                        # Written in small pieces, as a big result arrives.
                        out = encode({"jsonrpc": "2.0", "id": rid, "result": jobs})
                        for i in range(0, len(out), 4096):
                            conn.sendall(out[i:i + 4096])
                        continue
                    else:
                        conn.sendall(encode({"jsonrpc": "2.0", "id": rid,
                                             "error": {"code": -32601, "message": f"method not found: {method}"}}))
                        continue
                    conn.sendall(encode({"jsonrpc": "2.0", "id": rid, "result": result}))

    def calls(self, method):
        return [(n, length, msg) for n, length, msg in self.received if msg["method"] == method]


@pytest.fixture
def fake():
    d = FakeDaemon()
    yield d
    d.close()


def cli(bin_dir, fake, *args, cwd):
    p = subprocess.run([str(bin_dir / "aftransfer"), *map(str, args), "--socket", fake.path, "--home",
                        str(fake.root / "home"), "--no-autostart"], capture_output=True, text=True,
                       timeout=120, cwd=cwd, env=clean_env())
    return p


def write_list(path, count, pad=300):
    lines = ["# a comment", ""] + [f"http://127.0.0.1:9/f/{i}.bin?pad={'p' * pad}" for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_a_small_list_is_one_transfer_add_many_message(bin_dir, fake, tmp_path):
    write_list(tmp_path / "urls.txt", 3)
    p = cli(bin_dir, fake, "download", "-i", "urls.txt", "-d", tmp_path, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "2", "3"]
    calls = fake.calls("transfer.addMany")
    assert len(calls) == 1 and set(calls[0][2]["params"]) == {"requests"}
    assert [r["url"] for r in calls[0][2]["params"]["requests"]] == [f"http://127.0.0.1:9/f/{i}.bin?pad={'p' * 300}"
                                                                     for i in range(3)]
    assert all(r["directory"] == str(tmp_path) for r in calls[0][2]["params"]["requests"])
    assert fake.calls("transfer.add") == []


def test_a_single_download_still_uses_transfer_add(bin_dir, fake, tmp_path):
    p = cli(bin_dir, fake, "download", "http://127.0.0.1:9/one.bin", "-d", tmp_path, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"
    assert len(fake.calls("transfer.add")) == 1 and fake.calls("transfer.addMany") == []


def test_a_big_list_goes_in_parts_of_one_batch_on_one_connection_each_under_900_kib(bin_dir, fake, tmp_path):
    lines = write_list(tmp_path / "urls.txt", 5000)
    p = cli(bin_dir, fake, "download", "-i", "urls.txt", "-d", tmp_path, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    printed = json.loads(p.stdout)
    assert [j["id"] for j in printed] == list(range(1, 5001))
    calls = fake.calls("transfer.addMany")
    assert len(calls) >= 3, f"{len(calls)} parts for about 2 MB"
    assert len({n for n, _, _ in calls}) == 1, "all parts on one connection"
    assert len({m["params"]["batch"] for _, _, m in calls}) == 1, "one batch id"
    assert all(len(m["params"]["batch"]) == 16 for _, _, m in calls)
    assert [m["params"]["final"] for _, _, m in calls] == [False] * (len(calls) - 1) + [True]
    assert max(length for _, length, _ in calls) <= LINE_LIMIT
    sent = [r["url"] for _, _, m in calls for r in m["params"]["requests"]]
    assert sent == lines[2:]


def test_a_refused_index_names_the_lists_line_and_exits_2(bin_dir, tmp_path):
    fake = FakeDaemon(refuse=(3997, "destination_exists"))
    try:
        write_list(tmp_path / "urls.txt", 5000)
        p = cli(bin_dir, fake, "download", "-i", "urls.txt", "-d", tmp_path, cwd=tmp_path)
        assert p.returncode == 2, p
        assert p.stdout == ""
        # Index 3997 is the 3998th URL, on line 4000 after a comment and a blank line.
        assert "urls.txt line 4000: refused here" in p.stderr, p.stderr
        assert fake.calls("transfer.remove") == [], "the daemon decides all or nothing: no roll-back"
    finally:
        fake.close()


def test_list_json_copies_the_streamed_array_and_sends_limit_and_state(bin_dir, tmp_path):
    listing = [job(i, f"http://127.0.0.1:9/{i}/" + "é/" * 20, state="queued" if i % 3 else "paused")
               for i in range(1, 3001)]
    fake = FakeDaemon(listing=listing)
    try:
        p = cli(bin_dir, fake, "list", "--json", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout.endswith("]\n")
        assert json.loads(p.stdout) == listing
        p = cli(bin_dir, fake, "list", "--json", "--state", "paused", "--limit", "5", cwd=tmp_path)
        assert [j["id"] for j in json.loads(p.stdout)] == [3, 6, 9, 12, 15]
        assert fake.calls("transfer.list")[-1][2]["params"] == {"state": "paused", "limit": 5}
        p = cli(bin_dir, fake, "list", "--limit", "2", cwd=tmp_path)
        assert [line.split()[0] for line in p.stdout.splitlines()] == ["ID", "1", "2"]
    finally:
        fake.close()
