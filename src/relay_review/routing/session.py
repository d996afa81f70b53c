"""A routing session: one run's deadline, HTTP client, preflight in the background, and serving.

Usage::

    async with RoutingSession(entries, preflight=..., serving=..., environ=os.environ) as s:
        result = await s.serve(messages)
    s.readiness()   # every catalog route's fate, in catalog order

The session starts preflight at once and lets serving begin on the first ready route; when the
session closes, probes still in flight are cancelled and reported as abandoned. The run deadline
starts when the session is created and bounds probes and serving alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import httpx

from relay_review._tls import context as tls_context
from relay_review.config import PreflightPolicy, ServingPolicy
from relay_review.records import Attempt, CatalogEntry, ChatMessage, Outcome, Probe, Readiness
from relay_review.redact import usable_secrets
from relay_review.routing import failover, progress
from relay_review.routing.board import RouteBoard
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.failover import Accept, Downgrade, ExtraBody, ServeRequest, ServeResult
from relay_review.routing.preflight import run_preflight
from relay_review.routing.send import ChatFn, KeyCheckFn, RunContext, api_key_for

log = logging.getLogger("relay_review.preflight")


def default_chat() -> ChatFn:
    """The real chat call (imported late so pure users of routing need no HTTP stack)."""
    from relay_review.providers.chat.call import chat_call

    return chat_call


def default_key_check() -> KeyCheckFn:
    """The real gateway key check (``GET /models``), imported late like :func:`default_chat`."""
    from relay_review.providers.chat.keycheck import key_check

    return key_check


class RoutingSession:
    """Preflight + failover over one catalog, under one whole-run deadline."""

    def __init__(
        self,
        entries: Sequence[CatalogEntry],
        *,
        preflight: PreflightPolicy,
        serving: ServingPolicy,
        environ: Mapping[str, str],
        chat: ChatFn | None = None,
        key_check: KeyCheckFn | None = None,
        clock: Callable[[], float] = time.monotonic,
        started_at: float | None = None,
        wait_for_recalled: bool = True,
        budgets: AccountBudgets | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        #: never sent in a message (:func:`~relay_review.routing.send.without_secrets`)
        self.secrets = tuple(usable_secrets(secrets))
        self.wait_for_recalled = wait_for_recalled
        self.budgets = budgets
        self.preflight = preflight
        self.serving = serving
        self.environ = environ
        self.chat = chat or default_chat()
        # a scripted chat (tests) has no server to list models: the check is opted into there
        self.key_check = key_check or (default_key_check() if chat is None else None)
        self.clock = clock
        self.started_at = started_at if started_at is not None else clock()
        self.deadline_at = self.started_at + serving.deadline
        self.board = RouteBoard(entries)
        self._run: RunContext | None = None
        self._preflight_task: asyncio.Task | None = None

    async def __aenter__(self) -> RoutingSession:
        client = httpx.AsyncClient(
            verify=tls_context(),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            follow_redirects=False,
        )
        self._run = RunContext(
            chat=self.chat,
            client=client,
            environ=self.environ,
            deadlines=self.serving.deadlines(),
            deadline_at=self.deadline_at,
            started_at=self.started_at,
            clock=self.clock,
            key_check=self.key_check,
            budgets=self.budgets,
            secrets=self.secrets,
        )
        hedged = self.preflight.mode == "hedged" and self.wait_for_recalled
        if not hedged:  # a remembered first byte only shortens a hedge delay
            self.board.remembered_first_byte.clear()
        if hedged and not self.board.recalled_left():
            lead = next((e for e in self.board.unsettled() if api_key_for(e, self.environ)), None)
            if lead is not None:
                self.board.lead_with(lead.agent_id)
        self._preflight_task = asyncio.create_task(
            run_preflight(
                self.board,
                self._run,
                probe_budget=self.preflight.probe_budget,
                probe_timeout=self.preflight.probe_timeout,
                wait_for_recalled=self.wait_for_recalled,
                hedge_delay=self.preflight.hedge_delay_max if hedged else None,
                hedge_answer_delay=self.preflight.hedge_answer_max if hedged else None,
            )
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def serve(
        self,
        messages: list[ChatMessage],
        *,
        accept: Accept | None = None,
        max_tokens: int | None = None,
        extra_body: ExtraBody = None,
        downgrade: Downgrade | None = None,
    ) -> ServeResult:
        """Serve one request over the catalog (routes that failed this run are skipped)."""
        request = ServeRequest(
            messages,
            accept=accept,
            max_tokens=max_tokens,
            extra_body=extra_body,
            downgrade=downgrade,
        )
        return await failover.serve(self.board, self._context(), request)

    async def call(
        self,
        entry: CatalogEntry,
        messages: list[ChatMessage],
        *,
        max_tokens: int | None = None,
        extra_body: dict | None = None,
    ) -> tuple[Outcome, Attempt]:
        """One follow-up request on a route that just served (the review's repair round).

        Not a retry: the route is not switched and the failure of this call does not take the
        route out. It is bounded by the same deadlines and recorded as a ``repair`` attempt.
        """
        key = api_key_for(entry, self.environ) or ""
        request = ServeRequest(
            messages, max_tokens=max_tokens, extra_body=extra_body, purpose="repair"
        )
        _, outcome, attempt, _ = await failover.attempt_on(entry, key, self._context(), request)
        return outcome, attempt

    def readmit(self, agent_ids: set[str]) -> None:
        """Let routes that refused a request as too long serve again: the caller re-planned
        that request smaller (the review's one re-plan on ``context_too_long``)."""
        for agent_id in agent_ids:
            self.board.out.discard(agent_id)
            self.board.set(agent_id, status=Readiness.READY, detail="re-admitted: smaller request")
        self.board.touch()

    def routes_left(self) -> bool:
        """Whether any route is still in the run (not out): one that can take a request."""
        return any(e.agent_id not in self.board.out for e in self.board.entries)

    def _context(self) -> RunContext:
        assert self._run is not None, "use the session as an async context manager"
        return self._run

    async def wait_preflight(self) -> None:
        """Wait until every budgeted probe has answered or timed out (the ``preflight`` command)."""
        if self._preflight_task is not None:
            await self._preflight_task

    async def close(self) -> None:
        """Cancel probes still in flight (marking them abandoned) and close the client."""
        task, self._preflight_task = self._preflight_task, None
        if task is not None and task.done() and not task.cancelled():
            failed = task.exception()  # retrieved: never "Task exception was never retrieved"
            if failed is not None:
                log.warning("preflight ended early: %s", type(failed).__name__)
        if task is not None and not task.done():
            self.board.finish()  # ends a wait for a remembered route (a lost cancel too)
            for agent_id in list(self.board.in_flight):
                self.board.set(
                    agent_id,
                    status=Readiness.ABANDONED,
                    detail=progress.stall_detail(agent_id)
                    or "probe sent, abandoned when the run finished",
                )
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._say_not_needed()
        for check in self.board.key_checks.values():
            if not check.done():
                check.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await check
        run, self._run = self._run, None
        if run is not None:
            await run.client.aclose()

    def _say_not_needed(self) -> None:
        """Routes that got no request at all while another served: say so in the table."""
        board = self.board
        served = [a for a in board.proven - board.out if a in board.outcomes]
        if not served:
            return
        for e in board.entries:
            probe = board.probes[e.agent_id]
            untouched = e.agent_id not in board.out and e.agent_id not in board.proven
            quiet = probe.status is Readiness.UNPROBED and not probe.sent and not probe.detail
            if untouched and quiet:
                board.set(e.agent_id, detail="not needed: another route served")

    def elapsed(self) -> float:
        return round(self.clock() - self.started_at, 3)

    def readiness(self) -> list[Probe]:
        """Every catalog route's preflight record, in catalog order (copies: the board's own
        records change as long as the session runs)."""
        return [p.model_copy() for p in self.board.rows()]

    @property
    def probes_sent(self) -> int:
        return self.board.probes_sent
