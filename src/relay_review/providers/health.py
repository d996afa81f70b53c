"""Published health: what OpenRouter says of its endpoints and of a key, read before any probe.

Two listings, never a completion (no free-tier request is spent on them):

- ``GET {base_url}/models/{author}/{slug}/endpoints`` (documented at
  https://openrouter.ai/docs/api/api-reference/endpoints/list-all-endpoints-for-a-model):
  ``{"data": {"id", ..., "endpoints": [{"provider_name", "uptime_last_5m", "uptime_last_30m",
  "uptime_last_1d", "latency_last_30m": {"p50", ...}, ...}]}}``. One request per distinct
  model of the catalog's OpenRouter routes, at most :data:`HEALTH_CONCURRENCY` at a time.
- ``GET {base_url}/key`` (documented at https://openrouter.ai/docs/api/api-reference/api-keys/
  get-current-key and https://openrouter.ai/docs/limits): ``{"data": {"is_free_tier", "usage",
  "usage_daily", "limit", "limit_remaining", ...}}``. One request per OpenRouter account.

**A route's published uptime** (percent): for each endpoint the lower of its
``uptime_last_5m`` and ``uptime_last_30m`` (whichever are given: a recent outage shows), and
for the route the highest over its endpoints (OpenRouter itself falls over between them).
Every number is input: a value that is not a finite number is ignored, the rest are clamped to
0..100. No endpoint with a figure -> no prior.

**What the key says.** The key endpoint reports credits (``usage``, ``usage_daily``,
``limit_remaining``: USD) and ``is_free_tier``; it does **not** report free requests used or
left today. The daily allowance of free (``:free``) requests is the documented one:
:data:`FREE_PER_DAY` for a free-tier account (1,000 once 10 USD of credits were bought, which
the key endpoint does not say), so it is given only when ``is_free_tier`` is true.

Both are optional: every failure (timeout, HTTP error, bad JSON, wrong shape) is collected in
``errors`` and the run goes on without the prior; the caller says so in one warning. Keys are
sent only as ``Authorization: Bearer`` to the account's own base URL, and error texts are
scrubbed of them. Routes of other kinds are never asked about (no request at all).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from relay_review import __version__
from relay_review.records import CatalogEntry
from relay_review.redact import redact

if TYPE_CHECKING:
    from relay_review.records import KeyUsage

#: The provider kinds whose health this module reads (only OpenRouter publishes it).
HEALTH_KINDS = frozenset({"openrouter"})
#: At most this many endpoint listings in flight at once.
HEALTH_CONCURRENCY = 4
#: At most this many distinct models asked about in one run (the catalog holds fewer).
HEALTH_MAX_MODELS = 32
#: Free (``:free``) requests a day of an OpenRouter account on the free tier (docs, 2026-09).
FREE_PER_DAY = 50
#: An OpenRouter model id as the endpoints path takes it: ``author/slug`` with an optional
#: ``:variant``; anything else (``..``, more segments, spaces) is not asked about.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]*/[A-Za-z0-9][A-Za-z0-9._~-]*(:[a-z0-9._-]+)?$")


def percent(value: Any) -> float | None:
    """A published uptime as a percent in 0..100, or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(min(100.0, max(0.0, value)))  # clamped first: an int beyond a float's range


def endpoint_uptime(endpoint: Any) -> float | None:
    """One endpoint's uptime: the lower of its last 5 and last 30 minutes' (those given)."""
    if not isinstance(endpoint, Mapping):
        return None
    values = [percent(endpoint.get(k)) for k in ("uptime_last_5m", "uptime_last_30m")]
    known = [v for v in values if v is not None]
    return min(known) if known else None


