"""Issue 23: ``rediss://`` with a CA of our own (made here by ``openssl``) and an ACL user.

A real redis-server on a TLS port: ``?ssl_ca_certs=`` trusts the CA and the shared ledger and
memory work; without it the self-signed CA is refused, never downgraded, and the warning keeps
redis-py's reason (``CERTIFICATE_VERIFY_FAILED ... self-signed``) without the password; a wrong
host name is refused saying so; an ACL user limited to ``relay:*`` works with ``?prefix=relay:``
and, with another prefix, the warning names the key pattern it needed.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redis_server import RedisServer, _free_port
from relay_review.state import Wanted, check_state_url, open_store
from relay_review.state.ledger import Budget
from relay_review.state.memory import Memory, RouteMemo
from relay_review.state.redis_store import RedisStore

pytestmark = pytest.mark.integration

PASSWORD = "tls-s3cret-Pa55word"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca(where: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for ``localhost`` only (no IP address)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    ca_key, ca, key = where / "ca.key", where / "ca.crt", where / "server.key"
    csr, cert, ext = where / "server.csr", where / "server.crt", where / "ext.cnf"
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca), "-days", "2", "-subj", "/CN=relay-review test CA",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=localhost",
    )  # fmt: skip
    ext.write_text("subjectAltName=DNS:localhost\n")
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext),
    )  # fmt: skip
    return ca, cert, key


class TlsServer:
    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca, cert, key = make_ca(workdir)
        self.port = _free_port()
        extra = (
            "--tls-port", str(self.port), "--tls-cert-file", str(cert),
            "--tls-key-file", str(key), "--tls-ca-cert-file", str(self.ca),
            "--tls-auth-clients", "no", "--requirepass", PASSWORD,
        )  # fmt: skip
        self.server = RedisServer(workdir / "data", extra=extra)
        acl = redis.Redis(port=self.server.port, password=PASSWORD)
        acl.acl_setuser(
            "relay",
            enabled=True,
            passwords=[f"+{PASSWORD}"],
            keys=["relay:*"],
            commands=["+@read", "+@write", "+@scripting", "+info", "+ping", "+time"],
        )
        acl.close()
        time.sleep(0.1)

    def url(self, host: str = "localhost", user: str = "", query: str = "") -> str:
        return f"rediss://{user}:{PASSWORD}@{host}:{self.port}/0{query}"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    server = TlsServer(tmp_path_factory.mktemp("tls"))
    try:
        yield server
    finally:
        server.server.stop()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def round_trip(url: str) -> RedisStore:
    store = open_store(check_state_url(url))
    assert isinstance(store, RedisStore)
    now = time.time()
    memo = RouteMemo(state="proven", outcome="ok", at=now, until=now + 60)
    store.save(Memory(routes={"a/m": memo}))
    loaded = open_store(url).load(None, Wanted.of(routes=["a/m"]))
    assert loaded.routes == {"a/m": memo}, url
    return store


async def test_our_ca_is_trusted_with_ssl_ca_certs(tls: TlsServer) -> None:
    store = round_trip(tls.url(query=f"?ssl_ca_certs={tls.ca}"))
    assert (await store.ledger.reserve("acct", Budget(rpm=1))).granted
    assert not (await store.ledger.reserve("acct", Budget(rpm=1))).granted
    assert not store.health.broken


@pytest.mark.parametrize(
    ("host", "query", "why"),
    [
        ("localhost", "", "CERTIFICATE_VERIFY_FAILED"),  # our CA is not the system's
        ("127.0.0.1", "?ssl_ca_certs={ca}", "IP address mismatch"),  # not the certificate's name
    ],
    ids=["untrusted-ca", "wrong-name"],
)
def test_an_untrusted_certificate_is_refused_with_its_reason_and_no_password(
    tls: TlsServer, caplog: pytest.LogCaptureFixture, host: str, query: str, why: str
) -> None:
    url = tls.url(host=host, query=query.format(ca=tls.ca))
    store = open_store(check_state_url(url))
    with caplog.at_level(logging.WARNING):
        assert store.load(None, Wanted.of(routes=["a/m"])) == Memory()
    (warning,) = warnings_of(caplog)
    assert why in warning and "unavailable" in warning
    assert PASSWORD not in warning and "***" in warning


async def test_an_acl_user_limited_to_its_prefix(
    tls: TlsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The README's ACL (``+@read +@write +@scripting +info +ping +time``): memory and the
    ledger both work (the ledger's script calls TIME), and another prefix is refused."""
    ca = f"ssl_ca_certs={tls.ca}"
    store = round_trip(tls.url(user="relay", query=f"?{ca}&prefix=relay:"))
    assert (await store.ledger.reserve("acct", Budget(rpm=1))).granted
    assert not store.health.broken
    store = open_store(tls.url(user="relay", query=f"?{ca}&prefix=other:"))
    with caplog.at_level(logging.WARNING):
        store.save(Memory(routes={"a/m": RouteMemo(state="proven", outcome="ok", at=1, until=2e9)}))
    (warning,) = warnings_of(caplog)
    assert "NoPermissionError" in warning or "NOPERM" in warning, warning
    assert "~other:*" in warning and PASSWORD not in warning


def test_ssl_ca_certs_is_for_rediss_only() -> None:
    with pytest.raises(ValueError, match="ssl_ca_certs"):
        check_state_url("redis://cache/0?ssl_ca_certs=/etc/ca.pem")
    assert check_state_url("rediss://cache/0?ssl_ca_certs=/etc/ca.pem&prefix=a:")
