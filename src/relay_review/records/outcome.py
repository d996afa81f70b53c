"""One chat call: its named deadlines (:class:`Deadlines`) and the typed result it always
returns (:class:`Outcome`, never raised), whose :class:`OutcomeKind` the retry decisions are a
table over."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Deadlines(BaseModel):
    """Named bounds (seconds) for one chat call. Every wait in a call is bounded by one of these."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    connect: float = Field(5.0, gt=0, description="TCP/TLS connect")
    first_byte: float = Field(20.0, gt=0, description="call start -> headers and first body byte")
    idle: float = Field(30.0, gt=0, description="longest silent gap once the body is streaming")
    attempt: float = Field(180.0, gt=0, description="the whole call, end to end")
    first_token: float = Field(
        60.0,
        gt=0,
        description="call start -> first content or reasoning delta (keep-alive comments are "
        "bytes, not tokens); never longer than ``attempt`` in effect",
    )
    attempt_name: str = Field(
        "attempt bound", description="what the whole-call bound is called in messages"
    )


class OutcomeKind(StrEnum):
    """What one chat call came to. Decisions (retry, switch, give up) are a table over these."""

    OK = "ok"
    RATE_LIMITED = "rate_limited"
    PAYMENT_REQUIRED = "payment_required"
    AUTH_FAILED = "auth_failed"
    NOT_FOUND = "not_found"
    BAD_REQUEST = "bad_request"
    CONTEXT_TOO_LONG = "context_too_long"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    BAD_REPLY = "bad_reply"


class Phase(StrEnum):
    """Where in a call a timeout struck."""

    CONNECT = "connect"
    FIRST_BYTE = "first_byte"
    IDLE = "idle"
    FIRST_TOKEN = "first_token"  # noqa: S105 (a phase name, not a password)
    ATTEMPT = "attempt"


class Usage(BaseModel):
    """The token counts a provider reported for one reply (its ``usage`` object: only whole
    counts >= 0 are kept, the rest of the provider's JSON is not)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def of(cls, usage: Mapping[str, Any] | None) -> Usage | None:
        """The counts of a provider's ``usage`` JSON object (None when it sent none)."""
        if usage is None:
            return None
        return cls(
            prompt_tokens=_token_count(usage, "prompt_tokens"),
            completion_tokens=_token_count(usage, "completion_tokens"),
        )


class Outcome(BaseModel):
    """The typed result of one chat call (never raised, always returned)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    kind: OutcomeKind
    http_status: int | None = None
    content: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    retry_after: float | None = None
    daily_quota: bool = Field(False, description="a per-day quota is used up (see hints.py)")
    quota_exhausted: bool = Field(False, description="X-RateLimit-Remaining: 0 on the account")
    reset_at: str | None = Field(None, description="ISO UTC time the retry_after wait ends")
    sent: bool = Field(True, description="False: held back by the account budget, never sent")
    content_refusal: bool = Field(
        False,
        description="the reply refused this request's content (a content filter, moderation, a"
        " safety or policy message, a gateway's HTML/WAF page): a fact about this run's input,"
        " never about the route, so it ends the route for this run only and is not remembered",
    )
    phase: Phase | None = None
    detail: str = ""
    first_byte_s: float | None = None
    #: seconds to the first byte of the answer: a stream's first line that is not a keep-alive
    #: comment, any other body's first byte (hedged preflight's signal; route memory keeps it)
    answer_s: float | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.OK

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt tokens the provider counted (``usage.prompt_tokens``), if it said."""
        return self.usage.prompt_tokens if self.usage else None

    @property
    def completion_tokens(self) -> int | None:
        """Completion tokens the provider counted (``usage.completion_tokens``), if it said."""
        return self.usage.completion_tokens if self.usage else None


def _token_count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
