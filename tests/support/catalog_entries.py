"""Catalog entries for routing tests: one free ``openai_compatible`` route per model, one account
each, ranked in the order given (the real ``build_catalog`` over a discovery report)."""

from __future__ import annotations

from relay_review.records import CatalogEntry, Cost, Route
from relay_review.routing.catalog import build_catalog, parse_discovery


def entries(*models: str) -> list[CatalogEntry]:
    """Catalog entries for ``models``, one account each (``acct00``, ``acct01``, ...), in order."""
    raws = [
        {
            "account": f"acct{i:02d}",
            "provider": "openai_compatible",
            "model": model,
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "K",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for i, model in enumerate(models)
    ]
    return build_catalog(parse_discovery({"routes": raws}), limit=50).selected


def route_entry(
    account: str, model: str, provider: str = "openai_compatible", *, priority: int = 1
) -> CatalogEntry:
    """One free route ``{account}/{model}`` (``provider``), its key in ``{ACCOUNT}_KEY``."""
    route = Route(
        index=0,
        account=account,
        provider=provider,
        model=model,
        agent_id=f"{account}/{model}",
        api_key_env=f"{account.upper()}_KEY",
    )
    return CatalogEntry(route=route, cost=Cost.FREE, zdr=False, priority=priority)
