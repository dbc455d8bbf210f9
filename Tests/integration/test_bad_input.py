"""Bad input (SPEC "Security"): clear errors, exit 2, nothing queued, and the daemon carries on."""

import base64
import json
import os
import random
import socket
import time

import pytest


def assert_refused(daemon, r, *, mention: str | None = None) -> None:
    assert r.rc == 2, f"expected exit 2 (refused): {r}"
    assert r.err.strip(), "a refusal needs a clear message on stderr"
    assert r.out.strip() == "", f"nothing may be printed on stdout when refused: {r.out!r}"
    if mention is not None:
        assert mention in r.err, f"the message should name {mention!r}: {r.err!r}"
    assert daemon.jobs() == [], "nothing may be queued"


BAD_URLS = [
    "ftp://127.0.0.1/file.bin",
    "file:///etc/passwd",
    "gopher://127.0.0.1/",
    "http://",
    "https://",
    "garbage",
    "",
    "http:///no-host",
    "//127.0.0.1/x",
    "http://exa mple.com/",
    "http://127.0.0.1:99999/x",
    "http://[::1/x",
    "http://127.0.0.1/a\nb",
    "http://127.0.0.1:99999999999999999999/x",  # digits past any integer: Foundation sees no port
    "http://[zz::1]/x",
    "http://a%20b/x",
    "http://u:pw@@127.0.0.1/x",  # libcurl ends the password at the first @
]


@pytest.mark.parametrize("url", BAD_URLS, ids=[f"url{i}" for i in range(len(BAD_URLS))])
def test_a_bad_url_or_scheme_is_refused_with_exit_2_and_nothing_queued(daemon, url):
    before = set(os.listdir(daemon.work))
    r = daemon.cli("download", url, "-o", daemon.work / "out.bin")
    assert_refused(daemon, r)
    assert set(os.listdir(daemon.work)) == before


def test_a_missing_directory_is_refused_with_exit_2(daemon, faultserver, key):
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "nope" / "x.bin")
    assert_refused(daemon, r, mention=str(daemon.work / "nope"))
    r = daemon.cli("download", faultserver.url(key=key), "-d", daemon.work / "nope2")
    assert_refused(daemon, r, mention=str(daemon.work / "nope2"))
    assert not (daemon.work / "nope").exists() and not (daemon.work / "nope2").exists()
    assert faultserver.log(key) == [], "a refused job must not reach the server"


def test_an_existing_file_is_refused_with_exit_2_and_left_alone(daemon, faultserver, key):
    dest = daemon.work / "exists.bin"
    dest.write_bytes(b"keep me")
    r = daemon.cli("download", faultserver.url(key=key), "-o", dest)
    assert_refused(daemon, r, mention=str(dest))
    assert dest.read_bytes() == b"keep me"
    assert faultserver.log(key) == []


def test_an_existing_directory_as_the_output_file_is_refused(daemon, faultserver, key):
    (daemon.work / "adir").mkdir()
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "adir")
    assert_refused(daemon, r)


@pytest.mark.parametrize("name", ["newdir/", "newdir/.", "sub/newdir/.."])
def test_an_output_name_that_means_a_directory_is_refused_not_written_as_a_file(daemon, faultserver, key, name):
    # curl fails on `-o newdir/`; normalizing the path must not turn it into a file called newdir.
    (daemon.work / "sub").mkdir()
    r = daemon.cli("download", faultserver.url(key=key), "-o", name, "--create-dirs", cwd=daemon.work)
    assert_refused(daemon, r, mention="names a directory")
    assert not (daemon.work / "newdir").exists()


def test_a_list_line_whose_file_means_a_directory_is_refused(daemon, faultserver, key):
    lst = daemon.work / "list.txt"
    lst.write_text(f"{faultserver.url(key=key)}\tnewdir/\n")
    r = daemon.cli("download", "-i", lst, "-d", daemon.work)
    assert_refused(daemon, r, mention="line 1")
    assert not (daemon.work / "newdir").exists()


