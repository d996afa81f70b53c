"""Publishing a run on GitHub: the sticky comment (unless the head moved), optional line
comments as one review, then the step summary, the outputs and the JSON report file.

Never raises for GitHub's answers: what could not be posted is said in :class:`Published`
(``not_posted``) and the verdict then goes to the step summary. Every text is scrubbed of the
run's secrets before it leaves the process.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from relay_review import __version__
from relay_review._files import atomic_write
from relay_review.config.inputs import ActionInputs
from relay_review.github import actions
from relay_review.github.client import WaitBudget
from relay_review.github.comment import (
    HEAD_LINE_CHARS,
    MARKER,
    MAX_BODY_CHARS,
    resolve_author,
    upsert_sticky,
)
from relay_review.github.errors import GitHubEdgeError, GitHubRateLimited
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import Secrets, say
from relay_review.github.pr import head_sha
from relay_review.github.review import DEFAULT_MAX_SINGLE, LineComment, post_review
from relay_review.github.threads import Known, Plan, Thread, associations, read_threads
from relay_review.github.threads import close as close_threads
from relay_review.github.threads import marker as finding_marker
from relay_review.github.threads import plan as plan_lifecycle
from relay_review.pipeline.policy import PolicyOrigin
from relay_review.records import (
    Decision,
    DiscoveryReport,
    EarlierFinding,
    Finding,
    GithubReport,
    Inline,
    LifecycleReport,
    NotPosted,
    PullRequestReport,
    Refused,
    ResolveFailed,
    ReviewPosted,
    ReviewStatus,
    RunContext,
    RunReport,
)
from relay_review.render import comment_markdown, line_comment_body, md_code, md_text
from relay_review.review.diff import DiffIndex
from relay_review.review.noise import Noise, inline_plan
from relay_review.state.memory import FindingMemo, Memory

if TYPE_CHECKING:
    from github import Github
    from github.Repository import Repository

    from relay_review.providers.discovery import DiscoveryResult

log = logging.getLogger("relay_review.publish")

REPORT_NAME = "relay-review-report.json"
PERMISSION_STATUSES = frozenset({401, 403})


@dataclass
class Published:
    """What happened on GitHub."""

    comment_url: str | None = None
    comment_action: str | None = None
    #: Why nothing was posted: ``head_moved`` (or a newer head's run owns the comment),
    #: ``read_only``, ``rate_limited`` or ``failed``.
    not_posted: NotPosted | None = None
    detail: str = ""
    current_head: str | None = None
    review: ReviewPosted | None = None
    #: Which findings went inline (the step summary says it as the sticky comment does).
    inline: Inline | None = None

    def summary(self) -> GithubReport:
        """What happened on GitHub, as the report holds it."""
        return GithubReport(
            comment_url=self.comment_url,
            comment_action=self.comment_action,
            not_posted=self.not_posted and str(self.not_posted),
            detail=self.detail,
            current_head_sha=self.current_head,
            review=self.review,
        )


@dataclass
class Lifecycle:
    """What publishing needs to carry findings across pushes (see
    :mod:`relay_review.github.threads`): the diff (are a thread's cited lines still there?), the
    memory record as the review left it, and how to keep it (``save`` returns the sticky
    comment's state line for the ``comment`` store)."""

    index: DiffIndex
    memory: Memory
    save: Callable[[Memory], str | None]
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
class _Story:
    plan: Plan
    state_line: str | None
    read_error: str | None = None


def publish(
    gh: Github,
    repo: Repository,
    event: PullRequestEvent,
    inputs: ActionInputs,
    report: RunReport,
    secrets: Secrets,
    budget: WaitBudget | None = None,
    state_line: str | None = None,
    lifecycle: Lifecycle | None = None,
    noise: Noise | None = None,
) -> Published:
    """Post the sticky comment (and line comments) unless the head moved; never raises for
    GitHub's answers (the verdict then goes to the step summary). ``budget`` bounds how long a
    GitHub rate limit may make us wait before the one retry. ``state_line``: the memory
    payload (a hidden line, the ``comment`` state store) put at the end of the comment.
    ``lifecycle``: carry findings across pushes (post each once, close our fixed threads,
    honour dismissals); the report's findings then say their state, and memory keeps it.
    ``noise``: the severity floor and cap of inline comments (:mod:`relay_review.review.noise`;
    default ``medium`` and 10): the rest stay in the sticky comment only."""
    published = Published()
    if _head_moved(repo, event, secrets, published):
        return published
    author = resolve_author(gh, inputs.comment_author)
    story = None
    # no verdict (no route served): nothing is known of the findings; leave threads and memory
    if lifecycle is not None and report.decision != Decision.UNAVAILABLE:
        story = _story(gh, event, inputs, report, lifecycle, author)
        if story.state_line is not None:
            state_line = story.state_line
    # Scrubbed before rendering (escaping and cutting could hide a key from a later scrub) and
    # after (the rendered text as a whole).
    clean = report.scrubbed(secrets)
    findings = clean.verdict.findings
    noise = noise or Noise()
    # which findings go inline (new ones with the lifecycle, each once), before rendering: the
    # sticky comment says which stay there only
    candidates = list(range(len(findings))) if story is None else list(story.plan.post)
    inline = inline_plan([findings[i] for i in candidates], noise)
    if inputs.inline_comments:
        clean.inline = published.inline = inline.summary(noise)
    # room for the head line that upsert_sticky puts under the marker
    limit = MAX_BODY_CHARS - HEAD_LINE_CHARS - (len(state_line) + 1 if state_line else 0)
    body = secrets.redact(comment_markdown(clean, marker=MARKER, limit=limit))
    if state_line:
        body = body.rstrip("\n") + "\n" + state_line + "\n"
    if not _post_sticky(repo, event, author, body, secrets, budget, published):
        return published
    if inputs.inline_comments:
        chosen = [findings[candidates[j]] for j in inline.post]
        single = lifecycle.single_comments if lifecycle else DEFAULT_MAX_SINGLE
        deadline = lifecycle.deadline if lifecycle else None
        if chosen:
            published.review = post_line_comments(
                repo, event, chosen, secrets, max_single=single, deadline=deadline
            )
        review = published.review or ReviewPosted(mode="none", posted=0)
        if story is not None:
            not_reposted = len(findings) - len(candidates)
            review = _threads_closed(gh, story, deadline, secrets, not_reposted, review)
        published.review = review.model_copy(update={"noise": inline.summary(noise)})
    return published


def _story(
    gh: Github,
    event: PullRequestEvent,
    inputs: ActionInputs,
    report: RunReport,
    life: Lifecycle,
    bot: str,
) -> _Story:
    """Read our threads (with inline comments on), plan the findings' lifecycle, mark the
    report's findings with their state, and keep the states in memory (one more save)."""
    scope = f"{event.repo_full_name}#{event.number}:"
    remembered = {
        k[len(scope) :]: Known(v.path, v.cited, v.first, v.state, v.how)
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
    )
    report.verdict.findings = [
        f.model_copy(update={"state": state, "first_seen": first})
        for f, (state, first) in zip(report.verdict.findings, plan.states, strict=True)
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
            at=now,
            until=now + life.ttl,
        )
    line = life.save(life.memory.model_copy(update={"findings": kept}))
    return _Story(plan=plan, state_line=line, read_error=read_error)


def _threads_closed(
    gh: Github,
    story: _Story,
    deadline: float | None,
    secrets: Secrets,
    not_reposted: int,
    review: ReviewPosted,
) -> ReviewPosted:
    """Reply in and resolve our threads whose cited lines changed; ``review`` with what was
    done."""
    done = close_threads(gh, story.plan.close, deadline)
    if story.plan.close:
        say(
            f"review threads: {len(done.closed)} resolved (cited lines changed), "
            f"{len(done.failed)} could not be"
        )
    for thread_id, reason in done.failed:
        actions.warning(
            secrets.redact(f"relay-review: review thread {thread_id} not resolved: {reason}")
        )
    return review.model_copy(
        update={
            "not_reposted": not_reposted,
            "resolved": len(done.closed),
            "resolve_failed": [
                ResolveFailed(thread=t, reason=secrets.redact(r)) for t, r in done.failed
            ],
            "threads_error": secrets.redact(story.read_error) if story.read_error else None,
        }
    )


def _head_moved(
    repo: Repository, event: PullRequestEvent, secrets: Secrets, published: Published
) -> bool:
    """Re-read the head: ``True`` (and ``published`` says why) when it moved during the run."""
    try:
        current = head_sha(repo, event.number)
    except GitHubEdgeError as exc:  # GitHubConnectionError too: GitHub did not answer
        actions.warning(
            secrets.redact(f"relay-review: could not re-read the head ({exc}); posting anyway")
        )
        current = None
    published.current_head = current
    if current is None or current.lower() == event.head_sha.lower():
        return False
    published.not_posted = NotPosted.HEAD_MOVED
    published.detail = (
        f"the head moved from {event.head_sha} to {current} during the run; posting nothing "
        "for the stale head (a newer run owns the comment)"
    )
    actions.notice(f"relay-review: {published.detail}")
    return True


def _post_sticky(
    repo: Repository,
    event: PullRequestEvent,
    author: str,
    body: str,
    secrets: Secrets,
    budget: WaitBudget | None,
    published: Published,
) -> bool:
    """Create or update the sticky comment; ``False`` (and ``published`` says why) when it was
    not posted: refused, failed, rate-limited, or a newer head's run owns it."""
    try:
        sticky = upsert_sticky(
            repo, event.number, body, author=author, head_sha=event.head_sha, budget=budget
        )
    except GitHubRateLimited as exc:
        published.not_posted = NotPosted.RATE_LIMITED
        published.detail = secrets.redact(str(exc))
        actions.error(
            f"relay-review: the comment was not posted: {published.detail}. The verdict is in "
            "the step summary; re-run the job once GitHub's rate limit has passed."
        )
        return False
    except GitHubEdgeError as exc:
        published.detail = secrets.redact(str(exc))
        if exc.status in PERMISSION_STATUSES:
            published.not_posted = NotPosted.READ_ONLY
            actions.warning(
                f"relay-review: the token cannot comment ({published.detail}); the verdict is "
                "in the step summary. On fork pull requests use pull_request_target with "
                "`permissions: pull-requests: write`."
            )
        else:
            published.not_posted = NotPosted.FAILED
            actions.error(f"relay-review: the comment was not posted: {published.detail}")
        return False
    if sticky.current_head:
        published.current_head = sticky.current_head
    if sticky.action == "stale":
        published.not_posted = NotPosted.HEAD_MOVED
        published.detail = (
            f"a run for the newer head {sticky.current_head} owns the sticky comment; posting "
            f"nothing for the stale head {event.head_sha}"
        )
        if sticky.deleted:
            published.detail += f" (removed the {sticky.deleted} duplicate comment(s) it created)"
        actions.notice(f"relay-review: {published.detail}")
        return False
    published.comment_url = sticky.html_url
    published.comment_action = sticky.action
    say(f"sticky comment {sticky.action} (author {sticky.author}): {sticky.html_url}")
    if sticky.duplicates:
        say(f"{sticky.duplicates} older duplicate sticky comments left alone")
    if sticky.deleted:
        say(f"{sticky.deleted} duplicate sticky comments from a concurrent run deleted")
    return True


def post_line_comments(
    repo: Repository,
    event: PullRequestEvent,
    findings: Sequence[Finding],
    secrets: Secrets,
    *,
    max_single: int = DEFAULT_MAX_SINGLE,
    deadline: float | None = None,
) -> ReviewPosted:
    """Verified findings as one ``COMMENT`` review, each body ending with its hidden finding
    marker (fingerprint, cited lines, first commit); refused ones are listed, none are lost
    (they are all in the sticky comment)."""
    comments = []
    for f in findings:
        body = secrets.redact(line_comment_body(f))
        if f.fingerprint is not None and f.cited is not None:
            body += "\n\n" + finding_marker(f.fingerprint, f.cited, f.first_seen or event.head_sha)
        end = f.end_line if f.suggestion is not None and f.replaces else None
        last = end or f.line  # a range comment is anchored at its end
        comments.append(
            LineComment(
                path=f.path,
                line=last,
                side=f.side,
                body=body,
                start_line=f.line if last > f.line else None,
            )
        )
    summary = f"relay-review: {len(comments)} verified finding(s); the sticky comment has the rest."
    result = post_review(
        repo,
        event.number,
        event.head_sha,
        summary,
        comments,
        max_single=max_single,
        deadline=deadline,
    )
    say(
        f"line comments: {len(result.posted)} posted ({result.mode}), "
        f"{len(result.refused)} refused{'; outcome uncertain' if result.uncertain else ''}"
    )
    for refused in result.refused:
        actions.warning(
            secrets.redact(
                f"relay-review: line comment on {refused.comment.path}:{refused.comment.line} "
                f"refused ({refused.reason}); it stays in the sticky comment"
            )
        )
    return ReviewPosted(
        mode=result.mode,
        posted=len(result.posted),
        refused=[
            Refused(path=r.comment.path, line=r.comment.line, reason=secrets.redact(r.reason))
            for r in result.refused
        ],
        uncertain=result.uncertain,
        detail=secrets.redact(result.detail),
    )


def summary_markdown(report: RunReport, published: Published) -> str:
    note = ""
    if published.not_posted == NotPosted.HEAD_MOVED:
        note = f"> **Not posted:** {md_text(published.detail)}\n\n"
    elif published.not_posted == NotPosted.READ_ONLY:
        note = (
            "> **Not posted:** the token cannot comment on the pull request "
            f"({md_text(published.detail)}); this step summary holds the verdict.\n\n"
        )
    elif published.not_posted == NotPosted.RATE_LIMITED:
        note = (
            f"> **Not posted:** GitHub's rate limit ({md_text(published.detail)}); this step "
            "summary holds the verdict.\n\n"
        )
    elif published.not_posted == NotPosted.FAILED:
        note = f"> **Not posted:** {md_text(published.detail)}\n\n"
    elif published.comment_url:
        note = f"Posted as {md_code(published.comment_url)}.\n\n"
    limit = actions.SUMMARY_LIMIT_BYTES - 4096
    if published.inline is not None and report.inline is None:  # as the sticky comment says
        report = report.model_copy(update={"inline": published.inline})
    return note + comment_markdown(report, limit=limit)


def finish(
    env: Mapping[str, str], report: RunReport, published: Published, secrets: Secrets
) -> None:
    """Write the JSON report, the step summary and the outputs (all scrubbed of secrets)."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    report_path = workspace / REPORT_NAME
    clean = report.scrubbed(secrets)
    data = clean.to_json()
    try:
        atomic_write(report_path, (json.dumps(data, indent=2, allow_nan=False) + "\n").encode())
        say(f"report: {report_path}")
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the report {report_path}: {exc}")
        report_path = None  # type: ignore[assignment]
    try:
        actions.append_summary(secrets.redact(summary_markdown(clean, published)), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the step summary: {exc}")
    outputs = {
        "decision": str(data.get("decision") or ""),
        "served-by": ",".join(serving_routes(clean)),
        "comment-url": published.comment_url or "",
        # relative to the workspace: the container's /github/workspace is another path outside
        "report-path": os.path.relpath(report_path, workspace) if report_path else "",
        "findings": str(len(clean.verdict.findings)),
    }
    try:
        for name, value in outputs.items():
            actions.set_output(name, secrets.redact(value), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write GITHUB_OUTPUT: {exc}")


def serving_routes(report: RunReport) -> list[str]:
    """Every route that served a chunk, in chunk order without repeats (a review in several
    chunks can be served by several routes), else the report's one ``served_by``."""
    names = [c.served_by.agent_id for c in report.chunks if c.served_by is not None]
    if not names and report.served_by is not None and report.served_by.agent_id:
        names = [report.served_by.agent_id]
    return list(dict.fromkeys(names))


def set_skip_outputs(env: Mapping[str, str], decision: Decision) -> None:
    """Outputs for a run that produced no verdict: ``decision`` is ``skipped`` or ``error``."""
    try:
        for name, value in (
            ("decision", str(decision)),
            ("served-by", ""),
            ("comment-url", ""),
            ("report-path", ""),
            ("findings", "0"),
        ):
            actions.set_output(name, value, env)
    except OSError as exc:  # never mask the real problem with this one
        log.warning("cannot write GITHUB_OUTPUT: %s", exc)


def skipped(env: Mapping[str, str], reason: str) -> None:
    """Nothing to review: a notice, a one-line step summary and ``decision=skipped``."""
    actions.notice(f"relay-review: {reason}")
    try:
        actions.append_summary(f"relay-review: {md_text(reason)}\n", env)
    except OSError as exc:
        log.warning("cannot write the step summary: %s", exc)
    set_skip_outputs(env, Decision.SKIPPED)


def describe_run(
    report: RunReport,
    env: Mapping[str, str],
    event: PullRequestEvent,
    origin: PolicyOrigin,
    discovery: DiscoveryResult,
    require_zdr: bool,
) -> None:
    """Add what the action knows beyond the review: policy, pull request, discovery, version."""
    report.provenance = origin.provenance
    report.context = RunContext(
        server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
        repo=event.repo_full_name,
        head_sha=event.head_sha,
        base_sha=event.base_sha,
    )
    report.policy = origin.summary()
    report.pull_request = PullRequestReport(
        event=event.event_name,
        action=event.action,
        repo=event.repo_full_name,
        number=event.number,
        head_sha=event.head_sha,
        base_sha=event.base_sha,
        private=event.private,
    )
    report.require_zdr = require_zdr
    report.discovery = DiscoveryReport(
        accounts=list(discovery.accounts), errors=list(discovery.errors)
    )
    report.relay_review_version = __version__
