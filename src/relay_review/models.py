"""Records that cross stage boundaries.

Settings resolve accounts; discovery turns them into routes; the catalog selects and ranks them;
preflight and failover turn each chat call into an :class:`Outcome`; the report carries all of it
to rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: The provider kinds a policy may name (``providers/kinds.py`` says what each one means).
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

    Built by :mod:`relay_review.settings` (policy and environment); read by discovery. Key
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


class Route(BaseModel):
    """One (account, model) pair from a discovery report, validated and with defaults filled in."""

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
        } | ({} if self.uptime is None else {"uptime": self.uptime})


class CatalogReport(BaseModel):
    """Counts that explain a selection."""

    model_config = ConfigDict(defer_build=True)

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

    model_config = ConfigDict(defer_build=True)

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
    ABANDONED = "abandoned"


class Probe(BaseModel):
    """Preflight's record for one catalog route (also for routes never probed)."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str
    model: str
    status: Readiness = Readiness.UNPROBED
    http_status: int | None = None
    first_byte_s: float | None = None
    latency_s: float | None = None
    detail: str = ""
    retry_after: float | None = Field(None, description="seconds the route asked to wait")
    reset_at: str | None = Field(None, description="ISO UTC time that wait ends (quota reset)")
    finished_at: float | None = Field(None, exclude=True, description="monotonic clock")
    sent: bool = Field(False, exclude=True)


class Attempt(BaseModel):
    """One real (serving) request: which route, how far it got, how it ended, how long it took."""

    model_config = ConfigDict(defer_build=True)

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
    prompt_tokens: int | None = Field(None, description="usage the provider reported, if any")
    completion_tokens: int | None = None


