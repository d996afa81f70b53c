"""The triggering event: ``GITHUB_EVENT_NAME`` and the JSON payload at ``GITHUB_EVENT_PATH``.

``pull_request`` and ``pull_request_target`` are reviewed; ``issue_comment`` parses to a
:class:`CommentCommand` (a comment that may ask for a review of a pull request: the caller
checks the trigger word and the commenter's association, then fetches the pull request through
the API, since the payload lacks its head and base); any other event parses to a
:class:`NotPullRequestEvent` (the caller exits 0 with a notice). The comment's body is hostile
text: it is compared with the trigger word and otherwise never used. Title, body, branch names and
the author's login are attacker-controlled text: they are carried as data, never interpreted
(lone surrogates, which JSON escapes allow, become U+FFFD so the texts always encode as UTF-8).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from relay_review._text import scrub_text
from relay_review.github.errors import EventError

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")
COMMENT_EVENT = "issue_comment"
#: Events whose payload is read (the others are skipped without reading it).
READ_EVENTS = (*PULL_REQUEST_EVENTS, COMMENT_EVENT)


class PullRequestEvent(BaseModel):
    """What relay-review needs from a ``pull_request`` / ``pull_request_target`` payload."""

    model_config = ConfigDict(frozen=True)

    event_name: Literal["pull_request", "pull_request_target", "issue_comment"]
    action: str | None
    number: int
    repo_full_name: str
    private: bool
    base_sha: str
    base_ref: str
    head_sha: str
    head_ref: str
    #: ``None`` when the fork was deleted.
    head_repo_full_name: str | None
    draft: bool
    state: str
    author_association: str
    user_login: str
    title: str
    body: str
    html_url: str | None = None
    #: How many files the PR changes, as the payload says (the files API lists 3,000 at most).
    changed_files: int | None = None
    #: The repository's default branch (``repository.default_branch``): where trusted files
    #: (policy, guidelines) are read, never the base branch the author chose.
    default_branch: str | None = None

    @property
    def off_default(self) -> bool:
        """True when the pull request targets a branch other than the default one."""
        return bool(self.default_branch) and self.base_ref != self.default_branch

    @property
    def owner(self) -> str:
        return self.repo_full_name.split("/", 1)[0]

    @property
    def repo(self) -> str:
        return self.repo_full_name.split("/", 1)[1]

    @property
    def from_fork(self) -> bool:
        """True when the head lives in another repository (or a deleted fork)."""
        return self.head_repo_full_name != self.repo_full_name


class CommentCommand(BaseModel):
    """An ``issue_comment`` event: who commented where, and whether the comment asks for a
    review (:meth:`asks`). The body is kept only to be compared with the trigger word."""

    model_config = ConfigDict(frozen=True)

    event_name: Literal["issue_comment"] = "issue_comment"
    action: str | None
    repo_full_name: str
    private: bool
    number: int
    #: The issue is a pull request (``issue.pull_request`` is present).
    on_pull_request: bool
    comment_id: int
    commenter: str
    association: str
    body: str
    default_branch: str | None = None

    def asks(self, trigger: str) -> bool:
        """Whether the comment starts with ``trigger`` as a word of its own (``/relay-review``
        or ``/relay-review please``, not ``/relay-reviewer``); case-insensitive."""
        words = self.body.strip().split(maxsplit=1)
        return bool(words) and words[0].lower() == trigger.lower()

    def dismisses(self, trigger: str) -> bool:
        """Whether the comment is ``{trigger} dismiss``: a word for a reply in a review thread
        (it dismisses that thread's finding), not a request for a review."""
        words = self.body.strip().split(maxsplit=2)
        return self.asks(trigger) and len(words) > 1 and words[1].lower() == "dismiss"


class NotPullRequestEvent(BaseModel):
    """Any other event: nothing to review."""

    model_config = ConfigDict(frozen=True)

    event_name: str
    reason: str


# --- the payload shapes (only the fields read; extra fields ignored) ---------------------------


class _Repo(BaseModel):
    full_name: str
    private: bool = False
    default_branch: str | None = None


class _User(BaseModel):
    login: str


class _Branch(BaseModel):
    sha: str
    ref: str
    repo: _Repo | None = None


class _PullRequest(BaseModel):
    number: int
    state: str
    draft: bool = False
    title: str
    body: str | None = None
    author_association: str
    html_url: str | None = None
    changed_files: int | None = None
    user: _User
    base: _Branch
    head: _Branch


class _Payload(BaseModel):
    action: str | None = None
    pull_request: _PullRequest
    repository: _Repo


class _Issue(BaseModel):
    number: int
    pull_request: dict[str, Any] | None = None


class _Comment(BaseModel):
    id: int
    body: str | None = None
    user: _User
    author_association: str


class _CommentPayload(BaseModel):
    action: str | None = None
    issue: _Issue
    comment: _Comment
    repository: _Repo


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"])
        parts.append(f"{location}: {item['msg']}")
    return "; ".join(parts)


Event = PullRequestEvent | CommentCommand | NotPullRequestEvent


def parse_event(event_name: str, payload: Mapping[str, Any]) -> Event:
    """Parse a webhook payload. Raises :class:`EventError` naming every missing or bad field."""
    if event_name == COMMENT_EVENT:
        return _parse_comment(payload)
    if event_name not in PULL_REQUEST_EVENTS:
        return NotPullRequestEvent(
            event_name=event_name,
            reason=f"not a pull request event ({event_name!r}); relay-review runs on "
            "pull_request, pull_request_target and issue_comment (the trigger comment)",
        )
    try:
        data = _Payload.model_validate(payload)
    except ValidationError as exc:
        raise EventError(f"{event_name} payload: {_describe(exc)}") from None
    return _pull_request(event_name, data.action, data.pull_request, data.repository)


def _parse_comment(payload: Mapping[str, Any]) -> CommentCommand:
    try:
        data = _CommentPayload.model_validate(payload)
    except ValidationError as exc:
        raise EventError(f"{COMMENT_EVENT} payload: {_describe(exc)}") from None
    return CommentCommand(
        action=data.action,
        repo_full_name=data.repository.full_name,
        private=data.repository.private,
        number=data.issue.number,
        on_pull_request=data.issue.pull_request is not None,
        comment_id=data.comment.id,
        commenter=scrub_text(data.comment.user.login),
        association=data.comment.author_association,
        body=scrub_text(data.comment.body or ""),
        default_branch=_branch(data.repository.default_branch),
    )


def event_for_comment(command: CommentCommand, pull: Mapping[str, Any]) -> PullRequestEvent:
    """The pull request a trigger comment asks to review, from the pulls API's JSON (the
    ``issue_comment`` payload has no head or base). Raises :class:`EventError` on a bad shape."""
    try:
        pr = _PullRequest.model_validate(pull)
    except ValidationError as exc:
        raise EventError(f"pull request {command.number} from the API: {_describe(exc)}") from None
    repo = _Repo(
        full_name=command.repo_full_name,
        private=command.private,
        default_branch=command.default_branch,
    )
    # the pull request asked for is the one commented on (and the one fetched)
    pr = pr.model_copy(update={"number": command.number})
    return _pull_request(COMMENT_EVENT, command.action, pr, repo)


def _pull_request(
    event_name: str, action: str | None, pr: _PullRequest, repository: _Repo
) -> PullRequestEvent:
    return PullRequestEvent(
        event_name=event_name,  # type: ignore[arg-type]  # one of the literal's names
        action=action,
        number=pr.number,
        repo_full_name=repository.full_name,
        private=repository.private,
        base_sha=pr.base.sha,
        base_ref=scrub_text(pr.base.ref),
        head_sha=pr.head.sha,
        head_ref=scrub_text(pr.head.ref),
        head_repo_full_name=pr.head.repo.full_name if pr.head.repo else None,
        draft=pr.draft,
        state=pr.state,
        author_association=pr.author_association,
        user_login=scrub_text(pr.user.login),
        title=scrub_text(pr.title),
        body=scrub_text(pr.body or ""),
        html_url=pr.html_url,
        changed_files=pr.changed_files,
        default_branch=_branch(repository.default_branch),
    )


def _branch(name: str | None) -> str | None:
    """A branch name from the payload, as text (None when absent or blank)."""
    return scrub_text(name) if name and name.strip() else None


def load_event(env: Mapping[str, str] | None = None) -> Event:
    """Read ``GITHUB_EVENT_NAME`` and the payload at ``GITHUB_EVENT_PATH`` (``env``: os.environ)."""
    env = os.environ if env is None else env
    event_name = env.get("GITHUB_EVENT_NAME", "").strip()
    if not event_name:
        raise EventError("GITHUB_EVENT_NAME is not set: run inside GitHub Actions or set it")
    if event_name not in READ_EVENTS:
        return parse_event(event_name, {})
    path = env.get("GITHUB_EVENT_PATH", "").strip()
    if not path:
        raise EventError("GITHUB_EVENT_PATH is not set: run inside GitHub Actions or set it")
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise EventError(f"cannot read the event payload {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EventError(f"the event payload {path} is not JSON: {exc}") from None
    except RecursionError:  # hostile nesting: json's decoder recurses per level
        raise EventError(f"the event payload {path} is nested too deeply to read") from None
    if not isinstance(payload, dict):
        raise EventError(f"the event payload {path} is not a JSON object")
    return parse_event(event_name, payload)
