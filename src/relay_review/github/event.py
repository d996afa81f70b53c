"""The triggering event: ``GITHUB_EVENT_NAME`` and the JSON payload at ``GITHUB_EVENT_PATH``.

Only ``pull_request`` and ``pull_request_target`` are reviewed; any other event parses to a
:class:`NotPullRequestEvent` (the caller exits 0 with a notice). Title, body, branch names and
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


class PullRequestEvent(BaseModel):
    """What relay-review needs from a ``pull_request`` / ``pull_request_target`` payload."""

    model_config = ConfigDict(frozen=True)

    event_name: Literal["pull_request", "pull_request_target"]
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


class NotPullRequestEvent(BaseModel):
    """Any other event: nothing to review."""

    model_config = ConfigDict(frozen=True)

    event_name: str
    reason: str


# --- the payload shapes (only the fields read; extra fields ignored) ---------------------------


class _Repo(BaseModel):
    full_name: str
    private: bool = False


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


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"])
        parts.append(f"{location}: {item['msg']}")
    return "; ".join(parts)


def parse_event(
    event_name: str, payload: Mapping[str, Any]
) -> PullRequestEvent | NotPullRequestEvent:
    """Parse a webhook payload. Raises :class:`EventError` naming every missing or bad field."""
    if event_name not in PULL_REQUEST_EVENTS:
        return NotPullRequestEvent(
            event_name=event_name,
            reason=f"not a pull request event ({event_name!r}); relay-review runs on "
            "pull_request and pull_request_target",
        )
    try:
        data = _Payload.model_validate(payload)
    except ValidationError as exc:
        raise EventError(f"{event_name} payload: {_describe(exc)}") from None
    pr = data.pull_request
    return PullRequestEvent(
        event_name=event_name,  # type: ignore[arg-type]  # checked above
        action=data.action,
        number=pr.number,
        repo_full_name=data.repository.full_name,
        private=data.repository.private,
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
    )


def load_event(env: Mapping[str, str] | None = None) -> PullRequestEvent | NotPullRequestEvent:
    """Read ``GITHUB_EVENT_NAME`` and the payload at ``GITHUB_EVENT_PATH`` (``env``: os.environ)."""
    env = os.environ if env is None else env
    event_name = env.get("GITHUB_EVENT_NAME", "").strip()
    if not event_name:
        raise EventError("GITHUB_EVENT_NAME is not set: run inside GitHub Actions or set it")
    if event_name not in PULL_REQUEST_EVENTS:
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