def model_uptime(payload: Any) -> float | None:
    """A model's published uptime from its endpoints listing: the best endpoint's (see the
    module doc); None when no endpoint gives a figure."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    endpoints = data.get("endpoints") if isinstance(data, Mapping) else None
    if not isinstance(endpoints, list):
        raise ValueError('unexpected reply: expected {"data": {"endpoints": [...]}}')
    known = [u for u in (endpoint_uptime(e) for e in endpoints) if u is not None]
    return max(known) if known else None


def _credits(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond a float's range: no credit figure
        return None
    return max(0.0, number) if math.isfinite(number) else None


def key_info(account: str, payload: Any) -> KeyUsage:
    """The key endpoint's reply as :class:`KeyUsage` (unknown or unreadable fields: None;
    ``free_per_day`` the documented allowance when the key is on the free tier)."""
    from relay_review.records import KeyUsage  # the quota records: only once a key was read

    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, Mapping):
        raise ValueError('unexpected reply: expected {"data": {...}}')
    free = data.get("is_free_tier")
    is_free = free if isinstance(free, bool) else None
    return KeyUsage(
        account=account,
        is_free_tier=is_free,
        usage_daily=_credits(data.get("usage_daily")),
        limit_remaining=_credits(data.get("limit_remaining")),
        free_per_day=FREE_PER_DAY if is_free else None,
    )


@dataclass
class PublishedHealth:
    """What was read: uptime per catalog route (agent id -> percent), the key facts per
    account, the requests made, and what failed (scrubbed texts)."""

    uptime: dict[str, float] = field(default_factory=dict)
    keys: dict[str, KeyUsage] = field(default_factory=dict)
    requests: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "uptime": dict(sorted(self.uptime.items())),
            "keys": {name: k.model_dump(mode="json") for name, k in sorted(self.keys.items())},
            "requests": self.requests,
            "errors": list(self.errors),
        }


async def _get(client: httpx.AsyncClient, url: str, key: str, timeout: float) -> Any:
    """GET one JSON listing with the account's key (discovery's bounded fetch; FetchError)."""
    from relay_review.providers.discovery.listings import get_json

    payload, _ = await get_json(client, url, timeout, {"Authorization": f"Bearer {key}"})
    return payload


async def read_health(
    entries: Sequence[CatalogEntry],
    environ: Mapping[str, str],
    timeout: float,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> PublishedHealth:
    """Read the published health of the OpenRouter routes among ``entries`` (and each of their
    accounts' key facts), every request bounded by ``timeout`` and the whole read by it too."""
    result = PublishedHealth()
    keyed = [
        e
        for e in entries
        if e.route.provider in HEALTH_KINDS
        and e.route.base_url
        and environ.get(e.route.api_key_env, "").strip()
    ]
    if not keyed:
        return result
    # discovery's package loads here, not with this module: a run from a discovery file that
    # reads no health (no OpenRouter route with a key) sends its first request without it
    from relay_review.providers.discovery.listings import FetchError

    secrets = sorted({environ[e.route.api_key_env].strip() for e in keyed}, key=len, reverse=True)
    models: dict[tuple[str, str], list[CatalogEntry]] = {}
    for e in keyed:
        if _MODEL_ID.match(e.route.model):
            models.setdefault((str(e.route.base_url), e.route.model), []).append(e)
    asked = list(models.items())[:HEALTH_MAX_MODELS]
    accounts = {e.account: e for e in keyed}
    gate = asyncio.Semaphore(HEALTH_CONCURRENCY)
    errors: dict[str, list[str]] = {}

    def scrub(text: str) -> str:
        return redact(text, secrets, "[redacted]")

    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        headers={"User-Agent": f"relay-review/{__version__}", "Accept": "application/json"},
        transport=transport,
    ) as client:

        async def one_model(base: str, model: str, users: list[CatalogEntry]) -> None:
            key = environ[users[0].route.api_key_env].strip()
            async with gate:
                result.requests += 1
                try:
                    uptime = model_uptime(
                        await _get(client, f"{base}/models/{model}/endpoints", key, timeout)
                    )
                except (FetchError, ValueError) as exc:
                    errors.setdefault("endpoints", []).append(scrub(f"{model}: {exc}"))
                    return
            if uptime is not None:
                for e in users:
                    result.uptime[e.agent_id] = uptime

        async def one_key(name: str, entry: CatalogEntry) -> None:
            key = environ[entry.route.api_key_env].strip()
            result.requests += 1
            try:
                info = key_info(
                    name, await _get(client, f"{entry.route.base_url}/key", key, timeout)
                )
            except (FetchError, ValueError) as exc:
                errors.setdefault("key", []).append(scrub(f"{name}: {exc}"))
                return
            result.keys[name] = info

        jobs = [one_model(base, model, users) for (base, model), users in asked]
        jobs += [one_key(name, entry) for name, entry in sorted(accounts.items())]
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*jobs)
        except TimeoutError:
            errors.setdefault("timeout", []).append(f"not finished within {timeout:g} s")
    for what, texts in sorted(errors.items()):
        listed = "; ".join(texts[:3]) + (f"; and {len(texts) - 3} more" if len(texts) > 3 else "")
        result.errors.append(f"{what}: {listed}")
    return result
