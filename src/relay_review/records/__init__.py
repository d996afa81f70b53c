"""Records that cross stage boundaries.

Settings resolve accounts; discovery turns them into routes; the catalog selects and ranks them;
preflight and failover turn each chat call into an :class:`Outcome`; the report carries all of it
to rendering.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum, StrEnum
from typing import Any, Literal, Protocol, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from relay_review.records.finding import Finding

T = TypeVar("T")

#: The provider kinds a policy may name (``kinds.py`` says what each one means).
KindName = Literal[
    "openrouter",
    "nvidia_nim",
    "opencode",
    "groq",
    "cerebras",
    "gemini",
    "mistral",
    "cloudflare",
    "sambanova",
    "huggingface",
    "openai_compatible",
]
#: Where a kind's price evidence comes from.
Pricing = Literal["listing", "models.dev", "declared-free", "unknown"]


class Account(BaseModel):
    """One credential account, defaults resolved: where to call, which variable holds its key.

    Built by :mod:`relay_review.config.accounts` (policy and environment); read by discovery. Key
    *values* are never held here, only the name of the variable that holds the key.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

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


class Outcome(BaseModel):
    """The typed result of one chat call (never raised, always returned)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    kind: OutcomeKind
    http_status: int | None = None
    content: str | None = None
    finish_reason: str | None = None
    usage: dict | None = None
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
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.OK

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt tokens the provider counted (``usage.prompt_tokens``), if it said."""
        return _token_count(self.usage, "prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        """Completion tokens the provider counted (``usage.completion_tokens``), if it said."""
        return _token_count(self.usage, "completion_tokens")


def _token_count(usage: dict | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class Cost(StrEnum):
    """Price evidence for a route, decided only from numbers (never from a ``:free`` suffix)."""

    FREE = "free"
    PRICED = "priced"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, prompt: float | None, completion: float | None) -> Cost:
        """Both prices 0 -> free; both numbers, any > 0 -> priced; both absent -> unknown."""
        if prompt is None and completion is None:
            return cls.UNKNOWN
        if prompt is None or completion is None:
            raise ValueError("exactly one price present")
        return cls.FREE if prompt == 0 and completion == 0 else cls.PRICED


#: Declared structured-output support a route may carry (anything else is ignored).
RESPONSE_FORMATS = ("json_schema", "json_object")


class Route(BaseModel):
    """One (account, model) pair: built by discovery in process, or read back from a discovery
    report file (:func:`relay_review.routing.catalog.parse_discovery`), defaults filled in."""

    model_config = ConfigDict(defer_build=True, frozen=True)

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
    price_note: str | None = Field(None, description="why discovery found no price (unknown)")

    def report_json(self) -> dict[str, Any]:
        """The route as the discovery report file holds it (what ``discover`` writes)."""
        out: dict[str, Any] = {
            "account": self.account,
            "provider": self.provider,
            "model": self.model,
            "agent_id": self.agent_id,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "prompt_price_per_1k": self.prompt_price_per_1k,
            "completion_price_per_1k": self.completion_price_per_1k,
            "context_length": self.context_length,
        }
        if self.price_note is not None:
            out["price_note"] = self.price_note
        if self.response_format is not None:
            out["response_format"] = self.response_format
        return out


class CatalogEntry(BaseModel):
    """A selected route with its tier facts and its unique priority (higher is tried first)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    route: Route
    cost: Cost
    zdr: bool
    priority: int
    #: The route's published uptime in percent (OpenRouter's endpoints listing), if read.
    uptime: float | None = None

    @property
    def agent_id(self) -> str:
        return self.route.agent_id

    @property
    def account(self) -> str:
        return self.route.account

    def summary(self) -> SelectedRoute:
        """This entry as reports show it (the contract's JSON shape for one selected route)."""
        r = self.route
        return SelectedRoute(
            agent_id=r.agent_id,
            account=r.account,
            provider=r.provider,
            model=r.model,
            cost=self.cost.value,
            zdr=self.zdr,
            priority=self.priority,
            uptime=self.uptime,
        )

    @property
    def served_by(self) -> ServedBy:
        """This entry's route as a report names the one that served."""
        return ServedBy(agent_id=self.agent_id, account=self.account, model=self.route.model)


class CatalogReport(BaseModel):
    """Counts that explain a selection."""

    model_config = ConfigDict(defer_build=True)

    total_routes: int = 0
    free_routes: int = 0
    priced_routes: int = 0
    unknown_routes: int = 0
    account_diversity: int = 0
    selected_by_account: dict[str, int] = Field(default_factory=dict)
    zdr_selected: int = 0
    excluded: dict[str, int] = Field(default_factory=dict)


class SelectedRoute(BaseModel):
    """A catalog route as reports show it (:meth:`CatalogEntry.summary`): flat, no key names."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str = ""
    provider: str = ""
    model: str = ""
    cost: str = ""
    zdr: bool = False
    priority: int = 0
    #: Published uptime in percent, only where it was read (left out of the JSON otherwise).
    uptime: float | None = None

    @model_serializer(mode="wrap")
    def _drop_unread_uptime(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("uptime", 0) is None:
            del out["uptime"]
        return out


class CatalogSummary(BaseModel):
    """The catalog as reports hold it (:meth:`Catalog.summary`)."""

    model_config = ConfigDict(defer_build=True)

    selected: list[SelectedRoute] = Field(default_factory=list)
    report: CatalogReport | None = None


class Catalog(BaseModel):
    """The bounded, ranked list of routes a run may use, and how it was chosen."""

    model_config = ConfigDict(defer_build=True)

    selected: list[CatalogEntry]
    report: CatalogReport

    def summary(self) -> CatalogSummary:
        """The catalog as reports hold it."""
        return CatalogSummary(selected=[e.summary() for e in self.selected], report=self.report)

    def to_json(self) -> dict[str, Any]:
        return self.summary().model_dump(mode="json")


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


# --------------------------------------------------------------------------------------------
# the run's report: what the review stages hand to rendering and publishing


class Decision(StrEnum):
    """What a run concluded. The first four are verdicts; ``skipped`` and ``error`` are only the
    action's ``decision`` output for a run that produced none."""

    APPROVE = "approve"
    COMMENT = "comment"
    REQUEST_CHANGES = "request_changes"
    UNAVAILABLE = "unavailable"
    SKIPPED = "skipped"
    ERROR = "error"


class Stopped(StrEnum):
    """Why serving (one chunk, or the whole review) stopped."""

    SERVED = "served"
    PARTIAL = "partial"
    DEADLINE = "deadline"
    EXHAUSTED = "exhausted"
    NOTHING_TO_REVIEW = "nothing to review"


class ReviewStatus(StrEnum):
    """Whether a changed file was reviewed."""

    REVIEWED = "reviewed"
    SKIPPED = "skipped"


class NotPosted(StrEnum):
    """Why the action posted nothing on the pull request."""

    HEAD_MOVED = "head_moved"
    READ_ONLY = "read_only"
    RATE_LIMITED = "rate_limited"
    FAILED = "failed"


class _Row(BaseModel):
    """A report row: typed where the code reads it, other keys kept as they came (a report read
    back from JSON renders the same as the one that was written)."""

    model_config = ConfigDict(defer_build=True, extra="allow")


class FileReport(_Row):
    """One changed file: reviewed, or skipped with the reason (the chunk plan's, then the
    report's)."""

    path: str
    status: str = ReviewStatus.REVIEWED
    reason: str | None = None
    #: How the diff changes it (added, modified, deleted, renamed, copied, binary) and its old
    #: path: the plan's facts, not in the JSON report.
    change: str | None = Field(None, exclude=True)
    old_path: str | None = Field(None, exclude=True)
    #: Changed content no model was shown (not an exclusion the policy trusts, binary, no
    #: patch, a size limit): the review is partial and never approves.
    left_out: bool = False
    #: Reviewed in an earlier run and unchanged since: that run's head (sha, or "" when the run
    #: had none) and findings were reused with no model request. None: reviewed this run.
    reused_from: str | None = None
    #: The model's short note on this file (the comment's walkthrough; "" when it gave none).
    note: str = ""


class ChunkReport(_Row):
    """How one chunk of the diff was served."""

    number: int | None = None
    total: int | None = None
    paths: list[str] = Field(default_factory=list)
    served_by: ServedBy | None = None
    stopped: str = ""
    #: Served from memory: an earlier run's review of identical content (no model request).
    reused: bool = False
    #: The reply's summary of this chunk, when believed (it verified a finding or had none
    #: rejected); the comment's walkthrough when the model gave no per-file notes.
    summary: str = ""


class MemoryReport(_Row):
    """What memory across runs did this run: where it lives, what it settled, what it saved."""

    store: str = "none"
    #: Routes a past run settled: proven (served first, unprobed), dead, cooling (no request).
    proven: int = 0
    dead: int = 0
    cooling: int = 0
    #: Earlier chunk reviews some of whose files were reused (no model request), and the files.
    reused_chunks: int = 0
    reused_files: int = 0
    #: Requests a run without memory would have sent: probes not needed, chunks not re-sent.
    requests_avoided: int = 0
    #: Why files with reviewable changes were sent to a model again ("" when all were reused):
    #: changed since a commit, their route no longer selected, asked again, no earlier review.
    not_reused: str = ""


class Inline(BaseModel):
    """Which verified findings went inline (:mod:`relay_review.review.noise`): the policy's
    floor and cap, and how many were posted, below the floor, over the cap."""

    model_config = ConfigDict(defer_build=True)

    min_severity: str = ""
    max_inline: int = 0
    inline: int = 0
    below_floor: int = 0
    over_cap: int = 0


class Redactor(Protocol):
    """What scrubs a text of the run's secrets (:class:`relay_review.github.log.Secrets`)."""

    def redact(self, text: str) -> str: ...


def scrubbed(value: T, secrets: Redactor) -> T:
    """A copy of ``value`` (a record, or lists, tuples and dicts of them) with every text, dict
    keys included, scrubbed of the secrets; enum values are ours and stay as they are."""
    return cast(T, _scrub(value, secrets.redact))


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, Enum):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, BaseModel):
        update = {name: _scrub(getattr(value, name), redact) for name in type(value).model_fields}
        copy = value.model_copy(update=update)
        # the same fields set as the original (the JSON report leaves unset action keys out)
        object.__setattr__(copy, "__pydantic_fields_set__", set(value.model_fields_set))
        if value.model_extra:
            extra = {redact(k): _scrub(v, redact) for k, v in value.model_extra.items()}
            object.__setattr__(copy, "__pydantic_extra__", extra)
        return copy
    if isinstance(value, dict):
        return {_scrub(k, redact): _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub(v, redact) for v in value)
    return value


