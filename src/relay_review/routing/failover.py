"""Failover: the one retry loop. It decides which route to try next, and when to give up.

Order of service: **ready** routes (by priority) -> **unprobed** routes (by priority; the real
request is their probe) -> **deferred** routes (only those whose ``retry_after`` ends before the
run deadline; the one free soonest first, then by priority) -> never ``timeout`` or ``rejected``
routes. While probes are still in flight and no route is ready, the loop waits for the next probe
result (never longer than the deadline); as soon as one route is ready it is served, whatever
other probes are doing.

After a failed attempt the route is out for the rest of the run (no timed re-admission: a breaker
that re-admitted a stalled route every 30 s let it back in 29 times in one run). An auth or payment
failure takes every route of that account out. The whole-run deadline bounds every wait and
every attempt; when it passes the loop stops and reports.

Decision table (outcome of a serving attempt -> what happens next):

=====================  =============================================
ok, reply accepted     stop: ``served_by`` is this route
ok, reply refused      route out (counted as ``bad_reply``), next route
rate_limited           route out, next route
server_error / 408     route out, next route
timeout (any phase)    route out, next route
connection_error       route out, next route
not_found, bad_request route out, next route
context_too_long       route out, next route
bad_reply              route out, next route
auth_failed (401/403)  every route of the account out, next route
payment_required (402) every route of the account out, next route
deadline passed        stop, no reply
=====================  =============================================
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from relay_review.models import (
    Attempt,
    CatalogEntry,
    Deadlines,
    Outcome,
    OutcomeKind,
    Phase,
    Readiness,
    ServedBy,
)
from relay_review.routing.preflight import (
    ACCOUNT_WIDE,
    ChatFn,
    ReadinessBoard,
    api_key_for,
    outcome_detail,
)

log = logging.getLogger("relay_review.failover")

#: Extra request fields: the same for every route, or chosen per route (e.g. response_format).
ExtraBody = dict | Callable[[CatalogEntry], dict | None] | None

#: A reply check: (route, ok outcome) -> (accepted, value, why-not). Async so it may talk to the
#: same route again (the review's single repair round).
Accept = Callable[[CatalogEntry, Outcome], Awaitable[tuple[bool, Any, str]]]


@dataclass
class ServeResult:
    """What serving came to: the reply (if any), who served it, and every attempt."""

    reply: str | None = None
    value: Any = None
    served_by: ServedBy | None = None
    attempts: list[Attempt] = field(default_factory=list)
    stopped: str = "exhausted"  # served | deadline | exhausted

    @property
    def ok(self) -> bool:
        return self.served_by is not None


def attempt_phase(outcome: Outcome) -> str:
    """How far an attempt got: the timeout's phase, or where the answer was read."""
    if outcome.kind is OutcomeKind.TIMEOUT and outcome.phase:
        return outcome.phase.value
    if outcome.kind is OutcomeKind.CONNECTION_ERROR:
        return "connect"
    if outcome.kind in (OutcomeKind.OK, OutcomeKind.BAD_REPLY):
        return "stream"
    return "response"


@dataclass
class RunState:
    """Route bookkeeping shared by every request of one run (chunks may be served concurrently).

    ``out``: failed this run, never tried again. ``busy``: serving a request right now.
    ``proven``: served a reply this run, so it counts as ready whatever preflight said.
    """

    out: set[str] = field(default_factory=set)
    busy: set[str] = field(default_factory=set)
    proven: set[str] = field(default_factory=set)


def next_route(
    board: ReadinessBoard, state: RunState, now: float, deadline_at: float
) -> tuple[CatalogEntry | None, float]:
    """Pick the next route, or say how long to wait for news (pure over the board's state).

    Returns ``(entry, 0)`` to serve now, ``(entry, s)`` to serve after sleeping ``s`` seconds (a
    deferred route), ``(None, s>0)`` to wait for a probe result or a busy route to free up,
    ``(None, 0)`` when nothing is left. Concurrent requests share ready routes: while a ready
    route is busy, another request waits for it rather than trying unprobed or deferred ones.
    """
    entries = [  # catalog order = priority order
        e for e in board.entries if e.agent_id not in state.out and e.agent_id not in state.busy
    ]

    def good(agent_id: str) -> bool:
        return agent_id in state.proven or board.status(agent_id) is Readiness.READY

    for e in entries:
        if good(e.agent_id):
            return e, 0.0
    if not board.finished or any(good(a) for a in state.busy - state.out):
        # news is coming: a probe result, or a ready route finishing its current request
        # (better than gambling a concurrent chunk on an unprobed or deferred route)
        return None, max(0.0, deadline_at - now)
    for e in entries:
        probe = board.probes[e.agent_id]
        if probe.status is Readiness.UNPROBED and not probe.sent:
            return e, 0.0
    # deferred routes: the one free soonest (a later Retry-After never holds up one free now);
    # ties in catalog order
    soonest: tuple[float, CatalogEntry] | None = None
    for e in entries:
        probe = board.probes[e.agent_id]
        if probe.status is Readiness.DEFERRED:
            available_at = (probe.finished_at or now) + (probe.retry_after or 0.0)
            free_at = max(available_at, now)
            if available_at < deadline_at and (soonest is None or free_at < soonest[0]):
                soonest = (free_at, e)
    if soonest is not None:
        return soonest[1], soonest[0] - now
    if state.busy - state.out:
        return None, max(0.0, deadline_at - now)  # a route in use may free up
    return None, 0.0