@pytest.mark.parametrize("name,reason", [("missing.txt", "No such file or directory"), ("adir", "Is a directory")])
def test_a_list_that_cannot_be_read_is_refused_with_the_reason(daemon, name, reason):
    (daemon.work / "adir").mkdir(exist_ok=True)
    r = daemon.cli("download", "-i", daemon.work / name, "-d", daemon.work)
    assert_refused(daemon, r, mention=f"cannot read the list {daemon.work / name}: {reason}")


def test_a_list_that_is_not_utf8_is_refused_naming_its_line(daemon, faultserver, key):
    lst = daemon.work / "list.txt"
    good = faultserver.url(key=key).encode()
    lst.write_bytes(good + b"\tone\n" + good + b"\ttwo\n\n" + good + b"\tcaf\xe9\n")
    r = daemon.cli("download", "-i", lst, "-d", daemon.work)
    assert_refused(daemon, r, mention=f"{lst} line 4: not UTF-8 text")


def test_one_digest_for_a_whole_list_is_refused(daemon, faultserver, key):
    lst = daemon.work / "list.txt"
    lst.write_text(f"{faultserver.url(key=key)}\tone\n{faultserver.url(key=key + 'b')}\ttwo\n")
    r = daemon.cli("download", "-i", lst, "-d", daemon.work, "--sha256", "a" * 64)
    assert_refused(daemon, r, mention="--sha256 cannot be used with -i")


@pytest.mark.parametrize("content,says", [
    ('{"not": "a certificate"}', "no PEM certificate"),
    # Markers around a body that is no certificate: queued, it failed every attempt with `tls`.
    ("-----BEGIN CERTIFICATE-----\nAAAAbroken\n-----END CERTIFICATE-----\n", "cannot be read"),
], ids=["not-pem", "damaged"])
@pytest.mark.parametrize("option", ["--cacert", "--pin-cert"])
def test_a_certificate_file_without_a_readable_pem_certificate_is_refused_at_once(daemon, faultserver, key, option,
                                                                                   content, says):
    bad = daemon.work / "bad.pem"
    bad.write_text(content)
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "x", option, bad)
    assert_refused(daemon, r, mention=says)
    # Over the RPC too (the daemon checks what the CLI checks).
    resp = daemon.rpc("transfer.add", {"url": faultserver.url(key=key), "destination": str(daemon.work / "y"),
                                       "cacert" if option == "--cacert" else "pinCert": str(bad)})
    assert resp["error"]["code"] == -32602 and says in resp["error"]["message"], resp
    assert daemon.jobs() == []


@pytest.mark.parametrize("pins", [" sha256//PIN", "sha256//PIN ", "sha256//PIN; sha256//PIN"],
                         ids=["leading", "trailing", "after-semicolon"])
def test_a_pin_list_with_spaces_is_refused_since_libcurl_would_never_match_it(daemon, faultserver, key, pins):
    pin = base64.b64encode(bytes(range(32))).decode()
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "x", "--pin-pubkey",
                   pins.replace("PIN", pin))
    assert_refused(daemon, r, mention="no spaces")


def test_a_path_that_is_not_utf8_is_refused_and_never_names_another_file(daemon, faultserver, key):
    # Read as text, b"\xff\xfe" would become U+FFFD U+FFFD: the name of this other file.
    other = daemon.work / "\ufffd\ufffdX"
    other.write_text("precious")
    raw = os.fsdecode(bytes(daemon.work) + b"/\xff\xfeX")
    r = daemon.cli("download", faultserver.url(key=key), "-o", raw, "--replace")
    assert_refused(daemon, r, mention="not valid UTF-8")
    assert other.read_text() == "precious"
    assert sorted(os.listdir(daemon.work)) == [other.name]


BAD_OPTIONS = [
    ("-H", "NoColonHere"),
    ("-H", ": no name"),
    ("-H", "X-Evil: a\r\nInjected: b"),
    ("-H", "Content-Length: 1"),  # the daemon frames the body (a wrong one fed the next request)
    ("-H", "Range: bytes=0-9"),  # and asks for ranges itself
    ("-H", "Accept-Encoding: gzip"),  # and a download's coding (identity; it was replaced silently)
    ("--sha256", "xyz"),
    ("--sha256", "abcd"),
    ("--limit-rate", "fast"),
    ("--limit-rate", "-5K"),
    ("--limit-rate", "1.5"),  # a fraction without a unit was 1 byte a second
    ("--priority", "high"),
    ("--retries", "-1"),
    ("--retries", "many"),
    ("--bogus-option",),
]


