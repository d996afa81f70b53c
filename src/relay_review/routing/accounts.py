"""What one route's outcome means for its account, and the key check that decides it.

An authentication or payment failure condemns the whole account (preflight rejects its routes,
serving takes them out): at once for a direct provider; for a gateway, which fronts other
providers, or a failure that may be a refusal of the content, only once ``GET /models`` refuses
the key (checked at most once per account per run). A spent quota takes the account's free
routes out. Preflight and serving both decide here, so a probe and an attempt mean the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from relay_review.kinds import is_gateway
from relay_review.records import CatalogEntry, Deadlines, Outcome, OutcomeKind
from relay_review.routing.board import RouteBoard
from relay_review.routing.send import RunContext, api_key_for

#: Outcomes that condemn every route of the account, not just the one that saw them.
ACCOUNT_WIDE = frozenset({OutcomeKind.AUTH_FAILED, OutcomeKind.PAYMENT_REQUIRED})


async def account_consequences(
    board: RouteBoard,
    run: RunContext,
    entry: CatalogEntry,
    outcome: Outcome,
    *,
    condemn: Callable[[str, str], None],
) -> None:
    """What one route's failure means for its account: an auth/payment failure ``condemn``s
    the whole account (a gateway's only once its key is confirmed bad); a spent quota takes the
    account's free routes out. Probing rejects, serving takes out: the caller says which."""
    if outcome.kind in ACCOUNT_WIDE:
        why = await account_wide(board, run, entry, confirm=outcome.content_refusal)
        if why is not None:
            board.condemned.add(entry.account)
            condemn(entry.account, account_out_detail(entry.account, outcome, why))
    elif quota_spent(outcome, run.clock(), run.deadline_at):
        board.take_out_free_routes(
            entry.account, outcome, quota_detail(entry.account, outcome), seen_on=entry.agent_id
        )


def quota_spent(outcome: Outcome, now: float, deadline_at: float) -> bool:
    """Whether a rate-limited outcome says the account's free allowance is gone for the run: a
    per-day quota used up, or no requests remaining until after the run deadline."""
    if outcome.kind is not OutcomeKind.RATE_LIMITED:
        return False
    if outcome.daily_quota:
        return True
    wait = outcome.retry_after
    return outcome.quota_exhausted and wait is not None and now + wait >= deadline_at


def quota_detail(account: str, outcome: Outcome) -> str:
    """The readiness detail of a free route taken out by its account's spent quota."""
    what = "daily quota used up" if outcome.daily_quota else "no requests left this run"
    reset = f"; resets {outcome.reset_at}" if outcome.reset_at else ""
    return f"account {account}: {what}{reset}"


async def account_wide(
    board: RouteBoard, run: RunContext, entry: CatalogEntry, *, confirm: bool = False
) -> str | None:
    """After an auth or payment failure on ``entry``: why the whole account is out (``""`` for a
    direct provider: the failure itself says it), or None when only this route is.

    Direct providers: always the account, unless ``confirm`` (the failure may be a refusal of the
    content, e.g. a WAF's HTML 403). Gateways (``openai_compatible``) and ``confirm``: only when
    one authenticated ``GET {base_url}/models`` refuses the key (401/403), checked at most once
    per account per run, within the run deadline and the connect/first-byte bounds.
    """
    if not is_gateway(entry.route.provider) and not confirm:
        return ""
    if run.key_check is None or not entry.route.base_url:
        return None
    task = board.key_checks.get(entry.account)
    if task is None:
        task = asyncio.ensure_future(_check_key(run, entry))
        board.key_checks[entry.account] = task
    refused = await asyncio.shield(task)
    return "key refused by GET /models" if refused else None


async def _check_key(run: RunContext, entry: CatalogEntry) -> bool | None:
    remaining = run.deadline_at - run.clock()
    if remaining <= 0 or run.key_check is None:
        return None
    d = run.deadlines
    bound = min(d.first_byte, d.attempt, remaining)
    deadlines = Deadlines(
        connect=min(d.connect, bound), first_byte=bound, idle=bound, attempt=bound
    )
    return await run.key_check(
        run.client,
        base_url=entry.route.base_url or "",
        api_key=api_key_for(entry, run.environ),
        deadlines=deadlines,
    )


def account_out_detail(account: str, outcome: Outcome, why: str) -> str:
    """The readiness detail of a route whose account an auth or payment failure took out."""
    return f"account {account}: {outcome.kind.value}" + (f" ({why})" if why else "")
