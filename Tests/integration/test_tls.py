"""TLS (SPEC "Security"): verified by default, --cacert, public-key and certificate pinning,
--insecure shown in status, and no https→http downgrade. Against nginx with a test CA."""

import pytest

from conftest import sha256_file


@pytest.fixture(scope="module")
def tls_file(nginx):
    if not nginx.tls:
        pytest.skip("no openssl: nginx runs without TLS")
    digest = nginx.make_file("tls/secure.bin", 200_000)
    nginx.make_file("tls/plain.bin", 1000)
    return "tls/secure.bin", digest


def test_an_https_server_with_an_unknown_ca_fails_with_tls_and_is_not_retried(daemon, nginx, tls_file):
    name, _ = tls_file
    dest = daemon.work / "untrusted.bin"
    id = daemon.download(nginx.tls_url(name), "-o", dest)
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["error"]["code"] == "tls" and job["error"]["retryable"] is False
    assert job["attempts"] == 1 and job["insecure"] is False
    assert not dest.exists()


def test_cacert_trusts_a_private_ca(daemon, nginx, tls_file):
    name, digest = tls_file
    dest = daemon.work / "trusted.bin"
    id = daemon.download(nginx.tls_url(name), "-o", dest, "--cacert", nginx.tls.ca)
    job = daemon.wait_state(id, "completed", timeout=20)
    assert sha256_file(dest) == digest and job["insecure"] is False


def test_the_host_name_of_the_certificate_is_accepted_for_localhost_too(daemon, nginx, tls_file):
    name, digest = tls_file
    dest = daemon.work / "byname.bin"
    id = daemon.download(nginx.tls_url(name, host="localhost"), "-o", dest, "--cacert", nginx.tls.ca)
    daemon.wait_state(id, "completed", timeout=20)
    assert sha256_file(dest) == digest


def test_insecure_turns_evaluation_off_and_shows_in_status(daemon, nginx, tls_file):
    name, digest = tls_file
    dest = daemon.work / "insecure.bin"
    id = daemon.download(nginx.tls_url(name), "-o", dest, "--insecure")
    job = daemon.wait_state(id, "completed", timeout=20)
    assert job["insecure"] is True
    assert sha256_file(dest) == digest
    assert "insecure" in daemon.cli("status", id, check=0).out.lower(), "status must show that TLS was not verified"


def test_a_matching_public_key_pin_succeeds_and_a_wrong_one_fails_with_tls(daemon, nginx, tls_file):
    name, digest = tls_file
    good = daemon.download(nginx.tls_url(name), "-o", daemon.work / "pinned.bin", "--cacert", nginx.tls.ca,
                           "--pin-pubkey", nginx.tls.pubkey_pin())
    wrong_pin = nginx.tls.pubkey_pin(nginx.tls.other_ca)
    bad = daemon.download(nginx.tls_url(name), "-o", daemon.work / "mispinned.bin", "--cacert", nginx.tls.ca,
                          "--pin-pubkey", wrong_pin)
    several = daemon.download(nginx.tls_url(name), "-o", daemon.work / "several.bin", "--cacert", nginx.tls.ca,
                              "--pin-pubkey", f"{wrong_pin};{nginx.tls.pubkey_pin()}")
    daemon.wait_state(good, "completed", timeout=20)
    daemon.wait_state(several, "completed", timeout=20)
    job = daemon.wait_state(bad, "failed", timeout=20)
    assert job["error"]["code"] == "tls" and job["error"]["retryable"] is False
    assert not (daemon.work / "mispinned.bin").exists()
    assert sha256_file(daemon.work / "pinned.bin") == digest


def test_a_pinned_certificate_must_be_in_the_servers_chain(daemon, nginx, tls_file):
    name, digest = tls_file
    leaf = daemon.download(nginx.tls_url(name), "-o", daemon.work / "leaf.bin", "--cacert", nginx.tls.ca,
                           "--pin-cert", nginx.tls.server)
    ca = daemon.download(nginx.tls_url(name), "-o", daemon.work / "ca.bin", "--cacert", nginx.tls.ca,
                         "--pin-cert", nginx.tls.ca)
    other = daemon.download(nginx.tls_url(name), "-o", daemon.work / "other.bin", "--cacert", nginx.tls.ca,
                            "--pin-cert", nginx.tls.other_ca)
    daemon.wait_state(leaf, "completed", timeout=20)
    daemon.wait_state(ca, "completed", timeout=20)
    job = daemon.wait_state(other, "failed", timeout=20)
    assert job["error"]["code"] == "tls"
    assert sha256_file(daemon.work / "leaf.bin") == digest


def test_an_https_to_http_redirect_is_refused(daemon, nginx, tls_file):
    dest = daemon.work / "downgrade.bin"
    id = daemon.download(nginx.tls_url("to-http"), "-o", dest, "--cacert", nginx.tls.ca)
    job = daemon.wait_state(id, "failed", timeout=20)
    assert job["error"]["code"] == "redirect" and job["error"]["retryable"] is False
    assert not dest.exists()
    assert not nginx.log("tls/plain.bin"), "the plain-http target must not be requested"


def test_bad_tls_options_are_refused_with_exit_2(daemon, nginx, tls_file):
    name, _ = tls_file
    url = nginx.tls_url(name)
    for opts in (("--cacert", daemon.work / "missing.pem"), ("--pin-pubkey", "md5//abc"),
                 ("--pin-pubkey", "sha256//not base64!"), ("--pin-cert", daemon.work / "missing.pem")):
        r = daemon.cli("download", url, "-o", daemon.work / "x", *opts)
        assert r.rc == 2, f"{opts}: {r}"
    assert daemon.jobs() == []