# --------------------------------------------------------------------------------------------
# what the action adds to the report: where it ran, the policy, the pull request, discovery,
# what was posted, the findings across pushes


class RunContext(BaseModel):
    """Where the reviewed code is (links in the comment)."""

    model_config = ConfigDict(defer_build=True)

    server_url: str | None = None
    repo: str | None = None
    head_sha: str | None = None
    base_sha: str | None = None


class PolicySource(BaseModel):
    """Where the policy text came from; :meth:`render` is what the comment and report show."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    kind: Literal["pinned", "base", "default"]
    repo: str
    sha: str
    path: str
    #: What was asked for: the ``orchestrator-ref`` (pinned) or the PR's base branch (base).
    ref: str
    #: The minimum ref the pinned commit was verified to descend from, and its SHA.
    min_ref: str | None = None
    min_sha: str | None = None

    def render(self) -> str:
        """``owner/repo@<sha12> (resolved from <ref>)``; for a base policy ``(base of ...)``."""
        if self.kind == "pinned":
            return f"{self.repo}@{self.sha[:12]} (resolved from {self.ref})"
        if self.kind == "default":
            return f"{self.repo}@{self.sha[:12]} (default branch: {self.ref})"
        return f"{self.repo}@{self.sha[:12]} (base of the pull request: {self.ref})"

    def __str__(self) -> str:
        return self.render()


class PolicyReport(BaseModel):
    """Where the run's policy came from: the provenance line, its file, the inline policy and
    the action inputs over it, and a note for a pull request against another branch."""

    model_config = ConfigDict(defer_build=True)

    provenance: str = ""
    source: PolicySource | None = None
    inline: bool = False
    input_overrides: dict[str, JsonValue] = Field(default_factory=dict)
    note: str | None = None


class PullRequestReport(BaseModel):
    """The pull request the run reviewed."""

    model_config = ConfigDict(defer_build=True)

    event: str | None = None
    action: str | None = None
    repo: str | None = None
    number: int | None = None
    head_sha: str | None = None
    base_sha: str | None = None
    private: bool | None = None


class DiscoveredAccount(BaseModel):
    """How discovery went for one account (never holds a key)."""

    model_config = ConfigDict(defer_build=True)

    account: str
    kind: str
    status: str
    listed: int = 0
    kept: int = 0
    error: str | None = None
    dropped: dict[str, int] = Field(default_factory=dict)


class DiscoveryReport(BaseModel):
    """Discovery's accounts and errors, as the report holds them."""

    model_config = ConfigDict(defer_build=True)

    accounts: list[DiscoveredAccount] = Field(default_factory=list)
    errors: list[dict[str, str]] = Field(default_factory=list)


