"""A damaged or newer database (SPEC "Disk full and other faults"): ``aftransferd`` exits 1 with a
message naming the file, and leaves the file exactly as it was (never rewritten, never deleted)."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess

import pytest

from conftest import clean_env


def make_database(daemon, faultserver, key, jobs: int = 40) -> None:
    """A real database with some jobs in it, then the daemon stopped cleanly (WAL checkpointed)."""
    for i in range(jobs):
        daemon.download(faultserver.url("/data", size=10, seed=f"db{i}", key=key), "-o", daemon.work / f"f{i}")
    assert len(daemon.jobs()) == jobs
    rc, _ = daemon.stop()
    assert rc == 0


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_daemon(daemon) -> subprocess.CompletedProcess:
    return subprocess.run(daemon.command(), env=daemon.env, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def assert_refused_and_untouched(daemon, before: str, words: tuple[str, ...]) -> None:
    r = run_daemon(daemon)
    assert r.returncode == 1, f"aftransferd must exit 1 on this database: {r}"
    assert str(daemon.database) in r.stderr, f"the message must name the file: {r.stderr!r}"
    for w in words:
        assert w in r.stderr, f"{w!r} not in {r.stderr!r}"
    assert daemon.database.exists(), "the database was deleted"
    assert digest(daemon.database) == before, "the database was rewritten"
    # Twice: the first refusal changed nothing the second would trip over.
    assert run_daemon(daemon).returncode == 1
    assert digest(daemon.database) == before


def corrupt(path, offset: int, length: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes((i * 131 + 7) % 256 for i in range(length)))


def test_a_database_with_a_damaged_header_is_refused_and_left_as_it_is(daemon, faultserver, key):
    make_database(daemon, faultserver, key)
    corrupt(daemon.database, 0, 100)
    assert_refused_and_untouched(daemon, digest(daemon.database), ("not an SQLite database",))


def test_a_database_with_damaged_pages_is_refused_and_left_as_it_is(daemon, faultserver, key):
    make_database(daemon, faultserver, key)
    size = daemon.database.stat().st_size
    page = 4096
    assert size >= 3 * page, size
    corrupt(daemon.database, page, size - page)  # every page but the first: schema and rows
    assert_refused_and_untouched(daemon, digest(daemon.database), ("damaged",))


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_is(daemon_factory):
    d = daemon_factory(start=False)
    d.home.mkdir(parents=True, exist_ok=True)
    d.database.write_bytes(b"these are not the rows you are looking for\n" * 100)
    assert_refused_and_untouched(d, digest(d.database), ("not an SQLite database",))


def test_a_database_from_a_newer_version_is_refused_and_left_as_it_is(daemon, faultserver, key):
    make_database(daemon, faultserver, key, jobs=3)
    with sqlite3.connect(daemon.database) as db:
        db.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')")
    db.close()
    assert_refused_and_untouched(daemon, digest(daemon.database), ("newer version", "v99-from-the-future"))


def test_a_database_with_a_user_version_is_refused_as_newer(daemon, faultserver, key):
    make_database(daemon, faultserver, key, jobs=3)
    with sqlite3.connect(daemon.database) as db:
        db.execute("PRAGMA user_version = 12")
    db.close()
    assert_refused_and_untouched(daemon, digest(daemon.database), ("newer version",))


def test_an_intact_database_still_opens_with_its_jobs(daemon, faultserver, key):
    make_database(daemon, faultserver, key, jobs=5)
    daemon.start()
    assert len(daemon.jobs()) == 5


def test_a_refused_database_leaves_no_file_others_can_read(daemon, faultserver, key):
    # SQLite gives the -wal and -shm files the database's mode: a database copied in as 0644 and
    # then refused must not leave world-readable files beside it.
    make_database(daemon, faultserver, key)
    size = daemon.database.stat().st_size
    corrupt(daemon.database, 4096, size - 4096)
    daemon.database.chmod(0o644)
    for suffix in ("-wal", "-shm"):
        daemon.database.with_name(daemon.database.name + suffix).unlink(missing_ok=True)
    assert run_daemon(daemon).returncode == 1
    for f in daemon.database.parent.iterdir():
        if f.name.startswith(daemon.database.name):
            assert f.stat().st_mode & 0o077 == 0, f"{f.name} is {oct(f.stat().st_mode & 0o777)}"


def test_a_directory_in_the_databases_place_is_refused_and_its_mode_left_alone(daemon_factory):
    # Found by an outside audit: the daemon made it 0600 (untraversable) before refusing it.
    d = daemon_factory(start=False)
    d.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    d.database.mkdir(mode=0o755)
    d.database.chmod(0o755)
    r = run_daemon(d)
    assert r.returncode == 1 and str(d.database) in r.stderr, r
    assert d.database.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("mode", [0o000, 0o400], ids=["unreadable", "read-only"])
def test_an_unreadable_database_is_refused_not_made_readable(daemon, faultserver, key, mode):
    # Found by outside audits: a database of mode 000 was made 0600 and opened; one of 0400 was
    # opened read-only, made 0600, and every change then failed. As another user than root (root
    # reads and writes it anyway) the daemon must refuse it, naming the file, and leave it so.
    import os
    import shutil
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the daemon as nobody")
    make_database(daemon, faultserver, key)
    before = digest(daemon.database)
    home = daemon.database.parent
    parent_mode = home.parent.stat().st_mode & 0o7777
    try:
        for f in [home, *home.iterdir()]:
            os.chown(f, 65534, 65534)
        daemon.database.chmod(mode)
        home.parent.chmod(parent_mode | 0o011)  # nobody passes through to its own home
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *daemon.command()],
                           env=daemon.env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode == 1 and str(daemon.database) in r.stderr, r
        assert daemon.database.stat().st_mode & 0o777 == mode, oct(daemon.database.stat().st_mode)
        assert digest(daemon.database) == before
    finally:
        home.parent.chmod(parent_mode)
        for f in [home, *home.iterdir()]:
            os.chown(f, 0, 0)
        daemon.database.chmod(0o600)
