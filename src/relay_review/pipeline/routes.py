"""Discovery to catalog, and the routing flows without a review: probe the catalog, or serve
one chat request.

The action's discovery and catalog stages log what they found, as workflow text and, for
provider texts and model ids, as untrusted lines; the catalog itself is built by
:func:`relay_review.pipeline.catalog.catalog_for`, as for every other caller."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import httpx

from relay_review import _tls
from relay_review.config import Policy, key_conventions
from relay_review.config.secrets import secret_values
from relay_review.github import actions
from relay_review.github.log import say
from relay_review.pipeline.catalog import catalog_for
from relay_review.pipeline.memory import RunMemory, account_identities
from relay_review.providers.health import PublishedHealth, read_health
from relay_review.records import Account, Catalog, ChatMessage
from relay_review.records.scrub import scrubbed
from relay_review.redact import redact, usable_secrets
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.catalog import CatalogInputError, rank_by_uptime
from relay_review.routing.send import ChatFn
from relay_review.routing.session import RoutingSession
from relay_review.state import Store
from relay_review.state.ledger import Budget

if TYPE_CHECKING:
    from relay_review.providers.discovery import DiscoveryResult
    from relay_review.records import ChatReport, PreflightReport, QuotaReport

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


def spent(session: RoutingSession | None) -> QuotaReport:
    """What the session let out per account (probes and serving; none held back) and, while it
    had the shared ledger, every run's requests in the last 24 h of each account with a daily
    budget (the run's part of ``quota``; :func:`quota_report` adds the key facts)."""
    from relay_review.records import DayCount, QuotaReport  # after the reply: not at start-up

    if session is None or session.budgets is None:
        return QuotaReport()
    budgets = session.budgets
    return QuotaReport(
        requests_by_account=dict(sorted(budgets.sent.items())),
        shared_day={
            account: DayCount(used=used, per_day=per_day)
            for account, (used, per_day) in sorted(budgets.shared_day.items())
        },
    )


def quota_report(health: PublishedHealth, cost: QuotaReport | None) -> QuotaReport:
    """What the run cost each account (``cost``, from :func:`spent`: requests let out, probes
    included; every run's requests of the day where a shared ledger counted them) and, where
    the key endpoint said, the account's free tier (for the footer and the step summary)."""
    from relay_review.records import QuotaReport

    cost = cost or QuotaReport()
    return QuotaReport(
        requests_by_account=cost.requests_by_account,
        keys=dict(sorted(health.keys.items())),
        health_requests=health.requests,
        shared_day=cost.shared_day,
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
    secrets: Iterable[str] = (),
) -> RoutingSession:
    """A routing session over the catalog's selection, bounded by the policy, with the quota
    ledger of ``store`` (shared: Redis) or of this process (see :func:`account_budgets`). No
    secret of the run goes out in a message: ``secrets``, the catalog's keys and what
    :func:`~relay_review.config.secrets.secret_values` finds in ``environ`` (the token, every
    ``*API_KEY*`` variable, the state URL's password and the state key)."""
    _tls.warm()  # begun already when run as a command (relay_review.cli.main); not by callers
    return RoutingSession(
        catalog.selected,
        preflight=policy.preflight,
        serving=policy.serving,
        environ=environ,
        chat=chat,
        started_at=time.monotonic() if started_at is None else started_at,
        wait_for_recalled=wait_for_recalled,
        budgets=account_budgets(policy, store, account_identities(catalog.selected, environ)),
        secrets=[*secrets, *RunSecrets.of(catalog, environ).values],
    )


class RunSecrets:
    """A run's secrets as the command line knows them: the catalog's keys and what
    :func:`~relay_review.config.secrets.secret_values` finds in the environment (the token,
    every ``*API_KEY*`` variable, the state URL's password and the state key). A report the
    command line prints is scrubbed of them (:meth:`redact`), as the action's is."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = usable_secrets(values)

    @classmethod
    def of(cls, catalog: Catalog, environ: Mapping[str, str]) -> RunSecrets:
        keys = (environ.get(e.route.api_key_env, "") for e in catalog.selected)
        return cls([*secret_values(environ), *keys])

    def redact(self, text: str) -> str:
        """``text`` with every secret (whole, or cut at a truncation) replaced by ``***``."""
        return redact(text, self.values)


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
    from relay_review.records import PreflightReport  # after the probes: the report's records

    return PreflightReport(
        catalog=catalog.summary(),
        readiness=session.readiness(),
        probes_sent=session.probes_sent,
        elapsed_s=session.elapsed(),
        memory=memory.report(session.board, environ, policy, None, eager=True),
        quota=quota_report(health, spent(session)),
    )


async def chat(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    messages: list[ChatMessage],
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
    served = [result.served_by.agent_id] if result.served_by else []
    memory.save(session, policy)
    from relay_review.records import ChatReport  # after the reply: the report's records

    report = ChatReport(
        time_to_reply_s=time_to_reply if result.served_by else None,  # no reply, no time
        reply=result.reply,
        served_by=result.served_by,
        stopped=result.stopped,
        attempts=list(result.attempts),
        readiness=session.readiness(),
        catalog=catalog.summary(),
        probes_sent=session.probes_sent,
        elapsed_s=session.elapsed(),
        memory=memory.report(session.board, environ, policy, served),
        quota=quota_report(health, spent(session)),
    )
    return scrubbed(report, RunSecrets.of(catalog, environ))  # a reply may quote a key


def discover_routes(
    policy: Policy, accounts: list[Account], env: Mapping[str, str], remaining: float
) -> DiscoveryResult:
    """Discovery, bounded by its own timeout and by what is left of the run's deadline."""
    keyed = sum(1 for acc in accounts if env.get(acc.api_key_env, "").strip())
    say(f"accounts: {len(accounts)}, {keyed} with a key; listing their models")
    bounds = policy.discovery
    if remaining < bounds.timeout:
        bounds = bounds.model_copy(update={"timeout": max(remaining, 0.1)})
    from relay_review.providers.discovery import discover  # the action's only: keep chat light

    result = asyncio.run(discover(accounts, env, bounds))
    lines = []  # provider error texts are untrusted: logged inside a stop-commands block
    for s in result.accounts:
        if s.status == "ok":
            lines.append(f"discovery: {s.account} ({s.kind}): {s.kept} of {s.listed} models kept")
        elif s.status == "skipped":
            lines.append(f"discovery: {s.account} ({s.kind}): skipped ({s.error})")
        else:
            lines.append(f"discovery: {s.account} ({s.kind}): error: {s.error}")
    named = {s.account for s in result.accounts}
    for error in result.errors:
        if error.account not in named:
            lines.append(f"discovery: {error.account}: error: {error.error}")
    if lines:
        actions.log_untrusted("\n".join(lines))
    return result


def build_run_catalog(policy: Policy, discovery: DiscoveryResult, require_zdr: bool) -> Catalog:
    """The catalog of the routes discovery found (and its ZDR feed, when fetched)."""
    c = policy.catalog
    feed = discovery.zdr_feed

    def unusable(exc: Exception) -> None:
        actions.warning(f"relay-review: the ZDR feed is unusable ({exc}); no route counts as ZDR")

    try:
        catalog = catalog_for(
            discovery.routes,
            c,
            zdr_feed=None if feed is None else lambda: json.loads(feed),
            require_zdr=require_zdr,
            bad_feed=unusable,
        )
    except CatalogInputError as exc:  # our own discovery output: a bug, not the user's input
        raise RuntimeError(f"discovery produced routes the catalog refuses: {exc}") from exc
    say(f"catalog: pool={c.pool} limit={c.limit} account_cap={c.account_cap} zdr={require_zdr}")
    from relay_review.render import catalog_table  # the action's only: keep chat's start light

    actions.log_untrusted(catalog_table(catalog))  # model ids come from provider listings
    return catalog


async def health_stage(
    catalog: Catalog, policy: Policy, env: Mapping[str, str], remaining: float
) -> tuple[Catalog, PublishedHealth]:
    """OpenRouter's published uptime as a prior on the catalog's order, and its key facts
    (listings, no completion; one warning when they cannot be read)."""
    problems: list[str] = []
    catalog, health = await published_health(
        catalog, policy, env, remaining=remaining, warn=problems.append
    )
    if problems:  # the texts name model ids from provider listings: logged as untrusted
        actions.warning(
            "relay-review: OpenRouter's published health could not be read in full; routes "
            "without it keep their place (no prior)",
            title="relay-review: published health unavailable",
        )
        actions.log_untrusted("\n".join(problems))
    if health.uptime:
        low = [
            e.agent_id
            for e in catalog.selected
            if e.uptime is not None and e.uptime < policy.catalog.min_uptime
        ]
        say(
            f"published health: uptime for {len(health.uptime)} routes; {len(low)} below "
            f"min_uptime {policy.catalog.min_uptime:g} % ranked last in their tier"
        )
    return catalog, health


def empty_catalog_why(
    discovery: DiscoveryResult,
    catalog: Catalog,
    accounts: list[Account],
    env: Mapping[str, str],
    require_zdr: bool,
) -> str:
    """Why no route was selected, in one sentence for the comment."""
    if not any(env.get(acc.api_key_env, "").strip() for acc in accounts):
        wanted = key_conventions() + sorted({acc.api_key_env for acc in accounts})
        return "no provider account has a key; set one of " + ", ".join(wanted)
    excluded = catalog.report.excluded
    parts = [f"{reason} {count}" for reason, count in excluded.items()]
    failed = [e.account for e in discovery.errors]
    text = f"no route was selected ({catalog.report.total_routes} discovered"
    if parts:
        text += "; excluded: " + ", ".join(parts)
    if failed:
        text += "; discovery failed for " + ", ".join(failed)
    text += ")"
    if require_zdr and excluded.get("not_zdr"):
        text += "; this repository requires zero-data-retention routes (require-zdr)"
    return text


def zdr_blocked_line(catalog: Catalog, setting: str | bool, private: bool | None) -> str | None:
    """One line when ``require-zdr`` alone left the catalog empty: what was required, why, and
    the input that changes it (said before any model is called, so no quota is spent on it)."""
    if catalog.selected or not catalog.report.excluded.get("not_zdr"):
        return None
    if str(setting).lower() != "auto":
        why = "require-zdr is true"
    elif private is None:
        why = "require-zdr is auto and the repository's visibility is unknown"
    else:
        why = "require-zdr is auto and this repository is private"
    n = catalog.report.excluded["not_zdr"]
    return (
        f"no route may review this pull request: {why}, so only zero-data-retention (ZDR) routes "
        f"may see its code, and none of the {n} eligible route{'s' if n != 1 else ''} is ZDR by "
        "its provider's own published list; set the input require-zdr: false to allow routes "
        "that may retain prompts, or add an account whose provider publishes ZDR endpoints "
        "(OpenRouter's ZDR feed)"
    )
