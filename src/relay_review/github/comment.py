"""The one sticky comment: found by marker **and** author, edited in place, created once,
and converged to one when two runs race.

Anyone can paste the hidden marker into a comment, so a comment counts as ours only when it
starts with the marker *and* its author is the token's login. For ``GITHUB_TOKEN`` that login is
``github-actions[bot]``; ``GET /user`` answers 403 for installation tokens, so it is only a hint
(see :func:`resolve_author`). Check :func:`relay_review.github.pr.head_moved` before calling
:func:`upsert_sticky`. A run asks whose comments are ours once (:class:`StickyReader`): the
``comment`` store's reads before the review and the upsert after it share the answer. The
upsert lists the comments afresh: a listing taken before the review may be minutes old, and a
run that wrote from it would miss a comment another run posted meanwhile and make a second.

Writes, each tried at most twice and each bounded by the client's request timeout:

* **create** (POST, not idempotent): a 5xx or transport failure may still have created the
  comment, so the comments are listed again; ours there → edited (if needed), else created once
  more;
* **edit** (PATCH) and **delete**: idempotent, so a 5xx or transport failure is retried once
  (a delete answering 404 is done: another run deleted it);
* a **rate limit** (403/429 with ``retry-after`` or ``x-ratelimit-*``, or a "secondary rate
  limit" message; see :func:`~relay_review.github.client.rate_limit_wait`) is waited out and the
  call tried once more only when the wait fits the :class:`~relay_review.github.client.WaitBudget`
  (``github.max_wait`` for all waits of the upsert together, and the run's deadline); else
  :class:`GitHubRateLimited` is raised.

Once our comment is posted, a failure of the follow-up checks (the re-list, a head read, a
delete while converging) is logged and the posted comment reported: the verdict is on the PR.

Concurrent runs. GitHub has no compare-and-swap on comments, so convergence is built from the
head SHA each verdict is for, written on the comment's second line (``<!-- relay-review:head
<sha> -->``; the marker stays the first line):

1. the caller re-reads the PR's head right before publishing (head moved → nothing posted);
2. before editing a sticky that says it is for another head, the head is read again: if the
   current head is not ours, we are stale and write nothing (action ``stale``);
3. after creating, the comments are listed once more; more than one of ours means a race: a run
   whose head is the current head writes its body into the oldest and deletes the others; a
   stale run deletes only the one it created (unless it is the oldest, which the current run
   will overwrite) and touches nothing else. A 404 on delete is fine.

Residual window (documented, not closed): a stale run that read the head, then found the sticky
for an *older* head, can still overwrite a newer verdict if the head moves after its last read
*and* the newer run lists, writes and finishes entirely before the stale run's PATCH lands. The
next push (or a re-run) repairs it; GitHub offers no conditional update to close it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Literal, TypeVar

from github import Github, GithubException
from github.IssueComment import IssueComment
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict

from relay_review.github.client import WaitBudget, rate_limit_wait
from relay_review.github.errors import (
    CLIENT_ERRORS,
    GitHubEdgeError,
    GitHubRateLimited,
    translate,
)

log = logging.getLogger(__name__)

MARKER = "<!-- relay-review:sticky -->"
#: The second line of our comment: which head commit its verdict is for.
HEAD_LINE = "<!-- relay-review:head {sha} -->"
#: Room :func:`with_marker` needs for the head line (the caller truncates to leave it).
HEAD_LINE_CHARS = len(HEAD_LINE.format(sha="0" * 64)) + 1
#: GitHub's limit for an issue or pull-request comment body.
MAX_BODY_CHARS = 65_536
DEFAULT_AUTHOR = "github-actions[bot]"

#: How many of the repository's comments are read for other pull requests' route memory: the
#: newest 100 updated (one page, GitHub's largest; one request bounded by ``[github] timeout``),
#: so a busy repository costs no more than a quiet one. A sticky comment updated less recently
#: than the repository's 100 newest comments is not found: that run starts as cold as before.
RECENT_COMMENTS = 100

_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
_ISSUE_URL = re.compile(r"/issues/(\d{1,10})$")
_HEAD = re.compile(r"^<!-- relay-review:head ([0-9a-fA-F]{7,64}) -->$")
T = TypeVar("T")
Action = Literal["created", "updated", "unchanged", "stale"]


class StickyResult(BaseModel):
    """What :func:`upsert_sticky` did."""

    model_config = ConfigDict(frozen=True)

    #: ``stale``: a newer head owns the comment; nothing of ours is left on the PR.
    action: Action
    comment_id: int | None
    html_url: str | None
    author: str
    #: Other comments of ours carrying the marker (left alone; the oldest one is edited).
    duplicates: int = 0
    #: Comments of ours deleted while converging after a race.
    deleted: int = 0
    #: The PR's head when it was read again (a sticky for another head, or a race).
    current_head: str | None = None
    #: Seconds spent waiting out GitHub's rate limit.
    waited_s: float = 0.0


def token_login(gh: Github) -> str | None:
    """The token's login from ``GET /user``, or ``None`` when GitHub will not say.

    Installation tokens (``GITHUB_TOKEN``, GitHub Apps) get 403 there; any failure is ``None``.
    """
    try:
        login = gh.get_user().login
    except CLIENT_ERRORS as exc:
        log.debug("GET /user did not name the token's login: %s", exc)
        return None
    return login or None


def resolve_author(gh: Github, expected_author: str | None = None) -> str:
    """Whose comments count as ours: ``expected_author`` if given, else ``GET /user``, else
    ``github-actions[bot]`` (the author of every ``GITHUB_TOKEN`` comment)."""
    if expected_author:
        return expected_author
    return token_login(gh) or DEFAULT_AUTHOR


def head_line(sha: str) -> str:
    """The hidden second line naming the head commit the verdict is for."""
    return HEAD_LINE.format(sha=sha.lower())


def with_marker(body: str, marker: str = MARKER, head_sha: str | None = None) -> str:
    """``body`` starting with ``marker`` (added on its own line when missing), followed by the
    head line when ``head_sha`` is a commit SHA."""
    if not body.startswith(marker):
        body = f"{marker}\n{body}"
    if head_sha and _SHA.match(head_sha):
        first, _, rest = body.partition("\n")
        if head_of(body) is None:
            body = f"{first}\n{head_line(head_sha)}\n{rest}"
    return body


def head_of(body: str | None) -> str | None:
    """The head SHA a sticky comment says its verdict is for (its second line), or ``None``."""
    lines = (body or "").split("\n", 2)
    if len(lines) < 2:
        return None
    match = _HEAD.match(lines[1].strip())
    return match.group(1).lower() if match else None


def _is_ours(comment: IssueComment, author: str, marker: str) -> bool:
    user = comment.user
    login = user.login if user is not None else ""
    return (comment.body or "").startswith(marker) and login.casefold() == author.casefold()


def _list_error(repo: Repository, number: int, exc: Exception) -> GitHubEdgeError:
    return translate(exc, f"cannot list the comments of {repo.full_name}#{number}")


def list_stickies(
    repo: Repository, number: int, author: str, marker: str = MARKER
) -> list[IssueComment]:
    """Our comments on PR ``number`` (start with ``marker``, by ``author``), oldest first."""
    try:
        ours = [c for c in repo.get_issue(number).get_comments() if _is_ours(c, author, marker)]
    except GithubException as exc:
        if rate_limit_wait(exc) is not None:
            raise  # the caller decides whether to wait
        raise _list_error(repo, number, exc) from None
    return sorted(ours, key=lambda c: c.id)


def find_sticky(
    repo: Repository, number: int, author: str, marker: str = MARKER
) -> tuple[IssueComment | None, int]:
    """The oldest comment on PR ``number`` that starts with ``marker`` and is by ``author``.

    Returns ``(comment or None, number of further matching comments)``. A marker in a comment
    by anyone else is ignored.
    """
    try:
        ours = list_stickies(repo, number, author, marker)
    except CLIENT_ERRORS as exc:  # a rate limit, or no answer
        raise _list_error(repo, number, exc) from None
    if not ours:
        return None, 0
    return ours[0], len(ours) - 1


class StickyReader:
    """Our sticky comment on pull request ``number``, as one run reads it: whose comments count
    as ours (:func:`resolve_author`: ``GET /user`` asked at most once) and our comments listed
    (:func:`list_stickies`) at most once, each on first use. The ``comment`` store's reads
    before the review share the listing; the publisher after it shares the author only (the
    upsert lists afresh, module docs). Make one per run: it keeps them for its own life only. A
    listing that fails is not kept (the next use lists again)."""

    def __init__(
        self,
        gh: Github,
        repo: Repository,
        number: int,
        expected_author: str | None = None,
        marker: str = MARKER,
    ) -> None:
        self.gh, self.repo, self.number = gh, repo, number
        self.expected_author, self.marker = expected_author, marker
        self._author: str | None = None
        self._listed: list[IssueComment] | None = None

    def author(self) -> str:
        """Whose comments count as ours (asked on the first call only)."""
        if self._author is None:
            self._author = resolve_author(self.gh, self.expected_author)
        return self._author

    def find(self) -> tuple[IssueComment | None, int]:
        """As :func:`find_sticky`, from this run's listing (listed now, on the first call)."""
        if self._listed is None:
            try:
                self._listed = list_stickies(self.repo, self.number, self.author(), self.marker)
            except CLIENT_ERRORS as exc:  # a rate limit, or no answer
                raise _list_error(self.repo, self.number, exc) from None
        if not self._listed:
            return None, 0
        return self._listed[0], len(self._listed) - 1

    def body(self) -> str | None:
        """The body of our sticky comment (marker **and** author), or None: where the
        ``comment`` state store reads its payload, so a payload in anyone else's comment is
        never read."""
        comment, _ = self.find()
        return comment.body if comment is not None else None


