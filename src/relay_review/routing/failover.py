"""Failover: the one retry loop. It decides which route to try next, and when to give up.

Order of service: **ready** routes (by priority) -> **unprobed** routes (by priority; the real
request is their probe) -> **deferred** routes (only those whose ``retry_after`` ends before the
run deadline; the one free soonest first, then by priority) -> never ``timeout`` or ``rejected``
routes. While probes are still in flight and no route is ready, the loop waits for the next probe
result (never longer than the deadline); as soon as one route is ready it is served, whatever
other probes are doing.

After a failed attempt the route is out for the rest of the run (no timed re-admission: a breaker
that re-admitted a stalled route every 30 s let it back in 29 times in one run). An auth or payment
failure takes every route of that account out; on a gateway (``openai_compatible``) only once one
``GET /models`` confirms the account's key is bad (else just that route: it may be one upstream's
key behind the gateway). A spent daily quota (``free-models-per-day``, a ``PerDay`` quota id,
Cloudflare 4006, or no requests remaining until after the deadline) takes every free route of
the account out. The whole-run deadline bounds every wait and every attempt; when it passes the
loop stops and reports.

Decision table (outcome of a serving attempt -> what happens next):

=====================  =============================================
ok, reply accepted     stop: ``served_by`` is this route
ok, reply refused      route out (counted as ``bad_reply``), next route
rate_limited           route out, next route (daily quota spent: the
                       account's free routes out; nothing left until a
                       reset: the budget's routes held, below)
server_error / 408     route out, next route
timeout (any phase)    route out, next route
connection_error       route out, next route
not_found, bad_request route out, next route (404: rejected, "dropped
                       for this run: no endpoints" in the table;
                       OpenRouter's "can handle the requested
                       parameters": asked once more with the weaker
                       response_format first, like a refused form)
context_too_long       route out, next route (413 too: rejected,
(400/413)              "dropped for this run: request too large")
bad_reply              route out, next route
auth_failed (401/403)  every route of the account out (gateway: if
                       its key is confirmed bad), next route
payment_required (402) same as auth_failed; the table says "dropped
                       for this run: no credits"
budget refused (not    route held until the account's window frees
sent), or a 429 said   (not picked before), and so is every route
nothing is left until  whose requests count in the same budget (one
a reset                note in the attempt log per window, not one
                       per route), next route; never waited for
                       past the deadline
another route found    (a request on a route not known to answer, no
ready first            first byte yet) cancelled: route out, the
                       attempt logged ``cancelled``, the ready route
                       takes the request over
deadline passed        stop, no reply
=====================  =============================================

One request is asked twice on the same route, never more: when a request carries a
``downgrade`` (the review's ``response_format`` step down) and the route refused the form it was
sent (400/422/500 naming it), the same request goes once more with the weaker form; the attempt
records both. It is not a retry of a fault: the request changes.

Hedged preflight leans on the last row: the best-ranked route gets the real request unprobed
(its own probe), probes go out only when it has no first byte within the hedge delay
(:func:`~relay_review.routing.preflight.run_preflight`), and the first route a probe finds
ready takes over here, in this loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from relay_review.kinds import stream_usage
from relay_review.providers.chat.forms import refuses_parameters
from relay_review.records import (
    Attempt,
    CatalogEntry,
    ChatMessage,
    Deadlines,
    Outcome,
    OutcomeKind,
    Phase,
    Readiness,
    ServedBy,
)
from relay_review.routing import progress
from relay_review.routing.accounts import account_consequences
from relay_review.routing.board import MIN_HOLD_S, RouteBoard
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.preflight import PROBE_TABLE
from relay_review.routing.send import RunContext, api_key_for, outcome_detail, send

log = logging.getLogger("relay_review.failover")

#: Extra request fields: the same for every route, or chosen per route (e.g. response_format).
ExtraBody = dict | Callable[[CatalogEntry], dict | None] | None

#: A reply check: (route, ok outcome) -> (accepted, value, why-not). Async so it may talk to the
#: same route again (the review's single repair round).
Accept = Callable[[CatalogEntry, Outcome], Awaitable[tuple[bool, Any, str]]]


#: (route, failed outcome) -> the request fields to ask again with, or None (see ServeRequest).
Downgrade = Callable[[CatalogEntry, Outcome], dict | None]


@dataclass(frozen=True)
class ServeRequest:
    """One request to serve: its messages, the reply check, and what it asks of every route.

    ``purpose`` names the attempt in the report: ``serve``, or ``repair`` for the review's
    follow-up on the route that just served.
    """

    messages: list[ChatMessage]
    accept: Accept | None = None
    max_tokens: int | None = None
    extra_body: ExtraBody = None
    purpose: str = "serve"
    #: Asked once after a failed attempt: the request fields to send the same request again
    #: with on the same route (a weaker ``response_format`` the route may accept), or None.
    #: Not a retry of a fault: the request changes, and it is asked at most once per attempt.
    downgrade: Downgrade | None = None


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


#: Answers that end a route for the run at once (never retried, never waited for), and what
#: the readiness table says of them: no credits, no endpoints, a request too large for the
#: route's tier (Groq answers 413 above its per-request token limit; another route, or a
#: smaller chunk, may take it).
DROPPED_FOR_RUN: dict[OutcomeKind, str] = {
    OutcomeKind.PAYMENT_REQUIRED: "no credits",
    OutcomeKind.NOT_FOUND: "no endpoints for this model",
    OutcomeKind.CONTEXT_TOO_LONG: "request too large for this route",
}


def attempt_phase(outcome: Outcome) -> str:
    """How far an attempt got: the timeout's phase, or where the answer was read."""
    if outcome.kind is OutcomeKind.TIMEOUT and outcome.phase:
        return outcome.phase.value
    if outcome.kind is OutcomeKind.CONNECTION_ERROR:
        return "connect"
    if outcome.kind in (OutcomeKind.OK, OutcomeKind.BAD_REPLY):
        return "stream"
    if outcome.http_status is not None and 200 <= outcome.http_status < 300:
        return "stream"  # a mid-stream error event (429/5xx code) inside a 200
    return "response"


