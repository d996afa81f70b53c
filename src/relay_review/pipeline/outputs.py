"""What a run leaves on the runner: the JSON report file, the step summary and the outputs.

Written after publishing (the step summary says what was not posted, and then holds the
verdict), or alone for a run that produced no verdict; every text scrubbed of the run's secrets.
A failed write is a warning, never the run's failure.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from relay_review._files import atomic_write
from relay_review.github import actions
from relay_review.github.log import Secrets, say
from relay_review.pipeline.publish import Published
from relay_review.records import Decision, NotPosted, RunReport
from relay_review.render import comment_markdown, md_code, md_text

log = logging.getLogger("relay_review.publish")

REPORT_NAME = "relay-review-report.json"


def summary_markdown(report: RunReport, published: Published) -> str:
    """The step summary: what was not posted (or where it was), then the comment's text."""
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
    decision = str(data.get("decision") or "")
    if published.not_posted == NotPosted.HEAD_MOVED:
        # the verdict is for a head a newer push replaced: a workflow acting on `approve` would
        # act on code no model saw (the newer head's run gives its own decision)
        decision = str(Decision.STALE)
    pull = clean.pull_request
    outputs = {
        "decision": decision,
        "head-sha": (pull.head_sha or "") if pull else "",
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
            ("head-sha", ""),
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