@pytest.mark.parametrize("opts", BAD_OPTIONS, ids=[f"opt{i}" for i in range(len(BAD_OPTIONS))])
def test_a_bad_option_is_refused_with_exit_2(daemon, faultserver, key, opts):
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "o.bin", *opts)
    assert_refused(daemon, r)


@pytest.mark.parametrize("args,says", [
    (["download", "URL", "--retries", "-1"], "between 0 and 1000"),
    (["download", "URL", "--limit-rate", "-1K"], "not a rate"),
    (["download", "URL", "-x", "-3"], "between 1 and 16"),
    (["list", "--limit", "-1"], "1 or more"),
    (["wait", "1", "--timeout", "-5"], "number of seconds"),
    (["limit", "--download", "-1K"], "-1K"),
    (["limit", "--upload", "-2M"], "-2M"),
], ids=["retries", "limit-rate", "connections", "limit", "timeout", "limit-download", "limit-upload"])
def test_a_negative_number_is_named_as_a_bad_value_not_a_missing_one(daemon, faultserver, key, args, says):
    r = daemon.cli(*[faultserver.url(key=key) if a == "URL" else a for a in args])
    assert r.rc == 2, r
    assert says in r.err and "Missing value" not in r.err, r.err
    assert daemon.jobs() == []


@pytest.mark.parametrize("opts,says", [
    (["--on-end", ""], "--on-end: is empty"),
    (["--limit-rate", "5Q"], "--limit-rate: \"5Q\" is not a rate"),
    (["--pin-pubkey", "abc"], "--pin-pubkey: each pin"),
    (["--user", "nocolon"], "--user: must be USER:PASSWORD"),
    (["-H", "Accept-Encoding: br"], "header Accept-Encoding: a download asks for identity"),
], ids=["on-end", "limit-rate", "pin-pubkey", "user", "header"])
def test_a_refused_option_is_named_as_typed_and_not_blamed_on_a_list_line(daemon, faultserver, key, opts, says):
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "o.bin", *opts)
    assert_refused(daemon, r, mention=says)
    listing = daemon.work / "urls.txt"
    listing.write_text(f"{faultserver.url(key=key + 'a')}\n{faultserver.url(key=key + 'b')}\n")
    r = daemon.cli("download", "-i", listing, "-d", daemon.work, *opts)
    assert_refused(daemon, r, mention=says)
    assert "line 1" not in r.err, f"an option's refusal is not the list's first line's: {r.err!r}"


@pytest.mark.parametrize("args,says", [
    (["download", "URL", "-o", ""], "-o cannot be empty"),
    (["download", "-i", "", "-d", "WORK"], "-i cannot be empty"),
    (["download", "URL", "-o", "WORK/o.bin", "--cacert", ""], "--cacert cannot be empty"),
    (["download", "URL", "-o", "WORK/o.bin", "--pin-cert", ""], "--pin-cert cannot be empty"),
    (["upload", "", "URL"], "FILE cannot be empty"),
    (["upload", "SOURCE", "URL", "--response", ""], "--response cannot be empty"),
], ids=["output", "list", "cacert", "pin-cert", "source", "response"])
def test_an_empty_path_is_refused_as_empty_not_taken_as_the_working_directory(daemon, faultserver, key, args, says):
    source = daemon.work / "source.bin"
    source.write_bytes(b"x" * 10)
    values = {"URL": faultserver.url(key=key), "WORK": str(daemon.work), "SOURCE": str(source)}
    r = daemon.cli(*[values.get(a, a.replace("WORK", str(daemon.work))) for a in args])
    assert_refused(daemon, r, mention=says)


def test_output_file_and_directory_together_are_bad_usage(daemon, faultserver, key):
    r = daemon.cli("download", faultserver.url(key=key), "-o", daemon.work / "o", "-d", daemon.work)
    assert_refused(daemon, r)