def next_route(
    board: RouteBoard, now: float, deadline_at: float, ticket: int | None = None
) -> tuple[CatalogEntry | None, float]:
    """Pick the next route, or say how long to wait for news (pure over the board's state).

    Returns ``(entry, 0)`` to serve now, ``(entry, s)`` to serve after sleeping ``s`` seconds (a
    deferred route), ``(None, s>0)`` to wait for a probe result or a busy route to free up,
    ``(None, 0)`` when nothing is left. Concurrent requests share ready routes: while a ready
    route is busy, another request waits for it rather than trying unprobed or deferred ones.
    Older requests pick first: the request of ``ticket`` (see :meth:`RouteBoard.enter`) leaves
    the first good routes to the older requests still looking for one.
    """
    entries = board.available()  # catalog order = priority order
    # a request waiting on a route not known to answer takes the next ready route over first
    takeover = any(board.awaits_takeover(a) for a in board.busy)
    ahead = board.looking_ahead_of(ticket)
    left_to_older = False  # a good route left to an older request: news is coming
    for e in entries:
        if board.good(e.agent_id, now) and not (takeover and board.confirmed(e.agent_id)):
            if ahead == 0:
                return e, 0.0
            ahead -= 1
            left_to_older = True
    in_use = board.busy - board.out
    if left_to_older or not board.finished or any(board.good(a) for a in in_use):
        # news is coming: a probe result, or a ready route finishing its current request
        # (better than gambling a concurrent chunk on an unprobed or deferred route); a route
        # the budget holds back is news too, when its window frees
        frees = [board.held[e.agent_id] for e in entries if board.is_held(e.agent_id, now)]
        return None, max(0.0, min([deadline_at, *frees]) - now)
    for e in entries:
        probe = board.probes[e.agent_id]
        if (
            probe.status is Readiness.UNPROBED
            and not probe.sent
            and not board.is_held(e.agent_id, now)
        ):
            return e, 0.0
    # deferred routes (and routes the budget holds back): the one free soonest (a later
    # Retry-After never holds up one free now); ties in catalog order; one that frees only
    # after the deadline is never waited for
    soonest: tuple[float, CatalogEntry] | None = None
    for e in entries:
        probe = board.probes[e.agent_id]
        if board.is_held(e.agent_id, now):
            available_at = board.held[e.agent_id]
        elif probe.status is Readiness.DEFERRED:
            available_at = (probe.finished_at or now) + (probe.retry_after or 0.0)
        else:
            continue
        free_at = max(available_at, now)
        if available_at < deadline_at and (soonest is None or free_at < soonest[0]):
            soonest = (free_at, e)
    if soonest is not None:
        return soonest[1], soonest[0] - now
    if in_use:
        return None, max(0.0, deadline_at - now)  # a route in use may free up
    return None, 0.0


