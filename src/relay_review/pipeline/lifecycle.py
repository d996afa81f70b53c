"""Findings across pushes, planned before anything is posted: which findings go inline (each
once), which of our threads to close, which a maintainer dismissed (the rules are
:mod:`relay_review.github.threads`).

Our review threads are read and each finding's state planned; the report's findings are marked
with it and memory keeps it (one more save). Posting, and closing the threads the plan names, is
:mod:`.publish`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relay_review.config.inputs import ActionInputs
from relay_review.github import actions
from relay_review.github.errors import GitHubEdgeError
from relay_review.github.event import PullRequestEvent
from relay_review.github.review import DEFAULT_MAX_SINGLE
from relay_review.github.threads import Known, Plan, Thread, associations, read_threads
from relay_review.github.threads import plan as plan_lifecycle
from relay_review.records import (
    EarlierFinding,
    LifecycleReport,
    ReviewStatus,
    RunReport,
)
from relay_review.review.diff import DiffIndex
from relay_review.state.memory import FindingMemo, Memory

if TYPE_CHECKING:
    from github import Github


@dataclass
class Lifecycle:
    """What publishing needs to carry findings across pushes (see
    :mod:`relay_review.github.threads`): the diff (are a thread's cited lines still there?), the
    memory record as the review left it, and how to keep it (``save`` returns the sticky
    comment's state line for the ``comment`` store)."""

    index: DiffIndex
    memory: Memory
    save: Callable[[Memory], str | None]
    #: Files the pull request changes that GitHub did not list (it lists 3,000 at most): a
    #: path missing from ``index`` may be one of them, so nothing is known of its threads.
    unlisted: int = 0
    #: ``github.single_comments``: single line comments after a batch refused with 422.
    single_comments: int = DEFAULT_MAX_SINGLE
    #: ``memory.findings``: how long a finding's state is remembered (seconds).
    ttl: float = 90 * 86400.0
    #: The run's deadline (monotonic): no thread is replied to or resolved past it.
    deadline: float | None = None
    clock: Callable[[], float] = time.time


#: Most findings of one pull request kept in memory (the record must stay small).
MAX_REMEMBERED_FINDINGS = 200


@dataclass
class Story:
    plan: Plan
    state_line: str | None
    read_error: str | None = None


def plan_story(
    gh: Github,
    event: PullRequestEvent,
    inputs: ActionInputs,
    report: RunReport,
    life: Lifecycle,
    bot: str,
) -> Story:
    """Read our threads (with inline comments on), plan the findings' lifecycle, mark the
    report's findings with their state, and keep the states in memory (one more save)."""
    scope = f"{event.repo_full_name}#{event.number}:"
    remembered = {
        k[len(scope) :]: Known(v.path, v.cited, v.first, v.state, v.how, v.side)
        for k, v in life.memory.findings.items()
        if k.startswith(scope)
    }
    threads: list[Thread] | None = []
    read_error = None
    if inputs.inline_comments:
        try:
            threads = read_threads(gh, event.repo_full_name, event.number)
        except GitHubEdgeError as exc:
            threads, read_error = None, str(exc)
            actions.warning(
                f"relay-review: the review threads could not be read ({exc}); findings memory "
                "knows as posted are not posted again, and no thread is resolved this run"
            )
    extra = {event.user_login: event.author_association} if event.user_login else {}
    plan = plan_lifecycle(
        report.verdict.findings,
        threads,
        remembered,
        life.index,
        head_sha=event.head_sha,
        bot=bot,
        allowed=frozenset(inputs.author_associations),
        trigger=inputs.trigger,
        known=associations(threads or (), extra),
        reviewed=frozenset(f.path for f in report.files if f.status == ReviewStatus.REVIEWED),
        listed_all=not life.unlisted,
    )
    # each finding under its identity: an earlier finding's when it is that finding rated at
    # another severity (so the report and the story name it once)
    report.verdict.findings = [
        f.model_copy(update={"state": state, "first_seen": first, "fingerprint": ident})
        for f, (state, first), ident in zip(
            report.verdict.findings, plan.states, plan.identities, strict=True
        )
    ]
    current = {f.fingerprint for f in report.verdict.findings if f.fingerprint}
    report.lifecycle = LifecycleReport(
        counts=plan.counts(),
        earlier=[
            EarlierFinding(
                fingerprint=e.fingerprint,
                path=e.path,
                line=e.line,
                state=e.state,
                first_seen=e.first,
                how=e.how,
            )
            for fp, e in plan.entries.items()
            if fp not in current
        ],
        threads="unreadable" if threads is None else len(threads),
    )
    now = life.clock()
    kept = {k: v for k, v in life.memory.findings.items() if not k.startswith(scope)}
    entries = list(plan.entries.values())[:MAX_REMEMBERED_FINDINGS]
    for e in entries:
        kept[scope + e.fingerprint] = FindingMemo(
            path=e.path[:4096],
            cited=e.cited[:40],
            first=e.first[:64],
            state="open" if e.state == "new" else e.state,
            how=e.how[:40],
            side=e.side,
            at=now,
            until=now + life.ttl,
        )
    line = life.save(life.memory.model_copy(update={"findings": kept}))
    return Story(plan=plan, state_line=line, read_error=read_error)