def test_an_unknown_subcommand_or_a_missing_argument_is_bad_usage(daemon):
    assert daemon.cli("frobnicate").rc == 2
    assert daemon.cli("download").rc == 2
    assert daemon.cli("status").rc == 2
    assert daemon.jobs() == []


# MARK: - The RPC


def assert_rpc_error(resp, code: int | tuple, id=None) -> dict:
    assert isinstance(resp, dict), resp
    assert resp.get("jsonrpc") == "2.0", resp
    assert "result" not in resp, resp
    err = resp.get("error")
    assert isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str), resp
    codes = code if isinstance(code, tuple) else (code,)
    assert err["code"] in codes, f"expected error {codes}, got {resp}"
    assert "id" in resp and resp["id"] == id, f"error id should be {id!r}: {resp}"
    return err


def assert_daemon_alive(daemon) -> None:
    assert daemon.running, f"the daemon died:\n{daemon.log_tail()}"
    resp = daemon.rpc("daemon.status")
    assert "result" in resp, resp


def test_a_line_that_is_not_json_gets_a_parse_error_and_the_daemon_carries_on(daemon):
    with daemon.connect() as c:
        c.send_raw(b"this is not json\n")
        assert_rpc_error(c.recv(), -32700)
        c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"\n')
        assert_rpc_error(c.recv(), -32700)
        c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}\n')
        resp = c.recv()
        assert "error" in resp and resp["error"]["code"] in (-32700, -32600, -32601), resp
        # The same connection still works.
        resp = c.call("daemon.status", id=2)
        assert "result" in resp and resp["id"] == 2
    assert_daemon_alive(daemon)


@pytest.mark.parametrize("line", [b"42", b'"hello"', b"null", b"true", b"{}",
                                  b'{"jsonrpc":"1.0","id":1,"method":"daemon.status"}',
                                  b'{"jsonrpc":"2.0","id":1,"method":5}',
                                  b'{"id":1,"method":"daemon.status"}'])
def test_json_that_is_not_a_request_object_gets_invalid_request(daemon, line):
    with daemon.connect() as c:
        c.send_raw(line + b"\n")
        resp = c.recv(timeout=5)
        err = resp["error"]
        assert err["code"] == -32600, resp
        assert "result" not in resp and resp.get("jsonrpc") == "2.0"
    assert_daemon_alive(daemon)


def test_an_unknown_method_gets_method_not_found_with_its_id(daemon):
    resp = daemon.rpc("no.such.method", id=7)
    assert_rpc_error(resp, -32601, id=7)


def test_bad_params_get_invalid_params(daemon):
    assert_rpc_error(daemon.rpc("transfer.get", {"id": "twelve"}, id=3), -32602, id=3)
    assert_rpc_error(daemon.rpc("transfer.add", {}, id=4), -32602, id=4)
    assert_rpc_error(daemon.rpc("transfer.add", {"url": 5, "directory": "/tmp"}, id=5), -32602, id=5)
    # An element of a list is named as JSON names it, not as Foundation's "Index 0".
    resp = daemon.rpc("transfer.pause", {"ids": [1, "2"]}, id=6)
    assert_rpc_error(resp, -32602, id=6)
    assert resp["error"]["message"].endswith("wrong type for ids[1]"), resp
    assert daemon.jobs() == []


@pytest.mark.parametrize("params", ['"x"', "[99]", "7", "true"])
def test_params_that_are_not_an_object_get_invalid_params_with_data_and_a_notification_no_answer(daemon, params):
    with daemon.connect() as c:
        c.send_raw(b'{"jsonrpc":"2.0","method":"transfer.get","params":' + params.encode() + b"}\n")
        c.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"transfer.get","params":' + params.encode() + b"}\n")
        resp = c.recv(timeout=5)
    assert resp["id"] == 2, f"the notification was answered: {resp}"
    assert resp["error"]["code"] == -32602 and resp["error"]["data"] == {"code": "invalid_request"}, resp
    assert "params must be an object" in resp["error"]["message"], resp


def test_null_params_count_as_none(daemon):
    with daemon.connect() as c:
        c.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"daemon.status","params":null}\n')
        resp = c.recv(timeout=5)
    assert "result" in resp and resp["id"] == 5, resp


