"""A real Redis Cluster of three masters on loopback, started and stopped by PID (Debian's
``redis-server --cluster-enabled yes`` x3, slots assigned by ``redis-cli --cluster create``).

No fake cluster: ``CROSSSLOT`` and ``MOVED`` are the real server's answers.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

#: The ACL the README gives a user of relay-review on a cluster (prefix ``relay:``);
#: tests/project/test_readme_claims.py checks the README says exactly this.
README_CLUSTER_ACL = "~relay:* +@read +@write +@scripting +info +ping +time +cluster|slots +command"


class RedisCluster:
    """Three cluster-enabled servers, no replicas; ``url`` names the first node only (the
    client finds the others), ``urls`` every node."""

    def __init__(self, workdir: Path, masters: int = 3) -> None:
        binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if binary is None or cli is None:
            pytest.skip("redis-server is not installed (.ci/run installs Debian's redis-server)")
        self.ports = _cluster_ports(masters)
        self.procs: list[subprocess.Popen[bytes]] = []
        for port in self.ports:
            node = workdir / f"node-{port}"
            node.mkdir(parents=True, exist_ok=True)
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
            argv += ["--appendonly", "no", "--dir", str(node), "--cluster-enabled", "yes"]
            argv += ["--cluster-config-file", str(node / "nodes.conf")]
            argv += ["--cluster-node-timeout", "5000"]
            self.procs.append(
                subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        try:
            for port in self.ports:
                _wait_port(port)
            nodes = [f"127.0.0.1:{p}" for p in self.ports]
            subprocess.run(
                [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            self._wait_ok()
        except BaseException:
            self.stop()
            raise
        self.urls = [f"redis://127.0.0.1:{p}" for p in self.ports]
        self.url = self.urls[0]

    @contextlib.contextmanager
    def acl_user(self, name: str, rules: str) -> Iterator[str]:
        """The first node's URL for ACL user ``name`` (password ``{name}-pass-0123``) with
        ``rules`` (``ACL SETUSER`` words, as the README writes them) on every node, removed
        afterwards."""
        for port in self.ports:
            with redis.Redis(port=port) as client:
                client.execute_command(
                    "ACL", "SETUSER", name, "reset", "on", f">{name}-pass-0123", *rules.split()
                )
        try:
            yield f"redis://{name}:{name}-pass-0123@127.0.0.1:{self.ports[0]}"
        finally:
            for port in self.ports:
                with redis.Redis(port=port) as client:
                    client.acl_deluser(name)

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = []
            for port in self.ports:
                with redis.Redis(port=port, socket_timeout=1) as client:
                    states.append(client.execute_command("CLUSTER", "INFO"))
            texts = [s.decode() if isinstance(s, bytes) else str(s) for s in states]
            if all("cluster_state:ok" in t for t in texts):
                return
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok within 20 s")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _cluster_ports(n: int) -> list[int]:
    """``n`` free ports up to 55535 whose cluster bus port (+10000) is free too."""
    found: list[int] = []
    for port in random.sample(range(20_000, 55_535), 400):
        if all(_free(p) for p in (port, port + 10_000)) and port not in found:
            found.append(port)
            if len(found) == n:
                return found
    raise RuntimeError("no free ports for a cluster")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not start within 10 s")


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()
