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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay_review._files import atomic_write
from relay_review.action_inputs import ActionInputs
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
from relay_review.github.review import LineComment, post_review
from relay_review.models import Decision, NotPosted, RunReport
from relay_review.render import comment_markdown, line_comment_body, md_code, md_text

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
    review: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "comment_url": self.comment_url,
            "comment_action": self.comment_action,
            "not_posted": self.not_posted and str(self.not_posted),
            "detail": self.detail,
            "current_head_sha": self.current_head,
            "review": self.review,
        }


def publish(
    gh: Any,
    repo: Any,
    event: PullRequestEvent,
    inputs: ActionInputs,
    report: RunReport,
    secrets: Secrets,
    budget: WaitBudget | None = None,
    state_line: str | None = None,
) -> Published:
    """Post the sticky comment (and line comments) unless the head moved; never raises for
    GitHub's answers (the verdict then goes to the step summary). ``budget`` bounds how long a
    GitHub rate limit may make us wait before the one retry. ``state_line``: the memory
    payload (a hidden line, the ``comment`` state store) put at the end of the comment."""
    published = Published()
    if _head_moved(repo, event, secrets, published):
        return published
    # Scrubbed before rendering (escaping and cutting could hide a key from a later scrub) and
    # after (the rendered text as a whole).
    clean = secrets.redact_data(report.to_json())
    # room for the head line that upsert_sticky puts under the marker
    limit = MAX_BODY_CHARS - HEAD_LINE_CHARS - (len(state_line) + 1 if state_line else 0)
    body = secrets.redact(comment_markdown(clean, marker=MARKER, limit=limit))
    if state_line:
        body = body.rstrip("\n") + "\n" + state_line + "\n"
    if not _post_sticky(gh, repo, event, inputs, body, secrets, budget, published):
        return published
    findings = clean.get("findings") or []
    if inputs.inline_comments and findings:
        published.review = post_line_comments(repo, event, findings, secrets)
    return published


def _head_moved(repo: Any, event: PullRequestEvent, secrets: Secrets, published: Published) -> bool:
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
    gh: Any,
    repo: Any,
    event: PullRequestEvent,
    inputs: ActionInputs,
    body: str,
    secrets: Secrets,
    budget: WaitBudget | None,
    published: Published,
) -> bool:
    """Create or update the sticky comment; ``False`` (and ``published`` says why) when it was
    not posted: refused, failed, rate-limited, or a newer head's run owns it."""
    try:
        author = resolve_author(gh, inputs.comment_author)
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
    repo: Any, event: PullRequestEvent, findings: list[Mapping[str, Any]], secrets: Secrets
) -> dict[str, Any]:
    """Verified findings as one ``COMMENT`` review; refused ones are listed, none are lost (they
    are all in the sticky comment)."""
    comments = []
    for f in findings:
        end = f.get("end_line") if f.get("suggestion") is not None and f.get("replaces") else None
        last = int(end) if end else int(f["line"])  # a range comment is anchored at its end
        comments.append(
            LineComment(
                path=f["path"],
                line=last,
                side=f.get("side") or "RIGHT",
                body=secrets.redact(line_comment_body(f)),
                start_line=int(f["line"]) if last > int(f["line"]) else None,
            )
        )
    summary = f"relay-review: {len(comments)} verified finding(s); the sticky comment has the rest."
    result = post_review(repo, event.number, event.head_sha, summary, comments)
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
    return {
        "mode": result.mode,
        "posted": len(result.posted),
        "refused": [
            {"path": r.comment.path, "line": r.comment.line, "reason": secrets.redact(r.reason)}
            for r in result.refused
        ],
        "uncertain": result.uncertain,
        "detail": secrets.redact(result.detail),
    }


def summary_markdown(report: Mapping[str, Any], published: Published) -> str:
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
    return note + comment_markdown(report, limit=limit)


def finish(
    env: Mapping[str, str], report: RunReport, published: Published, secrets: Secrets
) -> None:
    """Write the JSON report, the step summary and the outputs (all scrubbed of secrets)."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    report_path = workspace / REPORT_NAME
    clean = secrets.redact_data(report.to_json())
    try:
        atomic_write(report_path, (json.dumps(clean, indent=2, allow_nan=False) + "\n").encode())
        say(f"report: {report_path}")
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the report {report_path}: {exc}")
        report_path = None  # type: ignore[assignment]
    try:
        actions.append_summary(secrets.redact(summary_markdown(clean, published)), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the step summary: {exc}")
    outputs = {
        "decision": str(clean.get("decision") or ""),
        "served-by": ",".join(serving_routes(clean)),
        "comment-url": published.comment_url or "",
        # relative to the workspace: the container's /github/workspace is another path outside
        "report-path": os.path.relpath(report_path, workspace) if report_path else "",
        "findings": str(len(clean.get("findings") or [])),
    }
    try:
        for name, value in outputs.items():
            actions.set_output(name, secrets.redact(value), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write GITHUB_OUTPUT: {exc}")


def serving_routes(report: Mapping[str, Any]) -> list[str]:
    """Every route that served a chunk, in chunk order without repeats (a review in several
    chunks can be served by several routes), else the report's one ``served_by``."""
    names = [
        str(c["served_by"]["agent_id"])
        for c in report.get("chunks") or []
        if isinstance(c, Mapping) and isinstance(c.get("served_by"), Mapping)
    ]
    served = report.get("served_by")
    if not names and isinstance(served, Mapping) and served.get("agent_id"):
        names = [str(served["agent_id"])]
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
