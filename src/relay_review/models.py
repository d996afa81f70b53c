"""Records that cross stage boundaries.

Settings resolve accounts; discovery turns them into routes; the catalog selects and ranks them;
preflight and failover turn each chat call into an :class:`Outcome`; the report carries all of it
to rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The provider kinds a policy may name (``providers/kinds.py`` says what each one means).
KindName = Literal["openrouter", "nvidia_nim", "opencode", "openai_compatible"]
#: Where a kind's price evidence comes from.
Pricing = Literal["listing", "models.dev", "declared-free", "unknown"]


class Account(BaseModel):
    """One credential account, defaults resolved: where to call, which variable holds its key.

    Built by :mod:`relay_review.settings` (policy and environment); read by discovery. Key
    *values* are never held here, only the name of the variable that holds the key.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    kind: KindName
    base_url: str
    api_key_env: str
    pricing: Pricing
    models_dev_provider: str | None = None
    source: Literal["policy", "env"] = "policy"


def has_key(account: Account, environ: Mapping[str, str]) -> bool:
    """Whether the account's key variable holds a non-empty value (the value is not returned)."""
    return bool(environ.get(account.api_key_env, "").strip())


class Deadlines(BaseModel):
    """Named bounds (seconds) for one chat call. Every wait in a call is bounded by one of these."""

    model_config = ConfigDict(frozen=True)

    connect: float = Field(5.0, gt=0, description="TCP/TLS connect")
    first_byte: float = Field(20.0, gt=0, description="call start -> headers and first body byte")
    idle: float = Field(30.0, gt=0, description="longest silent gap once the body is streaming")
    attempt: float = Field(180.0, gt=0, description="the whole call, end to end")


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
    ATTEMPT = "attempt"


class Outcome(BaseModel):
    """The typed result of one chat call (never raised, always returned)."""

    model_config = ConfigDict(frozen=True)

    kind: OutcomeKind
    http_status: int | None = None
    content: str | None = None
    finish_reason: str | None = None
    usage: dict | None = None
    retry_after: float | None = None
    phase: Phase | None = None
    detail: str = ""
    first_byte_s: float | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.OK


class Cost(StrEnum):
    """Price evidence for a route, decided only from numbers (never from a ``:free`` suffix)."""

    FREE = "free"
    PRICED = "priced"
    UNKNOWN = "unknown"


class Route(BaseModel):
    """One (account, model) pair from a discovery report, validated and with defaults filled in."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(description="position in the discovery report (for error messages)")
    account: str
    provider: str
    model: str
    agent_id: str
    base_url: str | None = None
    api_key_env: str
    prompt_price_per_1k: float | None = None
    completion_price_per_1k: float | None = None
    context_length: int | None = None
    cost: Cost = Cost.UNKNOWN
    response_format: str | None = Field(
        None, description="structured output the route declares: json_schema, json_object or None"
    )


class CatalogEntry(BaseModel):
    """A selected route with its tier facts and its unique priority (higher is tried first)."""

    model_config = ConfigDict(frozen=True)

    route: Route
    cost: Cost
    zdr: bool
    priority: int

    @property
    def agent_id(self) -> str:
        return self.route.agent_id

    @property
    def account(self) -> str:
        return self.route.account

    def summary(self) -> dict:
        """The contract's JSON shape for one selected route."""
        r = self.route
        return {
            "agent_id": r.agent_id,
            "account": r.account,
            "provider": r.provider,
            "model": r.model,
            "cost": self.cost.value,
            "zdr": self.zdr,
            "priority": self.priority,
        }


class CatalogReport(BaseModel):
    """Counts that explain a selection."""

    total_routes: int
    free_routes: int
    priced_routes: int
    unknown_routes: int
    account_diversity: int
    selected_by_account: dict[str, int]
    zdr_selected: int
    excluded: dict[str, int]


class Catalog(BaseModel):
    """The bounded, ranked list of routes a run may use, and how it was chosen."""

    selected: list[CatalogEntry]
    report: CatalogReport

    def to_json(self) -> dict:
        return {
            "selected": [e.summary() for e in self.selected],
            "report": self.report.model_dump(),
        }


class Readiness(StrEnum):
    """What preflight concluded about a route."""

    READY = "ready"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    UNPROBED = "unprobed"


class Probe(BaseModel):
    """Preflight's record for one catalog route (also for routes never probed)."""

    agent_id: str
    account: str
    model: str
    status: Readiness = Readiness.UNPROBED
    http_status: int | None = None
    first_byte_s: float | None = None
    latency_s: float | None = None
    detail: str = ""
    retry_after: float | None = Field(None, exclude=True)
    finished_at: float | None = Field(None, exclude=True, description="monotonic clock")
    sent: bool = Field(False, exclude=True)


class Attempt(BaseModel):
    """One real (serving) request: which route, how far it got, how it ended, how long it took."""

    agent_id: str
    account: str
    model: str
    phase: str
    outcome: str
    http_status: int | None = None
    elapsed_s: float
    started_s: float = Field(description="seconds since the run started")
    detail: str = ""
    purpose: str = Field("serve", description="serve, or repair (the review's one repair round)")


class ServedBy(BaseModel):
    """The route whose reply was used — and nothing else."""

    agent_id: str
    account: str
    model: str
