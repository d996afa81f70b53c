"""The route board: the state of each catalog route during one run, and the terms routing shares.

Probing (:mod:`~relay_review.routing.preflight`) writes each route's readiness on the board:
ready, deferred (with its ``retry_after``), rejected, timeout or still unprobed. Serving
(:mod:`~relay_review.routing.failover`) writes each route's outcomes: ``out`` after a failure (for
the rest of the run), ``busy`` while it serves a request, ``proven`` once it served a reply. Every
change wakes whoever waits on the board, so serving starts on the first ready route while other
probes are still in flight, and concurrent requests of one run share what each learns.

Both read one :class:`RunContext` (the chat call, HTTP client, keys, deadlines and clock of the
run) instead of threading those through every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relay_review.models import CatalogEntry, Deadlines, Outcome, OutcomeKind, Probe, Readiness

if TYPE_CHECKING:
    import httpx

#: Outcomes that condemn every route of the account, not just the one that saw them.
ACCOUNT_WIDE = frozenset({OutcomeKind.AUTH_FAILED, OutcomeKind.PAYMENT_REQUIRED})


class ChatFn(Protocol):
    """The shape of :func:`relay_review.providers.chat.chat_call` (injectable for tests)."""

    def __call__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        messages: list[dict],
        deadlines: Deadlines,
        max_tokens: int | None = None,
        extra_body: dict | None = None,
    ) -> Awaitable[Outcome]: ...


@dataclass(frozen=True)
class RunContext:
    """What every probe and attempt of one run shares: how to call a route, and the run's bounds.

    ``deadlines`` bound each serving attempt (probes take the shorter probe bound, and the
    connect bound from here); ``deadline_at`` ends the whole run, on ``clock``'s scale;
    ``started_at`` is where attempt start times are counted from.
    """

    chat: ChatFn
    client: httpx.AsyncClient
    environ: Mapping[str, str]
    deadlines: Deadlines
    deadline_at: float
    started_at: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep


def outcome_detail(outcome: Outcome) -> str:
    """A one-line human description of an outcome (no secrets: outcomes never carry keys)."""
    parts = [outcome.kind.value]
    if outcome.phase:
        parts.append(f"in {outcome.phase.value}")
    if outcome.retry_after is not None:
        parts.append(f"retry after {outcome.retry_after:g}s")
    if outcome.detail:
        parts.append(f"- {outcome.detail}")
    return " ".join(parts)


def missing_key_detail(env_name: str) -> str:
    """The rejection text for a route whose key variable is unset (names the variable only)."""
    return f"missing key {env_name}"


def api_key_for(entry: CatalogEntry, environ: Mapping[str, str]) -> str | None:
    """The route's key from its ``api_key_env`` (surrounding whitespace, e.g. a pasted newline,
    removed, as discovery does); None when unset or blank."""
    return (environ.get(entry.route.api_key_env) or "").strip() or None


class RouteBoard:
    """Every catalog route's state this run, in catalog (= priority) order, with a change signal.

    Readiness (from probes): ``probes`` (one record per route), ``in_flight`` (probes not yet
    answered), ``finished`` (preflight is over). Outcomes (from serving): ``out`` (failed this
    run, never tried again), ``busy`` (serving a request right now), ``proven`` (served a reply
    this run, so it counts as ready whatever preflight said).
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
        self._changed = asyncio.Event()

    # ---- readiness ----------------------------------------------------------------------------

    def status(self, agent_id: str) -> Readiness:
        return self.probes[agent_id].status

    def set(self, agent_id: str, **fields: object) -> None:
        self.probes[agent_id] = self.probes[agent_id].model_copy(update=fields)
        self._changed.set()

    def reject_account(self, account: str, why: str) -> None:
        """Take every route of ``account`` out (except routes that already proved ready)."""
        for e in self.entries:
            probe = self.probes[e.agent_id]
            if e.account == account and probe.status not in (Readiness.READY, Readiness.REJECTED):
                self.set(e.agent_id, status=Readiness.REJECTED, detail=why)

    def finish(self) -> None:
        """Preflight is over: no more probe results will come."""
        self.finished = True
        self._changed.set()

    @property
    def probes_sent(self) -> int:
        return sum(1 for p in self.probes.values() if p.sent)

    def rows(self) -> list[Probe]:
        """Records in catalog order."""
        return [self.probes[e.agent_id] for e in self.entries]

    # ---- outcomes -----------------------------------------------------------------------------

    def good(self, agent_id: str) -> bool:
        """Worth serving on now: it served this run, or its probe said ready."""
        return agent_id in self.proven or self.status(agent_id) is Readiness.READY

    def available(self) -> list[CatalogEntry]:
        """Routes neither out nor busy, in catalog order."""
        gone = self.out | self.busy
        return [e for e in self.entries if e.agent_id not in gone]

    def take_out_account(self, account: str, why: str) -> None:
        """An account-wide failure: every route of ``account`` is rejected and out for the run."""
        self.reject_account(account, why)
        self.out.update(e.agent_id for e in self.entries if e.account == account)

    # ---- the change signal --------------------------------------------------------------------

    def touch(self) -> None:
        """Signal a change that is not a probe result (a busy route became free)."""
        self._changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Wait until the board changes or ``timeout`` seconds pass."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=max(0.0, timeout))
