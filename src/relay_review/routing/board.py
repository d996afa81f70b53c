"""The route board: the state of each catalog route during one run.

Probing (:mod:`~relay_review.routing.preflight`) writes each route's readiness on the board:
ready, deferred (with its ``retry_after``), rejected, timeout or still unprobed. Serving
(:mod:`~relay_review.routing.failover`) writes each route's outcomes: ``out`` after a failure (for
the rest of the run), ``busy`` while it serves a request, ``proven`` once it served a reply. Every
change wakes whoever waits on the board, so serving starts on the first ready route while other
probes are still in flight, and concurrent requests of one run share what each learns.

The board only records and signals: what an outcome means for the route's account is decided in
:mod:`~relay_review.routing.accounts`, and requests go out through
:func:`~relay_review.routing.send.send`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence

from relay_review.records import CatalogEntry, Cost, Outcome, Probe, Readiness

#: Shortest hold of a budget-refused route (a refusal whose wait rounds to 0 never spins).
MIN_HOLD_S = 0.05
#: A hold moved by less than this is the same deferral (no second note in the attempt log).
HOLD_SLACK_S = 1.0

#: Hedged preflight with a remembered first byte: probes wait this many times the first byte
#: the route served with in a past run (its usual answer, with room for a slower moment) ...
HEDGE_FACTOR = 4.0
#: ... but at least this long (seconds: a route remembered at 20 ms is not hedged at 60 ms, one
#: a little slower this time would cost the run its probes) and
#: at most ``[preflight] hedge_delay_max``.
HEDGE_FLOOR_S = 0.4


def hedge_delay(remembered_first_byte: float | None, bound: float) -> float:
    """How long a route served first may go without a first byte before the other routes are
    probed: ``HEDGE_FACTOR`` x the first byte memory remembers of it, at least
    ``HEDGE_FLOOR_S``, never more than ``bound`` (``[preflight] hedge_delay_max``, or
    ``hedge_answer_max`` once its stream flows: see :meth:`RouteBoard.hedge_wait`; also the
    delay when nothing usable is remembered: none, not finite, negative)."""
    r = remembered_first_byte
    if r is None or not math.isfinite(r) or r < 0:
        return bound
    return min(bound, max(HEDGE_FLOOR_S, HEDGE_FACTOR * r))


class RouteBoard:
    """Every catalog route's state this run, in catalog (= priority) order, with a change signal.

    Readiness (from probes): ``probes`` (one record per route), ``in_flight`` (probes not yet
    answered), ``finished`` (preflight is over). Outcomes (from serving): ``out`` (failed this
    run, never tried again), ``busy`` (serving a request right now), ``proven`` (served a reply
    this run, so it counts as ready whatever preflight said), ``held`` (its account's budget
    refused a request: not picked again before the window frees, whatever else it is).
    """

    def __init__(self, entries: Sequence[CatalogEntry]) -> None:
        self.entries = list(entries)
        self.probes: dict[str, Probe] = {
            e.agent_id: Probe(agent_id=e.agent_id, account=e.account, model=e.route.model)
            for e in entries
        }
        self.in_flight: set[str] = set()
        self.finished = False
        self.out: set[str] = set()
        self.busy: set[str] = set()
        self.proven: set[str] = set()
        #: account -> its one key check this run (gateways; see :func:`.accounts.account_wide`)
        self.key_checks: dict[str, asyncio.Task[bool | None]] = {}
        #: Accounts an auth or payment failure took out this run
        #: (:func:`.accounts.account_consequences`): the only accounts memory may remember as dead.
        self.condemned: set[str] = set()
        #: The last outcome each route gave this run (probe or attempt): what memory keeps.
        self.outcomes: dict[str, Outcome] = {}
        #: Routes whose latest outcome answered a request carrying the run's input.
        self.input_outcomes: set[str] = set()
        #: Routes a past run proved, served first and unprobed (see :meth:`recall`).
        self.recalled_proven: set[str] = set()
        #: route -> when (on the run's clock) its account's budget frees (see :meth:`hold`)
        self.held: dict[str, float] = {}
        #: Routes served first without a probe: the ones a past run proved (:meth:`recall`)
        #: and, with hedged preflight, the best-ranked route (:meth:`lead_with`).
        self.first_up: set[str] = set()
        #: route -> when (run clock) its unprobed request was sent (see :meth:`hedge_wait`)
        self.sending: dict[str, float] = {}
        #: Routes whose request a faster route took over this run (``cancelled``): no outcome
        #: of their own, but what memory said of them (proven) no longer holds.
        self.cancelled: set[str] = set()
        #: Routes whose real request produced its first byte this run (they answer).
        self.first_bytes: set[str] = set()
        #: Routes whose unprobed request's 2xx stream started this run, keep-alive comments
        #: counted (they took the request; the hedge waits longer for their answer).
        self.streams_started: set[str] = set()
        #: route -> the first byte (seconds) it served with in a past run (:meth:`recall`)
        self.remembered_first_byte: dict[str, float] = {}
        #: serving request (ticket, in arrival order) -> whether it is looking for a route
        #: (False while it has a request out): older ones pick first (see :meth:`enter`)
        self.looking: dict[int, bool] = {}
        self._tickets = 0
        self._changed = asyncio.Event()

    # ---- readiness ----------------------------------------------------------------------------

    def status(self, agent_id: str) -> Readiness:
        return Readiness(self.probes[agent_id].status)  # the board sets no other

    def set(self, agent_id: str, **fields: object) -> None:
        self.probes[agent_id] = self.probes[agent_id].model_copy(update=fields)
        self.touch()

    def reject_account(self, account: str, why: str) -> None:
        """Take every route of ``account`` out (except routes that already proved ready)."""
        for e in self.entries:
            probe = self.probes[e.agent_id]
            if e.account == account and probe.status not in (Readiness.READY, Readiness.REJECTED):
                self.set(e.agent_id, status=Readiness.REJECTED, detail=why)

    def finish(self) -> None:
        """Preflight is over: no more probe results will come."""
        self.finished = True
        self.touch()

    @property
    def probes_sent(self) -> int:
        return sum(1 for p in self.probes.values() if p.sent)

    def rows(self) -> list[Probe]:
        """Records in catalog order."""
        return [self.probes[e.agent_id] for e in self.entries]

    # ---- outcomes -----------------------------------------------------------------------------

    def good(self, agent_id: str, now: float | None = None) -> bool:
        """Worth serving on now: it served this run, its probe said ready, or it is served
        first without a probe (:attr:`first_up`), and (given ``now``) its account's budget is
        not holding it back."""
        if now is not None and self.is_held(agent_id, now):
            return False
        return self.confirmed(agent_id) or agent_id in self.first_up

    def confirmed(self, agent_id: str) -> bool:
        """Known to answer this run or before: it served (or a past run proved it), its probe
        said ready, or its real request produced a first byte. A route a past run proved with
        a remembered first byte (hedged preflight) is not confirmed until it answers this run:
        its request is hedged like the lead's (:func:`hedge_delay`)."""
        return (
            (agent_id in self.proven and agent_id not in self.remembered_first_byte)
            or agent_id in self.first_bytes
            or self.status(agent_id) is Readiness.READY
        )

    def hold(self, agent_id: str, until: float) -> bool:
        """The account's budget refused a request on ``agent_id``: hold the route until
        ``until`` (its window frees). True when it was not held already (a new deferral, the
        one the attempt log notes); False when the hold only moved."""
        before = self.held.get(agent_id)
        self.held[agent_id] = max(until, before or until)
        self.touch()
        return before is None or before < until - HOLD_SLACK_S

    def is_held(self, agent_id: str, now: float) -> bool:
        """Whether the account's budget still holds ``agent_id`` back at ``now``."""
        return self.held.get(agent_id, now) > now

    def available(self) -> list[CatalogEntry]:
        """Routes neither out nor busy, in catalog order."""
        gone = self.out | self.busy
        return [e for e in self.entries if e.agent_id not in gone]

    def take_out_account(self, account: str, why: str) -> None:
        """An account-wide failure: every route of ``account`` is rejected and out for the run."""
        self.reject_account(account, why)
        self.out.update(e.agent_id for e in self.entries if e.account == account)

    def take_out_free_routes(
        self, account: str, outcome: Outcome, why: str, *, seen_on: str | None = None
    ) -> None:
        """A used-up daily quota: every free route of ``account`` is deferred past its reset
        and out for the run (its priced routes stay: the free allowance is what ran out).
        ``seen_on``, the route that got the signal, keeps its own record (it says more)."""
        for e in self.entries:
            if e.account != account or e.cost is not Cost.FREE:
                continue
            self.out.add(e.agent_id)
            keep = e.agent_id in self.proven or e.agent_id == seen_on
            if not keep and self.status(e.agent_id) is not Readiness.REJECTED:
                self.set(
                    e.agent_id,
                    status=Readiness.DEFERRED,
                    detail=why,
                    retry_after=outcome.retry_after,
                    reset_at=outcome.reset_at,
                )

    # ---- memory across runs ------------------------------------------------------------------

    def note(self, agent_id: str, outcome: Outcome, *, carried_input: bool = False) -> None:
        """Keep the route's latest outcome (a probe's or an attempt's) for memory, and whether
        its request carried the run's input (an attempt: text the pull request's author wrote)
        rather than the probe's own."""
        self.outcomes[agent_id] = outcome
        if carried_input:
            self.input_outcomes.add(agent_id)
        else:
            self.input_outcomes.discard(agent_id)

    def recall(
        self,
        agent_id: str,
        *,
        usable: bool,
        status: Readiness,
        detail: str,
        first_byte_s: float | None = None,
    ) -> None:
        """What a past run says of a route: ``usable`` ones are served first without a probe
        (``first_byte_s``: the first byte it served with, which shortens the hedge delay: see
        :func:`hedge_delay`); the others (dead or cooling) are out for this run and get no
        request at all."""
        self.set(agent_id, status=status, detail=detail)
        if usable and first_byte_s is not None:
            self.remembered_first_byte[agent_id] = first_byte_s
        if usable:
            self.proven.add(agent_id)
            self.recalled_proven.add(agent_id)
            self.first_up.add(agent_id)
        else:
            self.out.add(agent_id)

    def lead_with(self, agent_id: str) -> None:
        """Hedged preflight: serve ``agent_id`` first without a probe (its real request is its
        probe); the others are probed only if it gives no first byte within the hedge delay."""
        self.first_up.add(agent_id)
        self.touch()

    def sent_unprobed(self, agent_id: str, at: float) -> None:
        """The unprobed request on ``agent_id`` went out at ``at`` (the hedge delay runs)."""
        self.sending[agent_id] = at
        self.touch()

    def first_byte(self, agent_id: str) -> None:
        """The real request on ``agent_id`` produced its first byte: the route answers."""
        if agent_id not in self.first_bytes:
            self.first_bytes.add(agent_id)
            self.touch()

    def alive(self, agent_id: str) -> None:
        """The real request on ``agent_id`` got a 2xx stream's first byte (perhaps only a
        keep-alive comment): the route took the request and its model may be working."""
        if agent_id not in self.streams_started:
            self.streams_started.add(agent_id)
            self.touch()

    def enter(self) -> int:
        """A serving request starts: its ticket (requests of one run pick routes oldest first,
        so which chunk a route serves does not depend on which waiter woke first)."""
        self._tickets += 1
        self.looking[self._tickets] = True
        return self._tickets

    def leave(self, ticket: int) -> None:
        """The request of ``ticket`` is done (served or gave up)."""
        self.looking.pop(ticket, None)
        self.touch()

    def looking_ahead_of(self, ticket: int | None) -> int:
        """How many older requests are looking for a route (each takes a good route first)."""
        if ticket is None:
            return 0
        return sum(1 for t, looking in self.looking.items() if t < ticket and looking)

    def awaits_takeover(self, agent_id: str) -> bool:
        """Whether a request is out on ``agent_id`` unprobed with no first byte yet (the next
        route found ready takes it over, before any newer request)."""
        return (
            agent_id in self.busy
            and agent_id in self.sending
            and agent_id not in self.out
            and not self.confirmed(agent_id)
        )

    def hedge_wait(
        self, now: float, delay: float | None, answer_delay: float | None = None
    ) -> float | None:
        """How long probes should still hold back for a route served first (None: not at all).

        A first-up route holds them back while it is in play (not out, not held by its
        budget) and, with a hedge ``delay`` (the bound, ``[preflight] hedge_delay_max``), until
        its unprobed request has gone :func:`hedge_delay` seconds without a first byte
        (``delay``, or less when memory knows the route's first byte; forever once the first
        byte came). Once its stream flows without an answer yet (keep-alive comments: see
        :meth:`alive`) the bound is ``answer_delay`` (``[preflight] hedge_answer_max``; never
        shorter than ``delay``). ``delay`` None (eager preflight, a remembered route): while it
        is in play. A first-up route whose request has not gone out (a second route a past run
        proved) holds them back only while no first-up request is out: it is next in line, not
        a reason to wait out a silent one (two remembered routes, the first now stalling, held
        the probes back until its 20 s first-byte bound).
        """
        waits: list[float] = []
        unsent = out = False
        for a in self.first_up:
            if a in self.out or self.is_held(a, now):
                continue
            sent_at = self.sending.get(a)
            if sent_at is None:
                unsent = True
                continue
            out = True
            if delay is None or a in self.first_bytes:
                waits.append(float("inf"))
            else:
                bound = delay
                if a in self.streams_started and answer_delay is not None:
                    bound = max(delay, answer_delay)
                due = sent_at + hedge_delay(self.remembered_first_byte.get(a), bound)
                if due > now:
                    waits.append(due - now)
        if unsent and (delay is None or not out):
            waits.append(float("inf"))
        return min(waits) if waits else None

    def idle_first_up(self) -> list[CatalogEntry]:
        """Routes served first (a past run proved them) whose request has not gone out and that
        are still in play: when the hedge fires, they are probed like the unsettled ones (a
        probe that says ready lets one take the request over)."""
        return [
            e
            for e in self.entries
            if e.agent_id in self.recalled_proven
            and e.agent_id not in self.sending
            and e.agent_id not in self.out
        ]

    def unsettled(self) -> list[CatalogEntry]:
        """Routes memory said nothing about (the ones preflight may probe), in catalog order."""
        return [e for e in self.entries if e.agent_id not in self.out | self.recalled_proven]

    def recalled_left(self, now: float | None = None) -> bool:
        """Whether a route a past run proved is still in play (preflight waits while it is);
        one its account's budget holds back (given ``now``) is not: other routes are needed."""
        return any(
            a not in self.out and (now is None or not self.is_held(a, now))
            for a in self.recalled_proven
        )

    # ---- the change signal --------------------------------------------------------------------

    def touch(self) -> None:
        """Signal a change (every record change calls it; also a busy route became free).

        Each change sets the current event and starts a new one, so a waiter that read the
        board and then waits never misses a change made after its read (no shared clear)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Wait until the board changes or ``timeout`` seconds pass."""
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=max(0.0, timeout))