async def serve(
    board: ReadinessBoard,
    *,
    chat: ChatFn,
    client: httpx.AsyncClient,
    environ: Mapping[str, str],
    messages: list[dict],
    deadlines: Deadlines,
    deadline_at: float,
    run_started: float,
    accept: Accept | None = None,
    max_tokens: int | None = None,
    extra_body: ExtraBody = None,
    state: RunState | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] | None = None,
) -> ServeResult:
    """Serve ``messages`` over the board's routes until one reply is accepted or time runs out.

    ``state`` is shared between concurrent callers of one run (see :class:`RunState`).
    """
    import asyncio

    sleep = sleep or asyncio.sleep
    state = state if state is not None else RunState()
    result = ServeResult()
    while True:
        now = clock()
        if now >= deadline_at:
            result.stopped = "deadline"
            break
        entry, wait = next_route(board, state, now, deadline_at)
        if entry is None:
            if wait <= 0:
                result.stopped = "exhausted"
                break
            await board.wait_change(min(wait, deadline_at - now))
            continue
        if wait > 0:
            log.info("waiting %.1fs for deferred route %s (retry-after)", wait, entry.agent_id)
            await sleep(min(wait, deadline_at - now))
            continue
        key = api_key_for(entry, environ)
        if key is None:
            state.out.add(entry.agent_id)
            board.set(entry.agent_id, status=Readiness.REJECTED, detail="missing key")
            continue
        state.busy.add(entry.agent_id)
        try:
            accepted, outcome, attempt, value = await attempt_on(
                entry,
                chat=chat,
                client=client,
                key=key,
                messages=messages,
                deadlines=deadlines,
                deadline_at=deadline_at,
                run_started=run_started,
                accept=accept,
                max_tokens=max_tokens,
                extra_body=extra_body,
                clock=clock,
            )
        finally:
            state.busy.discard(entry.agent_id)
            board.touch()
        result.attempts.append(attempt)
        if accepted:
            state.proven.add(entry.agent_id)
            result.reply = outcome.content
            result.value = value
            result.served_by = ServedBy(
                agent_id=entry.agent_id, account=entry.account, model=entry.route.model
            )
            result.stopped = "served"
            break
        state.out.add(entry.agent_id)
        if outcome.kind in ACCOUNT_WIDE:
            board.reject_account(entry.account, f"account {entry.account}: {outcome.kind.value}")
            state.out.update(e.agent_id for e in board.entries if e.account == entry.account)
    if result.stopped == "deadline":
        for e in board.entries:
            probe = board.probes[e.agent_id]
            untouched = e.agent_id not in state.out and e.agent_id not in state.proven
            if untouched and probe.status is Readiness.UNPROBED and not probe.sent:
                board.set(e.agent_id, detail="never tried: the run deadline passed")
    return result


async def attempt_on(
    entry: CatalogEntry,
    *,
    chat: ChatFn,
    client: httpx.AsyncClient,
    key: str,
    messages: list[dict],
    deadlines: Deadlines,
    deadline_at: float,
    run_started: float,
    accept: Accept | None,
    max_tokens: int | None,
    extra_body: ExtraBody,
    clock: Callable[[], float],
    purpose: str = "serve",
) -> tuple[bool, Outcome, Attempt, Any]:
    """One request on one route (no switching), its reply check, and its log line."""
    started = clock()
    remaining = deadline_at - started
    if remaining <= 0:  # e.g. a repair round asked for just as the deadline struck
        outcome = Outcome(
            kind=OutcomeKind.TIMEOUT,
            phase=Phase.ATTEMPT,
            detail="not sent: the run deadline had passed",
        )
    else:
        outcome = await chat(
            client,
            base_url=entry.route.base_url or "",
            api_key=key,
            model=entry.route.model,
            messages=messages,
            deadlines=Deadlines(
                connect=min(deadlines.connect, remaining),
                first_byte=min(deadlines.first_byte, remaining),
                idle=min(deadlines.idle, remaining),
                attempt=min(deadlines.attempt, remaining),
            ),
            max_tokens=max_tokens,
            extra_body=extra_body(entry) if callable(extra_body) else extra_body,
        )
    elapsed = round(clock() - started, 3)
    accepted, value, why = (outcome.ok, None, "")
    if outcome.ok and accept is not None:
        accepted, value, why = await accept(entry, outcome)
    kind = outcome.kind.value if accepted or not outcome.ok else OutcomeKind.BAD_REPLY.value
    detail = outcome_detail(outcome) if not outcome.ok else why
    if outcome.kind is OutcomeKind.TIMEOUT and clock() >= deadline_at - 0.05:
        detail += " (bounded by the run deadline)"
    attempt = Attempt(
        agent_id=entry.agent_id,
        account=entry.account,
        model=entry.route.model,
        phase=attempt_phase(outcome),
        outcome=kind,
        http_status=outcome.http_status,
        elapsed_s=elapsed,
        started_s=round(started - run_started, 3),
        detail=detail,
        purpose=purpose,
    )
    log_attempt(attempt, accepted)
    return accepted, outcome, attempt, value


def log_attempt(attempt: Attempt, accepted: bool) -> None:
    """One INFO line per attempt: route, account, phase, outcome, HTTP status, elapsed."""
    log.info(
        "attempt (%s): route=%s account=%s phase=%s outcome=%s http=%s elapsed=%.2fs%s",
        attempt.purpose,
        attempt.agent_id,
        attempt.account,
        attempt.phase,
        attempt.outcome,
        attempt.http_status if attempt.http_status is not None else "-",
        attempt.elapsed_s,
        f" ({attempt.detail})" if attempt.detail and not accepted else "",
    )