async def serve(board: RouteBoard, run: RunContext, request: ServeRequest) -> ServeResult:
    """Serve ``request`` over the board's routes until one reply is accepted or time runs out.

    The board is shared between concurrent callers of one run: a route one request found
    failing is out for the others, and a route that served is ready for them.
    """
    result = ServeResult()
    ticket = board.enter()
    try:
        await _serve(board, run, request, result, ticket)
    finally:
        board.leave(ticket)
    if result.stopped == "deadline":
        _mark_never_tried(board)
    return result


async def _serve(
    board: RouteBoard, run: RunContext, request: ServeRequest, result: ServeResult, ticket: int
) -> None:
    """The loop of :func:`serve` for the request of ``ticket``; fills ``result``."""
    while True:
        now = run.clock()
        if now >= run.deadline_at:
            result.stopped = "deadline"
            break
        entry, wait = next_route(board, now, run.deadline_at, ticket)
        if entry is None:
            if wait <= 0:
                result.stopped = "exhausted"
                break
            await board.wait_change(min(wait, run.deadline_at - now))
            continue
        if wait > 0:
            log.info("waiting %.1fs for deferred route %s (retry-after)", wait, entry.agent_id)
            pause = min(wait, run.deadline_at - now)
            with progress.pausing(entry.agent_id, "the retry-after", pause, clock=run.clock):
                await run.sleep(pause)
            continue
        key = api_key_for(entry, run.environ)
        if key is None:
            board.out.add(entry.agent_id)
            board.set(entry.agent_id, status=Readiness.REJECTED, detail="missing key")
            continue
        board.busy.add(entry.agent_id)
        board.looking[ticket] = False
        board.touch()  # a younger request that left this route to us may pick the next one
        try:
            if board.confirmed(entry.agent_id):
                accepted, outcome, attempt, value = await attempt_on(entry, key, run, request)
            else:
                taken = await attempt_or_takeover(board, entry, key, run, request)
                if isinstance(taken, Attempt):  # another route was found ready first
                    result.attempts.append(taken)
                    continue
                accepted, outcome, attempt, value = taken
        finally:
            board.looking[ticket] = True
            board.busy.discard(entry.agent_id)
            board.touch()
        if not outcome.sent:  # the account's budget held it back: not picked before it frees
            now = run.clock()
            wait = min(max(outcome.retry_after or 0.0, MIN_HOLD_S), run.deadline_at - now)
            if board.hold(entry.agent_id, now + wait):
                result.attempts.append(attempt)  # one deferral note per budget per window
            _hold_budget(board, run, entry, now + wait)
            if not board.good(entry.agent_id):  # nothing proven of it: say why it waits
                board.set(
                    entry.agent_id,
                    status=Readiness.DEFERRED,
                    detail=outcome.detail,
                    retry_after=outcome.retry_after,
                    finished_at=run.clock(),
                )
            continue
        result.attempts.append(attempt)
        frees_in = run.budgets.frees_in(entry) if run.budgets is not None else None
        if frees_in is not None:  # the provider said the account has nothing left until then
            now = run.clock()
            _hold_budget(board, run, entry, now + min(frees_in, run.deadline_at - now))
        if not run.deadline_struck(outcome):  # the run's end is no fact about the route
            board.note(entry.agent_id, outcome, carried_input=True)
        if accepted:
            probe = board.probes[entry.agent_id]
            if probe.status is Readiness.UNPROBED and not probe.sent and not probe.detail:
                board.set(entry.agent_id, detail="served without a probe")
            board.proven.add(entry.agent_id)
            board.first_byte(entry.agent_id)  # it answered (a scripted chat is told nothing)
            result.reply = outcome.content
            result.value = value
            result.served_by = ServedBy(
                agent_id=entry.agent_id, account=entry.account, model=entry.route.model
            )
            result.stopped = "served"
            break
        board.out.add(entry.agent_id)
        if outcome.sent and outcome.retry_after is not None:
            # the latest wait it asked for (the comment's "frees at"), not its probe's older one
            board.set(
                entry.agent_id,
                retry_after=outcome.retry_after,
                reset_at=outcome.reset_at,
                finished_at=run.clock(),
            )
        probe = board.probes[entry.agent_id]
        if entry.agent_id in board.first_up and probe.status is Readiness.UNPROBED:
            # served first, its real request was its probe: the table says what it found
            board.set(
                entry.agent_id,
                status=PROBE_TABLE[OutcomeKind(attempt.outcome)],
                http_status=outcome.http_status,
                detail=f"sent unprobed: {attempt.detail or attempt.outcome}",
            )
        why = DROPPED_FOR_RUN.get(outcome.kind) if outcome.sent else None
        if why is not None and refuses_parameters(outcome.http_status, outcome.detail):
            why = "no endpoint takes this request's parameters"
        if why is not None and outcome.http_status is not None:
            board.set(
                entry.agent_id,
                status=Readiness.REJECTED,
                http_status=outcome.http_status,
                detail=f"dropped for this run: {why} ({outcome_detail(outcome)})",
            )
        await account_consequences(board, run, entry, outcome, condemn=board.take_out_account)


