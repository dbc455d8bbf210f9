"""Control commands that land while a download's file is being put in place (SPEC "Control
commands act where they make sense"). A server sends each body whole and then, from its request
thread, sends the daemon a command for that very job: the command arrives while the body is
verified, synced and moved into place, or just after. Whichever way the race goes, the command
must apply to the job as it is when it is decided: to a running job (cancelled: no file), or to
the completed job it became (refused as completed, or removed with or without its file) — never
refused as "running", never answered "cancelled" with the file left in place."""

from __future__ import annotations

import http.server
import json
import os
import socket
import socketserver
import threading
import time

import pytest

from conftest import sha256_file

BODY = bytes(range(256)) * 160  # 40 KiB: held in memory and put in place by the batch writer
ROUNDS = 24


class _Hurrier(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Serves BODY at /ID, then sends ``method`` for job ID over the daemon's socket."""
    daemon_threads = True

    def __init__(self, sock_path: str, method: str, params: dict, subscribe: bool = False):
        self.sock_path, self.method, self.params, self.subscribe = sock_path, method, params, subscribe
        self.answers: dict[int, dict] = {}
        super().__init__(("127.0.0.1", 0), _Handler)

    def ask(self, id: int) -> dict:
        """Sends the command and, pipelined behind it on the same connection, `transfer.get`:
        the command's answer, with the get's as "then" and, on a subscribed connection, the
        notifications about the job that came before the answer as "told"."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(20)
            s.connect(self.sock_path)
            lines = s.makefile()
            if self.subscribe:
                s.sendall(b'{"jsonrpc":"2.0","id":0,"method":"events.subscribe","params":{"ids":[%d]}}\n' % id)
                assert json.loads(lines.readline())["result"] == {"subscribed": True}
            request = {"jsonrpc": "2.0", "id": 1, "method": self.method, "params": {"ids": [id], **self.params}}
            get = {"jsonrpc": "2.0", "id": 2, "method": "transfer.get", "params": {"id": id}}
            s.sendall((json.dumps(request) + "\n" + json.dumps(get) + "\n").encode())
            told, later, answer = [], [], None
            while True:
                msg = json.loads(lines.readline())
                if "method" in msg:
                    if msg["method"] != "transfer.progress":
                        (told if answer is None else later).append((msg["method"], msg["params"]["state"]))
                elif msg["id"] == 1:
                    answer = msg
                else:
                    answer["then"], answer["told"], answer["toldAfter"] = msg, told, later
                    return answer


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        id = int(self.path.strip("/"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
        self.wfile.flush()
        if id in self.server.answers:
            return  # a later attempt (after a resume): the race was run once
        time.sleep(0.0005 * (id % 5))
        self.server.answers[id] = self.server.ask(id)


@pytest.fixture
def hurrier(daemon):
    """Makes the hurrying server for a method (stopped at teardown)."""
    servers = []

    def make(method: str, params: dict, subscribe: bool = False) -> _Hurrier:
        server = _Hurrier(str(daemon.socket), method, params, subscribe)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def _race(daemon, server: _Hurrier) -> tuple[dict[int, dict], dict[int, dict]]:
    """Downloads ROUNDS jobs from a hurrying server; returns each job's answer and the jobs left."""
    out = daemon.work / "out"
    out.mkdir()
    for k in range(ROUNDS):
        id = daemon.download(f"http://127.0.0.1:{server.server_address[1]}/{k + 1}", "-o", out / f"f{k + 1}")
        assert id == k + 1
    deadline = time.monotonic() + 30
    while len(server.answers) < ROUNDS and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.answers) == ROUNDS, f"answers: {sorted(server.answers)}"
    time.sleep(0.3)  # a file that would still go into place has done so
    return dict(server.answers), {j["id"]: j for j in daemon.jobs()}


