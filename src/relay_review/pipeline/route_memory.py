"""Route memory: a past run's outcomes laid on this run's board, and this run's folded back.

:func:`recall` (before routing): a dead or cooling route gets zero requests this run and its
readiness row says what was remembered and when (``remembered: not_found, 3 min ago``); a route
proven recently is served first with no probe. :func:`remember` (after routing): each route's
last outcome this run becomes its memo (:func:`classify`), the others keep theirs while fresh.

Only facts about a route are remembered: an unknown model (404), a bad request the route
refuses, a key the provider itself refused or an account out of credits (account-wide only when
this run took the account out: :attr:`~relay_review.routing.board.RouteBoard.condemned`), a rate
limit or daily quota until its reset, a timeout's or server error's cooldown. A refusal of this
run's *content* (``Outcome.content_refusal``: a content filter, moderation, a safety or policy
message, a WAF page) ended the route for this run only; it never writes a memo, so one pull
request cannot deny review to the next one (for ``[memory] dead``, org-wide with Redis).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from relay_review.config import MemoryPolicy
from relay_review.providers.chat.forms import refuses_parameters
from relay_review.records import Outcome, OutcomeKind, Readiness
from relay_review.routing.accounts import ACCOUNT_WIDE
from relay_review.routing.board import RouteBoard
from relay_review.routing.preflight import plan_probes
from relay_review.routing.send import api_key_for
from relay_review.state.memory import MAX_FIRST_BYTE_S, Memory, RouteMemo

#: Outcomes that mean the route will not serve (until its memo runs out).
DEAD = frozenset({OutcomeKind.NOT_FOUND, OutcomeKind.BAD_REQUEST})
#: A 400 about the model itself, not the request's text ("x is not a valid model ID").
_MODEL_ERROR = re.compile(
    r"\bmodel\b.{0,80}?\b(?:not a valid|invalid|unknown|not found|does not exist|not supported)"
    r"|\b(?:not a valid|invalid|unknown|unsupported) model\b",
    re.IGNORECASE,
)
#: Outcomes that mean: not now, later.
COOLING = frozenset(
    {
        OutcomeKind.RATE_LIMITED,
        OutcomeKind.TIMEOUT,
        OutcomeKind.SERVER_ERROR,
        OutcomeKind.CONNECTION_ERROR,
    }
)


def ago(seconds: float) -> str:
    """``42 s``, ``3 min``, ``2 h``, ``1 d``: how long ago, in one short word (a time that is not
    finite reads as ``0 s``: records are validated when read, this never raises)."""
    s = max(0, int(seconds)) if math.isfinite(seconds) else 0
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h"
    return f"{s // 86400} d"


@dataclass(frozen=True)
class Origins:
    """Where the memos not from this pull request's own record came from (``#12``): by agent id
    (routes) and by account name (accounts)."""

    routes: Mapping[str, str] = field(default_factory=dict)
    accounts: Mapping[str, str] = field(default_factory=dict)


def _memo_for(
    memory: Memory, agent_id: str, account: str, now: float, origins: Origins
) -> tuple[RouteMemo, str] | None:
    """The fresh memo that decides a route, and where it came from ("": this record): its
    account's (dead) first, then its own; but a proof that the route served *after* its
    account's memo was written (a record merged from another pull request's, or from a run that
    had not seen it) is the newer fact, and the route is served."""
    mine = memory.routes.get(agent_id)
    fresh_mine = mine if mine is not None and mine.until > now else None
    theirs = memory.accounts.get(account)
    newer_proof = (
        fresh_mine is not None
        and fresh_mine.state == "proven"
        and theirs is not None
        and fresh_mine.at > theirs.at
    )
    if theirs is not None and theirs.until > now and not newer_proof:
        return theirs, origins.accounts.get(account, "")
    if fresh_mine is not None:
        return fresh_mine, origins.routes.get(agent_id, "")
    return None


@dataclass
class Recalled:
    """How many routes memory settled before routing, and which: ``settled`` (agent ids) and,
    of them, ``by_account`` (settled by their account's memo, not their own)."""

    proven: int = 0
    dead: int = 0
    cooling: int = 0
    settled: set[str] = field(default_factory=set)
    by_account: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return self.proven + self.dead + self.cooling


def recall(
    board: RouteBoard, memory: Memory, now: float, origins: Origins | None = None
) -> Recalled:
    """Lay ``memory``'s fresh memos on ``board`` (see the module docs); the counts. A memo
    another pull request left (``origins``) says so: ``remembered from #12: served, ...``."""
    counts = Recalled()
    for e in board.entries:
        found = _memo_for(memory, e.agent_id, e.account, now, origins or Origins())
        if found is None:
            continue
        memo, where = found
        counts.settled.add(e.agent_id)
        if memo is memory.accounts.get(e.account):
            counts.by_account.add(e.agent_id)
        what = "served" if memo.state == "proven" else memo.outcome
        source = f" from {where}" if where else ""
        detail = f"remembered{source}: {what}, {ago(now - memo.at)} ago"
        if memo.state == "cooling":
            detail += f"; cooling for {ago(memo.until - now)} more"
        status = {
            "proven": Readiness.UNPROBED,
            "dead": Readiness.REJECTED,
            "cooling": Readiness.DEFERRED,
        }[memo.state]
        board.recall(
            e.agent_id,
            usable=memo.state == "proven",
            status=status,
            detail=detail,
            first_byte_s=memo.first_byte_s,
        )
        setattr(counts, memo.state, getattr(counts, memo.state) + 1)
    return counts


def routes_avoided(
    board: RouteBoard,
    recalled: Recalled,
    environ: Mapping[str, str],
    served: Sequence[str] | None,
    *,
    probe_budget: int,
    eager: bool,
) -> int:
    """Requests to routes a run without memory would have sent beyond those this run sent: a
    lower bound, 0 when memory settled no route. ``served``: the routes that served a reply
    this run (empty: none did; None: the run needed no request).

    Eager preflight (and the ``preflight`` command) probes the first ``probe_budget`` routes
    with a key: the probes of that plan this run did not send. Hedged preflight sends a real
    request or a probe to every route ranked above the one that serves, and at the hedge to
    every route when none serves (a budget > 0): those of them this run sent nothing, memory
    settled or (when one served) left unneeded, neither held by the budget nor out for an
    account this run took out, and one per account for routes its account's memo settled (a
    blind run would have lost the account on its first route)."""
    if not recalled.total:
        return 0
    if eager:
        blind, _ = plan_probes(board.entries, environ, probe_budget)
        return max(0, len(blind) - board.probes_sent)
    if served is None or (not served and probe_budget <= 0):
        return 0
    order = [e.agent_id for e in board.entries]
    stop = min((order.index(a) for a in served if a in order), default=len(order))
    asked = set(board.outcomes) | set(board.sending) | board.first_bytes | board.busy
    asked |= {a for a, p in board.probes.items() if p.sent}
    skipped = [
        e
        for e in board.entries[:stop]
        if e.agent_id not in asked
        and e.agent_id not in board.held
        and e.account not in board.condemned
        and (e.agent_id in recalled.settled or (served and e.agent_id not in board.out))
        and api_key_for(e, environ) is not None
    ]
    accounts = {e.account for e in skipped if e.agent_id in recalled.by_account}
    return sum(e.agent_id not in recalled.by_account for e in skipped) + len(accounts)


def horizon(policy: MemoryPolicy) -> float:
    """The longest a route, account or chunk memo may count: the largest ``[memory]`` time of
    ``policy`` but ``findings`` (a finding's state across pushes, bounded on its own); what
    records are read with (:func:`relay_review.pipeline.memory.limits`)."""
    return max(float(getattr(policy, k)) for k in type(policy).model_fields if k != "findings")


def longest_ttl(policy: MemoryPolicy) -> float:
    """The longest a memo may count: the policy's longest ``[memory]`` TTL (a provider's
    ``Retry-After`` remembered as a cooldown is capped at it); the same bound records are read
    with (:func:`horizon`)."""
    return horizon(policy)


def route_horizon(policy: MemoryPolicy) -> float:
    """The longest a route or account memo is written to count (``proven``, ``dead``,
    ``rate_limited``, ``timeout_max``, ``server_error``): a record not updated for longer holds
    no fresh route memo (a ``Retry-After`` longer than these is the rare exception)."""
    return max(
        policy.proven, policy.dead, policy.rate_limited, policy.timeout_max, policy.server_error
    )


def first_byte_of(outcome: Outcome) -> float | None:
    """The first byte (seconds) of a served ``outcome``'s answer as a memo keeps it (keep-alive
    comments before it not counted: the hedge delay derives from it, and the hedge waits for
    the answer): finite, at least 0, at most ``MAX_FIRST_BYTE_S`` (None when the call measured
    none). A scripted outcome without ``answer_s`` gives its ``first_byte_s``."""
    s = outcome.answer_s if outcome.answer_s is not None else outcome.first_byte_s
    if s is None or not math.isfinite(s):
        return None
    return min(max(s, 0.0), MAX_FIRST_BYTE_S)


def classify(
    outcome: Outcome,
    *,
    served: bool,
    now: float,
    policy: MemoryPolicy,
    before: RouteMemo | None = None,
    carried_input: bool = False,
) -> RouteMemo | None:
    """A route's memo from its last outcome this run (None: nothing worth remembering).

    A 400 to a request that ``carried_input`` (the pull request's text, which its author
    controls) may be about that text: it cools the route for ``server_error`` only, so one pull
    request cannot mark a route dead for every run of the repository; a 400 to a probe (our own
    text), or one naming the model as invalid (OpenRouter's "is not a valid model ID"), is the
    route's. OpenRouter's 404 that no endpoint takes the requested parameters, to such a
    request, is about the request too (its size, its ``response_format``): the same cooling,
    not a day dead. A timeout of such a request may be the text's too (a prompt built to be
    slow to read or to answer): it cools the route for ``server_error`` at most (never longer
    than ``timeout``) and does not count toward the doubling, which only a timeout of our own
    probe drives; other pull requests borrow this memo, and a shared store serves it to every
    run.
    """
    kind = outcome.kind
    if served:
        return RouteMemo(
            state="proven",
            outcome="ok",
            at=now,
            until=now + policy.proven,
            first_byte_s=first_byte_of(outcome),
        )
    if outcome.content_refusal:
        return None  # about this run's input, not the route
    if carried_input and (
        (kind is OutcomeKind.BAD_REQUEST and not _MODEL_ERROR.search(outcome.detail))
        or refuses_parameters(outcome.http_status, outcome.detail)
    ):
        return RouteMemo(
            state="cooling", outcome=kind.value, at=now, until=now + policy.server_error
        )
    if kind in DEAD or kind in ACCOUNT_WIDE:
        return RouteMemo(state="dead", outcome=kind.value, at=now, until=now + policy.dead)
    if kind is OutcomeKind.RATE_LIMITED:
        wait = outcome.retry_after if outcome.retry_after else policy.rate_limited
        wait = min(wait, longest_ttl(policy))  # a provider's number, capped: never years
        return RouteMemo(state="cooling", outcome=kind.value, at=now, until=now + wait)
    if kind is OutcomeKind.TIMEOUT and carried_input:
        strikes = before.strikes if before and before.outcome == kind.value else 0
        cooldown = min(policy.server_error, policy.timeout)
        return RouteMemo(
            state="cooling", outcome=kind.value, at=now, until=now + cooldown, strikes=strikes
        )
    if kind is OutcomeKind.TIMEOUT:
        strikes = before.strikes + 1 if before and before.outcome == kind.value else 0
        cooldown = min(policy.timeout * 2**strikes, policy.timeout_max)
        return RouteMemo(
            state="cooling", outcome=kind.value, at=now, until=now + cooldown, strikes=strikes
        )
    if kind in COOLING:
        return RouteMemo(
            state="cooling", outcome=kind.value, at=now, until=now + policy.server_error
        )
    return None  # ok but not served (a probe, a refused reply), context too long, bad reply


def remember(memory: Memory, board: RouteBoard, now: float, policy: MemoryPolicy) -> Memory:
    """``memory`` updated with this run's outcomes on ``board`` (expired entries dropped; a
    timed-out route's memo lingers up to ``timeout_max`` so its next cooldown can double; a
    route whose request a faster route took over loses its memo: proven no longer holds)."""
    routes = dict(memory.routes)
    accounts = dict(memory.accounts)
    for e in board.entries:
        outcome = board.outcomes.get(e.agent_id)
        if outcome is None:
            if e.agent_id in board.cancelled:  # a faster route took its request: not proven
                routes.pop(e.agent_id, None)
            continue
        served = e.agent_id in board.proven and e.agent_id not in board.out and outcome.ok
        if outcome.content_refusal and not served:
            # Says nothing of the route: what was known of it stands (proven if it served
            # earlier this run); only a key the listing refused this run condemns the account.
            if outcome.kind in ACCOUNT_WIDE and e.account in board.condemned:
                accounts[e.account] = RouteMemo(
                    state="dead", outcome=outcome.kind.value, at=now, until=now + policy.dead
                )
            if e.agent_id in board.proven:
                before = routes.get(e.agent_id)
                routes[e.agent_id] = RouteMemo(
                    state="proven",
                    outcome="ok",
                    at=now,
                    until=now + policy.proven,
                    first_byte_s=before.first_byte_s if before else None,
                )
            continue
        try:
            memo = classify(
                outcome,
                served=served,
                now=now,
                policy=policy,
                before=routes.get(e.agent_id),
                carried_input=e.agent_id in board.input_outcomes,
            )
        except ValidationError:  # a time no memo may hold (a provider's wait of ages)
            memo = None
        if outcome.kind in ACCOUNT_WIDE and memo is not None and e.account in board.condemned:
            accounts[e.account] = memo
        if memo is None:
            routes.pop(e.agent_id, None)
        else:
            routes[e.agent_id] = memo
    for e in board.entries:  # an account that served this run is not dead
        served = e.agent_id in board.proven and e.agent_id not in board.out
        if served and e.agent_id in board.outcomes:
            accounts.pop(e.account, None)
    linger = policy.timeout_max
    return Memory.of(
        routes={
            k: v
            for k, v in routes.items()
            if v.until > now or (v.outcome == "timeout" and v.until + linger > now)
        },
        accounts={k: v for k, v in accounts.items() if v.until > now},
        chunks={k: v for k, v in memory.chunks.items() if v.until > now},
    )
