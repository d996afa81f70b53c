"""Route discovery: list each keyed account's models, keep the chat-capable ones, attach price
evidence, and write the report.

Accounts are asked concurrently (:mod:`.listings`), each request bounded by ``[discovery]
timeout``; one account failing is recorded under ``errors`` and does not stop the others. Keys
are only sent to the account's own base URL, and every error text is scrubbed of every key
before it is recorded. The routes are built by :mod:`.routes` (:mod:`.chat_filter`,
:mod:`.prices`). When an ``openrouter`` account has a key, OpenRouter's ZDR feed is saved byte
for byte beside the report as ``<report stem>.zdr.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from relay_review import __version__
from relay_review._files import atomic_write
from relay_review.providers.discovery.listings import (
    FetchError,
    fetch_models_dev,
    fetch_zdr,
    list_models,
)
from relay_review.providers.discovery.routes import build_routes
from relay_review.providers.discovery.text import clip
from relay_review.records import Account, DiscoveredAccount, DiscoveryError, Route, has_key
from relay_review.redact import redact

logger = logging.getLogger(__name__)

ZDR_ERROR_ACCOUNT = "openrouter-zdr"
MODELS_DEV_ERROR_ACCOUNT = "models.dev"


class DiscoveryBounds(Protocol):
    """What discovery reads from the policy's ``[discovery]`` table (``settings.DiscoveryPolicy``).

    A protocol, so this edge does not import the settings module (which imports provider kinds).
    """

    @property
    def timeout(self) -> float: ...
    @property
    def models_dev_url(self) -> str: ...
    @property
    def zdr_url(self) -> str: ...


@dataclass
class DiscoveryResult:
    """What discovery found: the routes (records, handed to the catalog as they are), the
    errors, each account's summary and the ZDR feed's bytes. :meth:`report` is the discovery
    report file's JSON (``routes``, ``errors``, ``dropped``, ``zdr_feed``).
    """

    routes: list[Route] = field(default_factory=list)
    errors: list[DiscoveryError] = field(default_factory=list)
    zdr_feed: bytes | None = None
    accounts: list[DiscoveredAccount] = field(default_factory=list)

    def report(self, zdr_feed_name: str | None) -> dict[str, Any]:
        """The report file's JSON; ``zdr_feed_name`` names the saved feed, if any. ``dropped``
        maps each listed account to how many of its listed ids were left out, by reason."""
        dropped = {s.account: s.dropped for s in self.accounts if s.status == "ok"}
        return {
            "routes": [route.report_json() for route in self.routes],
            "errors": [e.model_dump(mode="json") for e in self.errors],
            "dropped": dropped,
            "zdr_feed": zdr_feed_name,
        }


def _scrub(text: str, secrets: Iterable[str]) -> str:
    """Remove every secret value in ``text``, whole or cut (keys should never get there)."""
    return redact(text, secrets, "[redacted]")


async def _outcome(coro: Any, secrets: Sequence[str]) -> tuple[Any, str | None]:
    """Await ``coro``; a failure becomes a scrubbed error text instead of an exception."""
    try:
        return await coro, None
    except FetchError as exc:
        return None, _scrub(str(exc), secrets)
    except Exception as exc:  # a bug or an odd transport error must not sink the other accounts
        logger.debug("discovery fetch failed unexpectedly", exc_info=True)
        return None, _scrub(f"{type(exc).__name__}: {clip(str(exc))}", secrets)


async def discover(
    accounts: Sequence[Account],
    environ: Mapping[str, str],
    settings: DiscoveryBounds,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> DiscoveryResult:
    """List every keyed account's models concurrently and build the discovery report.

    Accounts without a key are reported as skipped. Models.dev is fetched only when a keyed
    account prices from it; the ZDR feed only when a keyed ``openrouter`` account exists.
    """
    keyed = [acc for acc in accounts if has_key(acc, environ)]
    keys = {acc.name: environ[acc.api_key_env].strip() for acc in keyed}
    secrets = sorted(set(keys.values()), key=len, reverse=True)
    timeout = settings.timeout
    result = DiscoveryResult()
    want_models_dev = any(acc.pricing == "models.dev" for acc in keyed)
    want_zdr = any(acc.kind == "openrouter" for acc in keyed)

    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        headers={"User-Agent": f"relay-review/{__version__}", "Accept": "application/json"},
        transport=transport,
    ) as client:
        jobs = [
            _outcome(list_models(client, acc, keys[acc.name], timeout), secrets) for acc in keyed
        ]
        if want_models_dev:
            jobs.append(
                _outcome(fetch_models_dev(client, settings.models_dev_url, timeout), secrets)
            )
        if want_zdr:
            jobs.append(_outcome(fetch_zdr(client, settings.zdr_url, timeout), secrets))
        outcomes = list(await asyncio.gather(*jobs))

    listings = outcomes[: len(keyed)]
    extra = outcomes[len(keyed) :]
    models_dev, models_dev_error = extra.pop(0) if want_models_dev else (None, None)
    if want_models_dev and models_dev_error:
        result.errors.append(
            DiscoveryError(
                account=MODELS_DEV_ERROR_ACCOUNT, kind="models.dev", error=models_dev_error
            )
        )
    if want_zdr:
        result.zdr_feed, zdr_error = extra.pop(0)
        if zdr_error:
            result.errors.append(
                DiscoveryError(account=ZDR_ERROR_ACCOUNT, kind="openrouter", error=zdr_error)
            )

    by_name = {acc.name: outcome for acc, outcome in zip(keyed, listings, strict=True)}
    for acc in accounts:
        if acc.name not in by_name:
            result.accounts.append(
                DiscoveredAccount(
                    account=acc.name,
                    kind=acc.kind,
                    status="skipped",
                    error=f"{acc.api_key_env} is not set",
                )
            )
            continue
        entries, error = by_name[acc.name]
        if error:
            result.errors.append(DiscoveryError(account=acc.name, kind=acc.kind, error=error))
            result.accounts.append(
                DiscoveredAccount(account=acc.name, kind=acc.kind, status="error", error=error)
            )
            logger.debug("account %s: %s", acc.name, error)
            continue
        dropped: Counter[str] = Counter()
        routes = build_routes(acc, entries, models_dev, models_dev_error, dropped)
        result.routes.extend(routes)
        summary = DiscoveredAccount(
            account=acc.name,
            kind=acc.kind,
            status="ok",
            listed=len(entries),
            kept=len(routes),
            dropped=dict(sorted(dropped.items())),
        )
        result.accounts.append(summary)
        logger.debug(
            "account %s: %d listed, %d kept; dropped: %s",
            acc.name,
            len(entries),
            len(routes),
            summary.dropped_text() or "none",
        )

    result.routes.sort(key=lambda r: (r.account, r.model))
    result.routes = [r.model_copy(update={"index": i}) for i, r in enumerate(result.routes)]
    result.errors.sort(key=lambda e: (e.account, e.error))
    result.accounts.sort(key=lambda s: s.account)
    return result


def zdr_feed_path(out: Path) -> Path:
    """Where the ZDR feed is saved: ``report.json`` -> ``report.zdr.json`` beside it."""
    return out.with_name(f"{out.stem}.zdr.json")


def write_report(result: DiscoveryResult, out: str | Path) -> dict[str, Any]:
    """Write the report (and the ZDR feed beside it, if fetched); return the report written.

    Without a fetched feed, a feed file left there by an earlier run is removed, so the
    directory never holds ZDR evidence the report does not vouch for.
    """
    out = Path(out)
    feed_path = zdr_feed_path(out)
    if result.zdr_feed is not None:
        atomic_write(feed_path, result.zdr_feed)
        report = result.report(feed_path.name)
    else:
        feed_path.unlink(missing_ok=True)
        report = result.report(None)
    atomic_write(out, (json.dumps(report, indent=2, allow_nan=False) + "\n").encode())
    return report