def _outcome(answer: dict) -> tuple[str, str]:
    """("acted", state) or ("refused", state) from a control command's answer."""
    result = answer["result"]
    if result["jobs"]:
        return "acted", result["jobs"][0]["state"]
    return "refused", result["refused"][0]["state"]


@pytest.mark.parametrize("delete_files", [True, False])
def test_remove_as_a_file_goes_into_place_leaves_the_file_only_of_a_completed_job_kept(
        daemon, hurrier, delete_files):
    answers, left = _race(daemon, hurrier("transfer.remove", {"deleteFiles": delete_files}))
    assert left == {}, "every job is removed"
    for id, answer in sorted(answers.items()):
        how, state = _outcome(answer)
        assert how == "acted", f"remove is never refused: job {id}: {answer}"
        assert answer["then"].get("error", {}).get("code") == -32001, f"a get after the remove: {answer}"
        path = daemon.work / "out" / f"f{id}"
        if state == "cancelled" or delete_files:
            assert not path.exists(), f"job {id} answered {state} (deleteFiles {delete_files}) but left its file"
        else:
            assert state == "completed", f"job {id}: {answer}"
            assert path.read_bytes() == BODY
    assert not [p for p in os.listdir(daemon.work / "out") if p.endswith(".aftpart")]


@pytest.mark.parametrize("method", ["transfer.cancel", "transfer.pause"])
def test_cancel_or_pause_as_a_file_goes_into_place_acts_on_the_running_job_or_is_refused_as_completed(
        daemon, hurrier, method):
    answers, left = _race(daemon, hurrier(method, {}))
    for id, answer in sorted(answers.items()):
        how, state = _outcome(answer)
        job = left[id]
        path = daemon.work / "out" / f"f{id}"
        # A get sent right behind the command sees the job as the command left it.
        assert answer["then"]["result"]["state"] == state, f"job {id}: {answer}"
        if how == "refused":
            assert state == "completed", f"refused only once the job has ended: job {id}: {answer}"
            assert job["state"] == "completed" and path.read_bytes() == BODY
        elif method == "transfer.cancel":
            assert state == job["state"] == "cancelled", f"job {id}: {answer} / {job}"
            assert not path.exists(), f"cancelled job {id} left its file"
        else:
            assert state == job["state"] == "paused", f"job {id}: {answer} / {job}"
            assert not path.exists(), f"paused job {id} has its file in place already"
    for id, job in left.items():
        if job["state"] == "paused":
            assert daemon.cli("resume", str(id)).rc == 0
            daemon.wait_state(id, "completed")
            assert (daemon.work / "out" / f"f{id}").read_bytes() == BODY


def test_a_subscriber_hears_of_a_completion_before_the_answer_of_the_remove_that_waited_for_it(daemon, hurrier):
    """On a subscribed connection the events of what happened while a command waited come before
    its answer, as they do for a command answered at once."""
    answers, left = _race(daemon, hurrier("transfer.remove", {"deleteFiles": False}, subscribe=True))
    assert left == {}
    for id, answer in sorted(answers.items()):
        assert ("transfer.state", "completed") not in answer["toldAfter"], (
            f"job {id}: its completion was told after the answer of the remove that waited for it: "
            f"{answer['told']} / answer / {answer['toldAfter']}")


def test_retry_of_a_cancelled_job_whose_file_a_new_job_took_is_refused(daemon, faultserver, key):
    # Found by an outside audit: the retried job and the new one wrote one part at once; one
    # completed with the first 2 MB of its file and the rest of the other's.
    dest = daemon.work / "shared.bin"
    old = daemon.download(faultserver.url(size=2_000_000, key=key, slow=1_000_000), "-o", dest)
    daemon.wait_bytes(old, 100_000)
    daemon.cli("cancel", old, check=0)
    new = daemon.download(faultserver.url(size=3_000_000, key=key + "-new", seed="other", slow=3_000_000), "-o", dest)
    r = daemon.cli("retry", old, check=2)
    assert f"cannot retry job {old}: job {new} now writes to {dest}" in r.err, r
    assert daemon.job(old)["state"] == "cancelled"
    job = daemon.wait_state(new, "completed", timeout=30)
    assert sha256_file(dest) == job["sha256"] == faultserver.sha256(3_000_000, "other")
    # Once the new job has ended, the path is free again for a retry (which then finds the file).
    daemon.cli("retry", old, check=0)


