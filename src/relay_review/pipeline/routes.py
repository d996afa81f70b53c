"""The routing flows without a review: probe the catalog, or serve one chat request."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import httpx

from relay_review.config import Policy
from relay_review.pipeline.memory import RunMemory, account_identities
from relay_review.providers.health import PublishedHealth, read_health
from relay_review.records import Catalog, ChatReport, KeyUsage, PreflightReport, QuotaReport
from relay_review.routing.board import ChatFn
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.catalog import rank_by_uptime
from relay_review.routing.session import RoutingSession, warm_tls_context
from relay_review.state import Store
from relay_review.state.ledger import Budget

log = logging.getLogger("relay_review.routing")


async def published_health(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    *,
    remaining: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    warn: Callable[[str], None] | None = None,
) -> tuple[Catalog, PublishedHealth]:
    """The catalog ranked by its routes' published uptime (``[catalog] min_uptime``), and what
    was read (:mod:`relay_review.providers.health`): listings only, bounded by ``[discovery]
    timeout`` (and ``remaining`` seconds of the run), no request at all when ``[discovery]
    health`` is off or no selected route is an OpenRouter route with a key. A failure is one
    warning (``warn``, else the log); routes without a figure keep their place."""
    if not policy.discovery.health:
        return catalog, PublishedHealth()
    timeout = policy.discovery.timeout
    if remaining is not None:
        timeout = max(0.1, min(timeout, remaining))
    health = await read_health(catalog.selected, environ, timeout, transport=transport)
    if health.errors:
        (warn or log.warning)(
            "published health (OpenRouter's endpoints and key listings) partly unavailable; "
            "routes without it keep their place: " + "; ".join(health.errors)
        )
    if health.uptime:
        catalog = rank_by_uptime(catalog, health.uptime, policy.catalog.min_uptime)
    return catalog, health


def requests_sent(session: RoutingSession | None) -> dict[str, int]:
    """Requests the session let out per account (probes and serving; none held back)."""
    if session is None or session.budgets is None:
        return {}
    return dict(session.budgets.sent)


def quota_report(health: PublishedHealth, sent: Mapping[str, int]) -> QuotaReport:
    """What the run cost each account (requests let out, probes included) and, where the key
    endpoint said, the account's free tier (for the footer and the step summary)."""
    return QuotaReport(
        requests_by_account=dict(sorted(sent.items())),
        keys={
            name: KeyUsage.model_validate(k.to_json()) for name, k in sorted(health.keys.items())
        },
        health_requests=health.requests,
    )


def session_for(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    chat: ChatFn | None,
    started_at: float | None = None,
    *,
    wait_for_recalled: bool = True,
    store: Store | None = None,
) -> RoutingSession:
    """A routing session over the catalog's selection, bounded by the policy, with the quota
    ledger of ``store`` (shared: Redis) or of this process (see :func:`account_budgets`)."""
    warm_tls_context()
    return RoutingSession(
        catalog.selected,
        preflight=policy.preflight,
        serving=policy.serving,
        environ=environ,
        chat=chat,
        started_at=time.monotonic() if started_at is None else started_at,
        wait_for_recalled=wait_for_recalled,
        budgets=account_budgets(policy, store, account_identities(catalog.selected, environ)),
    )


def account_budgets(
    policy: Policy, store: Store | None, identities: Mapping[str, str] | None = None
) -> AccountBudgets:
    """Each account's request budget (policy ``rpm``/``rpd``, else the provider's published
    free-tier limits for its free routes), kept in the store's shared ledger when it has one,
    under the account's identity (kind, base URL, key fingerprint), never its name."""
    limits = {a.name: Budget(a.rpm, a.rpd) for a in policy.accounts if a.rpm or a.rpd}
    return AccountBudgets(
        store.ledger if store is not None else None,
        limits,
        identities,
        timeout=policy.state.timeout_s,
        share=policy.state.offline_share,
    )


async def _routed(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    chat: ChatFn | None,
    store: Store | None,
    *,
    wait_for_recalled: bool = True,
) -> tuple[Catalog, PublishedHealth, RunMemory, RoutingSession]:
    """The catalog ranked by published health, the run's memory read, and a routing session
    over the catalog with that memory recalled onto it (the start of ``preflight`` and ``chat``)."""
    catalog, health = await published_health(catalog, policy, environ)
    memory = RunMemory.load(store, entries=catalog.selected, environ=environ, policy=policy.memory)
    session = session_for(
        catalog, policy, environ, chat, wait_for_recalled=wait_for_recalled, store=store
    )
    memory.recall_onto(session)
    return catalog, health, memory, session


async def preflight(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    chat: ChatFn | None = None,
    *,
    store: Store | None = None,
) -> PreflightReport:
    """Probe the catalog and classify every route (the ``preflight`` command's report); routes
    with fresh memory in ``store`` are reported as remembered and not probed."""
    catalog, health, memory, session = await _routed(
        catalog, policy, environ, chat, store, wait_for_recalled=False
    )
    async with session:
        await session.wait_preflight()
    memory.save(session, policy)
    return PreflightReport(
        catalog=catalog.summary(),
        readiness=session.readiness(),
        probes_sent=session.probes_sent,
        elapsed_s=session.elapsed(),
        memory=memory.report(catalog.selected, session.probes_sent, environ, policy),
        quota=quota_report(health, requests_sent(session)),
    )


async def chat(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    messages: list[dict],
    chat_fn: ChatFn | None = None,
    *,
    store: Store | None = None,
) -> ChatReport:
    """Serve one chat request with preflight and failover (the ``chat`` command's report);
    ``store`` holds what earlier runs learned of the routes (read before, written after)."""
    catalog, health, memory, session = await _routed(catalog, policy, environ, chat_fn, store)
    async with session:
        # bounded in tokens as well as time: a model that never stops ends at max_tokens
        result = await session.serve(
            messages,
            max_tokens=policy.review.max_output_tokens,
            extra_body={"temperature": policy.review.temperature},
        )
        time_to_reply = session.elapsed()  # before in-flight probes are cancelled at close
    memory.save(session, policy)
    return ChatReport(
        time_to_reply_s=time_to_reply if result.served_by else None,  # no reply, no time
        reply=result.reply,
        served_by=result.served_by,
        stopped=result.stopped,
        attempts=list(result.attempts),
        readiness=session.readiness(),
        catalog=catalog.summary(),
        probes_sent=session.probes_sent,
        elapsed_s=session.elapsed(),
        memory=memory.report(catalog.selected, session.probes_sent, environ, policy),
        quota=quota_report(health, requests_sent(session)),
    )