async def attempt_or_takeover(
    board: RouteBoard, entry: CatalogEntry, key: str, run: RunContext, request: ServeRequest
) -> tuple[bool, Outcome, Attempt, Any] | Attempt:
    """:func:`attempt_on` on a route not known to answer (its request is its probe), cancelled
    if another route is found ready before this one produces its first byte: then the
    ``cancelled`` attempt (the route is out for the run). Otherwise what :func:`attempt_on`
    returns."""
    agent = entry.agent_id
    started = run.clock()
    task = asyncio.ensure_future(
        attempt_on(
            entry,
            key,
            run,
            request,
            on_first_byte=lambda: board.first_byte(agent),
            on_alive=lambda: board.alive(agent),
            on_admitted=lambda: board.sent_unprobed(agent, run.clock()),
        )
    )
    try:
        while not task.done():
            taker = _taker(board, entry, run.clock(), run.budgets)
            if taker is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise asyncio.CancelledError  # we were cancelled too: never swallow it
                if not task.cancelled():  # it finished just as it was cancelled
                    return task.result()
                return _cancelled(board, entry, run, request, started, taker)
            change = asyncio.ensure_future(board.wait_change(run.deadline_at - run.clock()))
            try:
                await asyncio.wait({task, change}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                change.cancel()
        return task.result()
    finally:
        if not task.done():  # our own caller was cancelled: never leave the request behind
            task.cancel()


def _hold_budget(board: RouteBoard, run: RunContext, entry: CatalogEntry, until: float) -> None:
    """Hold every other route whose requests count in ``entry``'s budget until ``until``: its
    window is closed for them too, so none is picked (and refused, or sent into the same 429)
    before it frees. Silent: the one attempt that found the window closed says so."""
    budgets = run.budgets
    if budgets is None:
        return
    for other in board.available():
        if other.agent_id != entry.agent_id and budgets.shares_budget(entry, other):
            board.hold(other.agent_id, until)


def _taker(
    board: RouteBoard, entry: CatalogEntry, now: float, budgets: AccountBudgets | None = None
) -> CatalogEntry | None:
    """Another route, free now and known to answer, that should take the request over from
    ``entry`` (None while ``entry``'s request has produced its first byte: it answers). Not
    one whose account's budget this run heard closed: the request it would take over would be
    refused, and the cancelled one may have answered (hedge probes can spend an account's last
    slots of the minute; a lead that answered in 1.5 s was cancelled and the reply came at 60 s)."""
    if entry.agent_id in board.first_bytes:
        return None
    for e in board.available():
        other = e.agent_id != entry.agent_id
        if not other or not board.confirmed(e.agent_id) or board.is_held(e.agent_id, now):
            continue
        if budgets is None or not budgets.closed(e):
            return e
    return None


def _cancelled(
    board: RouteBoard,
    entry: CatalogEntry,
    run: RunContext,
    request: ServeRequest,
    started: float,
    taker: CatalogEntry,
) -> Attempt:
    """Record the loser of a takeover: out for the run, its attempt ``cancelled``."""
    elapsed = round(run.clock() - started, 3)
    # no byte at all, or keep-alive comments only (the hedge signal is the answer's first byte)
    detail = f"no answer after {elapsed:g}s; {taker.agent_id} was found ready and took over"
    board.out.add(entry.agent_id)
    board.cancelled.add(entry.agent_id)
    probe = board.probes[entry.agent_id]
    if probe.status is Readiness.UNPROBED:
        board.set(entry.agent_id, detail=f"sent unprobed, cancelled: {detail}")
    attempt = Attempt(
        agent_id=entry.agent_id,
        account=entry.account,
        model=entry.route.model,
        phase="first_byte",
        outcome="cancelled",
        elapsed_s=elapsed,
        started_s=round(started - run.started_at, 3),
        detail=detail,
        purpose=request.purpose,
    )
    log_attempt(attempt, False)
    return attempt


def _mark_never_tried(board: RouteBoard) -> None:
    """Say on the board which routes the run deadline left unprobed and untried."""
    for e in board.entries:
        probe = board.probes[e.agent_id]
        untouched = e.agent_id not in board.out and e.agent_id not in board.proven
        if untouched and probe.status is Readiness.UNPROBED and not probe.sent:
            board.set(e.agent_id, detail="never tried: the run deadline passed")


async def attempt_on(
    entry: CatalogEntry,
    key: str,
    run: RunContext,
    request: ServeRequest,
    *,
    on_first_byte: Callable[[], None] | None = None,
    on_alive: Callable[[], None] | None = None,
    on_admitted: Callable[[], None] | None = None,
) -> tuple[bool, Outcome, Attempt, Any]:
    """One request on one route (no switching), its reply check, and its log line;
    ``on_first_byte`` is told when the reply's first byte arrives, keep-alive comments not
    counted, ``on_alive`` when a 2xx stream's first byte does, keep-alives counted (hedged
    routing; see :func:`relay_review.providers.chat.call.chat_call`)."""
    clock = run.clock
    started = clock()
    remaining = run.deadline_at - started
    note = ""
    if remaining <= 0:  # e.g. a repair round asked for just as the deadline struck
        outcome = Outcome(
            kind=OutcomeKind.TIMEOUT,
            phase=Phase.ATTEMPT,
            detail="not sent: the run deadline had passed",
        )
    else:
        extra_body = request.extra_body
        extra = extra_body(entry) if callable(extra_body) else extra_body
        hooks = {"on_first_byte": on_first_byte, "on_alive": on_alive, "on_admitted": on_admitted}
        outcome = await _send_once(entry, key, run, request, extra, hooks)
        retry = request.downgrade(entry, outcome) if request.downgrade and not outcome.ok else None
        if retry is not None and run.deadline_at - clock() > 0:
            refused = outcome_detail(outcome)
            outcome = await _send_once(entry, key, run, request, retry, hooks)
            note = f"asked again with a weaker response_format after: {refused}"
    elapsed = round(clock() - started, 3)
    accepted, value, why = (outcome.ok, None, "")
    if outcome.ok and request.accept is not None:
        accepted, value, why = await request.accept(entry, outcome)
    kind = outcome.kind.value if accepted or not outcome.ok else OutcomeKind.BAD_REPLY.value
    detail = outcome_detail(outcome) if not outcome.ok else why
    if note:
        detail = f"{detail}; {note}" if detail else note
    if run.deadline_struck(outcome):
        detail += " (bounded by the run deadline)"
    attempt = Attempt(
        agent_id=entry.agent_id,
        account=entry.account,
        model=entry.route.model,
        phase=attempt_phase(outcome),
        outcome=kind,
        http_status=outcome.http_status,
        elapsed_s=elapsed,
        started_s=round(started - run.started_at, 3),
        detail=detail,
        purpose=request.purpose,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
    )
    log_attempt(attempt, accepted)
    return accepted, outcome, attempt, value


async def _send_once(
    entry: CatalogEntry,
    key: str,
    run: RunContext,
    request: ServeRequest,
    extra: dict | None,
    hooks: dict[str, Callable[[], None] | None],
) -> Outcome:
    """Send ``request`` to ``entry`` once with the request fields ``extra``, within what is
    left of the run deadline; ``hooks``: ``on_first_byte``, ``on_alive`` and ``on_admitted``
    (hedging)."""
    remaining = run.deadline_at - run.clock()
    bounds = run.deadlines
    if stream_usage(entry.route.provider):
        extra = {"stream_options": {"include_usage": True}, **(extra or {})}
    return await send(
        run,
        entry,
        base_url=entry.route.base_url or "",
        api_key=key,
        model=entry.route.model,
        messages=request.messages,
        deadlines=Deadlines(
            connect=min(bounds.connect, remaining),
            first_byte=min(bounds.first_byte, remaining),
            idle=min(bounds.idle, remaining),
            attempt=min(bounds.attempt, remaining),
            first_token=min(bounds.first_token, remaining),
        ),
        max_tokens=request.max_tokens,
        extra_body=extra,
        on_first_byte=hooks.get("on_first_byte"),
        on_alive=hooks.get("on_alive"),
        on_admitted=hooks.get("on_admitted"),
    )


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
    if attempt.prompt_tokens is not None or attempt.completion_tokens is not None:
        log.info(
            "usage: route=%s prompt_tokens=%s completion_tokens=%s",
            attempt.agent_id,
            attempt.prompt_tokens if attempt.prompt_tokens is not None else "-",
            attempt.completion_tokens if attempt.completion_tokens is not None else "-",
        )
