"""Preflight: cheap real probes that sort catalog routes into ready / deferred / rejected / timeout.

Probes go out concurrently, in catalog order, at most ``probe_budget`` per run, each asking for
at most :data:`PROBE_MAX_TOKENS` output tokens under a short bound. Routes beyond the budget stay
``unprobed`` (serving treats the real request as their probe).

Hedged preflight (the default, ``[preflight] mode = "hedged"``): serving sends the real request
first to the best-ranked route (:meth:`RouteBoard.lead_with`; or to the routes a past run proved)
and no probe goes out while that request may still answer: until it fails, or until it has gone
the hedge delay without a first byte of its answer, keep-alive comments not counted
(:func:`~.board.hedge_delay`: a multiple of the first byte memory remembers of the route, with a
floor, at most ``[preflight] hedge_delay_max``, which is also the delay when memory knows
none). Then every other route with a key is probed at
once (one probe each: a route left unprobed would later cost a full-size request unprobed), and
the first route found ready takes the request over (:func:`~.failover.serve`). On a good day no
probe is sent at all. Eager preflight (``mode = "eager"``) probes up to ``probe_budget`` routes
at once when the run starts. A route whose key is missing is
rejected without a request. An authentication or payment failure takes the whole account out
(a gateway's only when its key is confirmed bad: :func:`~.accounts.account_wide`);
a spent daily quota takes every free route of the account out (:func:`~.accounts.quota_spent`).

Results land on the :class:`~relay_review.routing.board.RouteBoard` as they arrive, so serving
can start on the first ready route while other probes are still in flight. One probe's
exception (any) never ends the others: raised by the budget or the chat call it is that
route's ``bad_reply`` (:func:`~.send.send`: rejected); raised anywhere else (a key check, the
board) the route is deferred with the exception's type as its detail (serving tries it last).
Either way with one warning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from relay_review.records import CatalogEntry, Deadlines, OutcomeKind, Readiness
from relay_review.routing.accounts import account_consequences
from relay_review.routing.board import MIN_HOLD_S, RouteBoard
from relay_review.routing.send import (
    RunContext,
    api_key_for,
    missing_key_detail,
    outcome_detail,
    send,
)

log = logging.getLogger("relay_review.preflight")

#: The most output tokens a probe may ask for.
PROBE_MAX_TOKENS = 16
#: A probe, like every request, carries a temperature (the same answer to the same probe).
PROBE_TEMPERATURE = 0.0
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word: ready"}]

#: Outcome kind -> readiness of the probed route (the probe classification table).
PROBE_TABLE: dict[OutcomeKind, Readiness] = {
    OutcomeKind.OK: Readiness.READY,
    OutcomeKind.RATE_LIMITED: Readiness.DEFERRED,
    OutcomeKind.SERVER_ERROR: Readiness.DEFERRED,  # 5xx and 408: may recover
    OutcomeKind.CONNECTION_ERROR: Readiness.DEFERRED,  # refused/reset: cheap to try again last
    OutcomeKind.TIMEOUT: Readiness.TIMEOUT,
    OutcomeKind.AUTH_FAILED: Readiness.REJECTED,
    OutcomeKind.PAYMENT_REQUIRED: Readiness.REJECTED,
    OutcomeKind.NOT_FOUND: Readiness.REJECTED,
    OutcomeKind.BAD_REQUEST: Readiness.REJECTED,
    OutcomeKind.CONTEXT_TOO_LONG: Readiness.REJECTED,
    OutcomeKind.BAD_REPLY: Readiness.REJECTED,
}


def plan_probes(
    entries: Iterable[CatalogEntry], environ: Mapping[str, str], budget: int
) -> tuple[list[CatalogEntry], list[CatalogEntry]]:
    """(routes to probe, routes without a key) in catalog order; at most ``budget`` to probe."""
    to_probe: list[CatalogEntry] = []
    keyless: list[CatalogEntry] = []
    for e in entries:
        if api_key_for(e, environ) is None:
            keyless.append(e)
        elif len(to_probe) < budget:
            to_probe.append(e)
    return to_probe, keyless


async def run_preflight(
    board: RouteBoard,
    run: RunContext,
    *,
    probe_budget: int,
    probe_timeout: float,
    wait_for_recalled: bool = False,
    hedge_delay: float | None = None,
    hedge_answer_delay: float | None = None,
) -> None:
    """Probe up to ``probe_budget`` routes concurrently and record each result on ``board``.

    Each probe is bounded by ``probe_timeout`` (and the run's connect bound and deadline). Only
    routes memory said nothing about are probed; with ``wait_for_recalled``, no probe goes out
    while a route served first (proven by a past run, or the hedged lead) is still in play (its
    real request is its probe). With a ``hedge_delay`` (hedged preflight: the bound,
    ``[preflight] hedge_delay_max``), a first-up request that goes its hedge delay
    (:func:`~.board.hedge_delay`) without a first byte no longer holds the probes back, and every
    unsettled route is probed (``probe_budget`` 0 still means no probes); one whose stream flows
    (keep-alive comments) holds them back up to ``hedge_answer_delay`` (``[preflight]
    hedge_answer_max``) instead.
    """
    if wait_for_recalled:
        await _wait_for_need(board, run, hedge_delay, hedge_answer_delay)
        if board.finished:  # the session closed while we waited: no probe is needed
            return
    if hedge_delay is not None and probe_budget > 0:
        probe_budget = len(board.entries)
    candidates = [e for e in board.unsettled() if e.agent_id not in board.first_up]
    if hedge_delay is not None:  # hedged: a remembered route not yet sent is probed too
        chosen = {e.agent_id for e in candidates} | {e.agent_id for e in board.idle_first_up()}
        candidates = [e for e in board.entries if e.agent_id in chosen]
    to_probe, keyless = plan_probes(candidates, run.environ, probe_budget)
    for e in keyless:
        board.set(
            e.agent_id, status=Readiness.REJECTED, detail=missing_key_detail(e.route.api_key_env)
        )
    try:
        await asyncio.gather(*(_guarded(board, run, e, probe_timeout) for e in to_probe))
    finally:
        board.finish()


async def _wait_for_need(
    board: RouteBoard, run: RunContext, hedge_delay: float | None, answer_delay: float | None
) -> None:
    """Wait while a route served first is still in play and may answer (or until the run
    deadline): see :meth:`RouteBoard.hedge_wait`; one its account's budget holds back does not
    keep the others unprobed."""
    while not board.finished and run.clock() < run.deadline_at:
        now = run.clock()
        wait = board.hedge_wait(now, hedge_delay, answer_delay)
        if wait is None:
            return
        await board.wait_change(min(wait, run.deadline_at - now))


async def _guarded(board: RouteBoard, run: RunContext, entry: CatalogEntry, timeout: float) -> None:
    """:func:`_probe`, its exception (never a cancellation) kept to this one route."""
    try:
        await _probe(board, run, entry, timeout)
    except Exception as exc:  # one probe's failure never ends preflight for the others
        log.warning(
            "probe %s failed: %s; the route is deferred (tried last)",
            entry.agent_id,
            type(exc).__name__,
        )
        if board.status(entry.agent_id) is not Readiness.REJECTED:
            board.set(
                entry.agent_id,
                status=Readiness.DEFERRED,
                detail=f"probe failed: {type(exc).__name__}",
                retry_after=None,
                finished_at=run.clock(),
            )


async def _probe(board: RouteBoard, run: RunContext, entry: CatalogEntry, timeout: float) -> None:
    """One probe of one route, its readiness written on the board."""
    remaining = run.deadline_at - run.clock()
    if remaining <= 0:
        return
    bound = min(timeout, remaining)
    deadlines = Deadlines(
        connect=min(run.deadlines.connect, bound),
        first_byte=bound,
        idle=bound,
        attempt=bound,
        attempt_name="probe timeout",
    )
    board.in_flight.add(entry.agent_id)
    board.set(entry.agent_id, sent=True)
    try:
        outcome = await send(
            run,
            entry,
            base_url=entry.route.base_url or "",
            api_key=api_key_for(entry, run.environ),
            model=entry.route.model,
            messages=PROBE_MESSAGES,
            deadlines=deadlines,
            max_tokens=PROBE_MAX_TOKENS,
            extra_body={"temperature": PROBE_TEMPERATURE},
        )
    finally:
        board.in_flight.discard(entry.agent_id)
    if run.deadline_struck(outcome):  # cut short by the run's end: no fact about the route
        board.set(
            entry.agent_id,
            status=Readiness.ABANDONED,
            detail=f"probe sent, abandoned when the run deadline struck after "
            f"{outcome.elapsed_s:.2f}s",
            finished_at=run.clock(),
        )
        log.info("probe %s: abandoned at the run deadline", entry.agent_id)
        return
    if outcome.sent:
        board.note(entry.agent_id, outcome)
    else:  # held back by the account budget: no probe went out, nothing to remember
        board.set(entry.agent_id, sent=False)
        board.hold(entry.agent_id, run.clock() + max(outcome.retry_after or 0.0, MIN_HOLD_S))
    status = PROBE_TABLE[outcome.kind]
    if board.status(entry.agent_id) is Readiness.REJECTED and status is not Readiness.READY:
        status = Readiness.REJECTED  # its account was condemned meanwhile
    board.set(
        entry.agent_id,
        status=status,
        http_status=outcome.http_status,
        first_byte_s=_round(outcome.first_byte_s),
        latency_s=_round(outcome.elapsed_s),
        detail=outcome_detail(outcome),
        retry_after=outcome.retry_after,
        reset_at=outcome.reset_at,
        finished_at=run.clock(),
    )
    log.info(
        "probe %s: %s (%s, http %s, %.2fs)",
        entry.agent_id,
        status.value,
        outcome.kind.value,
        outcome.http_status if outcome.http_status is not None else "-",
        outcome.elapsed_s,
    )
    await account_consequences(board, run, entry, outcome, condemn=board.reject_account)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
