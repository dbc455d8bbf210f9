"""`watch` with no ids (issue 10): on a terminal, the whole queue redrawn in place with a totals line;
Ctrl-C leaves the jobs running; plain lines when not a terminal."""

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time

from conftest import spawn, stop_process


def read_for(fd, seconds):
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def test_that_watch_on_a_terminal_shows_every_unfinished_job_and_a_totals_line_and_ctrl_c_leaves_them_running(
        daemon, faultserver, key):
    ids = [daemon.download(faultserver.url(f"/file{i}.bin", key=key, size=2_000_000, slow=100_000), "-o",
                           str(daemon.work / f"file{i}.bin")) for i in range(3)]
    for id in ids:
        daemon.wait_state(id, "running")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 12, 100, 0, 0))
    proc = spawn([daemon.cli_exe, "watch", "--home", str(daemon.home), "--no-autostart"], "aftransfer watch",
                 stdin=slave, stdout=slave, stderr=slave, env={**daemon.env, "TERM": "xterm"}, start_new_session=True)
    os.close(slave)
    try:
        screen = read_for(master, 2.5)
        for id, i in zip(ids, range(3)):
            assert f"#{id} " in screen and f"file{i}.bin" in screen, screen
        assert "running" in screen and "[" in screen and "ETA" in screen and "/s" in screen, screen
        assert "Total: 3 jobs (3 running)" in screen, screen
        assert "\x1b[" in screen, "redrawn in place with cursor moves"
        plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", screen)
        assert all(len(line) < 100 for line in plain.replace("\r", "\n").split("\n")), plain
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=10) == 130
        assert read_for(master, 0.3).endswith("\n"), "the cursor is left below the view"
    finally:
        stop_process(proc)
        os.close(master)
    for id in ids:
        assert daemon.job(id)["state"] == "running"


def on_a_terminal(daemon, args, what, columns=80):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 12, columns, 0, 0))
    proc = spawn([daemon.cli_exe, *args, "--home", str(daemon.home), "--no-autostart"], what, stdin=slave,
                 stdout=slave, stderr=slave, env={**daemon.env, "TERM": "xterm"}, start_new_session=True)
    os.close(slave)
    return proc, master


def test_that_a_wide_name_never_wraps_a_line_and_ctrl_c_ends_a_bar_with_a_newline(daemon, faultserver, key):
    # A CJK name takes two columns a character: counted as one, the line wrapped at 80 columns
    # and every redraw left a stale copy behind.
    name = "日本語のファイル名テスト日本語のファイル名テスト日本語.bin"
    wide = daemon.download(faultserver.url("/w.bin", key=key, size=4_000_000, slow=100_000), "-o",
                           str(daemon.work / name))
    daemon.wait_state(wide, "running")
    for args in (("watch",), ("watch", str(wide))):
        proc, master = on_a_terminal(daemon, args, "aftransfer watch")
        try:
            plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", read_for(master, 2.0))
            lines = [line for line in plain.replace("\r", "\n").split("\n") if line]
            widths = [sum(2 if "\u2e80" <= ch <= "\uffef" else 1 for ch in line) for line in lines]
            assert lines and max(widths) < 80, plain
            os.kill(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=10) == 130
        finally:
            stop_process(proc)
            os.close(master)
    # Ctrl-C on `download --wait` (the bar on stderr) ends the bar's line too.
    proc, master = on_a_terminal(
        daemon, ("download", faultserver.url("/b.bin", key=key, size=4_000_000, slow=100_000), "-o",
                 str(daemon.work / "b.bin"), "--wait"), "aftransfer download --wait")
    try:
        assert "[" in read_for(master, 1.5)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=10) == 130
        assert read_for(master, 0.3).endswith("\n"), "the cursor is left below the bar"
    finally:
        stop_process(proc)
        os.close(master)
    assert daemon.job(wide)["state"] == "running"


def test_that_watch_with_no_ids_prints_plain_lines_when_not_a_terminal(daemon, faultserver, key):
    id = daemon.download(faultserver.url(key=key, size=200_000, slow=200_000), "-o", str(daemon.work / "p.bin"))
    r = subprocess.run([daemon.cli_exe, "watch", "--home", str(daemon.home), "--no-autostart"], capture_output=True,
                       text=True, timeout=30, env=daemon.env)
    assert r.returncode == 0, r
    assert "\x1b[" not in r.stdout and "\r" not in r.stdout
    assert f"{id} completed" in r.stdout, r.stdout


def test_that_watch_with_no_ids_follows_jobs_queued_after_it_started(daemon, faultserver, key):
    first = daemon.download(faultserver.url(key=key + "a", size=200_000, slow=200_000), "-o", str(daemon.work / "a.bin"))
    watch = spawn([daemon.cli_exe, "watch", "--home", str(daemon.home), "--no-autostart"], "watch",
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=daemon.env)
    try:
        time.sleep(0.4)
        second = daemon.download(faultserver.url(key=key + "b", size=400_000, slow=200_000),
                                 "-o", str(daemon.work / "b.bin"))
        out, _ = watch.communicate(timeout=30)
    finally:
        stop_process(watch)
    text = out.decode(errors="replace")
    assert watch.returncode == 0, text
    assert f"{first} completed" in text, text
    assert f"{second} completed" in text, text
    assert daemon.job(second)["state"] == "completed"
