"""The run's report: the verdict (decision computed, never the model's), the files and chunks
reviewed, memory's part, and the flows' reports (``review``'s :class:`RunReport`,
``preflight``'s and ``chat``'s); :meth:`RunReport.to_json` is the documented JSON report."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from relay_review.records.action import (
    GithubReport,
    Inline,
    LifecycleReport,
    PolicyReport,
    PullRequestReport,
    RunContext,
)
from relay_review.records.discovery import DiscoveryReport
from relay_review.records.finding import Finding
from relay_review.records.quota import QuotaReport
from relay_review.records.route import CatalogSummary
from relay_review.records.scrub import Redactor, scrubbed
from relay_review.records.serving import Attempt, Probe, ServedBy


class Decision(StrEnum):
    """What a run concluded. The first four are verdicts; ``skipped`` and ``error`` are only the
    action's ``decision`` output for a run that produced none, ``stale`` for one whose verdict is
    for a head that a push replaced during the run (nothing was posted)."""

    APPROVE = "approve"
    COMMENT = "comment"
    REQUEST_CHANGES = "request_changes"
    UNAVAILABLE = "unavailable"
    SKIPPED = "skipped"
    ERROR = "error"
    STALE = "stale"


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
    #: Requests a run without memory would have sent beyond this run's (a lower bound): chunks
    #: not re-sent, routes not asked (:func:`relay_review.pipeline.route_memory.routes_avoided`).
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
    #: The maintainers' guidelines the review followed, as ``path@sha12`` (default branch).
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
