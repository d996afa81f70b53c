"""The process's one TLS context for provider calls: made once, in a thread started as the
program starts, and the same context httpx would make."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import textwrap
import threading

import certifi
import httpx
import pytest

from cli_harness import run_cli
from relay_review import _tls
from relay_review.errors import UsageError


def test_the_tls_warm_up_thread_is_joined_before_the_interpreter_finalizes(monkeypatch) -> None:
    """A daemon thread still inside OpenSSL when a run that sent nothing exits crashed the
    process (SIGSEGV, about 1 run in 20 of a review whose every file was reused): the warm-up
    thread is a normal one, so the interpreter waits for it (tens of ms of file reading)."""
    monkeypatch.setattr(_tls, "_made", [])
    monkeypatch.setattr(_tls, "_started", [])
    before = set(threading.enumerate())
    _tls.warm()
    _tls.warm()  # started: no second thread
    started = [t for t in threading.enumerate() if t not in before and t.name == "tls-context"]
    for thread in started:
        thread.join(10)
    assert len(started) <= 1 and len(_tls._started) == 1, "the warm-up runs in one thread"
    assert not _tls._started[0].daemon
    assert len(_tls._made) == 1 and _tls.context() is _tls._made[0]
    _tls.warm()  # made: no thread at all
    assert len(_tls._started) == 1


def test_a_context_the_thread_cannot_make_fails_the_caller_not_the_thread(
    monkeypatch, tmp_path
) -> None:
    monkeypatch.setattr(_tls, "_made", [])
    monkeypatch.setattr(_tls, "_started", [])
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    raised: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    _tls.warm()
    _tls._started[0].join(10)
    assert raised == [] and _tls._made == []
    with pytest.raises(UsageError, match=r"^SSL_CERT_FILE=.*missing\.pem: no CA certificates"):
        _tls.context()


def test_a_bad_ssl_cert_file_is_a_usage_error_naming_it(monkeypatch, tmp_path) -> None:
    """What the variable names is the run's configuration: exit 2 and one line, no traceback."""
    monkeypatch.setattr(_tls, "_made", [])
    monkeypatch.setattr(_tls, "_started", [])
    bad = tmp_path / "not-a-bundle.pem"
    bad.write_text("not a certificate\n")
    run = run_cli("drill", env={**os.environ, "SSL_CERT_FILE": str(bad)}, cwd=tmp_path)
    assert run.returncode == 2
    assert f"relay-review drill: error: SSL_CERT_FILE={bad}: no CA certificates" in run.stderr
    assert "Traceback" not in run.stderr


def _alike(ours: ssl.SSLContext, theirs: ssl.SSLContext) -> None:
    assert ours.verify_mode == theirs.verify_mode == ssl.CERT_REQUIRED
    assert ours.check_hostname and theirs.check_hostname
    assert ours.minimum_version == theirs.minimum_version
    assert ours.options == theirs.options
    assert ours.cert_store_stats() == theirs.cert_store_stats()
    assert ours.cert_store_stats()["x509_ca"] > 0  # the bundle was read


@pytest.mark.parametrize("env", ["none", "SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_the_context_is_the_one_httpx_makes_for_verify_true(monkeypatch, tmp_path, env) -> None:
    """httpx is given this context (``verify=``) instead of making its own: it must trust what
    httpx would (certifi's bundle, or the file or directory its documented variables name)."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    if env == "SSL_CERT_FILE":
        bundle = tmp_path / "one.pem"
        pems = certifi.contents().split("-----END CERTIFICATE-----")
        bundle.write_text(pems[0] + "-----END CERTIFICATE-----\n")
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    elif env == "SSL_CERT_DIR":
        monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    ours, theirs = _tls.make(), httpx.create_ssl_context()
    if env == "SSL_CERT_DIR":  # a directory's certificates load when a peer needs one
        assert ours.cert_store_stats() == theirs.cert_store_stats()
        return
    _alike(ours, theirs)
    if env == "SSL_CERT_FILE":
        assert ours.cert_store_stats()["x509_ca"] == 1


def test_a_command_that_sends_starts_the_context_before_its_modules_import() -> None:
    """Run as the program, ``chat`` starts the thread before pydantic or httpx loads; ``catalog``
    (no request) and ``--help`` start none."""
    probe = textwrap.dedent(
        """
        import sys, threading
        from relay_review import _tls
        seen = {}
        real = threading.Thread.start
        def start(self):
            if self.name == "tls-context":
                seen["pydantic"] = "pydantic" in sys.modules
                seen["httpx"] = "httpx" in sys.modules
            real(self)
        threading.Thread.start = start
        sys.argv = ["relay-review", *sys.argv[1:]]
        from relay_review.cli import main
        try:
            main()
        except SystemExit:
            pass
        print(sorted(k for k, v in seen.items() if v), bool(_tls._started))
        """
    )

    def started(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
        )
        return proc.stdout.strip().splitlines()[-1]

    assert started("chat", "--help") == "[] False"
    assert started("catalog", "--discovery", "/nonexistent.json") == "[] False"
    # a usage error after the thread started: it was started before anything heavy loaded
    assert started("chat", "--discovery", "/nonexistent.json", "--message", "hi") == "[] True"
