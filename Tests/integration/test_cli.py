"""The CLI (SPEC "The CLI"): exit statuses, control commands, autostart, output for people."""

import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import (assert_job_schema, proc_alive, processes_mentioning, sha256_file, spawn, stop_process,
                      wait_until)


def slow_url(faultserver, key, size=2_000_000, bps=100_000, **kw):
    return faultserver.url(size=size, key=key, slow=bps, **kw)


# MARK: - The binary


def test_the_cli_loads_no_transfer_library(bin_dir):
    """The CLI links TransferBase only: it does not load libcurl, OpenSSL, SQLite or libuv, which
    cost ~6 ms at the start of every command (README "Layout")."""
    needed = subprocess.run(["readelf", "-d", str(bin_dir / "aftransfer")], capture_output=True, text=True,
                            check=True).stdout
    libraries = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", needed)
    assert libraries and any(l.startswith("libc.so") for l in libraries), needed
    for name in ("libcurl", "libssl", "libcrypto", "libsqlite3", "libuv"):
        assert not any(l.startswith(name) for l in libraries), (name, libraries)
    # The daemon does load them: the check above reads what it should.
    daemon = subprocess.run(["readelf", "-d", str(bin_dir / "aftransferd")], capture_output=True, text=True,
                            check=True).stdout
    assert "libcurl" in daemon and "libsqlite3" in daemon, daemon


# MARK: - No daemon


def test_daemon_status_without_a_daemon_says_so_and_exits_3(daemon_factory):
    d = daemon_factory(start=False)
    r = d.cli("daemon", "status")
    assert r.rc == 3, r
    assert (r.out + r.err).strip(), "daemon status must say that no daemon runs"
    assert not d.socket.exists()


@pytest.mark.parametrize("args", [("list",), ("status", "1"), ("download", "http://127.0.0.1:9/x", "-o", "/tmp/x"),
                                  ("pause", "1"), ("wait", "1")])
def test_commands_exit_3_when_no_daemon_answers_and_autostart_is_off(daemon_factory, args):
    d = daemon_factory(start=False)
    r = d.cli(*args)
    assert r.rc == 3, r
    assert r.err.strip()
    assert not d.home.exists() or not d.socket.exists(), "--no-autostart must not start a daemon"


def test_a_bare_aftransfer_is_bad_usage_and_help_is_not(daemon_factory):
    # No command at all is bad usage (exit 2, as curl's and git's): the overview goes to stderr,
    # nothing to stdout (a script's `id=$(aftransfer)` must not read help as an id). `--help` asks.
    d = daemon_factory(start=False)
    bare = subprocess.run([d.cli_exe], capture_output=True, text=True, timeout=30, env=d.env)
    assert bare.returncode == 2, bare
    assert bare.stdout == "", bare.stdout
    assert "download" in bare.stderr and "no command given" in bare.stderr, bare.stderr
    asked = subprocess.run([d.cli_exe, "--help"], capture_output=True, text=True, timeout=30, env=d.env)
    assert asked.returncode == 0 and "download" in asked.stdout, asked
    assert not d.home.exists() or not d.socket.exists(), "no command must not start a daemon"


@pytest.mark.parametrize("flag", ["--home", "--socket"])
def test_an_empty_home_or_socket_is_refused_not_read_as_the_default(daemon_factory, flag):
    # `--home "$UNSET"` must not reach (or start) the daemon of the default home.
    d = daemon_factory(start=False)
    default_home = d.work / "default-home"
    r = d.cli("list", flag, "", home=False, env={"AFTRANSFER_HOME": str(default_home)})
    assert r.rc == 2 and f"{flag} cannot be empty" in r.err, r
    assert not default_home.exists(), "nothing may be started in the default home"


def test_an_empty_download_directory_is_refused(daemon, faultserver, key):
    r = daemon.cli("download", faultserver.url(size=10, key=key), "-d", "")
    assert r.rc == 2 and "-d cannot be empty" in r.err, r
    assert daemon.cli("list", "--json", check=0).out.strip() == "[]"


