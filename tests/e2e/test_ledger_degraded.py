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


async def test_grants_and_the_cut_reservation_seed_the_in_process_ledger(
    server: RedisServer,
) -> None:
    """rpm 4: two granted, then Redis killed while the third is on its way (the connection cut
    without an answer: the server may have applied it, so it counts): one more, not four."""
    store = RedisStore(server.url, prefix="deg2:", timeout=0.5)
    # offline_share 1: no cap of its own, so what is seen is the seeding alone
    budgets = AccountBudgets(store.ledger, {"acct": Budget(rpm=4)}, timeout=0.5, share=1.0)
    e = entry("acct")
    assert await budgets.admit(e, 30) is None
    assert await budgets.admit(e, 30) is None
    server.kill()
    assert await budgets.admit(e, 30) is None  # 2 + the cut one + this = 4
    fifth = await budgets.admit(e, 30)
    assert fifth is not None and "per-minute limit" in (fifth.detail or "")


async def test_a_run_that_lost_the_ledger_sends_only_its_share(server: RedisServer) -> None:
    """rpm 20, the default offline_share 0.25: once the shared ledger is lost, this run's own
    requests in the window (the 2 it sent before included) stop at 5, though the window it
    last saw held only 2 of 20."""
    store = RedisStore(server.url, prefix="deg4:", timeout=0.5)
    budgets = AccountBudgets(store.ledger, {"acct": Budget(rpm=20)}, timeout=0.5)
    e = entry("acct")
    assert await budgets.admit(e, 30) is None
    assert await budgets.admit(e, 30) is None
    server.kill()
    answers = [await budgets.admit(e, 30) for _ in range(10)]
    assert sum(a is None for a in answers) == 3  # 2 + 3 = 5 = 0.25 of 20
    refused = [a.detail or "" for a in answers if a is not None]
    assert all("per-minute limit (this run's offline_share" in d for d in refused), refused


@pytest.mark.parametrize(("rpm", "share", "each"), [(4, 0.25, 1), (20, 0.25, 5), (4, 0.0, 1)])
async def test_twelve_runs_that_never_reached_redis_stay_within_n_times_their_share(
    server: RedisServer, caplog: pytest.LogCaptureFixture, rpm: int, share: float, each: int
) -> None:
    """Redis killed before the runs start: no run knows what the others send, so each sends at
    most its share (at least one) per window: 12 runs, at most 12 x share in the minute (before:
    each run a whole window, 12 x rpm: 48 at rpm 4)."""
    url = server.url
    server.kill()
    e = entry("acct")
    runs = [
        AccountBudgets(
            RedisStore(url, prefix="blind:", timeout=0.3).ledger,
            {"acct": Budget(rpm=rpm)},
            timeout=0.3,
            share=share,
        )
        for _ in range(12)
    ]
    with caplog.at_level(logging.WARNING):
        granted = [sum([await run.admit(e, 30) is None for _ in range(rpm + 2)]) for run in runs]
    assert granted == [each] * 12, granted  # total 12 x each, never 12 x rpm
    warned = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(warned) == 12, warned  # one per run
    assert all("per run and conservatively" in w and "ConnectionError" in w for w in warned)


async def test_a_reservation_that_timed_out_counts_as_granted(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis stopped (SIGSTOP) while a reservation is on its way: the server applies it once it
    runs again, so the in-process ledger counts it as granted (rpm 2: one sent, one pending, so
    the window is full; before, the run granted a second request)."""
    store = RedisStore(server.url, prefix="slow:", timeout=5)
    budgets = AccountBudgets(store.ledger, {"acct": Budget(rpm=2)}, timeout=0.5, share=1.0)
    e = entry("acct")
    assert await budgets.admit(e, 30) is None
    server.pause()
    try:
        with caplog.at_level(logging.WARNING):
            refused = await budgets.admit(e, 30)
    finally:
        server.resume()
    assert isinstance(budgets.ledger, MemoryLedger)
    assert refused is not None and "per-minute limit" in (refused.detail or "")
    (warned,) = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert "no answer within [state] timeout_s = 0.5 s" in warned
    assert "per run and conservatively" in warned
    with redis.Redis.from_url(server.url) as check:
        # the server did apply the reservation that timed out
        keys = [k for k in check.scan_iter("slow:ledger:*:m")]
        assert len(keys) == 1 and check.zcard(keys[0]) == 2


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
    """rpm 5: run B took 2, run A took 1 and then lost Redis with its next reservation on the
    way (counted): A grants one more (the 5th), not five. offline_share 1: the seeding alone."""
    e = entry("acct")
    limits = {"acct": Budget(rpm=5)}
    ledger = RedisStore(server.url, prefix="deg3:").ledger
    other = AccountBudgets(ledger, limits, timeout=0.5, share=1.0)
    assert await other.admit(e, 30) is None
    assert await other.admit(e, 30) is None
    ledger = RedisStore(server.url, prefix="deg3:").ledger
    mine = AccountBudgets(ledger, limits, timeout=0.5, share=1.0)
    assert await mine.admit(e, 30) is None  # the shared window now holds 3
    server.kill()
    assert await mine.admit(e, 30) is None  # 3 + the cut one + this = 5
    refused = await mine.admit(e, 30)
    assert isinstance(mine.ledger, MemoryLedger)
    assert refused is not None and "per-minute limit" in (refused.detail or "")


# ---------------------------------------------------------------- the day's count (issue 25)


async def test_the_shared_ledger_counts_every_runs_requests_of_the_day(server: RedisServer) -> None:
    """Two runs on one Redis, one account with a budget of 50 a day: each run reads every run's
    requests of the last 24 h back from the ledger (what the footer's "N of 50 left today"
    says); a run that loses the ledger drops the count rather than guess what others sent."""
    limits = {"acct": Budget(rpd=50)}
    first = AccountBudgets(RedisStore(server.url, prefix="day:", timeout=0.5).ledger, limits)
    second = AccountBudgets(RedisStore(server.url, prefix="day:", timeout=0.5).ledger, limits)
    e = entry("acct")
    for _ in range(3):
        assert await first.admit(e, 30) is None
    assert first.shared_day == {"acct": (3, 50)}
    assert await second.admit(e, 30) is None
    assert await second.admit(e, 30) is None
    assert second.shared_day == {"acct": (5, 50)} and second.sent["acct"] == 2
    # an account without a daily budget has no count to show
    assert await second.admit(entry("other"), 30) is None
    assert "other" not in second.shared_day
    server.kill()
    assert await second.admit(e, 30) is None  # the in-process ledger took over
    assert not second.shared and second.shared_day == {}


async def test_the_in_process_ledger_claims_no_count_of_the_day() -> None:
    """Without a shared ledger the run hears no other run: no day's count is claimed."""
    budgets = AccountBudgets(None, {"acct": Budget(rpd=50)})
    assert await budgets.admit(entry("acct"), 30) is None
    assert not budgets.shared and budgets.shared_day == {} and budgets.sent["acct"] == 1
