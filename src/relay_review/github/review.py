"""Verified findings as one pull-request review (event ``COMMENT``) with line comments.

GitHub refuses a whole review with 422 when one comment's line is not in the diff. Then each
comment is posted alone (``POST /pulls/{n}/comments``), so one bad line never loses the others;
the refused ones are reported (they stay in the sticky comment anyway). At most
``github.single_comments`` go one by one, and none once the run's deadline has passed. A 5xx or
timeout on the batch is *not* followed by single posts: the review may exist, and posting again
would duplicate.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from github import GithubException
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict, Field

from relay_review.github.errors import CLIENT_ERRORS

if TYPE_CHECKING:
    from github.PullRequest import ReviewComment

Side = Literal["LEFT", "RIGHT"]
#: Most single comments posted after GitHub refused the batch (``github.single_comments``):
#: each is a content-creating request, and GitHub's secondary limit allows 80 a minute.
DEFAULT_MAX_SINGLE = 10


class LineComment(BaseModel):
    """One line comment: ``line`` is the file line on ``side`` (RIGHT = the head version);
    ``start_line`` (same side, before ``line``) makes it a comment on a range of lines, as a
    suggestion replacing several lines needs."""

    model_config = ConfigDict(frozen=True)

    path: str
    line: int = Field(gt=0)
    side: Side = "RIGHT"
    body: str
    start_line: int | None = Field(default=None, gt=0)

    def payload(self) -> ReviewComment:
        """The comment as the create-review API takes it."""
        out: ReviewComment = {
            "path": self.path,
            "line": self.line,
            "side": self.side,
            "body": self.body,
        }
        if self.start_line is not None and self.start_line < self.line:
            out["start_line"] = self.start_line
            out["start_side"] = self.side
        return out

    def extra(self) -> dict[str, Any]:
        """The range arguments of a single review comment (empty for one line)."""
        if self.start_line is not None and self.start_line < self.line:
            return {"start_line": self.start_line, "start_side": self.side}
        return {}


class Refused(BaseModel):
    model_config = ConfigDict(frozen=True)

    comment: LineComment
    reason: str


class ReviewResult(BaseModel):
    """Which comments went out, which GitHub refused, and how."""

    model_config = ConfigDict(frozen=True)

    #: ``batch``: one review; ``single``: posted one by one after a 422; ``none``: nothing posted.
    mode: Literal["batch", "single", "none"]
    posted: list[LineComment] = []
    refused: list[Refused] = []
    review_id: int | None = None
    #: Set when the outcome of the batch POST is unknown (5xx/timeout): the review may exist.
    uncertain: bool = False
    detail: str = ""


def _reason(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    parts = [str(data.get("message") or "")]
    for error in data.get("errors") or []:
        parts.append(error if isinstance(error, str) else str(error.get("message") or error))
    text = "; ".join(p for p in parts if p)
    return f"HTTP {exc.status}" + (f": {text}" if text else "")


def post_review(
    repo: Repository,
    number: int,
    commit_sha: str,
    body: str,
    comments: list[LineComment],
    *,
    max_single: int = DEFAULT_MAX_SINGLE,
    deadline: float | None = None,
) -> ReviewResult:
    """Post ``comments`` on PR ``number`` at ``commit_sha`` as one ``COMMENT`` review.

    Never raises for GitHub's answers: a 403 (read-only token) refuses everything, a 422 falls
    back to at most ``max_single`` single comments (``github.single_comments``), none started
    past ``deadline`` (a :func:`time.monotonic` value), a 5xx/timeout is reported as
    ``uncertain``.
    """
    if not comments:
        return ReviewResult(mode="none", detail="no line comments to post")
    pull = repo.get_pull(number)
    commit = repo.get_commit(commit_sha)  # lazy client: no request, only the SHA is used
    payload: list[ReviewComment] = [c.payload() for c in comments]
    try:
        review = pull.create_review(commit=commit, body=body, event="COMMENT", comments=payload)
    except GithubException as exc:
        if exc.status != 422:
            uncertain = exc.status >= 500
            return ReviewResult(
                mode="none",
                refused=[Refused(comment=c, reason=_reason(exc)) for c in comments],
                uncertain=uncertain,
                detail=f"review refused: {_reason(exc)}",
            )
        batch_reason = _reason(exc)
    except CLIENT_ERRORS as exc:  # no answer (GithubException is caught above)
        return ReviewResult(
            mode="none",
            refused=[Refused(comment=c, reason=type(exc).__name__) for c in comments],
            uncertain=True,
            detail=f"review POST failed: {exc}",
        )
    else:
        return ReviewResult(mode="batch", posted=list(comments), review_id=review.id)

    posted: list[LineComment] = []
    refused: list[Refused] = []
    for n, c in enumerate(comments):
        if n >= max_single:
            refused.append(Refused(comment=c, reason=f"over github.single_comments ({max_single})"))
            continue
        if deadline is not None and time.monotonic() >= deadline:
            refused.append(Refused(comment=c, reason="the run's deadline passed"))
            continue
        try:
            pull.create_review_comment(
                c.body, commit_sha, c.path, line=c.line, side=c.side, **c.extra()
            )
        except GithubException as exc:
            refused.append(Refused(comment=c, reason=_reason(exc)))
            if exc.status in (401, 403):  # no write access: the rest will fail the same way
                refused.extend(Refused(comment=r, reason=_reason(exc)) for r in comments[n + 1 :])
                break
        except CLIENT_ERRORS as exc:  # no answer
            refused.append(Refused(comment=c, reason=type(exc).__name__))
        else:
            posted.append(c)
    return ReviewResult(
        mode="single",
        posted=posted,
        refused=refused,
        detail=f"the batch was refused ({batch_reason}); posted one by one",
    )
