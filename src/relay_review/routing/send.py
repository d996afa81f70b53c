"""The run context and the one place a chat request goes out.

:class:`RunContext` is what every probe and attempt of one run shares (the chat call, HTTP
client, keys, deadlines, clock and budgets), so preflight and serving take one argument instead
of threading those through every call. :func:`send` is the only caller of the chat call: the
account's budget admits or refuses the request there, progress is tracked there, and an
exception below becomes the route's outcome there. A route's key and the one-line description
of an outcome live beside it, since both sides read them the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relay_review.records import CatalogEntry, ChatMessage, Deadlines, Outcome, OutcomeKind
from relay_review.redact import redact
from relay_review.routing import progress
from relay_review.routing.budget import AccountBudgets

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("relay_review.routing")


class ChatFn(Protocol):
    """The shape of :func:`relay_review.providers.chat.call.chat_call` (injectable for tests)."""

    def __call__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        messages: list[ChatMessage],
        deadlines: Deadlines,
        max_tokens: int | None = None,
        extra_body: dict | None = None,
        on_first_byte: Callable[[], None] | None = None,
        on_alive: Callable[[], None] | None = None,
    ) -> Awaitable[Outcome]: ...


class KeyCheckFn(Protocol):
    """The shape of :func:`relay_review.providers.chat.keycheck.key_check`: True when
    ``GET /models`` refuses the key, False when it accepts it, None when it could not tell."""

    def __call__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        deadlines: Deadlines,
    ) -> Awaitable[bool | None]: ...


@dataclass(frozen=True)
class RunContext:
    """What every probe and attempt of one run shares: how to call a route, and the run's bounds.

    ``deadlines`` bound each serving attempt (probes take the shorter probe bound, and the
    connect bound from here); ``deadline_at`` ends the whole run, on ``clock``'s scale;
    ``started_at`` is where attempt start times are counted from. ``key_check`` confirms a
    gateway account's key (None: never confirmed, so a gateway's auth failure stays per route).
    """

    chat: ChatFn
    client: httpx.AsyncClient
    environ: Mapping[str, str]
    deadlines: Deadlines
    deadline_at: float
    started_at: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    key_check: KeyCheckFn | None = None
    budgets: AccountBudgets | None = None
    #: the run's secrets (keys, token, state password and key): never sent in a message, even
    #: when the pull request's text or a reply quotes one (a model sees ``***`` in its place)
    secrets: tuple[str, ...] = ()

    def deadline_struck(self, outcome: Outcome) -> bool:
        """Whether ``outcome`` is a timeout the run deadline cut short (its bound was what was
        left of the run, not the route's own): nothing to hold against the route, so memory
        keeps no such outcome and a probe so cut is abandoned, not timed out."""
        return outcome.kind is OutcomeKind.TIMEOUT and self.clock() >= self.deadline_at - 0.05


def without_secrets(messages: list[ChatMessage], secrets: tuple[str, ...]) -> list[ChatMessage]:
    """``messages`` with every one of ``secrets`` in their contents replaced by ``***``."""
    if not secrets:
        return messages
    return [ChatMessage(role=m["role"], content=redact(m["content"], secrets)) for m in messages]


async def send(
    run: RunContext,
    entry: CatalogEntry,
    on_admitted: Callable[[], None] | None = None,
    **request: Any,
) -> Outcome:
    """One chat request on ``entry`` -- unless the account's budget cannot hold it: then the
    refusal (``sent`` False) and nothing goes out (see :mod:`relay_review.routing.budget`). An
    exception of the budget or the chat call (a bug: both return outcomes) is this route's
    ``bad_reply``. ``on_admitted`` is told when the budget let it go (the hedge clock starts
    there, not while a slow shared ledger answers). No secret of the run goes out in a message
    (:func:`without_secrets`)."""
    if "messages" in request:
        request["messages"] = without_secrets(request["messages"], run.secrets)
    try:
        if run.budgets is not None:
            refused = await run.budgets.admit(entry, run.deadline_at - run.clock())
            if refused is not None:
                return refused
        if on_admitted is not None:
            on_admitted()
        wanted = any(request.get(hook) is not None for hook in HEDGE_HOOKS)
        taken = hooks_taken(run.chat) if wanted else frozenset()
        for hook in HEDGE_HOOKS:
            if request.get(hook) is None or hook not in taken:
                request.pop(hook, None)  # a scripted chat: told nothing, answers whole
        with progress.tracking(
            entry.agent_id, request.get("deadlines"), deadline_at=run.deadline_at, clock=run.clock
        ):
            outcome = await run.chat(run.client, **request)
    except Exception as exc:  # both return outcomes; a bug below fails this route only
        log.warning("request on %s failed: %s", entry.agent_id, type(exc).__name__)
        return Outcome(kind=OutcomeKind.BAD_REPLY, detail=f"request failed: {type(exc).__name__}")
    if run.budgets is not None:
        await run.budgets.learn(entry, outcome)
    return outcome


#: The chat call's hooks hedged routing listens on (:func:`.providers.chat.call.chat_call`).
HEDGE_HOOKS = ("on_first_byte", "on_alive")


def hooks_taken(chat: Callable[..., object]) -> frozenset[str]:
    """The :data:`HEDGE_HOOKS` ``chat`` takes as keywords, its signature read once (the real
    chat call takes both; a scripted one in tests may not, and then hedging learns of its
    answer only when it returns)."""
    try:
        params = inspect.signature(chat).parameters
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return frozenset(HEDGE_HOOKS)
    return frozenset(hook for hook in HEDGE_HOOKS if hook in params)


def outcome_detail(outcome: Outcome) -> str:
    """A one-line human description of an outcome (no secrets: outcomes never carry keys)."""
    parts = [outcome.kind.value]
    if outcome.phase:
        parts.append(f"in {outcome.phase.value}")
    if outcome.retry_after is not None:
        parts.append(f"retry after {outcome.retry_after:g}s")
    if outcome.daily_quota and outcome.reset_at:
        parts.append(f"(daily quota, resets {outcome.reset_at})")
    elif outcome.quota_exhausted and outcome.reset_at:
        parts.append(f"(no requests left, resets {outcome.reset_at})")
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