def test_a_command_starts_the_daemon_when_none_answers(daemon_factory):
    d = daemon_factory(start=False)
    r = d.cli("list", "--json", autostart=True, timeout=20)
    assert r.rc == 0, r
    assert json.loads(r.out) == []
    st = d.cli_json("daemon", "status", "--json")
    pid = st["pid"]
    assert proc_alive(pid)
    assert st["home"] == str(d.home)
    # Stop it by its PID (it is not our child: it was started detached).
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not proc_alive(pid), 5, "the autostarted daemon to exit")


def test_a_home_whose_log_cannot_be_opened_is_named_as_such(daemon_factory):
    d = daemon_factory(start=False)
    (d.home / "aftransferd.log").mkdir(parents=True)
    r = d.cli("list", autostart=True, timeout=20)
    assert r.rc == 3 and f"cannot open the daemon's log {d.home}/aftransferd.log: Is a directory" in r.err, r
    assert not d.socket.exists()


def test_an_autostarted_daemon_that_exits_at_once_is_reported_at_once(daemon_factory):
    # A job database that is not one: the daemon refuses it and exits 1; with no other daemon
    # holding the home's lock, none is coming, and the CLI says so without its 5 s wait.
    d = daemon_factory(start=False)
    d.home.mkdir(parents=True, exist_ok=True)
    d.database.write_bytes(b"not a database, not to be touched\n")
    started = time.monotonic()
    r = d.cli("list", autostart=True, timeout=20)
    assert r.rc == 3 and "aftransferd exited (status 1)" in r.err, r
    assert time.monotonic() - started < 3, "the CLI waited for a daemon that had already exited"
    assert d.database.read_bytes() == b"not a database, not to be touched\n"


def test_daemon_start_and_daemon_stop(daemon_factory):
    d = daemon_factory(start=False)
    r = d.cli("daemon", "start", timeout=20)
    assert r.rc == 0, r
    pid = d.cli_json("daemon", "status", "--json")["pid"]
    assert proc_alive(pid)
    r = d.cli("daemon", "stop", timeout=20)
    assert r.rc == 0, r
    wait_until(lambda: not proc_alive(pid), 5, "the daemon to exit after `daemon stop`")
    assert d.cli("daemon", "status").rc == 3


def test_daemon_stop_does_not_wait_for_the_daemon_to_be_reaped(daemon_factory):
    # A daemon whose parent has not reaped it yet is a zombie that still answers kill(pid, 0):
    # `daemon stop` must go by the home's lock (released at exit), not by the pid.
    d = daemon_factory(start=False)
    d.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(d.log_path, "ab") as log:
        proc = spawn(d.command(), f"unreaped aftransferd {d.home}", stdin=subprocess.DEVNULL, stdout=log,
                     stderr=log, env=d.env, start_new_session=True)
    try:
        wait_until(lambda: d.cli("daemon", "status").rc == 0, 15, "the daemon to answer")
        t0 = time.monotonic()
        r = d.cli("daemon", "stop", timeout=20)
        elapsed = time.monotonic() - t0
        assert r.rc == 0, r
        assert elapsed < 3, f"`daemon stop` took {elapsed:.1f} s for a daemon that exited but was not reaped"
        def state() -> str:
            with open(f"/proc/{proc.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]

        # Its lock is released while the process is still exiting (state D for a moment): then it
        # must become an unreaped zombie, which `daemon stop` did not wait for.
        wait_until(lambda: state() == "Z", 5, "the daemon to become an unreaped zombie")
    finally:
        # Reap it by its PID (SIGTERM first if it is somehow still running).
        assert stop_process(proc) == 0


def test_daemon_status_json_reports_the_daemon(daemon):
    st = daemon.cli_json("daemon", "status", "--json")
    assert st["pid"] == daemon.pid and st["network"] in ("reachable", "unreachable")
    assert st["maxActive"] == 4
    r = daemon.cli("daemon", "status", check=0)
    assert str(daemon.pid) in r.out


# MARK: - wait, status, curl


def test_wait_exits_0_for_completed_1_for_failed_or_cancelled_and_124_on_timeout(daemon, faultserver, key):
    ok = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "ok")
    bad = daemon.download(faultserver.url(key=key + "b", status=404), "-o", daemon.work / "bad")
    slow = daemon.download(slow_url(faultserver, key + "s"), "-o", daemon.work / "slow")
    assert daemon.cli("wait", ok, timeout=30).rc == 0
    assert daemon.cli("wait", bad, timeout=30).rc == 1
    t0 = time.monotonic()
    r = daemon.cli("wait", slow, slow, "--timeout", "1", timeout=30)
    assert r.rc == 124, r
    assert time.monotonic() - t0 < 5
    assert r.err.count(f"{slow} (running)") == 1, f"a repeated id is one job: {r.err!r}"
    daemon.cli("cancel", slow, check=0)
    r = daemon.cli("wait", slow, timeout=30)
    assert r.rc == 1
    assert r.err.strip() == f"aftransfer: job {slow} cancelled: cancelled by the user", r
    assert daemon.cli("wait", ok, bad, timeout=30).rc == 1, "any failed job makes wait exit 1"


