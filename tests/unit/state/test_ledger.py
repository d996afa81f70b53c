"""The quota ledger (issue 14): sliding per-minute and per-day windows per account, in memory
and in a real redis-server (atomic across clients; every key with a TTL)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from redis_server import KINDS, RedisServer, serve
from relay_review.state.ledger import Budget, MemoryLedger, RedisLedger


@pytest.fixture(scope="module", params=KINDS)
def redis_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """Every Redis test of this module on redis-server and on Valkey (issue 23)."""
    yield from serve(request.param, tmp_path_factory)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_memory_ledger_slides_its_windows() -> None:
    clock = Clock()
    ledger = MemoryLedger(clock)
    budget = Budget(rpm=2, rpd=3)
    assert (await ledger.reserve("a", budget)).granted
    clock.now += 10
    assert (await ledger.reserve("a", budget)).granted
    refused = await ledger.reserve("a", budget)
    assert not refused.granted and refused.window == "minute" and refused.wait_s == 50
    assert refused.detail == "account budget: per-minute limit, frees in 50 s"
    assert (await ledger.reserve("b", budget)).granted  # another account: its own windows
    clock.now += 50
    assert (await ledger.reserve("a", budget)).granted  # the first slot slid out
    clock.now += 60
    day = await ledger.reserve("a", budget)
    assert not day.granted and day.window == "day"
    assert day.wait_s == pytest.approx(86_400 - 120)
    assert (await ledger.reserve("c", Budget())).granted  # no budget: no limit


async def test_memory_ledger_closed_window_refuses_until_its_reset() -> None:
    clock = Clock()
    ledger = MemoryLedger(clock)
    await ledger.close("a", 30)
    await ledger.close("a", 5)  # an earlier reset does not reopen it
    refused = await ledger.reserve("a", Budget())
    assert not refused.granted and refused.window == "closed" and refused.wait_s == 30
    clock.now += 30.5
    assert (await ledger.reserve("a", Budget())).granted


def client(server: RedisServer) -> aioredis.Redis:
    return aioredis.Redis.from_url(server.url, socket_timeout=2, socket_connect_timeout=2)


async def test_redis_ledger_is_atomic_across_clients(redis_server: RedisServer) -> None:
    clients = [client(redis_server) for _ in range(6)]
    ledgers = [RedisLedger(c, prefix="t-atomic:") for c in clients]
    budget = Budget(rpm=4, rpd=100)
    answers = await asyncio.gather(
        *(ledgers[i % len(ledgers)].reserve("acct", budget) for i in range(60))
    )
    granted = [a for a in answers if a.granted]
    assert len(granted) == 4  # 60 concurrent reservations, 6 connections: exactly the budget
    refused = [a for a in answers if not a.granted]
    assert all(a.window == "minute" and 55 < a.wait_s <= 60 for a in refused)
    keys = await clients[0].keys("t-atomic:*")
    ttls = [await clients[0].pttl(k) for k in keys]
    assert keys and all(ttl > 0 for ttl in ttls)  # every key has a TTL
    for c in clients:
        await c.aclose()


async def test_redis_ledger_day_window_and_closing(redis_server: RedisServer) -> None:
    c = client(redis_server)
    ledger = RedisLedger(c, prefix="t-day:")
    assert (await ledger.reserve("a", Budget(rpd=1))).granted
    day = await ledger.reserve("a", Budget(rpd=1))
    assert not day.granted and day.window == "day" and 86_000 < day.wait_s <= 86_400
    await ledger.close("b", 20)
    closed = await ledger.reserve("b", Budget(rpm=5))
    assert not closed.granted and closed.window == "closed" and 19 < closed.wait_s <= 20
    assert 0 < await c.pttl("t-day:ledger:{b}:closed") <= 20_000
    stored = b" ".join(await c.keys("t-day:*"))
    assert b"ledger:{a}:d" in stored and b"ledger:{b}:closed" in stored
    await c.aclose()


def test_a_state_url_password_is_masked_and_never_echoed(capsys: pytest.CaptureFixture) -> None:
    from relay_review.cli import main
    from relay_review.config.inputs import secret_values
    from relay_review.state import url_secrets
    from relay_review.state.redis_store import redact_url

    url = "rediss://:s3cret-Pa55word@redis.example:6380/0?prefix=org:"
    assert url_secrets(url)[0] == "s3cret-Pa55word"
    assert "s3cret-Pa55word" in secret_values({"INPUT_STATE": url})
    assert "s3cret-Pa55word" in secret_values({"RELAY_REVIEW_STATE": url})
    assert redact_url(url) == "rediss://:***@redis.example:6380/0?prefix=org:"
    # a password written without its colon is redis-py's user name, and a secret all the same
    # (it was printed as it was in the store's log lines; a helper's audit)
    assert redact_url("redis://Sup3rSecretPw@h:6379/0") == "redis://***@h:6379/0"
    assert redact_url("redis://user:pw@h/0") == "redis://user:***@h/0"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    with pytest.raises(SystemExit):
        main(["chat", "--discovery", "x.json", "--message", "m", "--state", "redis://:s3cret@/"])
    err = capsys.readouterr().err
    assert "value hidden" in err and "s3cret" not in err