class _Present(BaseModel):
    """A record whose JSON holds only the fields that were set (in field order)."""

    model_config = ConfigDict(defer_build=True)

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}


class Refused(BaseModel):
    """A line comment GitHub refused (it stays in the sticky comment)."""

    model_config = ConfigDict(defer_build=True)

    path: str
    line: int
    reason: str


class ResolveFailed(BaseModel):
    """A review thread that could not be resolved."""

    model_config = ConfigDict(defer_build=True)

    thread: str
    reason: str


class ReviewPosted(_Present):
    """The line comments and review threads of one run (only what was done is said): the
    review posted, the threads resolved, which findings went inline."""

    mode: str = "none"
    posted: int = 0
    refused: list[Refused] = Field(default_factory=list)
    uncertain: bool = False
    detail: str = ""
    not_reposted: int = 0
    resolved: int = 0
    resolve_failed: list[ResolveFailed] = Field(default_factory=list)
    threads_error: str | None = None
    noise: Inline | None = None


class GithubReport(BaseModel):
    """What happened on GitHub (:class:`relay_review.github.publish.Published`)."""

    model_config = ConfigDict(defer_build=True)

    comment_url: str | None = None
    comment_action: str | None = None
    not_posted: str | None = None
    detail: str = ""
    current_head_sha: str | None = None
    review: ReviewPosted | None = None


