"""What serving did per route: preflight's verdict on each catalog route (:class:`Probe`, its
:class:`Readiness`), each real request (:class:`Attempt`) and the route whose reply was used
(:class:`ServedBy`). Rows of the report's readiness table and attempt timeline."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ChatMessage(TypedDict):
    """One message of a chat request, in the OpenAI-compatible shape every route speaks."""

    role: Literal["system", "user", "assistant"]
    content: str


class Readiness(StrEnum):
    """What preflight concluded about a route."""

    READY = "ready"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    UNPROBED = "unprobed"
    ABANDONED = "abandoned"


#: The word an abandoned probe's detail carried in reports written before ``abandoned`` was a
#: status of its own (such reports still read back with the right column).
ABANDONED_MARK = "abandoned"


class Probe(BaseModel):
    """Preflight's record for one catalog route (also for routes never probed): a readiness row
    of the report and of the table."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str = ""
    model: str = ""
    #: A :class:`Readiness`; a report read back from JSON keeps a status it does not know as
    #: the text it was (shown, escaped, never guessed).
    status: Readiness | str = Field(Readiness.UNPROBED, union_mode="left_to_right")
    http_status: int | None = None
    first_byte_s: float | None = None
    latency_s: float | None = None
    detail: str = ""
    retry_after: float | None = Field(None, description="seconds the route asked to wait")
    reset_at: str | None = Field(None, description="ISO UTC time that wait ends (quota reset)")
    finished_at: float | None = Field(None, exclude=True, description="monotonic clock")
    sent: bool = Field(False, exclude=True)

    @field_validator("detail", mode="before")
    @classmethod
    def _detail(cls, value: Any) -> Any:
        return "" if value is None else value

    @property
    def column(self) -> Readiness | str:
        """The preflight column (the status; an old report's abandoned probe is not
        silently ``unprobed``)."""
        if self.status is Readiness.UNPROBED and ABANDONED_MARK in self.detail:
            return Readiness.ABANDONED
        return self.status


class Attempt(BaseModel):
    """One real (serving) request: which route, how far it got, how it ended, how long it took."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str = ""
    model: str = ""
    phase: str = ""
    outcome: str = ""
    http_status: int | None = None
    elapsed_s: float | None = None
    started_s: float | None = Field(None, description="seconds since the run started")
    detail: str = ""
    purpose: str = Field("serve", description="serve, or repair (the review's one repair round)")
    prompt_tokens: int | None = Field(None, description="usage the provider reported, if any")
    completion_tokens: int | None = None


class ServedBy(BaseModel):
    """The route whose reply was used — and nothing else (a chunk's, or the review's)."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str = ""
    model: str = ""
