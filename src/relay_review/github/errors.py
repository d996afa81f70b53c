"""Errors raised at the GitHub edge, and the one table that maps PyGithub's and requests'
exceptions onto them (as httpx maps its transports' exceptions onto its own).

Code outside ``github/`` catches only these: :class:`GitHubEdgeError` (and its kinds) or
:class:`EventError`; never ``github.GithubException`` or ``requests.RequestException``. Each
error names what was asked and what GitHub answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import requests
from github import GithubException

from relay_review.errors import RelayReviewError

__all__ = [
    "EventError",
    "GitHubConnectionError",
    "GitHubEdgeError",
    "GitHubRateLimited",
    "PolicyRefError",
    "github_errors",
    "translate",
]


class GitHubEdgeError(RelayReviewError):
    """A GitHub API call failed in a way the caller must not paper over (fail closed)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubConnectionError(GitHubEdgeError):
    """GitHub gave no answer: connection refused or reset, a timeout, TLS (``status`` is None)."""


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


#: What the GitHub client (PyGithub over requests) raises for an answer or for no answer.
CLIENT_ERRORS: tuple[type[Exception], ...] = (GithubException, requests.exceptions.RequestException)


def translate(
    exc: Exception, what: str, error: type[GitHubEdgeError] = GitHubEdgeError
) -> GitHubEdgeError:
    """The project's error for a client error ``exc`` raised while doing ``what``.

    An HTTP answer becomes ``error`` with its status (and GitHub's message, if any); no answer
    becomes :class:`GitHubConnectionError`, whatever ``error`` is (the policy was not refused,
    GitHub was not reached).
    """
    if isinstance(exc, GithubException):
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        detail = f"HTTP {exc.status}" + (f": {message}" if message else "")
        return error(f"{what}: {detail}", status=exc.status)
    return GitHubConnectionError(f"{what}: {type(exc).__name__}: {exc}")


@contextmanager
def github_errors(what: str, error: type[GitHubEdgeError] = GitHubEdgeError) -> Iterator[None]:
    """Run a block of GitHub calls; a client error leaves it as :func:`translate` maps it."""
    try:
        yield
    except CLIENT_ERRORS as exc:
        raise translate(exc, what, error) from None