@pytest.mark.parametrize("command", ["status", "wait", "curl"])
def test_status_wait_and_curl_of_an_unknown_id_exit_2(daemon, command):
    r = daemon.cli(command, "31337")
    assert r.rc == 2, r
    assert "31337" in r.err


def test_status_shows_the_job_to_people(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "s")
    daemon.wait_state(id, "completed")
    r = daemon.cli("status", id, check=0)
    assert "completed" in r.out and str(daemon.work / "s") in r.out


def test_list_shows_a_table_and_list_json_an_array(daemon, faultserver, key):
    ids = [daemon.download(faultserver.url(size=10, key=f"{key}{i}"), "-o", daemon.work / f"l{i}") for i in range(3)]
    for id in ids:
        daemon.wait_state(id, "completed")
    jobs = daemon.jobs()
    assert [j["id"] for j in jobs] == ids
    for j in jobs:
        assert_job_schema(j)
    table = daemon.cli("list", check=0).out
    for id in ids:
        assert re.search(rf"\b{id}\b", table)
    assert daemon.jobs("--state", "failed") == []


def test_curl_prints_an_equivalent_curl_command(daemon, faultserver, key):
    url = faultserver.url(size=10, key=key)
    id = daemon.download(url, "-o", daemon.work / "c.bin", "-H", "X-Trace: 42")
    out = daemon.cli("curl", id, check=0).out
    assert out.lstrip().startswith("curl")
    assert url in out and "X-Trace: 42" in out and str(daemon.work / "c.bin") in out


