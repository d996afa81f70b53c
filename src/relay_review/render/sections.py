"""The sticky comment's parts, in display order: the decision and summary, findings, the
walkthrough, findings across pushes, unverified findings, files not reviewed or reused, the
routes (one summary line over the readiness table), attempts, what to do next and the footer.
Each part comes in a full and a shortened form, so :mod:`.comment` can fit GitHub's size limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relay_review.records import (
    Attempt,
    Decision,
    FileReport,
    Finding,
    Probe,
    QuotaReport,
    RunContext,
    RunReport,
)
from relay_review.render.markdown import details, md_cell, md_code, md_table, md_text
from relay_review.render.routes import (
    ATTEMPT_HEADER,
    READINESS_HEADER,
    attempt_rows,
    no_model_line,
    readiness_rows,
    reused_heads,
    served_ids,
    servers_of,
)
from relay_review.render.suggestions import suggestion_diff
from relay_review.render.terminal import plain, plural
from relay_review.review.decision import SEVERITY_RANK

#: Where the findings link to: the run's context and the pull request's number.
Where = tuple[RunContext | None, int | None]


def quota_line(quota: QuotaReport | None, code: Any = plain) -> str | None:
    """What the review cost: ``3 requests; 41 of 50 left today on `openrouter` (...)``, from
    the report's ``quota``: requests let out per account (probes included), every run's
    requests of the day where a shared ledger counted them, and what OpenRouter's key endpoint
    said. None when the run has no such record. Every number is the report's (input): only
    counts >= 0 are shown."""
    if quota is None:
        return None
    sent = {k: v for k, v in quota.requests_by_account.items() if v >= 0}
    parts = [plural(sum(sent.values()), "request")]
    for name in sorted({*quota.keys, *quota.shared_day}):
        n, info, day = sent.get(name, 0), quota.keys.get(name), quota.shared_day.get(name)
        if day is not None and day.per_day > 0:
            parts.append(
                f"{day.left} of {day.per_day} left today on {code(name, 80)} (the shared "
                "ledger's count of every run's requests in the last 24 h)"
            )
        elif info is not None and info.free_per_day:
            parts.append(
                f"{n} on {code(name, 80)} of its {info.free_per_day} free a day (free tier; "
                "OpenRouter does not report how many are left today)"
            )
        elif info is not None and info.is_free_tier is False:
            parts.append(f"{n} on {code(name, 80)} (not on the free tier)")
    return "; ".join(parts)


DECISION_TITLES = {
    "request_changes": "🔴 Changes requested",
    "comment": "💬 Comments",
    "approve": "✅ No findings",
    "unavailable": "⚠️ Review unavailable",
}


def _finding_link(f: Finding, ctx: Where) -> str:
    """``path:line`` as a link to the head (RIGHT) or base (LEFT) commit, when the PR is known."""
    label = md_code(f"{f.path}:{f.line}{' (old)' if f.side == 'LEFT' else ''}")
    context, number = ctx
    if context is None:
        return label
    sha = context.base_sha if f.side == "LEFT" else context.head_sha
    if not (context.server_url and context.repo and sha):
        return label
    import hashlib
    from urllib.parse import quote

    server, repo = context.server_url, context.repo
    if number is not None and number > 0:
        # the line in the pull request's diff: GitHub anchors a file by its path's SHA-256
        anchor = hashlib.sha256(str(f.path).encode("utf-8", "surrogatepass")).hexdigest()
        side = "L" if f.side == "LEFT" else "R"
        url = f"{server}/{repo}/pull/{number}/files#diff-{anchor}{side}{f.line}"
    else:
        url = f"{server}/{repo}/blob/{sha}/{quote(str(f.path))}#L{int(f.line)}"
    return f"[{label}]({url})"


def _finding_line(f: Finding, ctx: Where, message_chars: int = 1000) -> str:
    quote = f" — {md_code(f.quote, 120)}" if f.quote else ""
    return (
        f"- **{md_text(f.severity, 10)}** {_finding_link(f, ctx)}{_state_md(f)}: "
        f"{md_text(f.message, message_chars)}{quote}"
    )


def _findings_md(findings: Sequence[Finding], ctx: Where, *, suggestions: bool = True) -> str:
    lines = []
    for f in findings:
        lines.append(_finding_line(f, ctx))
        if suggestions and f.suggestion is not None and f.replaces:
            lines.append("\n" + suggestion_diff(f.replaces, f.suggestion, indent="  "))
    return "\n".join(lines)


#: How each state of a finding across pushes reads in the comment.
STATE_WORDS = {
    "new": "new since the last push",
    "open": "still open",
    "fixed": "fixed",
    "dismissed": "dismissed",
}


def _state_md(f: Finding) -> str:
    """`` (still open, first seen at `abc`)`` when the finding's state across pushes is known."""
    if not f.state:
        return ""
    word = STATE_WORDS.get(str(f.state), md_text(f.state, 20))
    first = f", first seen at {md_code(f.first_seen, 12)}" if f.first_seen else ""
    return f" _({word}{first})_"


