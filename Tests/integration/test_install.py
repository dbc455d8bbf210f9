"""`scripts/install` and systemd socket activation (issue 10, SPEC "Living with it").

The install test runs `scripts/install --prefix TMP` from a clean clone of this branch, reusing the
build under test (AFT_INSTALL_BIN_DIR) instead of a release build per run; the release build itself
is what `scripts/install` without that variable does."""

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, make_temp_root, sha256_file, spawn, stop_process, wait_until


def manual_tool(bin_dir: Path) -> Path:
    """swift-argument-parser's generate-manual-tool beside the build under test (built once)."""
    tool = Path(bin_dir) / "generate-manual-tool"
    if not tool.exists():
        scratch = Path(bin_dir).resolve().parents[1]
        subprocess.run(["swift", "package", "--scratch-path", str(scratch), "plugin", "generate-manual", "--help"],
                       cwd=REPO, check=True, capture_output=True, timeout=600)
    assert tool.exists(), tool
    return tool


@pytest.mark.timeout(600)
def test_that_install_from_a_clean_clone_puts_every_file_in_place_and_uninstall_removes_exactly_them(bin_dir):
    root = make_temp_root("aft-install-")
    try:
        clone = root / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
        # Spaces in the prefix and the home: the units quote them for systemd.
        prefix, home, config = root / "pre fix", root / "my home", root / "config"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(config), "AFT_INSTALL_BIN_DIR": str(bin_dir),
               "AFT_GENERATE_MANUAL_TOOL": str(manual_tool(bin_dir))}
        for k in ("XDG_STATE_HOME", "AFTRANSFER_HOME", "AFTRANSFER_SOCKET"):
            env.pop(k, None)
        r = subprocess.run([str(clone / "scripts" / "install"), "--prefix", str(prefix)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr + r.stdout
        files = [
            prefix / "bin" / "aftransfer", prefix / "bin" / "aftransferd",
            prefix / "share" / "man" / "man1" / "aftransfer.1", prefix / "share" / "man" / "man1" / "aftransferd.1",
            prefix / "share" / "bash-completion" / "completions" / "aftransfer",
            prefix / "share" / "zsh" / "site-functions" / "_aftransfer",
            prefix / "share" / "fish" / "vendor_completions.d" / "aftransfer.fish",
            config / "systemd" / "user" / "aftransferd.service", config / "systemd" / "user" / "aftransferd.socket",
        ]
        for f in files:
            assert f.is_file() and f.stat().st_size > 0, f
            assert str(f) in r.stdout, f"install did not say it installed {f}: {r.stdout}"
        assert "systemctl --user enable --now aftransferd.socket" in r.stdout
        assert sha256_file(prefix / "bin" / "aftransferd") == sha256_file(Path(bin_dir) / "aftransferd")
        assert os.access(prefix / "bin" / "aftransfer", os.X_OK)

        # Both binaries answer --version.
        for b in ("aftransfer", "aftransferd"):
            v = subprocess.run([str(prefix / "bin" / b), "--version"], capture_output=True, text=True, timeout=30)
            assert v.returncode == 0 and v.stdout.strip() == "0.1.0", v

        # The man pages render, and come from the argument parser (every command and option).
        for page, words in (("aftransfer.1", ("set-url", "--on-end", "download", "watch")),
                            ("aftransferd.1", ("--on-end", "--max-active", "LISTEN_FDS"))):
            m = subprocess.run(["man", "-l", str(prefix / "share" / "man" / "man1" / page)], capture_output=True,
                               text=True, timeout=60, env={**env, "MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat"})
            assert m.returncode == 0, m.stderr
            assert "NAME" in m.stdout and "SYNOPSIS" in m.stdout, m.stdout[:500]
            for w in words:
                assert w in m.stdout, (page, w)
            if page == "aftransferd.1":
                # The daemon has no subcommands: the page must not offer any (nor `help`).
                assert "subcommand" not in m.stdout, m.stdout

        # Bash completion works when sourced.
        completion = prefix / "share" / "bash-completion" / "completions" / "aftransfer"
        c = subprocess.run(["bash", "-c", f"source '{completion}' && complete -p aftransfer"], capture_output=True,
                           text=True, timeout=30)
        assert c.returncode == 0 and "-F _aftransfer aftransfer" in c.stdout, c
        script = (f"source '{completion}'; COMP_WORDS=(aftransfer set-u); COMP_CWORD=1; COMP_LINE='aftransfer set-u'; "
                  "COMP_POINT=${#COMP_LINE}; _aftransfer aftransfer set-u aftransfer; printf '%s\\n' \"${COMPREPLY[@]}\"")
        c = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
        assert c.stdout.split() == ["set-url"], c
        line = "aftransfer upload --resumable "
        script = (f"source '{completion}'; COMP_WORDS=(aftransfer upload --resumable ''); COMP_CWORD=3; "
                  f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; _aftransfer aftransfer '' --resumable; "
                  "printf '%s\\n' \"${COMPREPLY[@]}\"")
        c = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
        assert sorted(c.stdout.split()) == ["auto", "off", "tus"], c
        assert "aftransfer" in (prefix / "share" / "zsh" / "site-functions" / "_aftransfer").read_text()
        assert "complete -c 'aftransfer'" in (prefix / "share" / "fish" / "vendor_completions.d" /
                                            "aftransfer.fish").read_text()

        # The units name the installed daemon and the socket the CLI uses by default.
        service = (config / "systemd" / "user" / "aftransferd.service").read_text()
        sock = (config / "systemd" / "user" / "aftransferd.socket").read_text()
        default_socket = home / ".local" / "state" / "aftransfer" / "aftransferd.sock"
        assert f'ExecStart="{prefix}/bin/aftransferd" --home "' in service and "Type=notify" in service
        assert f"ListenStream={default_socket}" in sock
        if shutil.which("systemd-analyze"):
            run = root / "run"
            run.mkdir()
            v = subprocess.run(["systemd-analyze", "--user", "--man=no", "verify",
                                str(config / "systemd" / "user" / "aftransferd.socket"),
                                str(config / "systemd" / "user" / "aftransferd.service")],
                               env={**env, "XDG_RUNTIME_DIR": str(run)}, capture_output=True, text=True, timeout=60)
            assert v.returncode == 0, v.stdout + v.stderr

        # --uninstall removes exactly what was installed.
        keep = prefix / "bin" / "someone-elses-tool"
        keep.write_text("#!/bin/sh\n")
        u = subprocess.run([str(clone / "scripts" / "install"), "--prefix", str(prefix), "--uninstall"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert u.returncode == 0, u.stderr
        for f in files:
            assert not f.exists(), f
        assert keep.exists()
        assert not (prefix / "share" / "aftransfer" / "installed-files").exists()
        # The directories it created go too, but for one that holds someone else's file.
        assert not (prefix / "share").exists(), sorted(str(p) for p in (prefix / "share").rglob("*"))
        assert not config.exists(), sorted(str(p) for p in config.rglob("*"))
        assert sorted(p.name for p in prefix.iterdir()) == ["bin"]
        assert sorted(p.name for p in (prefix / "bin").iterdir()) == ["someone-elses-tool"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(not shutil.which("systemd-socket-activate"), reason="needs Debian's systemd package")
@pytest.mark.timeout(300)
def test_that_a_relative_prefix_is_the_callers_and_a_prefix_systemd_cannot_name_is_refused(bin_dir):
    # A relative prefix went under the repository (the script changes directory first).
    root = make_temp_root("aft-install-rel-")
    try:
        (root / "cwd").mkdir()
        (root / "home").mkdir()
        env = {**os.environ, "HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "config"),
               "AFT_INSTALL_BIN_DIR": str(bin_dir), "AFT_GENERATE_MANUAL_TOOL": str(manual_tool(bin_dir))}
        script = str(REPO / "scripts" / "install")
        r = subprocess.run([script, "--prefix", "../rel"], cwd=root / "cwd", env=env, capture_output=True,
                           text=True, timeout=240)
        assert r.returncode == 0, r.stderr + r.stdout
        assert (root / "rel" / "bin" / "aftransferd").exists()
        assert not (REPO.parent / "rel").exists() and not (REPO / "rel").exists()
        u = subprocess.run([script, "--prefix", "../rel", "--uninstall"], cwd=root / "cwd", env=env,
                           capture_output=True, text=True, timeout=60)
        assert u.returncode == 0 and not (root / "rel").exists(), u.stderr + u.stdout
        q = subprocess.run([script, "--prefix", str(root / 'say "hi"')], env=env, capture_output=True, text=True,
                           timeout=60)
        assert q.returncode == 2 and "systemd" in q.stderr and not (root / 'say "hi"').exists(), q
        # A missing or empty prefix is bad usage (exit 2, the script's own message), like any other.
        for args in (["--prefix"], ["--prefix", ""]):
            m = subprocess.run([script, *args], env=env, capture_output=True, text=True, timeout=60)
            assert m.returncode == 2 and m.stderr.startswith("scripts/install: --prefix needs a directory"), m
        assert not (root / "home" / ".local").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_that_a_socket_activated_daemon_serves_the_inherited_socket_and_a_download_completes_through_it(
        daemon_factory, faultserver, key):
    d = daemon_factory(start=False)
    d.home.mkdir(parents=True, mode=0o700)
    notify_path = str(d.root / "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(15)
    log = open(d.log_path, "ab")
    # Another path than the home's default socket: the daemon binds nothing of its own.
    activated = d.root / "activated.sock"
    proc = spawn(["systemd-socket-activate", "-l", str(activated), "-E", f"NOTIFY_SOCKET={notify_path}",
                  d.daemon_exe, "--home", str(d.home)],
                 "systemd-socket-activate", stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=d.env,
                 start_new_session=True)
    log.close()
    try:
        wait_until(lambda: activated.exists(), 10, "systemd-socket-activate to listen")
        time.sleep(0.2)
        # Nothing runs before the first connection: the socket is systemd's.
        assert "aftransferd" not in d.log_text().split("Listening on", 1)[-1].split("\n", 1)[-1]
        sock = ("--socket", str(activated))
        st = d.cli_json("daemon", "status", "--json", *sock)  # --no-autostart: only the activated daemon answers
        assert st["pid"] == proc.pid and st["socket"] == str(activated) and st["home"] == str(d.home)
        assert notify.recv(4096).split(b"\n")[0] == b"READY=1"
        dest = d.work / "activated.bin"
        r = d.cli("download", faultserver.url(key=key, size=300_000), "-o", str(dest), "--wait", *sock)
        assert r.rc == 0, r
        assert sha256_file(dest) == faultserver.sha256(300_000)
        assert "socket activation: fd 3" in d.log_text()
        assert not d.socket.exists(), "the daemon bound a socket of its own"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert notify.recv(4096) == b"STOPPING=1"
        # The socket belongs to systemd: the daemon does not unlink it.
        assert activated.exists()
    finally:
        stop_process(proc)
        notify.close()


def test_that_both_binaries_answer_version(bin_dir):
    for b in ("aftransfer", "aftransferd"):
        v = subprocess.run([str(Path(bin_dir) / b), "--version"], capture_output=True, text=True, timeout=30)
        assert v.returncode == 0 and v.stdout.strip() == "0.1.0", v