@pytest.mark.parametrize("rate,bytes_per_s", [("1.5M", 1572864), ("500KB", 512000), ("2MiB", 2097152), ("800", 800)])
def test_the_printed_curl_command_takes_the_rate_in_a_form_curl_accepts(daemon, faultserver, key, rate, bytes_per_s):
    # Found by an outside audit: RATE's spellings were copied as typed, and curl refuses `1.5M`,
    # `500KB` and `2MiB` ("unsupported rate unit").
    id = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "r.bin", "--limit-rate", rate,
                         "--wait")
    command = daemon.cli("curl", id, check=0).out.strip()
    assert f"--limit-rate {bytes_per_s} " in command, command
    command = command.replace(key, key + "-curl").replace(str(daemon.work / "r.bin"), str(daemon.work / "c.bin"))
    r = subprocess.run(["sh", "-c", command + " -s"], cwd=daemon.work, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (command, r.stderr)
    assert (daemon.work / "c.bin").read_bytes() == (daemon.work / "r.bin").read_bytes()


def test_the_printed_curl_command_of_a_download_with_create_dirs_creates_them(daemon, faultserver, key):
    # --create-dirs was printed only while the name was unknown (`-O -J`), not with `-o`.
    dest = daemon.work / "new" / "sub" / "f.bin"
    id = daemon.download(faultserver.url(size=1000, key=key), "-o", dest, "--create-dirs", "--wait")
    command = daemon.cli("curl", id, check=0).out.strip().replace(key, key + "-curl")
    shutil.rmtree(daemon.work / "new")
    r = subprocess.run(["sh", "-c", command + " -s"], cwd=daemon.work, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (command, r.stderr)
    assert dest.stat().st_size == 1000


def test_the_printed_curl_command_never_splices_onto_an_existing_file(daemon, faultserver, key):
    # Found by an outside audit: the command carried `-C -`, so curl resumed into the old file at
    # the destination (no validator) and appended the new file's tail to its bytes.
    dest = daemon.work / "spliced.bin"
    dest.write_bytes(b"old " * 100)
    id = daemon.download(faultserver.url(size=1000, key=key), "-o", dest, "--replace", "--wait")
    assert dest.read_bytes() == faultserver.data(1000)
    command = daemon.cli("curl", id, check=0).out.strip().replace(key, key + "-curl")
    assert " -C " not in command, command
    dest.write_bytes(b"old " * 100)
    r = subprocess.run(["sh", "-c", command + " -s"], cwd=daemon.work, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (command, r.stderr)
    assert dest.read_bytes() == faultserver.data(1000)


def _received(faultserver, key):
    upload = faultserver.log(key)[-1]["upload"]
    parts = [{k: p.get(k) for k in ("name", "filename", "contentType", "sha256")} for p in upload["parts"] or []]
    return upload["contentType"], upload["sha256"] if not parts else None, parts


@pytest.mark.parametrize("kind", ["file", "form", "comma", "slash", "glob"])
def test_the_printed_curl_command_sends_what_the_daemon_sent(daemon, faultserver, key, kind):
    # Run the command `aftransfer curl` prints, against a fresh key: the server must see the same
    # body (or the same parts), content type included. Text parts are --form-string: with -F,
    # curl would read `<file` and cut at `;`.
    (daemon.work / "lt.txt").write_text("secret content\n")
    photo = daemon.work / "photo.jpg"
    photo.write_bytes(os.urandom(3000))
    if kind == "file":
        args = [photo, faultserver.url("/upload", key=key), "--resumable", "off"]
    elif kind == "comma":
        # curl -F splits a file name at `,` (several files) unless it is quoted.
        odd = daemon.work / "x,y.txt"
        odd.write_text("data with a comma in its name\n")
        args = ["--form", f"doc=@{odd}", faultserver.url("/upload", key=key)]
    elif kind == "slash":
        # curl -T adds the file's name to a URL ending in `/`; the daemon sends to the URL given.
        args = [photo, faultserver.url("/up/dir/", key=key), "--resumable", "off"]
    elif kind == "glob":
        # curl globs `[]` and `{}` in a URL and a -T file name unless --globoff.
        globbed = daemon.work / "g{a,b}[1-2].bin"
        globbed.write_bytes(os.urandom(500))
        args = [globbed, faultserver.url("/up/{x,y}[1-2]", key=key), "--resumable", "off"]
    else:
        args = ["--form", "title=<lt.txt", "--form", "msg=a;b", "--form", f"pic=@{photo}",
                faultserver.url("/upload", key=key)]
    id = daemon.upload(*args, "--wait", cwd=daemon.work)
    command = daemon.cli("curl", id, check=0).out.strip().replace(key, key + "-curl")
    r = subprocess.run(["sh", "-c", command + " -s -o /dev/null"], cwd=daemon.work, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, (command, r.stderr)
    daemons = _received(faultserver, key)
    curls = _received(faultserver, key + "-curl")
    assert [e["path"] for e in faultserver.log(key + "-curl")] == [e["path"] for e in faultserver.log(key)], command
    if kind == "comma":
        assert daemons[2] == curls[2] and [p["filename"] for p in curls[2]] == ["x,y.txt"], (command, curls)
    elif kind == "form":
        # The multipart boundary differs; the parts must not.
        assert daemons[2] == curls[2], (command, daemons, curls)
        assert [p["name"] for p in curls[2]] == ["title", "msg", "pic"]
    else:
        assert daemons == curls, (command, daemons, curls)


def test_watch_draws_progress_until_the_jobs_end(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=200_000, key=key, slow=200_000), "-o", daemon.work / "w")
    r = daemon.cli("watch", id, timeout=30)
    assert r.rc == 0, r
    assert r.out.strip(), "watch draws on stdout"
    assert daemon.job(id)["state"] == "completed"


# MARK: - Control commands


def test_control_commands_refuse_where_they_do_not_apply_and_name_the_job_and_its_state(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "d")
    daemon.wait_state(id, "completed")
    for command in ("pause", "resume", "cancel", "retry"):
        r = daemon.cli(command, id)
        assert r.rc == 2, r
        assert str(id) in r.err and "completed" in r.err, f"{command}: the refusal must name the job and state: {r.err!r}"
        # Once: "cannot pause job 1: it is completed", not the job and state twice over.
        assert r.err.count(f"job {id}") == 1 and r.err.count("completed") == 1, r.err
        assert daemon.job(id)["state"] == "completed"
    r = daemon.cli("pause", "777777")
    assert r.rc == 2 and r.err.strip() == "aftransfer: cannot pause job 777777: no such job", r


def test_several_ids_act_on_each_one_they_can_and_exit_2_if_any_was_refused(daemon, faultserver, key):
    a = daemon.download(slow_url(faultserver, key + "a"), "-o", daemon.work / "a")
    b = daemon.download(slow_url(faultserver, key + "b"), "-o", daemon.work / "b")
    done = daemon.download(faultserver.url(size=10, key=key + "c"), "-o", daemon.work / "c")
    daemon.wait_state(done, "completed")
    daemon.wait_state(a, "running")
    daemon.wait_state(b, "running")
    r = daemon.cli("pause", a, done, b)
    assert r.rc == 2, r
    assert str(done) in r.err
    assert daemon.job(a)["state"] == "paused" and daemon.job(b)["state"] == "paused"
    r = daemon.cli("resume", a, b, check=0)
    daemon.cli("cancel", a, b, check=0)


def test_ids_by_the_hundred_are_each_acted_on_in_order(faultserver, key, daemon_factory):
    # Past the first 64, ids are kept from the argument parser (quadratic in their number); they
    # must still reach the daemon, in order, with option values among them left alone.
    d = daemon_factory(args=("--max-active", "1"))
    lst = d.work / "list.txt"
    lst.write_text("".join(f"{slow_url(faultserver, f'{key}-{i}')}\tf{i}\n" for i in range(150)))
    ids = d.cli("download", "-i", lst, "-d", d.work).out.split()
    assert len(ids) == 150
    r = d.cli("cancel", *ids[:100], "--home", d.home, *ids[100:], "999999", check=2)
    assert r.rc == 2 and "cannot cancel job 999999: no such job" in r.err, r
    assert r.out.split("\n")[:150] == [f"job {i}: cancelled" for i in ids], r.out[:300]
    assert all(j["state"] == "cancelled" for j in d.jobs())


def test_an_id_given_twice_is_acted_on_once_and_not_refused(daemon, faultserver, key):
    a = daemon.download(slow_url(faultserver, key), "-o", daemon.work / "a")
    daemon.wait_state(a, "running")
    r = daemon.cli("pause", a, a, check=0)
    assert r.rc == 0 and r.out.split("\n").count(f"job {a}: paused") == 1 and r.err == "", r
    r = daemon.cli("remove", a, a, check=0)
    assert r.rc == 0 and r.out.strip() == f"job {a}: removed" and r.err == "", r


def test_pause_works_on_a_queued_job(faultserver, key, daemon_factory):
    d = daemon_factory(args=("--max-active", "1"))
    blocker = d.download(slow_url(faultserver, key + "x"), "-o", d.work / "x")
    queued = d.download(faultserver.url(size=10, key=key), "-o", d.work / "q")
    d.wait_state(blocker, "running")
    assert d.job(queued)["state"] == "queued"
    d.cli("pause", queued, check=0)
    assert d.job(queued)["state"] == "paused"
    d.cli("cancel", blocker, check=0)
    time.sleep(1.0)
    assert d.job(queued)["state"] == "paused" and faultserver.log(key) == []
    d.cli("resume", queued, check=0)
    d.wait_state(queued, "completed")


def test_cancel_removes_the_partial_data(daemon, faultserver, key):
    dest = daemon.work / "cx.bin"
    id = daemon.download(slow_url(faultserver, key), "-o", dest)
    daemon.wait_bytes(id, 50_000)
    daemon.cli("cancel", id, check=0)
    job = daemon.wait_state(id, "cancelled")
    assert not dest.exists() and not (daemon.work / "cx.bin.aftpart").exists()
    assert job["error"] is None or job["error"]["code"] == "cancelled"
    assert daemon.cli("cancel", id).rc == 2, "a cancelled job has ended: cancel refuses"


def test_retry_restarts_a_cancelled_job(daemon, faultserver, key):
    dest = daemon.work / "rc.bin"
    id = daemon.download(faultserver.url(size=300_000, seed=3, key=key, slow=150_000), "-o", dest)
    daemon.wait_state(id, "running")
    daemon.cli("cancel", id, check=0)
    daemon.wait_state(id, "cancelled")
    daemon.cli("retry", id, check=0)
    daemon.wait_state(id, "completed", timeout=30)
    assert sha256_file(dest) == faultserver.sha256(300_000, 3)


def test_remove_forgets_a_job_and_delete_files_deletes_a_completed_download(daemon, faultserver, key):
    keep = daemon.download(faultserver.url(size=10, key=key + "k"), "-o", daemon.work / "keep")
    gone = daemon.download(faultserver.url(size=10, key=key + "g"), "-o", daemon.work / "gone")
    daemon.wait_state(keep, "completed")
    daemon.wait_state(gone, "completed")
    daemon.cli("remove", keep, check=0)
    daemon.cli("remove", gone, "--delete-files", check=0)
    assert (daemon.work / "keep").exists() and not (daemon.work / "gone").exists()
    assert daemon.jobs() == []
    assert daemon.cli("status", keep).rc == 2


def test_remove_of_a_running_job_cancels_it_first(daemon, faultserver, key):
    dest = daemon.work / "rr.bin"
    id = daemon.download(slow_url(faultserver, key), "-o", dest)
    daemon.wait_bytes(id, 10_000)
    daemon.cli("remove", id, check=0)
    assert daemon.jobs() == []
    time.sleep(0.5)
    assert not dest.exists() and not (daemon.work / "rr.bin.aftpart").exists()
    n = len(faultserver.log(key))
    time.sleep(1.0)
    assert len(faultserver.log(key)) == n, "a removed job must not transfer again"


# MARK: - Where the home and socket come from


def test_the_home_environment_variable_works_like_the_option(daemon, faultserver, key):
    id = daemon.download(faultserver.url(size=10, key=key), "-o", daemon.work / "e")
    r = daemon.cli("list", "--json", home=False, env={"AFTRANSFER_HOME": str(daemon.home)}, check=0)
    assert [j["id"] for j in json.loads(r.out)] == [id]


def test_the_socket_option_and_variable_override_the_socket_path(daemon_factory, faultserver, key):
    d = daemon_factory(start=False)
    sock = d.root / "custom.sock"
    d.args += ["--socket", str(sock)]
    d.socket = sock
    d.start()
    assert sock.exists()
    assert json.loads(d.cli("list", "--json", "--socket", sock, check=0).out) == []
    r = d.cli("list", "--json", env={"AFTRANSFER_SOCKET": str(sock)}, check=0)
    assert json.loads(r.out) == []


def test_daemon_status_and_daemon_stop_never_start_a_daemon(daemon_factory):
    d = daemon_factory(start=False)
    assert d.cli("daemon", "status", autostart=True).rc == 3
    d.cli("daemon", "stop", autostart=True)
    time.sleep(0.5)
    assert not d.socket.exists(), "daemon status/stop must not autostart a daemon"
    assert processes_mentioning(str(d.home)) == []


@pytest.mark.parametrize("term", ["xterm", "dumb"])
def test_download_wait_draws_a_progress_bar_on_a_terminal_unless_it_is_dumb(daemon, faultserver, key, term):
    dest = daemon.work / "tty.bin"
    master, slave = pty.openpty()
    p = spawn([daemon.cli_exe, "download", faultserver.url(size=900_000, key=key, slow=300_000), "-o", str(dest),
               "--wait", "--home", str(daemon.home), "--no-autostart"], "aftransfer --wait on a tty",
              stdin=slave, stdout=subprocess.PIPE, stderr=slave, cwd=daemon.work,
              env={**daemon.env, "TERM": term, "COLUMNS": "100"})
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    assert p.wait(timeout=10) == 0
    assert re.fullmatch(r"\d+\n", out), f"stdout holds the id only: {out!r}"
    text = screen.decode(errors="replace")
    if term == "dumb":
        # A dumb terminal gets what a pipe gets: whole lines, no control sequences.
        assert "\x1b" not in text and "\r" not in text.replace("\r\n", "\n"), f"{text[-500:]!r}"
        assert "completed" in text, f"{text[-500:]!r}"
        return
    assert "%" in text, f"the bar shows a percentage: {text[-500:]!r}"
    assert "\r" in text or "\x1b[" in text, "a terminal bar redraws in place"
    assert "/s" in text, f"the bar shows a rate: {text[-500:]!r}"


def test_a_relative_directory_and_list_file_are_resolved_against_the_working_directory(daemon, faultserver, key):
    cwd = daemon.work / "cwd"
    (cwd / "in").mkdir(parents=True)
    (cwd / "urls.txt").write_text(faultserver.url("/r/listed.bin", size=10, key=key) + "\n")
    r = daemon.cli("download", "-i", "urls.txt", "-d", "in", cwd=cwd, check=0)
    id = int(r.out.split()[0])
    job = daemon.wait_state(id, "completed")
    assert job["destination"] == str(cwd / "in" / "listed.bin")


# MARK: - Large lists and long listings (SPEC "Scale": transfer.addMany, list --limit/--state)


def big_list(faultserver, key, count, pad=300):
    """``count`` URL lines (each long enough that the list needs several addMany parts), after a
    comment and a blank line, so that line numbers and request indexes differ by 2."""
    lines = ["# a big list", ""]
    lines += [faultserver.url(f"/big/{i}.bin", size=1000, key=key, slow=100, pad="p" * pad) for i in range(count)]
    return lines


@pytest.mark.daemon_args("--max-active", "1")
@pytest.mark.timeout(180)
def test_a_list_of_5000_lines_is_queued_whole_in_batch_parts(daemon, faultserver, key):
    lines = big_list(faultserver, key, 5000)
    assert sum(len(l) for l in lines) > 1024 * 1024, "the list must not fit in one 1 MiB message"
    (daemon.work / "urls.txt").write_text("\n".join(lines) + "\n")
    r = daemon.cli("download", "-i", "urls.txt", "-d", daemon.work, timeout=120, check=0)
    ids = r.out.split()
    assert len(ids) == 5000 and all(re.fullmatch(r"\d+", i) for i in ids), f"one id a line: {r.out[:200]!r}"
    assert len(set(ids)) == 5000
    jobs = daemon.jobs()
    assert [str(j["id"]) for j in jobs] == ids, "the jobs, oldest first, in the list's order"
    assert [j["url"] for j in jobs] == lines[2:]


@pytest.mark.daemon_args("--max-active", "1")
@pytest.mark.timeout(180)
def test_a_line_the_daemon_refuses_in_a_big_list_is_named_and_nothing_is_queued(daemon, faultserver, key):
    # The CLI cannot know that another job already targets taken.bin: only the daemon refuses it,
    # with the index of the request, which the CLI turns back into the list's line.
    taken = daemon.work / "taken.bin"
    first = daemon.download(slow_url(faultserver, key), "-o", taken)
    lines = big_list(faultserver, key, 5000)
    lines[3999] = faultserver.url("/big/taken.bin", key=key) + "\ttaken.bin"  # line 4000
    (daemon.work / "urls.txt").write_text("\n".join(lines) + "\n")
    r = daemon.cli("download", "-i", "urls.txt", "-d", daemon.work, timeout=120)
    assert r.rc == 2, r
    assert r.out == ""
    assert "urls.txt line 4000:" in r.err, f"the refusal must name line 4000: {r.err!r}"
    assert "request 3999" not in r.err, f"the line, not the daemon's index, names it: {r.err!r}"
    assert [j["id"] for j in daemon.jobs()] == [first], "nothing of the list may stay queued"


def test_a_line_refused_by_the_cli_itself_is_named_before_any_daemon_is_contacted(daemon_factory, faultserver, key):
    d = daemon_factory(start=False)
    lines = big_list(faultserver, key, 4000, pad=0)
    lines[3999] = "ftp://127.0.0.1/nope"  # line 4000
    (d.work / "urls.txt").write_text("\n".join(lines) + "\n")
    r = d.cli("download", "-i", "urls.txt", "-d", d.work, autostart=True)
    assert r.rc == 2, r
    assert "urls.txt line 4000:" in r.err, r.err
    assert not d.socket.exists(), "refused input must not start a daemon"


@pytest.mark.daemon_args("--max-active", "1")
def test_list_limit_and_state_select_the_first_jobs_in_the_lists_order(daemon, faultserver, key):
    ids = [daemon.download(slow_url(faultserver, key), "-o", daemon.work / f"f{i}.bin") for i in range(5)]
    daemon.wait_state(ids[0], "running")
    daemon.cli("pause", ids[3], check=0)
    assert [j["id"] for j in daemon.jobs("--limit", "2")] == ids[:2]
    assert [j["id"] for j in daemon.jobs("--state", "queued")] == [ids[1], ids[2], ids[4]]
    assert [j["id"] for j in daemon.jobs("--state", "queued", "--limit", "2")] == [ids[1], ids[2]]
    table = daemon.cli("list", "--limit", "3", check=0).out.splitlines()
    assert [line.split()[0] for line in table[1:]] == [str(i) for i in ids[:3]]
    assert daemon.cli("list", "--limit", "0").rc == 2


def test_list_json_is_one_array_ending_with_a_newline(daemon, faultserver, key):
    assert daemon.cli("list", "--json", check=0).out.strip() == "[]"
    id = daemon.download(slow_url(faultserver, key), "-o", daemon.work / "one.bin")
    out = daemon.cli("list", "--json", check=0).out
    assert out.endswith("]\n")
    jobs = json.loads(out)
    assert [j["id"] for j in jobs] == [id]
    assert_job_schema(jobs[0])


def test_output_that_cannot_be_written_is_exit_23_never_a_silent_success(daemon, faultserver, key):
    # curl's write error is 23: a script must not take a lost id or a lost list for a success.
    id = daemon.download(faultserver.url(key=key, size=100, slow=10), "-o", str(daemon.work / "w.bin"))
    with open("/dev/full", "w") as full:
        r = subprocess.run([daemon.cli_exe, "list", "--json", "--home", str(daemon.home), "--no-autostart"],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=30, env=daemon.env)
    assert r.returncode == 23 and "cannot write the output" in r.stderr, r
    # stdout closed: the job is queued, its id could not be printed (the socket must not take fd 1).
    before = len(daemon.jobs())
    r = subprocess.run([daemon.cli_exe, "download", faultserver.url(key=key + "c", size=10), "-o",
                        str(daemon.work / "c.bin"), "--home", str(daemon.home), "--no-autostart"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=30, env=daemon.env,
                       pass_fds=(), preexec_fn=lambda: os.close(1))
    assert r.returncode == 23 and "cannot write the output" in r.stderr, r
    assert len(daemon.jobs()) == before + 1
    # A command that prints nothing there is not failed by a closed stdout.
    done = daemon.download(faultserver.url(key=key + "d", size=10), "-o", str(daemon.work / "d.bin"))
    daemon.wait_state(done, "completed")
    r = subprocess.run([daemon.cli_exe, "wait", str(done), "--home", str(daemon.home), "--no-autostart"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=30, env=daemon.env,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 0, r
    # A reader that goes away ends it by SIGPIPE, as any command of a pipeline.
    p = subprocess.Popen([daemon.cli_exe, "list", "--json", "--home", str(daemon.home), "--no-autostart"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=daemon.env)
    p.stdout.close()
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGPIPE, (p.returncode, p.stderr.read())
    daemon.cli("cancel", str(id))
