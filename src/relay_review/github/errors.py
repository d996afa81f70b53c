"""Errors raised at the GitHub edge. Each one names what was asked and what GitHub answered."""

from __future__ import annotations

from relay_review.errors import RelayReviewError


class GitHubEdgeError(RelayReviewError):
    """A GitHub API call failed in a way the caller must not paper over (fail closed)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PolicyRefError(GitHubEdgeError):
    """The pinned policy could not be resolved, verified or read."""


class EventError(RelayReviewError):
    """The event payload at ``GITHUB_EVENT_PATH`` is missing or malformed."""


class GitHubRateLimited(GitHubEdgeError):
    """GitHub's rate limit (403/429 with ``retry-after``, ``x-ratelimit-*`` or a "secondary rate
    limit" message) asked for a wait that does not fit the run: nothing more was tried."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float) -> None:
        super().__init__(message, status=status)
        #: Seconds GitHub asked us to wait.
        self.retry_after = retry_after