def _lifecycle_section(report: RunReport) -> Section | None:
    """The pull request's story across pushes: counts, then the earlier findings that are not
    in this push (fixed, dismissed, or still open though not reported again)."""
    life = report.lifecycle
    if life is None:
        return None

    def n(key: str) -> int:
        return life.counts.get(key, 0)

    head = (
        f"**Across pushes:** {n('new')} new since the last push · {n('open')} still open · "
        f"{n('fixed')} fixed · {n('dismissed')} dismissed"
    )
    earlier = life.earlier
    if not (earlier or n("open") or n("fixed") or n("dismissed")):
        return None  # a first push: every finding is new, nothing to tell yet
    if not earlier:
        return ("lifecycle", head, head)
    rows = []
    for e in earlier:
        where = md_code(f"{e.path}" + (f":{e.line}" if e.line else ""))
        state = STATE_WORDS.get(str(e.state), md_text(e.state, 20))
        how = e.how
        note = f" ({md_text(how, 40)})" if how and how != e.state else ""
        first = f", first seen at {md_code(e.first_seen, 12)}" if e.first_seen else ""
        rows.append(f"- {where}: **{state}**{note}{first}")
    body = "\n".join(rows)
    full = f"{head}\n\n" + details(f"Findings of earlier pushes ({len(earlier)})", body)
    return ("lifecycle", full, head)


def _summary_md(summary: str) -> str:
    """The model's summary: one escaped paragraph per non-empty line."""
    return "\n\n".join(md_text(line, 4000) for line in summary.splitlines() if line.strip())


#: Files named in the comment's opening "Partial review" note (the rest are in the files list).
PARTIAL_NOTE_FILES = 10


def _partial_md(partial: str, left_out: Sequence[FileReport]) -> str:
    """The quoted note at the top of a partial review: why, and which files were not shown."""
    lines = [f"> **Partial review:** {md_text(partial, 400)}."]
    for f in left_out[:PARTIAL_NOTE_FILES]:
        lines.append(f"> - {md_code(f.path)}: {md_text(f.reason or '', 200)}")
    if len(left_out) > PARTIAL_NOTE_FILES:
        lines.append(f"> - _and {len(left_out) - PARTIAL_NOTE_FILES} more (see the files list)_")
    return "\n".join(lines) + "\n\n"


#: A part of the comment: (name, full Markdown, shortened Markdown).
Section = tuple[str, str, str]


#: Findings shown when the findings section is shortened.
SHORT_FINDINGS = 50


#: Routes that did not serve kept when the readiness table is shortened.
SHORT_ROUTES = 10