def recent_stickies(
    repo: Repository,
    author: str,
    *,
    since: datetime,
    exclude: int,
    marker: str = MARKER,
) -> list[tuple[int, str]]:
    """Our sticky comments (starting with ``marker``, by ``author``) on the repository's other
    pull requests, newest updated first, as ``(number, body)``: among its
    :data:`RECENT_COMMENTS` most recently updated comments since ``since``
    (``GET /repos/{owner}/{repo}/issues/comments?sort=updated&direction=desc``, one page).
    Pull request ``exclude`` (this run's) is left out. Raises :class:`GitHubEdgeError` when
    GitHub does not list them (a rate limit too: nothing here waits)."""
    try:
        listing = repo.get_issues_comments(sort="updated", direction="desc", since=since)
        page = listing.get_page(0)[:RECENT_COMMENTS]
        found: list[tuple[int, str]] = []
        for comment in page:
            if not _is_ours(comment, author, marker):
                continue
            match = _ISSUE_URL.search(comment.issue_url or "")
            if match is None or int(match.group(1)) == exclude:
                continue
            found.append((int(match.group(1)), comment.body))
    except CLIENT_ERRORS as exc:
        raise translate(exc, f"cannot list the comments of {repo.full_name}") from None
    return found


class _Uncertain(Exception):
    """A create failed in a way that may still have created the comment (5xx, transport)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Sticky:
    """One upsert: the calls, their retries and rate-limit waits, and the convergence."""

    def __init__(
        self,
        repo: Repository,
        number: int,
        body: str,
        author: str,
        marker: str,
        head_sha: str | None,
        budget: WaitBudget,
    ) -> None:
        self.repo, self.number, self.body = repo, number, body
        self.author, self.marker, self.budget = author, marker, budget
        self.head_sha = head_sha.lower() if head_sha else None
        self.where = f"{repo.full_name}#{number}"
        self.waited = 0.0
        self.deleted = 0
        self.current_head: str | None = None

    # --- calls ----------------------------------------------------------------------------------

    def call(self, what: str, fn: Callable[[], T], *, idempotent: bool) -> T:
        """``fn()`` at most twice: once more after a rate limit that fits the budget, or (when
        ``idempotent``) after a 5xx or transport failure. Errors become GitHubEdgeError."""
        for attempt in (1, 2):
            try:
                return fn()
            except GithubException as exc:
                wait = rate_limit_wait(exc)
                if wait is not None:
                    if attempt == 2 or not self.budget.allows(wait, self.waited):
                        raise GitHubRateLimited(
                            f"cannot {what}: rate limited (HTTP {exc.status}); "
                            f"{self.budget.describe(wait, self.waited)}",
                            status=exc.status,
                            retry_after=wait,
                        ) from None
                    log.warning(
                        "GitHub rate limit (HTTP %s) on %s: waiting %.1f s as asked "
                        "(github.max_wait %g s), then trying once more",
                        exc.status,
                        what,
                        wait,
                        self.budget.max_wait,
                    )
                    time.sleep(wait)
                    self.waited += wait
                    continue
                if idempotent and exc.status >= 500 and attempt == 1:
                    log.warning("%s: HTTP %s; trying once more", what, exc.status)
                    continue
                raise translate(exc, f"cannot {what}") from None
            except CLIENT_ERRORS as exc:  # no answer (GithubException is caught above)
                if idempotent and attempt == 1:
                    log.warning("%s: %s; trying once more", what, type(exc).__name__)
                    continue
                raise translate(exc, f"cannot {what}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def list_ours(self) -> list[IssueComment]:
        return self.call(
            f"list the comments of {self.where}",
            lambda: list_stickies(self.repo, self.number, self.author, self.marker),
            idempotent=False,  # a GET: the transport already retried 5xx
        )

    def head(self) -> str:
        sha = self.call(
            f"read the head of {self.where}",
            lambda: self.repo.get_pull(self.number).complete().head.sha,
            idempotent=False,
        )
        self.current_head = sha.lower()
        return self.current_head

    def edit(self, comment: IssueComment) -> bool:
        """Write our body into ``comment``; False when it already holds it."""
        if comment.body == self.body:
            return False
        self.call(f"edit comment {comment.id}", lambda: comment.edit(self.body), idempotent=True)
        return True

    def delete(self, comment: IssueComment) -> None:
        try:
            self.call(f"delete comment {comment.id}", comment.delete, idempotent=True)
        except GitHubRateLimited:
            raise
        except GitHubEdgeError as exc:
            if exc.status != 404:  # 404: another run deleted it already
                raise
        self.deleted += 1

    def create(self, *, last: bool) -> IssueComment:
        what = f"comment on {self.where}"
        try:
            return self.call(
                what,
                lambda: self.repo.get_issue(self.number).create_comment(self.body),
                idempotent=False,
            )
        except GitHubRateLimited:
            raise
        except GitHubEdgeError as exc:
            if last or (exc.status is not None and exc.status < 500):
                raise
            raise _Uncertain(f"HTTP {exc.status}" if exc.status else str(exc)) from None

    # --- the upsert -----------------------------------------------------------------------------

    def result(
        self, action: Action, comment: tuple[int, str | None] | None, duplicates: int = 0
    ) -> StickyResult:
        """The outcome; ``comment`` is ``(id, html_url)`` read *before* any edit (PyGithub's
        ``edit()`` replaces the object's attributes with the answer's)."""
        return StickyResult(
            action=action,
            comment_id=comment[0] if comment is not None else None,
            html_url=comment[1] if comment is not None else None,
            author=self.author,
            duplicates=duplicates,
            deleted=self.deleted,
            current_head=self.current_head,
            waited_s=round(self.waited, 3),
        )

    def stale(self) -> bool:
        """Whether the PR's head, read again now, is not ours (a newer run owns the comment)."""
        return self.head_sha is not None and self.head() != self.head_sha

    def update_existing(self, ours: list[IssueComment], created: bool) -> StickyResult:
        target = ours[0]
        theirs = head_of(target.body)
        if self.head_sha and theirs and theirs != self.head_sha and self.stale():
            log.warning(
                "the sticky comment is for head %s and the head is now %s, not %s: "
                "a newer run owns it; writing nothing",
                theirs,
                self.current_head,
                self.head_sha,
            )
            return self.result("stale", None)
        ident = (target.id, target.html_url)
        changed = self.edit(target)
        action: Action = "created" if created else ("updated" if changed else "unchanged")
        return self.result(action, ident, duplicates=len(ours) - 1)

    def converge(self, ours: list[IssueComment], mine: int | None) -> StickyResult:
        """After our create the listing shows a race (more than one sticky of ours, or ours
        already removed by the other run): the current head's run keeps the oldest."""
        oldest = ours[0]
        if self.stale():
            log.warning(
                "after creating ours, %d sticky comments are listed and the head is now %s, "
                "not %s: leaving the comment to the newer run",
                len(ours),
                self.current_head,
                self.head_sha,
            )
            for comment in ours[1:]:
                if comment.id == mine:
                    self.delete(comment)
            return self.result("stale", None)
        log.warning(
            "after creating ours, %d sticky comments are listed (a concurrent run): keeping "
            "the oldest (%d) with this verdict",
            len(ours),
            oldest.id,
        )
        ident = (oldest.id, oldest.html_url)
        self.edit(oldest)
        for comment in ours[1:]:
            self.delete(comment)
        return self.result("created" if ident[0] == mine else "updated", ident)

    def upsert(self) -> StickyResult:
        ours = self.list_ours()
        if ours:
            return self.update_existing(ours, created=False)
        try:
            made = self.create(last=False)
        except _Uncertain as uncertain:
            # The POST may have created the comment anyway: look before posting again.
            log.warning(
                "creating the sticky comment failed (%s); listing comments before trying again",
                uncertain.reason,
            )
            ours = self.list_ours()
            if ours:
                mine = next((c.id for c in ours if c.body == self.body), None)
                if len(ours) == 1:
                    return self.update_existing(ours, created=mine is not None)
                return self.converge(ours, mine)
            made = self.create(last=True)
        mine = made.id
        try:
            ours = self.list_ours()
            if len(ours) > 1 or (ours and all(c.id != mine for c in ours)):
                return self.converge(ours, mine)  # a race; or a newer run already removed ours
        except GitHubEdgeError as exc:  # GitHubRateLimited too: the comment is posted already
            log.warning(
                "the sticky comment is posted, but checking for a concurrent run's comment "
                "failed (%s); any duplicate is left for the next run to converge",
                exc,
            )
        return self.result("created", (made.id, made.html_url))


def upsert_sticky(
    repo: Repository,
    number: int,
    body: str,
    *,
    author: str = DEFAULT_AUTHOR,
    marker: str = MARKER,
    head_sha: str | None = None,
    budget: WaitBudget | None = None,
) -> StickyResult:
    """Edit our sticky comment on PR ``number`` to ``body``, or create it once (module docs).

    ``body`` gets the marker (and, with ``head_sha``, the head line) prepended if missing and
    must then fit GitHub's 65,536 characters (the caller truncates; this raises
    :class:`ValueError`). ``head_sha`` (the commit the verdict is for) turns on the stale check
    and convergence. ``budget`` bounds rate-limit waits (default: none allowed). A 401/403 that
    is not a rate limit (read-only token) raises :class:`GitHubEdgeError` with that status so
    the caller can fall back to the step summary; a rate limit that does not fit raises
    :class:`GitHubRateLimited`.
    """
    body = with_marker(body, marker, head_sha)
    if len(body) > MAX_BODY_CHARS:
        raise ValueError(f"comment body is {len(body)} characters; GitHub allows {MAX_BODY_CHARS}")
    budget = budget if budget is not None else WaitBudget(max_wait=0.0)
    return _Sticky(repo, number, body, author, marker, head_sha, budget).upsert()