class EarlierFinding(BaseModel):
    """A finding of an earlier push not in this one (fixed, dismissed, or still open)."""

    model_config = ConfigDict(defer_build=True)

    fingerprint: str = ""
    path: str = ""
    line: int | None = None
    state: str = ""
    first_seen: str = ""
    how: str = ""


class LifecycleReport(BaseModel):
    """The findings across pushes: counts by state, the earlier ones, the threads read."""

    model_config = ConfigDict(defer_build=True)

    counts: dict[str, int] = Field(default_factory=dict)
    earlier: list[EarlierFinding] = Field(default_factory=list)
    #: How many of our review threads were read, or ``unreadable``.
    threads: int | str = 0


class Verdict(BaseModel):
    """What the review concluded: the decision (computed, never the model's), the texts, and the
    findings that did and did not verify."""

    model_config = ConfigDict(defer_build=True)

    decision: Decision = Decision.UNAVAILABLE
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)
    #: Findings that did not verify (each with its ``reason``).
    unverified: list[Finding] = Field(default_factory=list)
    stopped: str = Stopped.NOTHING_TO_REVIEW
    why: str = ""
    partial: str = ""


class PreflightReport(BaseModel):
    """What the ``preflight`` flow found: every catalog route's fate, and what memory did."""

    model_config = ConfigDict(defer_build=True)

    catalog: CatalogSummary
    readiness: list[Probe]
    probes_sent: int
    elapsed_s: float
    memory: MemoryReport
    quota: QuotaReport | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ChatReport(BaseModel):
    """What the ``chat`` flow came to: the reply (None: no route served), who served it, and
    every attempt and probe on the way."""

    model_config = ConfigDict(defer_build=True)

    #: Seconds to the reply (None: no reply, no time).
    time_to_reply_s: float | None
    reply: str | None
    served_by: ServedBy | None
    stopped: str
    attempts: list[Attempt]
    readiness: list[Probe]
    catalog: CatalogSummary
    probes_sent: int
    elapsed_s: float
    memory: MemoryReport
    quota: QuotaReport | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


#: Report keys of the review itself, in the JSON report's order.
_VERDICT_KEYS = ("decision", "summary", "findings", "unverified")
_REVIEW_KEYS = ("files", "served_by", "chunks", "attempts", "readiness", "catalog")
#: Keys the action adds (absent from the ``review`` command's report).
ACTION_KEYS = (
    "provenance",
    "guidelines",
    "context",
    "policy",
    "pull_request",
    "require_zdr",
    "discovery",
    "relay_review_version",
    "github",
    "lifecycle",
    "run_elapsed_s",
    "exit_code",
    "quota",
)


