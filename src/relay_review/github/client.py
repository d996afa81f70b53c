"""Build the PyGithub client: explicit timeout, retry and pacing, lazy objects; and read
GitHub's rate-limit answers.

The retry policy repeats only idempotent reads (GET/HEAD) on 5xx, and connection failures
(nothing was sent). A POST or PATCH is never repeated by the transport: the caller decides
(the sticky comment re-lists before creating again; see :mod:`relay_review.github.comment`).
Nor does the transport sleep on ``Retry-After``: :func:`rate_limit_wait` reads the wait GitHub
asks for, and :class:`WaitBudget` says whether it fits the policy's cap and the run's deadline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from github import Auth, Github, GithubException, RateLimitExceededException
from urllib3.util.retry import Retry

from relay_review import __version__
from relay_review._http import parse_retry_after

DEFAULT_API_URL = "https://api.github.com"
#: HTTP statuses worth one more try of a *read*.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
#: GitHub's advice when a secondary rate limit names no wait: "wait at least one minute".
DEFAULT_RATE_LIMIT_WAIT = 60.0


def make_retry(retries: int = 2, backoff: float = 0.5) -> Retry:
    """A urllib3 :class:`Retry` that never repeats a write after the request went out.

    ``connect`` retries are safe for every method (the request never left); ``read`` and
    ``status`` retries apply only to GET and HEAD. No ``Retry-After`` sleeping: a long wait is a
    decision for the caller's deadline, not for the transport.
    """
    return Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        allowed_methods=frozenset({"GET", "HEAD"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff,
        backoff_max=5.0,
        respect_retry_after_header=False,
        raise_on_status=False,
    )


def make_github(
    token: str | Auth.Auth,
    api_url: str = DEFAULT_API_URL,
    timeout: float = 30.0,
    *,
    retries: int = 2,
    backoff: float = 0.5,
    seconds_between_requests: float = 0.0,
    seconds_between_writes: float = 1.0,
    per_page: int = 100,
) -> Github:
    """A :class:`github.Github` for ``api_url`` (``GITHUB_API_URL``; GHES works).

    ``token`` is usually a string; tests may pass an :class:`github.Auth.Auth` (e.g. one that
    adds headers). The client is *lazy*: ``get_repo``/``get_pull`` make no request until an
    attribute is read. ``timeout`` is per socket operation (PyGithub wants whole seconds; it is
    rounded up). Pacing defaults follow GitHub's guidance (writes at least 1 s apart); tests set 0.
    """
    auth = Auth.Token(token) if isinstance(token, str) else token
    return Github(
        auth=auth,
        base_url=api_url.rstrip("/"),
        timeout=max(1, math.ceil(timeout)),
        user_agent=f"relay-review/{__version__}",
        per_page=per_page,
        retry=make_retry(retries, backoff),
        seconds_between_requests=seconds_between_requests,
        seconds_between_writes=seconds_between_writes,
        lazy=True,
    )


def _headers(exc: GithubException) -> dict[str, str]:
    raw: Mapping[str, Any] = exc.headers or {}
    return {str(k).lower(): str(v) for k, v in raw.items()}


def rate_limit_wait(exc: GithubException, now: float | None = None) -> float | None:
    """Seconds GitHub asks us to wait when ``exc`` is a rate limit, else ``None``.

    A rate limit is a 403 or 429 that PyGithub recognised (:class:`RateLimitExceededException`),
    whose message says "rate limit", or that carries ``retry-after`` or ``x-ratelimit-remaining:
    0``. The wait is ``retry-after``; else ``x-ratelimit-reset`` (epoch seconds) minus ``now``;
    else one minute (GitHub's advice for a secondary limit without a header). A plain 403
    ("Resource not accessible by integration") is *not* a rate limit: that is a read-only token.
    """
    if exc.status not in (403, 429):
        return None
    now = time.time() if now is None else now
    headers = _headers(exc)
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or "").lower()
    exhausted = headers.get("x-ratelimit-remaining", "").strip() == "0"
    if not (
        isinstance(exc, RateLimitExceededException)
        or "rate limit" in message
        or "retry-after" in headers
        or exhausted
        or exc.status == 429
    ):
        return None
    if "retry-after" in headers:
        wait = parse_retry_after(headers["retry-after"], now=datetime.fromtimestamp(now, UTC))
        if wait is not None:
            return wait
    if exhausted and "x-ratelimit-reset" in headers:
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - now)
        except ValueError:
            pass
    return DEFAULT_RATE_LIMIT_WAIT


@dataclass(frozen=True)
class WaitBudget:
    """How long a GitHub rate limit may hold the run: at most ``max_wait`` seconds (the policy's
    ``github.max_wait``) and never past ``deadline`` (a :func:`time.monotonic` value; the run's
    deadline), keeping ``reserve`` seconds for the request that follows the wait."""

    max_wait: float
    deadline: float | None = None
    reserve: float = 0.0

    def remaining(self) -> float | None:
        """Seconds left before the deadline (``None``: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def allows(self, wait: float, already: float = 0.0) -> bool:
        """Whether waiting ``wait`` seconds, then one request, fits the cap (with the ``already``
        seconds waited this run: ``max_wait`` bounds all waits together) and the deadline."""
        if already + wait > self.max_wait:
            return False
        left = self.remaining()
        return left is None or wait + self.reserve <= left

    def describe(self, wait: float, already: float = 0.0) -> str:
        """Why ``wait`` does not fit, in words for the log and the comment-less summary."""
        left = self.remaining()
        parts = [f"GitHub asked to wait {wait:.0f} s"]
        if already + wait > self.max_wait:
            spent = f" with {already:.0f} s waited already" if already else ""
            parts.append(f"more than github.max_wait ({self.max_wait:g} s){spent}")
        if left is not None and wait + self.reserve > left:
            parts.append(f"the run's deadline leaves {max(left, 0.0):.0f} s")
        return "; ".join(parts)
