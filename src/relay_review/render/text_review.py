"""A review as plain text for a terminal or a CI log (``--format text``): the decision, the
summary, findings with their quoted lines, files not reviewed, the readiness table and the
attempt timeline. Hostile text goes through :func:`~.terminal.plain`, not Markdown escapes.
"""

from __future__ import annotations

import textwrap

from relay_review.records import Decision, RunReport
from relay_review.render.routes import (
    attempt_timeline,
    no_model_line,
    readiness_table,
    reused_heads,
)
from relay_review.render.sections import PARTIAL_NOTE_FILES
from relay_review.render.terminal import TEXT_WIDTH, plain, plural

#: The decision in words, for the text report's first line.
DECISION_WORDS = {
    "request_changes": "changes requested",
    "comment": "comments",
    "approve": "no findings",
    "unavailable": "review unavailable",
}


#: Findings' continuation lines (the quote, the reason) start under the message.
_TEXT_INDENT = "    "


def _para(text: str, indent: str = "", first: str | None = None) -> list[str]:
    """``text`` (already plain) wrapped to :data:`TEXT_WIDTH`, continuation lines at ``indent``."""
    return textwrap.wrap(
        text,
        TEXT_WIDTH,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def review_text(report: RunReport) -> str:
    """A review for people as plain text: the decision, the summary (or why there is none),
    verified findings with their quoted lines, unverified ones with the reason, files not
    reviewed, the readiness table, the attempt timeline and a footer. Everything hostile is
    :func:`plain` (no Markdown escapes to read through, no control characters); no line is wider
    than :data:`TEXT_WIDTH` except an unbreakable token."""
    v = report.verdict
    out = [f"relay-review: {DECISION_WORDS.get(v.decision, plain(v.decision, 40))}", ""]
    if v.decision == Decision.UNAVAILABLE:
        why = v.why or "no route produced a valid verdict before the deadline"
        out += _para(f"No verdict: {plain(why)}. Every route's fate is in the table below.")
        out.append("")
    else:
        if v.partial:
            out += _para(f"Partial review: {plain(v.partial, 400)}.")
            left_out = [f for f in report.files if f.left_out]
            for lf in left_out[:PARTIAL_NOTE_FILES]:
                out += _para(
                    f"{plain(lf.path, 300)}: {plain(lf.reason or '', 200)}", "    ", "  - "
                )
            if len(left_out) > PARTIAL_NOTE_FILES:
                out.append(f"  - and {len(left_out) - PARTIAL_NOTE_FILES} more (files below)")
            out.append("")
        for line in v.summary.splitlines():
            if line.strip():
                out += [*_para(plain(line, 4000)), ""]
        findings = v.findings
        out.append(f"Findings ({len(findings)} verified)" if findings else "No verified findings.")
        for f in findings:
            where = f"{plain(f.path, 300)}:{f.line}"
            out += _para(
                f"{plain(f.severity, 20) or '-'}  {where}  {plain(f.message)}", "    ", "- "
            )
            if f.quote:
                out += _para(f"| {plain(f.quote, 400)}", _TEXT_INDENT + "| ", _TEXT_INDENT)
            if f.suggestion is not None:
                n = len(f.suggestion.splitlines()) or 1
                out.append(f"{_TEXT_INDENT}suggestion: {plural(n, 'line')} (in the JSON report)")
        out.append("")
    if v.unverified:
        out.append(
            f"Unverified findings ({len(v.unverified)}): cited lines not in the diff; not counted"
        )
        for u in v.unverified:
            where = f"{plain(u.path, 300)}:{u.line}"
            out += _para(f"{where}  {plain(u.message, 300)}", _TEXT_INDENT, "- ")
            out += _para(f"rejected: {plain(u.reason, 300)}", _TEXT_INDENT, _TEXT_INDENT)
        out.append("")
    skipped = [file for file in report.files if file.status != "reviewed"]
    if skipped:
        out.append(f"Files not reviewed ({len(skipped)} of {len(report.files)})")
        for file in skipped:
            reason = plain(file.reason or file.status, 200)
            out += _para(f"{plain(file.path, 300)}: {reason}", "    ", "- ")
        out.append("")
    chunk_servers = [c.served_by for c in report.chunks if c.served_by and not c.reused]
    servers = chunk_servers or ([report.served_by] if report.served_by else [])
    out.append("Routes: selection and readiness")
    out.append(
        readiness_table(report.catalog.selected, report.readiness, servers, report.attempts)
        if report.catalog.selected
        else "No routes were selected."
    )
    names = sorted({s.agent_id for s in servers})
    heads = reused_heads(report)
    served = "Served by " + ", ".join(names) + "." if names else "No route served."
    out += ["", *_para(no_model_line(heads) if heads is not None else served)]
    if report.attempts:
        out += ["", f"Attempt timeline ({len(report.attempts)})", attempt_timeline(report.attempts)]
    foot = [plural(len(report.catalog.selected), "route")]
    if report.probes_sent is not None:
        foot.append(plural(report.probes_sent, "probe"))
    if report.elapsed_s is not None:
        foot.append(f"{float(report.elapsed_s):.1f} s")
    if report.provenance:
        foot.insert(0, f"policy {plain(report.provenance, 200)}")
    foot.append("decision computed from verified findings, never taken from the model")
    out += ["", *_para(" · ".join(foot))]
    return "\n".join(out) + "\n"
