"""Two repositories share one OpenRouter key through one Redis ledger, under different policies:
one sets ``rpm`` for the account, the other keeps the published free tier (20 a minute). The
provider counts their free requests in one window, so the ledger must too. Before, the policy
chose the window (``id`` when ``rpm`` was set, ``id:free`` otherwise): the two filled a window
each, 10 + 20 = 30 requests in a minute against OpenRouter's 20, so the provider answered 429.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from redis_server import RedisServer
from relay_review.records import CatalogEntry, Cost, Route
from relay_review.routing.budget import AccountBudgets
from relay_review.state.ledger import Budget
from relay_review.state.redis_store import RedisStore

pytestmark = pytest.mark.integration

IDENTITY = "openrouter:url-hash:key-fingerprint"  # what the pipeline derives from the key


def free_route(model: str, cost: Cost = Cost.FREE) -> CatalogEntry:
    route = Route(
        index=0,
        account="openrouter",
        provider="openrouter",
        model=model,
        agent_id=f"openrouter/{model}",
        base_url="http://127.0.0.1:9/api/v1",
        api_key_env="OPENROUTER_API_KEY",
    )
    return CatalogEntry(route=route, cost=cost, zdr=False, priority=1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis")
    yield started
    started.stop()


async def test_two_policies_on_one_key_share_its_free_window(server: RedisServer) -> None:
    stores = [RedisStore(server.url, prefix="org:", timeout=1.0) for _ in range(2)]
    capped = AccountBudgets(
        stores[0].ledger, {"openrouter": Budget(rpm=10)}, {"openrouter": IDENTITY}
    )
    published = AccountBudgets(stores[1].ledger, {}, {"openrouter": IDENTITY})
    route = free_route("vendor/model:free")
    assert capped.budget_of(route)[0] == published.budget_of(route)[0]
    granted = {"capped": 0, "published": 0}
    for _ in range(15):  # both repositories keep asking within one minute
        for name, budgets in (("capped", capped), ("published", published)):
            if await budgets.admit(route, 30) is None:
                granted[name] += 1
    assert sum(granted.values()) <= 20, granted  # OpenRouter's free requests a minute
    assert granted["capped"] <= 10, granted  # each policy's own limit still holds
    # a priced route of the same key counts apart, in the account's other window
    priced = free_route("vendor/model", Cost.PRICED)
    assert capped.budget_of(priced)[0] != capped.budget_of(route)[0]
    assert await capped.admit(priced, 30) is None
