"""Publishing a run on GitHub: the sticky comment (unless the head moved), optional line
comments as one review (each finding once across pushes: :mod:`.lifecycle`); the step summary,
the outputs and the JSON report file follow (:mod:`.outputs`).

Never raises for GitHub's answers: what could not be posted is said in :class:`Published`
(``not_posted``) and the verdict then goes to the step summary. Every text is scrubbed of the
run's secrets before it leaves the process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relay_review import __version__
from relay_review.config.inputs import ActionInputs
from relay_review.github import actions
from relay_review.github.client import WaitBudget
from relay_review.github.comment import (
    HEAD_LINE_CHARS,
    MARKER,
    MAX_BODY_CHARS,
    StickyReader,
    upsert_sticky,
)
from relay_review.github.errors import GitHubEdgeError, GitHubRateLimited
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import Secrets, say
from relay_review.github.pr import head_sha
from relay_review.github.review import DEFAULT_MAX_SINGLE, LineComment, post_review
from relay_review.github.threads import close as close_threads
from relay_review.github.threads import marker as finding_marker
from relay_review.pipeline.lifecycle import Lifecycle, Story, plan_story
from relay_review.pipeline.policy import PolicyOrigin
from relay_review.records import (
    Decision,
    DiscoveryReport,
    Finding,
    GithubReport,
    Inline,
    NotPosted,
    PullRequestReport,
    Refused,
    ResolveFailed,
    ReviewPosted,
    RunContext,
    RunReport,
)
from relay_review.render import comment_markdown, line_comment_body
from relay_review.review.noise import Noise, inline_plan

if TYPE_CHECKING:
    from github import Github
    from github.Repository import Repository

    from relay_review.providers.discovery import DiscoveryResult

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
    reader: StickyReader | None = None,
) -> Published:
    """Post the sticky comment (and line comments) unless the head moved; never raises for
    GitHub's answers (the verdict then goes to the step summary). ``budget`` bounds how long a
    GitHub rate limit may make us wait before the one retry. ``state_line``: the memory
    payload (a hidden line, the ``comment`` state store) put at the end of the comment.
    ``lifecycle``: carry findings across pushes (post each once, close our fixed threads,
    honour dismissals); the report's findings then say their state, and memory keeps it.
    ``noise``: the severity floor and cap of inline comments (:mod:`relay_review.review.noise`;
    default ``medium`` and 10): the rest stay in the sticky comment only. ``reader``: the run's
    reader of our comment (whose comments are ours, when the comment store asked already: not
    asked again); default a fresh one."""
    published = Published()
    if _head_moved(repo, event, secrets, published):
        return published
    if reader is None:
        reader = StickyReader(gh, repo, event.number, inputs.comment_author)
    author = reader.author()
    story = None
    # no verdict (no route served): nothing is known of the findings; leave threads and memory
    if lifecycle is not None and report.decision != Decision.UNAVAILABLE:
        story = plan_story(gh, event, inputs, report, lifecycle, author)
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


def _threads_closed(
    gh: Github,
    story: Story,
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