def _head_section(report: RunReport) -> Section:
    """The decision's title and the summary (or why there is no verdict), after the note that
    the review is partial."""
    v = report.verdict
    title = DECISION_TITLES.get(v.decision, md_text(v.decision))
    head = f"## relay-review: {title}"
    if v.decision == Decision.UNAVAILABLE:
        why = v.why or "no route produced a valid verdict before the deadline"
        summary = (
            f"No verdict: {md_text(why)}. What each route ran into is below, then what to do next."
        )
        return ("head", f"{head}\n\n{summary}", f"{head}\n\n{summary}")
    raw = v.summary
    if not raw.strip() and v.unverified and not v.findings:
        raw = "No summary: every finding of the reply cited lines not in the diff; not believed."
    summary = _summary_md(raw)
    # the short form is cut before escaping, so never inside an escape
    short = _summary_md(raw if len(raw) <= 2000 else raw[:1999] + "…")
    if v.partial:
        note = _partial_md(v.partial, [f for f in report.files if f.left_out])
        summary, short = note + summary, note + short
    return ("head", f"{head}\n\n{summary}", f"{head}\n\n{short}")


def _findings_body(findings: Sequence[Finding], ctx: Where, *, suggestions: bool = True) -> str:
    """Medium and high findings listed; low ones folded under them (noise control)."""
    main = [f for f in findings if str(f.severity).lower() != "low"]
    low = [f for f in findings if str(f.severity).lower() == "low"]
    parts = [_findings_md(main, ctx, suggestions=suggestions)] if main else []
    if low:
        title = f"Low-severity findings ({len(low)})"
        parts.append(details(title, _findings_md(low, ctx, suggestions=suggestions)))
    return "\n\n".join(parts)


def _inline_note(report: RunReport) -> str:
    """Which findings are in this comment only (issue 26's noise controls), or ``""``."""
    inline = report.inline
    if inline is None:
        return ""
    held = []
    if inline.below_floor:
        floor = md_text(inline.min_severity, 10)
        held.append(f"{inline.below_floor} below the severity floor ({floor})")
    if inline.over_cap:
        held.append(f"{inline.over_cap} over the cap of {inline.max_inline} a run")
    if not held:
        return ""
    return (
        f"\n\n_{plural(inline.inline, 'finding')} posted as line comments; "
        f"{' and '.join(held)} are in this comment only._"
    )


def _findings_section(report: RunReport) -> Section | None:
    findings = report.verdict.findings
    ctx: Where = (report.context, report.pull_request.number if report.pull_request else None)
    if not findings:
        if report.decision == Decision.UNAVAILABLE:
            return None
        return ("findings", "No verified findings.", "No verified findings.")
    title = f"### Findings ({len(findings)} verified)"
    note = _inline_note(report)
    full = f"{title}\n\n{_findings_body(findings, ctx)}{note}"
    if len(findings) <= SHORT_FINDINGS:
        if any(f.suggestion is not None for f in findings):
            brief = f"{title}\n\n{_findings_body(findings, ctx, suggestions=False)}{note}"
            return ("findings", full, brief + "\n\n_Suggestions are in the JSON report._")
        return ("findings", full, full)
    short = (
        f"{title}\n\n{_findings_md(by_severity(findings)[:SHORT_FINDINGS], ctx, suggestions=False)}"
        f"\n\n_{len(findings) - SHORT_FINDINGS} more findings are in the JSON report._"
    )
    return ("findings", full, short)


