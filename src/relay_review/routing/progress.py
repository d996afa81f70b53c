"""Progress lines during long waits: a request (probe or serving attempt) that has been waiting
longer than :data:`QUIET_S` gets an INFO line at most every :data:`EVERY_S` naming what it
waits for, from which route, and how much of the bound in force is used::

    INFO relay_review.progress: waiting for first token from nim_a/qwen/qwen3 (12 s of 60 s)

How it works: :func:`tracking` (around one chat call, in :func:`.send.send`) registers the
request in the running loop's registry with its start time and deadlines; the chat call moves
its phase on (:func:`phase`: first byte -> first token -> the rest of the reply) through a
context variable, so no argument is threaded through; one ticker task per loop, started with
the first tracked request and ended with the last, reads the registry every
:data:`TICK_S` and logs. Lines of one route come from that one task, in order. The ticker only
reads and logs: it never cancels, retries or bounds anything (the chat call's timers do).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from relay_review.records import Deadlines

log = logging.getLogger("relay_review.progress")

#: A wait shorter than this says nothing.
QUIET_S = 5.0
#: At most one line per request this often.
EVERY_S = 10.0
#: How often the ticker looks.
TICK_S = 0.5

#: What a request waits for, by phase, and which bound applies then.
FIRST_BYTE = "first byte"
FIRST_TOKEN = "first token"  # noqa: S105 (a phase name, not a password)
REST = "the rest of the reply"


@dataclass
class Wait:
    """One request in flight, as the ticker sees it."""

    route: str
    purpose: str
    deadlines: Deadlines
    deadline_at: float
    clock: Callable[[], float]
    started: float
    phase: str = FIRST_BYTE
    phase_started: float = 0.0
    said_at: float | None = None
    #: A plain wait (no request): its length in seconds (:func:`pausing`).
    pause_s: float | None = None

    def bound(self) -> tuple[float, float]:
        """(seconds waited, bound in seconds) for the phase in force, from the call's start:
        the first_byte, first_token or attempt bound, never past the run's deadline."""
        d = self.deadlines
        if self.pause_s is not None:
            return self.clock() - self.started, self.pause_s
        if self.phase == FIRST_BYTE:
            bound = min(d.first_byte, d.first_token, d.attempt)
        elif self.phase == FIRST_TOKEN:
            bound = min(d.first_token, d.attempt)
        else:
            bound = d.attempt
        bound = min(bound, max(self.deadline_at - self.started, 0.0))
        return self.clock() - self.started, bound

    def line(self) -> str:
        waited, bound = self.bound()
        if self.pause_s is not None:
            return f"waiting out {self.phase} of {self.route} ({waited:.0f} s of {bound:.0f} s)"
        what = "probe reply" if self.purpose == "probe" else self.phase
        if self.purpose == "probe" and self.phase != FIRST_BYTE:
            what = f"probe reply ({self.phase})"
        return f"waiting for {what} from {self.route} ({waited:.0f} s of {bound:.0f} s)"


@dataclass
class _Registry:
    waits: dict[int, Wait] = field(default_factory=dict)
    ticker: asyncio.Task | None = None


_registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Registry] = (
    weakref.WeakKeyDictionary()
)
_current: contextvars.ContextVar[Wait | None] = contextvars.ContextVar("progress", default=None)
_ids = itertools.count()


def in_flight() -> list[Wait]:
    """The requests the running loop's registry holds (tests, and the ticker)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return []
    reg = _registries.get(loop)
    return list(reg.waits.values()) if reg else []


@contextlib.contextmanager
def tracking(
    route: str,
    deadlines: Deadlines | None,
    *,
    deadline_at: float,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Wait | None]:
    """Register one request on ``route`` for progress lines while the block runs (a probe when
    ``deadlines`` are the probe's: ``attempt_name`` ``probe timeout``). Without deadlines or a
    running loop nothing is tracked."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if deadlines is None or loop is None:
        yield None
        return
    now = clock()
    purpose = "probe" if deadlines.attempt_name == "probe timeout" else "serve"
    wait = Wait(route, purpose, deadlines, deadline_at, clock, now, phase_started=now)
    with _registered(loop, wait):
        token = _current.set(wait)
        try:
            yield wait
        finally:
            _current.reset(token)


@contextlib.contextmanager
def pausing(
    route: str, what: str, seconds: float, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[Wait | None]:
    """Register a plain wait of ``seconds`` on ``route`` (``what``: ``the retry-after``) for
    progress lines while the block runs (``waiting out the retry-after of x (12 s of 30 s)``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        yield None
        return
    now = clock()
    d = Deadlines(connect=max(seconds, 0.001), first_byte=1, idle=1, attempt=1)
    wait = Wait(route, "pause", d, now + seconds, clock, now, what, now, pause_s=seconds)
    with _registered(loop, wait):
        yield wait


@contextlib.contextmanager
def _registered(loop: asyncio.AbstractEventLoop, wait: Wait) -> Iterator[None]:
    """``wait`` in the loop's registry while the block runs; the ticker started if need be."""
    reg = _registries.setdefault(loop, _Registry())
    key = next(_ids)
    reg.waits[key] = wait
    if reg.ticker is None or reg.ticker.done():
        reg.ticker = loop.create_task(_tick(reg), name="relay-review progress")
    try:
        yield
    finally:
        reg.waits.pop(key, None)


def phase(name: str) -> None:
    """The current request (this task's :func:`tracking`) now waits for ``name``; no-op when
    nothing is tracked. Called by the chat call as bytes and tokens arrive."""
    wait = _current.get()
    if wait is not None and wait.phase != name:
        wait.phase = name
        wait.phase_started = wait.clock()


def due(wait: Wait) -> bool:
    """Whether ``wait`` gets a line now: waiting longer than :data:`QUIET_S`, and its last line
    at least :data:`EVERY_S` ago."""
    now = wait.clock()
    if now - wait.started < QUIET_S:
        return False
    return wait.said_at is None or now - wait.said_at >= EVERY_S


async def _tick(reg: _Registry) -> None:
    """Log the due waits until none is left in flight."""
    while reg.waits:
        await asyncio.sleep(TICK_S)
        for wait in sorted(reg.waits.values(), key=lambda w: w.started):
            if due(wait):
                wait.said_at = wait.clock()
                log.info("%s", wait.line())


def stall_detail(route: str) -> str | None:
    """What a request on ``route`` still in flight has waited for so far (``stalled: no byte
    in 12 s``), for a probe abandoned when the run finished; ``None`` when none is in flight."""
    for wait in in_flight():
        if wait.route == route and wait.pause_s is None:
            elapsed = wait.clock() - wait.started
            waited = round(elapsed, 1 if elapsed < 10 else None)
            if wait.phase == FIRST_BYTE:
                return f"stalled: no byte in {waited:g} s"
            if wait.phase == FIRST_TOKEN:
                return f"stalled: no token in {waited:g} s"
            return f"stalled: reply unfinished after {waited:g} s"
    return None
