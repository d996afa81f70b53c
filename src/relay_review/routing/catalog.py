"""The catalog: a pure, order-independent selection of routes, filled round-robin across accounts.

Why round-robin: a catalog filled in sort order once took 8 + 4 routes from two NVIDIA keys and
none from OpenRouter, so one stalled provider took the whole review down. Here every account gets
a turn before any account gets a second one, inside each tier:

    free+ZDR  ->  free+non-ZDR  ->  priced+ZDR  ->  priced+non-ZDR

Inside a tier an account's routes are queued by (model, agent_id); accounts take turns in
alphabetical order, one route per turn. ``account_cap`` counts over the whole catalog; the fill
stops at ``limit``. The i-th selected route of n gets priority n - i.

**Published health** (:func:`rank_by_uptime`, issue 25) changes order only, never the
selection: after the fill, inside each tier, the routes whose published uptime is below
``[catalog] min_uptime`` move behind that tier's other routes (keeping their relative order),
so they are served and probed last within their tier; free stays before priced and ZDR before
non-ZDR. A route with no published figure has no prior and keeps its place.

Input validation is strict (a bad report is a user error, exit 2), and every message names the
route's index and the field.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from relay_review.errors import UsageError
from relay_review.kinds import default_base_url, default_key_env
from relay_review.records import (
    RESPONSE_FORMATS,
    Catalog,
    CatalogEntry,
    CatalogReport,
    Cost,
    Route,
)

Pool = Literal["free", "auto"]

#: Reasons a route is left out, in the order they are checked.
EXCLUDED_UNKNOWN_COST = "unknown_cost"
EXCLUDED_POOL = "priced_not_in_pool"
EXCLUDED_NOT_ZDR = "not_zdr"
EXCLUDED_ACCOUNT_CAP = "account_cap"
EXCLUDED_LIMIT = "limit"


class CatalogInputError(UsageError):
    """A discovery report or ZDR feed that breaks the catalog contract."""


def _price(raw: Mapping[str, Any], index: int, field: str) -> float | None:
    value = raw.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogInputError(
            f"routes[{index}].{field}: expected a number or null, got {type(value).__name__} "
            f"{value!r:.40}"
        )
    try:
        price = float(value)
    except OverflowError:  # an int beyond a float's range
        price = math.inf
    if not math.isfinite(price):
        raise CatalogInputError(f"routes[{index}].{field}: {value!r:.40} is not a finite price")
    if price < 0:
        raise CatalogInputError(f"routes[{index}].{field}: {value} is negative")
    return price


def _text(raw: Mapping[str, Any], index: int, field: str, *, required: bool) -> str | None:
    value = raw.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        what = "missing" if value is None else f"{type(value).__name__} {value!r:.40}"
        raise CatalogInputError(f"routes[{index}].{field}: expected a non-empty string, got {what}")
    return value


def parse_route(raw: Any, index: int) -> Route:
    """Validate one route of a discovery report file and fill in its defaults (the file is
    input: in process, discovery builds its routes as records)."""
    if not isinstance(raw, Mapping):
        raise CatalogInputError(f"routes[{index}]: expected an object, got {type(raw).__name__}")
    account = _text(raw, index, "account", required=True)
    provider = _text(raw, index, "provider", required=True)
    model = _text(raw, index, "model", required=True)
    assert account and provider and model
    agent_id = _text(raw, index, "agent_id", required=False) or f"{account}/{model}"
    prompt = _price(raw, index, "prompt_price_per_1k")
    completion = _price(raw, index, "completion_price_per_1k")
    if (prompt is None) != (completion is None):
        missing = "prompt_price_per_1k" if prompt is None else "completion_price_per_1k"
        raise CatalogInputError(
            f"routes[{index}].{missing}: missing while the other price is present "
            "(give both prices or neither)"
        )
    context = raw.get("context_length")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int)):
        raise CatalogInputError(
            f"routes[{index}].context_length: expected an integer or null, got {context!r:.40}"
        )
    base_url = _text(raw, index, "base_url", required=False) or default_base_url(provider)
    if base_url is None:  # a route nobody can call: refuse it now, not as a URL error later
        raise CatalogInputError(
            f"routes[{index}].base_url: missing, and provider {provider!r:.40} has no default "
            "URL (give base_url, or a known provider kind)"
        )
    return Route(
        index=index,
        account=account,
        provider=provider,
        model=model,
        agent_id=agent_id,
        base_url=base_url,
        api_key_env=_text(raw, index, "api_key_env", required=False)
        or default_key_env(account, provider),
        prompt_price_per_1k=prompt,
        completion_price_per_1k=completion,
        context_length=context,
        cost=Cost.of(prompt, completion),
        response_format=fmt if (fmt := raw.get("response_format")) in RESPONSE_FORMATS else None,
        price_note=note if isinstance(note := raw.get("price_note"), str) else None,
    )


def parse_discovery(report: Any) -> list[Route]:
    """Validate a discovery report file's JSON (``{"routes": [...]}``); unknown fields are
    ignored."""
    if not isinstance(report, Mapping) or not isinstance(report.get("routes"), list):
        raise CatalogInputError('discovery report: expected an object with a "routes" list')
    routes = [parse_route(raw, i) for i, raw in enumerate(report["routes"])]
    seen: dict[str, int] = {}
    for route in routes:
        if route.agent_id in seen:
            raise CatalogInputError(
                f"routes[{route.index}].agent_id: {route.agent_id!r} duplicates "
                f"routes[{seen[route.agent_id]}]"
            )
        seen[route.agent_id] = route.index
    return routes


def parse_zdr_feed(feed: Any) -> list[str]:
    """Model ids from a feed shaped like OpenRouter's ``/endpoints/zdr``; non-string ids skipped."""
    if not isinstance(feed, Mapping) or not isinstance(feed.get("data"), list):
        raise CatalogInputError('ZDR feed: expected an object with a "data" list')
    return [
        entry["model_id"]
        for entry in feed["data"]
        if isinstance(entry, Mapping) and isinstance(entry.get("model_id"), str)
    ]


