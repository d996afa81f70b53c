"""Preflight: cheap real probes that sort catalog routes into ready / deferred / rejected / timeout.

Probes go out concurrently, in catalog order, at most ``probe_budget`` per run, each asking for
at most :data:`PROBE_MAX_TOKENS` output tokens under a short bound. Routes beyond the budget stay
``unprobed`` (serving treats the real request as their probe). A route whose key is missing is
rejected without a request. An authentication or payment failure takes the whole account out.

Results land on a :class:`ReadinessBoard` as they arrive, so serving can start on the first
ready route while other probes are still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Protocol

import httpx

from relay_review.models import CatalogEntry, Deadlines, Outcome, OutcomeKind, Probe, Readiness

log = logging.getLogger("relay_review.preflight")

#: The most output tokens a probe may ask for.
PROBE_MAX_TOKENS = 16
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


class ReadinessBoard:
    """Every catalog route's current preflight record, with a signal on each change."""

    def __init__(self, entries: Sequence[CatalogEntry]) -> None:
        self.entries = list(entries)
        self.probes: dict[str, Probe] = {
            e.agent_id: Probe(agent_id=e.agent_id, account=e.account, model=e.route.model)
            for e in entries
        }
        self.in_flight: set[str] = set()
        self.finished = False
        self._changed = asyncio.Event()

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

    def touch(self) -> None:
        """Signal a change that is not a probe result (a busy route became free)."""
        self._changed.set()

    def finish(self) -> None:
        self.finished = True
        self._changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Wait until the board changes or ``timeout`` seconds pass."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=max(0.0, timeout))

    @property
    def probes_sent(self) -> int:
        return sum(1 for p in self.probes.values() if p.sent)

    def rows(self) -> list[Probe]:
        """Records in catalog order."""
        return [self.probes[e.agent_id] for e in self.entries]


def missing_key_detail(env_name: str) -> str:
    """The rejection text for a route whose key variable is unset (names the variable only)."""
    return f"missing key {env_name}"


def api_key_for(entry: CatalogEntry, environ: Mapping[str, str]) -> str | None:
    """The route's key from its ``api_key_env`` (surrounding whitespace, e.g. a pasted newline,
    removed, as discovery does); None when unset or blank."""
    return (environ.get(entry.route.api_key_env) or "").strip() or None


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
    board: ReadinessBoard,
    *,
    chat: ChatFn,
    client: httpx.AsyncClient,
    environ: Mapping[str, str],
    probe_budget: int,
    probe_timeout: float,
    connect_timeout: float,
    deadline_at: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Probe up to ``probe_budget`` routes concurrently and record each result on ``board``."""
    to_probe, keyless = plan_probes(board.entries, environ, probe_budget)
    for e in keyless:
        board.set(
            e.agent_id, status=Readiness.REJECTED, detail=missing_key_detail(e.route.api_key_env)
        )

    async def probe(entry: CatalogEntry) -> None:
        remaining = deadline_at - clock()
        if remaining <= 0:
            return
        bound = min(probe_timeout, remaining)
        deadlines = Deadlines(
            connect=min(connect_timeout, bound), first_byte=bound, idle=bound, attempt=bound
        )
        board.in_flight.add(entry.agent_id)
        board.set(entry.agent_id, sent=True)
        try:
            outcome = await chat(
                client,
                base_url=entry.route.base_url or "",
                api_key=api_key_for(entry, environ),
                model=entry.route.model,
                messages=PROBE_MESSAGES,
                deadlines=deadlines,
                max_tokens=PROBE_MAX_TOKENS,
            )
        finally:
            board.in_flight.discard(entry.agent_id)
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
            finished_at=clock(),
        )
        log.info(
            "probe %s: %s (%s, http %s, %.2fs)",
            entry.agent_id,
            status.value,
            outcome.kind.value,
            outcome.http_status if outcome.http_status is not None else "-",
            outcome.elapsed_s,
        )
        if outcome.kind in ACCOUNT_WIDE:
            board.reject_account(entry.account, f"account {entry.account}: {outcome.kind.value}")

    try:
        await asyncio.gather(*(probe(e) for e in to_probe))
    finally:
        board.finish()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
