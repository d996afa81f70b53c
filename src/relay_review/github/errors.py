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