# MARK: - One path, one job, inside one command (found by an outside audit)


def test_retry_of_two_jobs_of_one_path_in_one_command_takes_only_the_first(daemon, faultserver, key):
    # Both were accepted: two jobs wrote one part, and one completed with bytes of both.
    dest = daemon.work / "same.bin"
    a = daemon.download(faultserver.url(size=2_000_000, seed="a", key=key, slow=200_000), "-o", dest)
    daemon.wait_state(a, "running")
    daemon.cli("cancel", a, check=0)
    b = daemon.download(faultserver.url(size=2_000_000, seed="b", key=key + "b", slow=200_000), "-o", dest)
    daemon.wait_state(b, "running")
    daemon.cli("cancel", b, check=0)
    r = daemon.cli("retry", a, b)
    assert r.rc == 2 and f"job {a} now writes to {dest}" in r.err, r
    assert daemon.job(b)["state"] == "cancelled"
    daemon.wait_state(a, "completed", timeout=60)
    assert sha256_file(dest) == faultserver.sha256(2_000_000, "a")


def test_removing_a_job_that_gave_its_path_up_leaves_the_new_holders_part(daemon, faultserver, key):
    # The removal deleted the running job's part, which then failed ("cannot read back … to hash").
    dest = daemon.work / "g.bin"
    gone = daemon.download(faultserver.url("/missing", key=key, status=404), "-o", dest, "--retries", "0")
    daemon.wait_state(gone, "failed")
    holder = daemon.download(faultserver.url(size=1_500_000, key=key + "h", slow=300_000), "-o", dest,
                             "--retries", "0")
    daemon.wait_bytes(holder, 300_000)
    part = daemon.work / "g.bin.aftpart"
    assert part.exists()
    daemon.cli("remove", gone, check=0)
    assert part.exists(), "the new holder's part was deleted"
    daemon.wait_state(holder, "completed", timeout=60)
    assert sha256_file(dest) == faultserver.sha256(1_500_000)


def test_delete_files_of_an_old_job_keeps_the_file_a_newer_job_put_there(daemon, faultserver, key):
    dest = daemon.work / "k.bin"
    old = daemon.download(faultserver.url(size=1000, seed="o", key=key), "-o", dest)
    daemon.wait_state(old, "completed")
    new = daemon.download(faultserver.url(size=5000, seed="n", key=key + "n"), "-o", dest, "--replace")
    daemon.wait_state(new, "completed")
    daemon.cli("remove", old, "--delete-files", check=0)
    assert dest.exists() and sha256_file(dest) == faultserver.sha256(5000, "n")
    daemon.cli("remove", new, "--delete-files", check=0)
    assert not dest.exists(), "its own file is deleted"


def test_delete_files_keeps_an_older_file_of_the_same_size_put_in_the_downloads_place(daemon, faultserver, key):
    # A restored backup (`mv`, `cp -p`, `rsync -t`: an older mtime) of the same size as the
    # download was deleted: size and "not written after completion" were all that was compared.
    dest = daemon.work / "backup.bin"
    id = daemon.download(faultserver.url(size=4096, seed="b", key=key), "-o", dest, "--wait")
    backup = daemon.work / "old-backup.bin"
    backup.write_bytes(os.urandom(4096))
    os.utime(backup, (1_600_000_000, 1_600_000_000))
    backup.replace(dest)
    daemon.cli("remove", id, "--delete-files", check=0)
    assert dest.exists() and dest.stat().st_mtime == 1_600_000_000, "the restored file is kept"
    assert "not this download's file any more" in daemon.log_path.read_text()
