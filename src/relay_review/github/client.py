"""Build the PyGithub client: explicit timeout, retry and pacing, lazy objects.

The retry policy repeats only idempotent reads (GET/HEAD) on 5xx, and connection failures
(nothing was sent). A POST or PATCH is never repeated by the transport: the caller decides
(the sticky comment re-lists before creating again; see :mod:`relay_review.github.comment`).
"""

from __future__ import annotations

import math

from github import Auth, Github
from urllib3.util.retry import Retry

from relay_review import __version__

DEFAULT_API_URL = "https://api.github.com"
#: HTTP statuses worth one more try of a *read*.
RETRY_STATUSES = frozenset({500, 502, 503, 504})


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