def test_an_unknown_job_id_gets_no_such_job(daemon):
    assert_rpc_error(daemon.rpc("transfer.get", {"id": 987654}, id=9), -32001, id=9)


def test_transfer_add_refuses_what_the_cli_refuses_with_the_spec_error_code(daemon, faultserver, key):
    existing = daemon.work / "there.bin"
    existing.write_bytes(b"x")
    cases = [
        ({"url": "ftp://127.0.0.1/x", "destination": str(daemon.work / "a")}, "invalid_request"),
        ({"url": "file:///etc/passwd", "destination": str(daemon.work / "a")}, "invalid_request"),
        ({"url": "garbage", "destination": str(daemon.work / "a")}, "invalid_request"),
        ({"url": faultserver.url(key=key), "destination": "relative/path.bin"}, "invalid_request"),
        ({"url": faultserver.url(key=key), "directory": "relative"}, "invalid_request"),
        ({"url": faultserver.url(key=key), "destination": str(daemon.work / "no" / "x")}, "destination_missing_dir"),
        ({"url": faultserver.url(key=key), "destination": str(existing)}, "destination_exists"),
        ({"url": faultserver.url(key=key), "destination": str(daemon.work / "h"), "headers": ["bad header"]},
         "invalid_request"),
        ({"url": faultserver.url(key=key), "destination": str(daemon.work / "s"), "sha256": "nothex"},
         "invalid_request"),
        ({"url": faultserver.url(key=key), "destination": str(daemon.work / "k"), "kind": "teleport"},
         "invalid_request"),
    ]
    for params, code in cases:
        resp = daemon.rpc("transfer.add", params, id=11)
        err = assert_rpc_error(resp, -32602, id=11)
        assert isinstance(err.get("data"), dict) and err["data"].get("code") == code, (params, resp)
    assert daemon.jobs() == []
    assert faultserver.log(key) == []


def test_an_oversized_line_gets_an_error_and_the_connection_stays_usable(daemon):
    pad = "x" * (3 * 1024 * 1024 // 2)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "transfer.list", "params": {"pad": pad}}).encode()
    with daemon.connect(timeout=20) as c:
        c.send_raw(line + b"\n")
        assert_rpc_error(c.recv(), -32003)
        resp = c.call("daemon.status", id=2)
        assert "result" in resp and resp["id"] == 2, resp
    assert_daemon_alive(daemon)
    assert daemon.jobs() == []


def test_random_bytes_on_the_socket_get_error_objects_and_the_daemon_carries_on(daemon):
    rng = random.Random(1234)
    for round in range(3):
        junk = bytes(rng.getrandbits(8) for _ in range(20000)) + b"\n"
        with daemon.connect(timeout=10) as c:
            c.send_raw(junk)
            c.sock.shutdown(socket.SHUT_WR)
            replies = []
            while True:
                try:
                    line = c.recv_line(timeout=5)
                except socket.timeout:
                    break
                if line is None:
                    break
                if line.strip():
                    replies.append(json.loads(line))
            assert replies, "random bytes must be answered with JSON-RPC errors"
            for resp in replies:
                assert resp.get("jsonrpc") == "2.0" and "error" in resp and "result" not in resp, resp
                assert resp["error"]["code"] in (-32700, -32600, -32003), resp
    # Bytes with no newline at all, then an abrupt close; a half line then a close.
    for junk in (os.urandom(5000), b'{"jsonrpc":"2.0","id":1,"meth'):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(daemon.socket))
        s.sendall(junk)
        s.close()
    time.sleep(0.2)
    assert_daemon_alive(daemon)
    assert daemon.jobs() == []


def test_many_abrupt_connections_do_not_hurt_the_daemon(daemon):
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(daemon.socket))
        s.close()
    assert_daemon_alive(daemon)


def test_a_notification_gets_no_answer(daemon):
    with daemon.connect() as c:
        c.send({"jsonrpc": "2.0", "method": "daemon.status"})
        c.send({"jsonrpc": "2.0", "id": 5, "method": "daemon.status"})
        resp = c.recv(timeout=5)
        assert resp.get("id") == 5, f"the notification was answered: {resp}"