class ServedBy(BaseModel):
    """The route whose reply was used — and nothing else."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str
    model: str


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


class RouteStatus(StrEnum):
    """The readiness table's preflight column and the JSON ``status``: :class:`Readiness`, whose
    ``abandoned`` is a probe that went out but was cancelled when the run finished."""

    READY = "ready"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    UNPROBED = "unprobed"
    ABANDONED = "abandoned"


#: The word an abandoned probe's detail carried in reports written before ``abandoned`` was a
#: status of its own (such reports still read back with the right column).
ABANDONED_MARK = "abandoned"


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


class ReportFinding(_Row):
    """A verified finding as the report holds it (see :class:`review.verdict.Finding`)."""

    path: str
    line: int
    side: str = "RIGHT"
    quote: str = ""
    severity: str = ""
    message: str = ""
    #: A checked suggestion: it replaces RIGHT lines ``line`` .. ``end_line``, whose current
    #: text is ``replaces`` (all three unset when the finding carries none).
    end_line: int | None = None
    suggestion: str | None = None
    replaces: list[str] = Field(default_factory=list)
    #: Its identity across pushes (:mod:`relay_review.review.fingerprint`): path, cited text
    #: and kind, not the line number; ``cited`` is the cited lines' hash (``<hex>:<lines>``).
    fingerprint: str | None = None
    cited: str | None = None
    #: Across pushes (set when published): ``new``, ``open`` (posted before, still there) or
    #: ``dismissed``; and the commit (12 hex digits) it was first seen at.
    state: str | None = None
    first_seen: str | None = None


class UnverifiedFinding(_Row):
    """A finding that did not verify, and why."""

    path: str | None = None
    line: int | None = None
    side: str = "RIGHT"
    quote: str = ""
    severity: str = ""
    message: str = ""
    reason: str = ""


class FileReport(_Row):
    """One changed file: reviewed, or skipped with the reason."""

    path: str
    status: str = ReviewStatus.REVIEWED
    reason: str | None = ""
    #: Changed content no model was shown (not an exclusion the policy trusts): the review is
    #: partial and never approves.
    left_out: bool = False
    #: Reviewed in an earlier run and unchanged since: that run's head (sha, or "" when the run
    #: had none) and findings were reused with no model request. None: reviewed this run.
    reused_from: str | None = None
    #: The model's short note on this file (the comment's walkthrough; "" when it gave none).
    note: str = ""


class RouteRef(_Row):
    """A route named in the report (served a chunk, or a row of a table)."""

    agent_id: str
    account: str = ""
    model: str = ""


class ChunkReport(_Row):
    """How one chunk of the diff was served."""

    number: int | None = None
    total: int | None = None
    paths: list[str] = Field(default_factory=list)
    served_by: RouteRef | None = None
    stopped: str = ""
    #: Served from memory: an earlier run's review of identical content (no model request).
    reused: bool = False
    #: The reply's summary of this chunk, when believed (it verified a finding or had none
    #: rejected); the comment's walkthrough when the model gave no per-file notes.
    summary: str = ""


class SelectedRoute(_Row):
    """A catalog route as the report shows it (:meth:`CatalogEntry.summary`)."""

    agent_id: str
    account: str = ""
    provider: str = ""
    model: str = ""
    cost: str = ""
    zdr: bool = False
    priority: int = 0


class CatalogSummary(_Row):
    """The catalog as the report holds it (:meth:`Catalog.to_json`)."""

    selected: list[SelectedRoute] = Field(default_factory=list)
    report: dict | None = None


class ProbeReport(_Row):
    """A readiness row (:class:`Probe` as JSON)."""

    agent_id: str
    account: str = ""
    model: str = ""
    status: str = RouteStatus.UNPROBED
    http_status: int | None = None
    first_byte_s: float | None = None
    latency_s: float | None = None
    detail: str | None = ""
    retry_after: float | None = None
    reset_at: str | None = None

    @property
    def column(self) -> str:
        """The preflight column (the status; an old report's abandoned probe is not
        silently ``unprobed``)."""
        if self.status == RouteStatus.UNPROBED and ABANDONED_MARK in (self.detail or ""):
            return RouteStatus.ABANDONED
        return self.status


class AttemptReport(_Row):
    """A serving attempt row (:class:`Attempt` as JSON)."""

    agent_id: str
    account: str = ""
    model: str = ""
    phase: str = ""
    outcome: str = ""
    http_status: int | None = None
    elapsed_s: float | None = None
    started_s: float | None = None
    detail: str | None = ""
    purpose: str = "serve"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


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


class Verdict(BaseModel):
    """What the review concluded: the decision (computed, never the model's), the texts, and the
    findings that did and did not verify."""

    model_config = ConfigDict(defer_build=True)

    decision: Decision = Decision.UNAVAILABLE
    summary: str = ""
    findings: list[ReportFinding] = Field(default_factory=list)
    unverified: list[UnverifiedFinding] = Field(default_factory=list)
    stopped: str = Stopped.NOTHING_TO_REVIEW
    why: str = ""
    partial: str = ""


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
)


class RunReport(BaseModel):
    """Everything a run found out, typed; :meth:`to_json` is the documented JSON report."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    verdict: Verdict = Field(default_factory=Verdict)
    files: list[FileReport] = Field(default_factory=list)
    served_by: RouteRef | None = None
    chunks: list[ChunkReport] = Field(default_factory=list)
    attempts: list[AttemptReport] = Field(default_factory=list)
    readiness: list[ProbeReport] = Field(default_factory=list)
    catalog: CatalogSummary = Field(default_factory=CatalogSummary)
    probes_sent: int | None = 0
    elapsed_s: float | None = 0.0
    memory: MemoryReport = Field(default_factory=MemoryReport)
    # set by the action (and the drill's provenance); absent from the JSON when unset
    provenance: str | None = None
    #: The maintainers' guidelines the review followed, as ``path@sha12`` (base commit).
    guidelines: str | None = None
    context: dict | None = None
    policy: dict | None = None
    pull_request: dict | None = None
    require_zdr: bool | None = None
    discovery: dict | None = None
    relay_review_version: str | None = None
    github: dict | None = None
    #: The findings across pushes: counts (new, open, fixed, dismissed) and the earlier ones.
    lifecycle: dict | None = None
    run_elapsed_s: float | None = None
    exit_code: int | None = None

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
