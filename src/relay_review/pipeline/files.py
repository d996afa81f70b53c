"""The pull request's files for the review: the diff index from the files API, and the head
versions of changed files for context around hunks (read at the head SHA, never checked out
or run). Its own module rather than part of :mod:`.review`: these stages talk to GitHub, the
review stage does not (the CLI's ``review`` reads a diff file instead)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from relay_review.config import Policy
from relay_review.github import actions
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import say
from relay_review.github.pr import head_files, list_files
from relay_review.review.context import HeadFiles
from relay_review.review.diff import DiffIndex
from relay_review.review.paths import DEFAULT_EXCLUDES, excluded_by

if TYPE_CHECKING:
    from github.Repository import Repository


#: Problems reading head files (one per file, at most) named in the one warning annotation.
CONTEXT_PROBLEMS_NAMED = 3


def files_stage(repo: Repository, event: PullRequestEvent) -> tuple[DiffIndex, int]:
    """The pull request's files as a diff index, and how many files GitHub did not list."""
    files = list_files(repo, event.number)
    index = DiffIndex.from_api_files(files)
    say(f"{len(files)} files, {len(index)} commentable lines")
    unlisted = max(0, (event.changed_files or 0) - len(files))  # GitHub lists 3,000 at most
    if unlisted:
        actions.warning(
            f"relay-review: the pull request changes {event.changed_files} files; GitHub "
            f"lists {len(files)}: the rest cannot be reviewed (the review is partial)"
        )
    actions.log_untrusted("\n".join(f"  {f.status}: {f.filename}" for f in files))
    return index, unlisted


def context_stage(
    repo: Repository, event: PullRequestEvent, index: DiffIndex, policy: Policy, remaining: float
) -> HeadFiles | None:
    """Head versions of the changed files, for context around hunks: read through the contents
    API at the head SHA (never checked out or run), bounded in count, size and time; a failure
    is a warning and the review goes on without context."""
    r = policy.review
    if not r.context_lines:
        return None
    excludes = [*(DEFAULT_EXCLUDES if r.default_excludes else ()), *r.exclude]
    paths = [
        f.path
        for f in index.files
        if f.status in ("modified", "renamed", "copied")
        and not f.skip_reason
        and f.hunks
        and excluded_by(f.path, excludes) is None
    ]
    if not paths:
        return None
    # at most a tenth of what is left of the run, and never more than a minute
    budget = max(0.0, min(remaining / 10, 60.0))
    fetched = head_files(repo, paths, event.head_sha, deadline=time.monotonic() + budget)
    if problems := fetched.problems:  # one annotation, not one per file (the log has each)
        named = "; ".join(problems[:CONTEXT_PROBLEMS_NAMED])
        more = len(problems) - CONTEXT_PROBLEMS_NAMED
        rest = f"; and {more} more (in the log)" if more > 0 else ""
        actions.warning(f"relay-review: context: {named}{rest}; those hunks are shown without it")
        for problem in problems[CONTEXT_PROBLEMS_NAMED:]:
            say(f"context: {problem}")
    say(f"context: {len(fetched.files)} of {len(paths)} head files read")
    return fetched.files