class KeyUsage(BaseModel):
    """What a provider's key endpoint said of one account (OpenRouter's ``GET /key``; credits in
    USD as published; ``free_per_day`` the documented free allowance when on the free tier)."""

    model_config = ConfigDict(defer_build=True)

    account: str = ""
    is_free_tier: bool | None = None
    usage_daily: float | None = None
    limit_remaining: float | None = None
    free_per_day: int | None = None

    @field_validator("free_per_day", mode="before")
    @classmethod
    def _whole_or_none(cls, value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return value if ok else None


class QuotaReport(BaseModel):
    """What a run cost: requests let out per account (probes included), the key facts read,
    and the listing requests the published health took."""

    model_config = ConfigDict(defer_build=True)

    requests_by_account: dict[str, int] = Field(default_factory=dict)
    keys: dict[str, KeyUsage] = Field(default_factory=dict)
    health_requests: int = 0

    @field_validator("requests_by_account", mode="before")
    @classmethod
    def _counts_only(cls, value: Any) -> dict[str, int]:
        """A report read back is input: only whole counts >= 0 are kept (no bool, no text)."""
        if not isinstance(value, Mapping):
            return {}
        return {
            str(k): v
            for k, v in value.items()
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0
        }

    @field_validator("keys", mode="before")
    @classmethod
    def _key_records_only(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            return {}
        return {str(k): v for k, v in value.items() if isinstance(v, Mapping | KeyUsage)}


class RunReport(BaseModel):
    """Everything a run found out, typed; :meth:`to_json` is the documented JSON report."""

    #: what is assigned is validated too (a part given as its JSON form becomes its record)
    model_config = ConfigDict(defer_build=True, extra="allow", validate_assignment=True)

    verdict: Verdict = Field(default_factory=Verdict)
    files: list[FileReport] = Field(default_factory=list)
    served_by: ServedBy | None = None
    chunks: list[ChunkReport] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    readiness: list[Probe] = Field(default_factory=list)
    catalog: CatalogSummary = Field(default_factory=CatalogSummary)
    probes_sent: int | None = 0
    elapsed_s: float | None = 0.0
    memory: MemoryReport = Field(default_factory=MemoryReport)
    # set by the action (and the drill's provenance); absent from the JSON when unset
    provenance: str | None = None
    #: The maintainers' guidelines the review followed, as ``path@sha12`` (base commit).
    guidelines: str | None = None
    context: RunContext | None = None
    policy: PolicyReport | None = None
    pull_request: PullRequestReport | None = None
    require_zdr: bool | None = None
    discovery: DiscoveryReport | None = None
    relay_review_version: str | None = None
    github: GithubReport | None = None
    #: The findings across pushes: counts (new, open, fixed, dismissed) and the earlier ones.
    lifecycle: LifecycleReport | None = None
    run_elapsed_s: float | None = None
    exit_code: int | None = None
    #: What the review cost (:class:`QuotaReport`); absent from the JSON when unset.
    quota: QuotaReport | None = None
    #: Requests the routing session let out per account (the review's part of ``quota``).
    requests_by_account: dict[str, int] = Field(default_factory=dict, exclude=True)
    #: Set on the copy publishing renders (never in the JSON report): what went inline.
    inline: Inline | None = Field(None, exclude=True)

    def scrubbed(self, secrets: Redactor) -> RunReport:
        """A typed copy with every text scrubbed of the secrets: what is rendered and written
        (scrubbed before rendering: escaping and cutting could hide a key from a later scrub)."""
        return scrubbed(self, secrets)

    @property
    def decision(self) -> Decision:
        return self.verdict.decision

    @classmethod
    def from_json(cls, data: Any) -> RunReport:
        """A report from its JSON form (or a partial one: missing keys take their defaults)."""
        if isinstance(data, RunReport):
            return data
        data = dict(data)
        verdict = {
            k: data.pop(k) for k in (*_VERDICT_KEYS, "stopped", "why", "partial") if k in data
        }
        if verdict.get("decision") is None:
            verdict.pop("decision", None)
        return cls.model_validate({**data, "verdict": verdict})

    def to_json(self) -> dict[str, Any]:
        """The JSON report: review keys in their documented order, then the action's."""
        v = self.verdict.model_dump(mode="json")
        body = self.model_dump(mode="json", exclude={"verdict"})
        out = {k: v[k] for k in _VERDICT_KEYS}
        out.update({k: body.pop(k) for k in _REVIEW_KEYS})
        out.update(probes_sent=body.pop("probes_sent"), elapsed_s=body.pop("elapsed_s"))
        out.update(memory=body.pop("memory"))
        out.update(stopped=v["stopped"], why=v["why"], partial=v["partial"])
        for key in ACTION_KEYS:
            value = body.pop(key)
            if value is not None or key in self.model_fields_set:
                out[key] = value
        out.update(body)  # extra keys, as they came
        return out
