"""What the action adds to the report: where it ran, the policy and its source, the pull
request, what was posted on GitHub (sticky comment, line comments, threads) and the findings
across pushes (how discovery went per account: :mod:`.discovery`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class Inline(BaseModel):
    """Which verified findings went inline (:mod:`relay_review.review.noise`): the policy's
    floor and cap, and how many were posted, below the floor, over the cap."""

    model_config = ConfigDict(defer_build=True)

    min_severity: str = ""
    max_inline: int = 0
    inline: int = 0
    below_floor: int = 0
    over_cap: int = 0


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
    """What happened on GitHub (:class:`relay_review.pipeline.publish.Published`)."""

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
