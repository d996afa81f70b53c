"""Issue 23: a lost shared ledger keeps the budget honest. When Redis is lost mid-run, the
in-process ledger starts from what the shared one said this run (its grants, a refusal until it
frees), never a whole fresh window; a Redis restarted empty mid-run is noticed (an epoch key
written at the run's first reservation), warned once, and the run puts its own grants back."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redis_server import RedisServer
from relay_review.records import CatalogEntry, Cost, Route
from relay_review.routing.budget import AccountBudgets
from relay_review.state.ledger import Budget, MemoryLedger
from relay_review.state.redis_store import RedisStore

pytestmark = pytest.mark.integration


def entry(account: str) -> CatalogEntry:
    route = Route(
        index=0,
        account=account,
        provider="openai_compatible",
        model="m",
        agent_id=f"{account}/m",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="NONE",
    )
    return CatalogEntry(route=route, cost=Cost.PRICED, zdr=False, priority=1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis")
    yield started
    started.stop()


@pytest.mark.parametrize("fault", ["kill", "pause"])
async def test_a_ledger_lost_mid_run_goes_on_from_what_it_said(
    server: RedisServer, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(server.url, prefix="deg:", timeout=0.5)
    budgets = AccountBudgets(store.ledger, {"acct": Budget(rpm=2)}, timeout=0.5)
    e = entry("acct")
    assert await budgets.admit(e, 30) is None
    assert await budgets.admit(e, 30) is None
    refused = await budgets.admit(e, 30)
    assert refused is not None and "per-minute limit" in (refused.detail or "")
    getattr(server, fault)()
    try:
        with caplog.at_level(logging.WARNING):
            after = await budgets.admit(e, 30)
        assert isinstance(budgets.ledger, MemoryLedger)  # the in-process ledger took over
        assert after is not None and "per-minute limit" in (after.detail or "")  # no fresh window
        assert 50 < (after.retry_after or 0) <= 60
        warned = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(warned) == 1
    finally:
        server.resume()


async def test_grants_alone_seed_the_in_process_ledger(server: RedisServer) -> None:
    store = RedisStore(server.url, prefix="deg2:", timeout=0.5)
    budgets = AccountBudgets(store.ledger, {"acct": Budget(rpm=3)}, timeout=0.5)
    e = entry("acct")
    assert await budgets.admit(e, 30) is None
    assert await budgets.admit(e, 30) is None
    server.kill()
    assert await budgets.admit(e, 30) is None  # the third of 3: the in-process ledger grants
    fourth = await budgets.admit(e, 30)
    assert fourth is not None and "per-minute limit" in (fourth.detail or "")


async def test_a_restart_empty_is_noticed_once_and_the_runs_grants_put_back(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(server.url, prefix="ep:")
    budget = Budget(rpm=2)
    assert (await store.ledger.reserve("acct", budget)).granted
    assert (await store.ledger.reserve("acct", budget)).granted
    server.restart()  # empty: no persistence
    with contextlib.suppress(redis.ConnectionError):
        await store.ledger.reserve("acct", budget)  # the old connection: closed by the restart
    with caplog.at_level(logging.WARNING):
        answers = [await store.ledger.reserve("acct", budget) for _ in range(3)]
    assert not any(a.granted for a in answers)  # this run's two grants are back in the window
    assert all(a.window == "minute" for a in answers)
    warned = [r.getMessage() for r in caplog.records if "were lost" in r.getMessage()]
    assert len(warned) == 1 and "put back its own 2" in warned[0]
    other = RedisStore(server.url, prefix="ep:")  # another run: sees the window put back
    assert not (await other.ledger.reserve("acct", budget)).granted


async def test_the_in_process_ledger_counts_what_other_runs_had_reserved(
    server: RedisServer,
) -> None:
    """Run B took 2 of 4; run A took 1 and then lost Redis: A grants one more, not four."""
    e = entry("acct")
    limits = {"acct": Budget(rpm=4)}
    other = AccountBudgets(RedisStore(server.url, prefix="deg3:").ledger, limits, timeout=0.5)
    assert await other.admit(e, 30) is None
    assert await other.admit(e, 30) is None
    mine = AccountBudgets(RedisStore(server.url, prefix="deg3:").ledger, limits, timeout=0.5)
    assert await mine.admit(e, 30) is None  # the shared window now holds 3
    server.kill()
    assert await mine.admit(e, 30) is None  # the 4th
    refused = await mine.admit(e, 30)
    assert isinstance(mine.ledger, MemoryLedger)
    assert refused is not None and "per-minute limit" in (refused.detail or "")
