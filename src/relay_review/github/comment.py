"""The one sticky comment: found by marker **and** author, edited in place, created once.

Anyone can paste the hidden marker into a comment, so a comment counts as ours only when it
starts with the marker *and* its author is the token's login. For ``GITHUB_TOKEN`` that login is
``github-actions[bot]``; ``GET /user`` answers 403 for installation tokens, so it is only a hint
(see :func:`resolve_author`). Creation is idempotent: when a POST fails in a way that may still
have created the comment (5xx, timeout), the comments are listed again before any second POST.
Check :func:`relay_review.github.pr.head_moved` before calling :func:`upsert_sticky`.
"""

from __future__ import annotations

import logging
from typing import Literal

import requests
from github import Github, GithubException
from github.IssueComment import IssueComment
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict

from relay_review.github.errors import GitHubEdgeError

log = logging.getLogger(__name__)

MARKER = "<!-- relay-review:sticky -->"
#: GitHub's limit for an issue or pull-request comment body.
MAX_BODY_CHARS = 65_536
DEFAULT_AUTHOR = "github-actions[bot]"


class StickyResult(BaseModel):
    """What :func:`upsert_sticky` did."""

    model_config = ConfigDict(frozen=True)

    action: Literal["created", "updated", "unchanged"]
    comment_id: int
    html_url: str | None
    author: str
    #: Other comments of ours carrying the marker (left alone; the oldest one is edited).
    duplicates: int = 0


def token_login(gh: Github) -> str | None:
    """The token's login from ``GET /user``, or ``None`` when GitHub will not say.

    Installation tokens (``GITHUB_TOKEN``, GitHub Apps) get 403 there; any failure is ``None``.
    """
    try:
        login = gh.get_user().login
    except (GithubException, requests.exceptions.RequestException) as exc:
        log.debug("GET /user did not name the token's login: %s", exc)
        return None
    return login or None


def resolve_author(gh: Github, expected_author: str | None = None) -> str:
    """Whose comments count as ours: ``expected_author`` if given, else ``GET /user``, else
    ``github-actions[bot]`` (the author of every ``GITHUB_TOKEN`` comment)."""
    if expected_author:
        return expected_author
    return token_login(gh) or DEFAULT_AUTHOR


def with_marker(body: str, marker: str = MARKER) -> str:
    """``body`` starting with ``marker`` (added on its own line when missing)."""
    return body if body.startswith(marker) else f"{marker}\n{body}"


def _is_ours(comment: IssueComment, author: str, marker: str) -> bool:
    user = comment.user
    login = user.login if user is not None else ""
    return (comment.body or "").startswith(marker) and login.casefold() == author.casefold()


def find_sticky(
    repo: Repository, number: int, author: str, marker: str = MARKER
) -> tuple[IssueComment | None, int]:
    """The oldest comment on PR ``number`` that starts with ``marker`` and is by ``author``.

    Returns ``(comment or None, number of further matching comments)``. A marker in a comment
    by anyone else is ignored.
    """
    try:
        ours = [c for c in repo.get_issue(number).get_comments() if _is_ours(c, author, marker)]
    except GithubException as exc:
        raise GitHubEdgeError(
            f"cannot list the comments of {repo.full_name}#{number}: HTTP {exc.status}",
            status=exc.status,
        ) from None
    if not ours:
        return None, 0
    return ours[0], len(ours) - 1


def _update(
    comment: IssueComment, body: str, author: str, duplicates: int, created: bool
) -> StickyResult:
    comment_id, html_url = comment.id, comment.html_url  # before edit() replaces the attributes
    action: Literal["created", "updated", "unchanged"] = "created" if created else "updated"
    if comment.body == body:
        action = "created" if created else "unchanged"
    else:
        try:
            comment.edit(body)
        except GithubException as exc:
            raise GitHubEdgeError(
                f"cannot edit comment {comment_id}: HTTP {exc.status}", status=exc.status
            ) from None
    return StickyResult(
        action=action,
        comment_id=comment_id,
        html_url=html_url,
        author=author,
        duplicates=duplicates,
    )


def upsert_sticky(
    repo: Repository, number: int, body: str, *, author: str = DEFAULT_AUTHOR, marker: str = MARKER
) -> StickyResult:
    """Edit our sticky comment on PR ``number`` to ``body``, or create it once.

    ``body`` gets the marker prepended if missing and must then fit GitHub's 65,536 characters
    (the caller truncates; this raises :class:`ValueError`). A 403 (read-only token) raises
    :class:`GitHubEdgeError` with ``status == 403`` so the caller can fall back to the step
    summary.
    """
    body = with_marker(body, marker)
    if len(body) > MAX_BODY_CHARS:
        raise ValueError(f"comment body is {len(body)} characters; GitHub allows {MAX_BODY_CHARS}")
    existing, duplicates = find_sticky(repo, number, author, marker)
    if existing is not None:
        return _update(existing, body, author, duplicates, created=False)
    issue = repo.get_issue(number)
    for attempt in (1, 2):
        try:
            made = issue.create_comment(body)
        except GithubException as exc:
            if exc.status < 500 or attempt == 2:
                raise GitHubEdgeError(
                    f"cannot comment on {repo.full_name}#{number}: HTTP {exc.status}",
                    status=exc.status,
                ) from None
            reason = f"HTTP {exc.status}"
        except requests.exceptions.RequestException as exc:
            if attempt == 2:
                raise GitHubEdgeError(
                    f"cannot comment on {repo.full_name}#{number}: {exc}"
                ) from None
            reason = type(exc).__name__
        else:
            return StickyResult(
                action="created", comment_id=made.id, html_url=made.html_url, author=author
            )
        # The POST may have created the comment anyway: look before posting again.
        log.warning(
            "creating the sticky comment failed (%s); listing comments before trying again", reason
        )
        existing, duplicates = find_sticky(repo, number, author, marker)
        if existing is not None:
            return _update(existing, body, author, duplicates, created=True)
    raise AssertionError("unreachable")  # pragma: no cover