def by_severity(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first, in their order within a severity (a shortened list keeps those)."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK.get(str(f.severity).lower(), 0))


#: Characters of a finding's message when the findings are cut to fit the comment.
FIT_MESSAGE_CHARS = 300


def findings_within(report: RunReport, room: int) -> str | None:
    """The findings section in at most ``room`` characters, for a comment that is still too
    long with every part shortened: most severe first, no suggestions, messages cut to
    :data:`FIT_MESSAGE_CHARS`, as many as fit, and how many more the JSON report holds (so
    the route summary, the readiness table and the footer after it are kept, not cut off).
    None when there are no findings or not even the title and that note fit."""
    findings = report.verdict.findings
    if not findings:
        return None
    ctx: Where = (report.context, report.pull_request.number if report.pull_request else None)
    title = f"### Findings ({len(findings)} verified)"

    def tail(more: int) -> str:
        return f"\n\n_{more} more findings are in the JSON report._" if more else ""

    text = title
    shown = 0
    for f in by_severity(findings):
        line = ("\n\n" if not shown else "\n") + _finding_line(f, ctx, FIT_MESSAGE_CHARS)
        if len(text) + len(line) + len(tail(len(findings) - shown - 1)) > room:
            break
        text += line
        shown += 1
    text += tail(len(findings) - shown)
    return text if len(text) <= room else None


#: Longest file note (or part summary) shown in the walkthrough (characters).
NOTE_SHOW_CHARS = 300


#: Files named for one part of a review in several parts.
PART_FILES = 4


def _walkthrough_section(report: RunReport) -> Section | None:
    """A short walkthrough: the model's note per file when the replies gave them (``note`` on a
    file), else -- for a review in several parts -- each believed part summary under the files
    it covers (never a "Part k/9" naming no file); nothing for one part (the summary says it)."""
    noted = [(f.path, str(getattr(f, "note", "") or "")) for f in report.files]
    noted = [(path, note) for path, note in noted if note.strip()]
    if noted:
        rows = [f"- {md_code(path)}: {md_text(note, NOTE_SHOW_CHARS)}" for path, note in noted]
        title = f"Walkthrough ({len(noted)} of {plural(len(report.files), 'file')})"
    else:
        parts = [c for c in report.chunks if str(getattr(c, "summary", "") or "").strip()]
        parts = [c for c in parts if c.summary != report.verdict.summary]
        if not parts:
            return None
        rows = []
        for c in parts:
            names = ", ".join(md_code(p) for p in c.paths[:PART_FILES])
            if len(c.paths) > PART_FILES:
                names += f" and {len(c.paths) - PART_FILES} more"
            rows.append(f"- {names or '_(no file)_'}: {md_text(c.summary, NOTE_SHOW_CHARS)}")
        title = f"Walkthrough ({plural(len(parts), 'more part')})"
    body = "\n".join(rows)
    return ("walkthrough", f"**{title}**\n\n{body}", f"_{len(rows)} walkthrough lines omitted._")


def _unverified_line(u: Finding) -> str:
    return (
        f"- {md_code(str(u.path) + ':' + str(u.line))}: {md_text(u.message, 300)} — "
        f"_rejected: {md_text(u.reason, 300)}_"
    )


def _unverified_section(report: RunReport) -> Section | None:
    unverified = report.verdict.unverified
    if not unverified:
        return None
    body = "\n".join(_unverified_line(u) for u in unverified)
    title = f"Unverified findings ({len(unverified)}): cited lines not in the diff; not counted"
    return (
        "unverified",
        details(title, body),
        f"_{len(unverified)} unverified findings omitted._",
    )


def _files_section(report: RunReport) -> Section | None:
    skipped: list[FileReport] = [f for f in report.files if f.status != "reviewed"]
    if not skipped:
        return None
    body = "\n".join(f"- {md_code(f.path)}: {md_text(f.reason or f.status, 200)}" for f in skipped)
    title = f"Files not reviewed ({len(skipped)} of {len(report.files)})"
    return ("files", details(title, body), f"_{len(skipped)} files were not reviewed._")


def _reused_section(report: RunReport) -> Section | None:
    """Files an earlier run reviewed, unchanged since: their findings were reused unasked."""
    reused = [f for f in report.files if f.reused_from is not None]
    if not reused:
        return None

    def since(f: FileReport) -> str:
        return f"reviewed at {md_code(f.reused_from)}" if f.reused_from else "reviewed earlier"

    body = "\n".join(f"- {md_code(f.path)}: {since(f)}, unchanged since" for f in reused)
    if report.memory.not_reused:
        body += f"\n\nSent to a model again: {md_text(report.memory.not_reused, 600)}."
    title = f"Files reused from an earlier run ({len(reused)} of {len(report.files)})"
    return ("reused", details(title, body), f"_{len(reused)} files reused from an earlier run._")


def _fault_word(probe: Probe, failure: Attempt | None) -> str | None:
    """A route's fault in a word or two for the route summary (``stalled``, ``429``, ``no key``,
    ``bad reply``; ``too slow``: cancelled when a faster route took over), or ``None`` when it
    did not fail (ready, or never tried). A status below 400 is no fault: the outcome says it."""
    if failure is not None:
        if failure.outcome == "timeout":
            return "stalled"
        if failure.outcome == "cancelled":
            return "too slow"
        if failure.http_status and failure.http_status >= 400:
            return str(failure.http_status)
        return failure.outcome.replace("_", " ")
    status = probe.column
    if status == "timeout":
        return "stalled"
    if status == "abandoned":  # still in flight when another route's reply ended the run
        return None
    if status in ("rejected", "deferred"):
        if probe.http_status:
            return str(probe.http_status)
        detail = probe.detail or ""
        if detail.startswith("remembered"):  # memory's word, not a fault seen this run
            return "remembered cooling" if status == "deferred" else "remembered dead"
        return "no key" if detail.startswith("missing key") else detail.split(" ", 1)[0] or status
    return None


def route_summary(report: RunReport) -> str:
    """One line: who served, after how many probes, how many routes failed and how (``Served by
    `x` after 2 probes; 3 of 6 routes failed: stalled, 429, 404.``)."""
    servers = servers_of(report)
    names = sorted({s.agent_id for s in servers})
    served = served_ids(servers)
    failures = {a.agent_id: a for a in report.attempts if a.outcome != "ok"}
    by_id = {r.agent_id: r for r in report.readiness}
    words: dict[str, int] = {}
    unanswered = 0
    routes = report.catalog.selected
    for c in routes:
        if c.agent_id in served:
            continue
        probe = by_id.get(c.agent_id) or Probe(agent_id=c.agent_id)
        failure = failures.get(c.agent_id)
        word = _fault_word(probe, failure)
        if word:
            words[word] = words.get(word, 0) + 1
        elif failure is None and probe.column == "abandoned":
            unanswered += 1
    head = "Served by " + ", ".join(md_code(n) for n in names) if names else "No route served"
    if report.probes_sent:
        head += f" after {plural(report.probes_sent, 'probe')}"
    failed = sum(words.values())
    # a probe not answered yet when the run ended did not fail: it was not needed (yet)
    pending = (
        f"; {plural(unanswered, 'probe')} not answered yet when the run finished"
        if unanswered
        else ""
    )
    if not routes:
        return head + "; no route was selected."
    if not failed:
        return head + f"; {plural(len(routes), 'route')} selected, none failed{pending}."
    how = ", ".join(md_text(w, 40) + (f" ×{k}" if k > 1 else "") for w, k in words.items())
    return head + f"; {failed} of {plural(len(routes), 'route')} failed — {how}{pending}."


def _readiness_section(report: RunReport) -> Section:
    """The one-line route summary, with every catalog route's preflight result and fault
    folded under it (open when the review is unavailable or partial: then it is the story)."""
    servers = servers_of(report)
    rows = [
        [md_cell(c) for c in row]
        for row in readiness_rows(
            report.catalog.selected, report.readiness, servers, report.attempts
        )
    ]
    line = route_summary(report)
    heads = reused_heads(report)
    if heads is not None:
        line = no_model_line(heads, md_code)
    table = md_table(READINESS_HEADER, rows) if rows else "No routes were selected."
    opened = report.decision == Decision.UNAVAILABLE or bool(report.verdict.partial)
    title = "Routes: selection and readiness"
    full = f"{line}\n\n{details(title, table, opened=opened)}"
    keep = [r for r in rows if r[-1]] + [r for r in rows if not r[-1]][:SHORT_ROUTES]
    if len(keep) == len(rows):
        return ("readiness", full, full)
    shown = md_table(READINESS_HEADER, keep) + f"\n\n_{len(rows) - len(keep)} rows omitted._"
    return ("readiness", full, f"{line}\n\n{details(title, shown, opened=opened)}")


def _next_steps(report: RunReport) -> Section | None:
    """What to do next when no verdict came: when a route's wait frees, which key to add, how
    to run again."""
    if report.decision != Decision.UNAVAILABLE:
        return None
    steps: list[str] = []
    waits = [p for p in report.readiness if p.retry_after is not None or p.reset_at]
    if waits:
        soon = min(waits, key=lambda p: p.retry_after if p.retry_after is not None else 1e18)
        when = (
            f"at {md_code(soon.reset_at, 40)}"
            if soon.reset_at
            else f"about {float(soon.retry_after or 0):.0f} s after the run"
        )
        steps.append(f"{md_code(soon.agent_id)} asked to wait: it frees {when}; run again then.")
    keys = sorted(
        {
            (p.detail or "")[len("missing key ") :]
            for p in report.readiness
            if (p.detail or "").startswith("missing key ")
        }
    )
    if keys:
        steps.append(
            "Add a key: set the secret "
            + ", ".join(md_code(k, 80) for k in keys)
            + " in the workflow's environment (routes with no key were never tried)."
        )
    bad = sorted({p.account for p in report.readiness if p.http_status in (401, 403) and p.account})
    if bad:
        steps.append(
            "Check the key of " + ", ".join(md_code(a, 80) for a in bad) + " (HTTP 401/403)."
        )
    if "deadline" in str(report.verdict.stopped):
        steps.append("The run reached its deadline: a larger `deadline` input gives routes longer.")
    steps.append("Comment `/relay-review` on this pull request to review it again.")
    body = "**What to do next**\n\n" + "\n".join(f"- {step}" for step in steps)
    return ("next", body, body)


def _attempts_section(report: RunReport) -> Section | None:
    attempts = report.attempts
    if not attempts:
        return None
    rows = [[md_cell(c) for c in row] for row in attempt_rows(attempts)]
    full = details(f"Attempt timeline ({len(attempts)})", md_table(ATTEMPT_HEADER, rows))
    return ("attempts", full, f"_{len(attempts)} attempts omitted._")


def _footer_section(report: RunReport) -> Section:
    foot = []
    if report.provenance:
        foot.append(f"policy {md_code(report.provenance, 200)}")
    if report.guidelines:
        foot.append(f"guidelines: {md_code(report.guidelines, 200)}")
    foot.append(plural(len(report.catalog.selected), "route"))
    if report.probes_sent is not None:
        foot.append(plural(report.probes_sent, "probe"))
    if report.elapsed_s is not None:
        foot.append(f"{float(report.elapsed_s):.1f} s")
    m = report.memory
    if m.store != "none":
        remembered = m.proven + m.dead + m.cooling
        why = f" ({md_text(m.not_reused, 300)})" if m.not_reused and not m.reused_files else ""
        foot.append(
            f"memory ({m.store}): {plural(remembered, 'route')} remembered, "
            f"{plural(m.reused_files, 'file')} reused{why}, "
            f"{plural(m.requests_avoided, 'request')} saved"
        )
    if cost := quota_line(report.quota, md_code):
        foot.append(cost)
    foot.append("decision computed from verified findings, never taken from the model")
    text = "<sub>" + " · ".join(foot) + "</sub>"
    note = report.policy.note if report.policy else None
    if note:  # a pull request against another branch than the default
        text = f"> {md_text(note, 400)}\n\n{text}"
    return ("footer", text, text)


def comment_sections(report: RunReport) -> list[Section]:
    """(name, full Markdown, shortened Markdown) for each part of the comment, in display order."""
    parts = (
        _head_section(report),
        _findings_section(report),
        _walkthrough_section(report),
        _lifecycle_section(report),
        _unverified_section(report),
        _files_section(report),
        _reused_section(report),
        _readiness_section(report),
        _attempts_section(report),
        _next_steps(report),
        _footer_section(report),
    )
    return [p for p in parts if p is not None]