#: Providers whose own published ZDR list the feed is: OpenRouter's ``/endpoints/zdr`` lists
#: OpenRouter's endpoints, so it is evidence for OpenRouter routes only.
ZDR_FEED_PROVIDERS = frozenset({"openrouter"})


class ZdrIndex:
    """Answers "is this route zero-data-retention?" from a feed's model ids.

    Only from evidence the route's provider publishes itself: an OpenRouter route whose model id
    is in OpenRouter's feed (case-insensitive, exact). A route of another provider is never ZDR
    by this feed, even when its model has the same name: the feed says what OpenRouter's
    endpoints retain, nothing about NVIDIA's or anyone else's.
    """

    def __init__(self, model_ids: Iterable[str] | None) -> None:
        self._exact = {m.lower() for m in model_ids or ()}

    def is_zdr(self, provider: str, model: str) -> bool:
        return provider in ZDR_FEED_PROVIDERS and model.lower() in self._exact


def _tier(cost: Cost, zdr: bool) -> int:
    return (0 if cost is Cost.FREE else 2) + (0 if zdr else 1)


def build_catalog(
    routes: Sequence[Route],
    zdr_model_ids: Iterable[str] | None = None,
    *,
    limit: int = 12,
    account_cap: int = 8,
    pool: Pool = "free",
    require_zdr: bool = False,
) -> Catalog:
    """Select at most ``limit`` routes, round-robin across accounts inside each tier.

    Pure and order-independent: any permutation of ``routes`` gives the same catalog.
    """
    if limit < 0 or account_cap < 0:
        raise CatalogInputError("limit and account_cap must be 0 or more")
    if pool not in ("free", "auto"):
        raise CatalogInputError(f"pool {pool!r} is not allowed; use free or auto")
    zdr_index = ZdrIndex(zdr_model_ids)
    excluded: Counter[str] = Counter()
    tiers: dict[int, dict[str, list[tuple[Route, bool]]]] = {}
    for route in routes:
        zdr = zdr_index.is_zdr(route.provider, route.model)
        if route.cost is Cost.UNKNOWN:
            excluded[EXCLUDED_UNKNOWN_COST] += 1
        elif route.cost is Cost.PRICED and pool == "free":
            excluded[EXCLUDED_POOL] += 1
        elif require_zdr and not zdr:
            excluded[EXCLUDED_NOT_ZDR] += 1
        else:
            tiers.setdefault(_tier(route.cost, zdr), {}).setdefault(route.account, []).append(
                (route, zdr)
            )

    picked: list[tuple[Route, bool]] = []
    per_account: Counter[str] = Counter()
    for tier in sorted(tiers):
        queues = {
            account: sorted(items, key=lambda item: (item[0].model, item[0].agent_id))
            for account, items in tiers[tier].items()
        }
        order = sorted(queues)
        progress = True
        while progress and len(picked) < limit:
            progress = False
            for account in order:
                if len(picked) >= limit:
                    break
                if per_account[account] >= account_cap or not queues[account]:
                    continue
                picked.append(queues[account].pop(0))
                per_account[account] += 1
                progress = True
        for account, left in queues.items():
            reason = EXCLUDED_ACCOUNT_CAP if per_account[account] >= account_cap else EXCLUDED_LIMIT
            if left:
                excluded[reason] += len(left)

    n = len(picked)
    selected = [
        CatalogEntry(route=route, cost=route.cost, zdr=zdr, priority=n - i)
        for i, (route, zdr) in enumerate(picked)
    ]
    costs = Counter(route.cost for route in routes)
    by_account = Counter(e.account for e in selected)
    report = CatalogReport(
        total_routes=len(routes),
        free_routes=costs[Cost.FREE],
        priced_routes=costs[Cost.PRICED],
        unknown_routes=costs[Cost.UNKNOWN],
        account_diversity=len(by_account),
        selected_by_account=dict(sorted(by_account.items())),
        zdr_selected=sum(1 for e in selected if e.zdr),
        excluded=dict(sorted(excluded.items())),
    )
    return Catalog(selected=selected, report=report)


def rank_by_uptime(catalog: Catalog, uptime: Mapping[str, float], min_uptime: float) -> Catalog:
    """The same selection with each route's published ``uptime`` (agent id -> percent)
    attached, and inside each tier the routes below ``min_uptime`` moved last (see the module
    doc); priorities renumbered n..1 in the new order. Pure."""

    def low(entry: CatalogEntry) -> bool:
        value = uptime.get(entry.agent_id)
        return value is not None and value < min_uptime

    ordered = sorted(
        enumerate(catalog.selected),
        key=lambda item: (_tier(item[1].cost, item[1].zdr), low(item[1]), item[0]),
    )
    n = len(ordered)
    selected = [
        entry.model_copy(update={"priority": n - i, "uptime": uptime.get(entry.agent_id)})
        for i, (_, entry) in enumerate(ordered)
    ]
    return Catalog(selected=selected, report=catalog.report)
