"""Renderings of a run for people: the catalog, readiness and attempt tables as text, and the
sticky PR comment (also the step summary) as Markdown built on the same rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from relay_review.models import (
    AttemptReport,
    Catalog,
    Decision,
    FileReport,
    ProbeReport,
    ReportFinding,
    RouteRef,
    RunReport,
    SelectedRoute,
    UnverifiedFinding,
)
from relay_review.review.verdict import suggestion_lines

#: Rows as typed records, or as their JSON form (the CLI commands' reports); JSON is coerced.
Rows = Sequence[Any]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def align(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned text columns separated by two spaces."""
    cells = [[str(c) for c in header]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _typed(model: type[BaseModel], rows: Rows) -> list[Any]:
    """``rows`` as ``model`` records (JSON rows are validated; typed ones kept)."""
    return [r if isinstance(r, model) else model.model_validate(r) for r in rows]


def _served_ids(served_by: Any) -> set[str]:
    """Agent ids of one route or a list of routes (typed or JSON)."""
    if not served_by:
        return set()
    if isinstance(served_by, Mapping | RouteRef):
        served_by = [served_by]
    return {r.agent_id for r in _typed(RouteRef, [s for s in served_by if s])}


def catalog_table(catalog: Catalog) -> str:
    """The catalog's selection and counts as aligned text for people."""
    if not catalog.selected:
        lines = ["No routes selected."]
    else:
        rows = [
            (e.priority, e.agent_id, e.account, e.cost.value, "yes" if e.zdr else "no")
            for e in catalog.selected
        ]
        lines = [align(("priority", "agent_id", "account", "cost", "zdr"), rows)]
    r = catalog.report
    lines.append(
        f"\n{len(catalog.selected)} selected of {plural(r.total_routes, 'route')} "
        f"({r.free_routes} free, {r.priced_routes} priced, {r.unknown_routes} unknown cost); "
        f"{plural(r.account_diversity, 'account')}; {r.zdr_selected} ZDR"
    )
    if r.excluded:
        lines.append("excluded: " + ", ".join(f"{k}={v}" for k, v in r.excluded.items()))
    return "\n".join(lines)


def readiness_rows(
    catalog: Rows,
    readiness: Rows,
    served_by: Any,
    attempts: Rows = (),
) -> list[list[Any]]:
    """One row per catalog route: priority, route, tier, preflight result, what was found,
    whether it served.

    ``served_by`` is one route or, for a review in several chunks, every route that served one.
    ``found`` names the fault: the route's last failed serving attempt (from ``attempts``), else
    its probe's detail when the probe did not find it ready.
    """
    by_id = {r.agent_id: r for r in _typed(ProbeReport, readiness)}
    failures = {a.agent_id: a for a in _typed(AttemptReport, attempts) if a.outcome != "ok"}
    served = _served_ids(served_by)
    rows = []
    for c in _typed(SelectedRoute, catalog):
        r = by_id.get(c.agent_id) or ProbeReport(agent_id=c.agent_id)
        rows.append(
            [
                c.priority,
                c.account,
                c.model,
                f"{c.cost}{'+zdr' if c.zdr else ''}",
                r.column,
                r.http_status,
                r.first_byte_s,
                r.latency_s,
                _found(r, failures.get(c.agent_id)),
                "SERVED" if c.agent_id in served else "",
            ]
        )
    return rows


#: Characters of the ``found`` column (a probe's or an attempt's detail, cut with ``…``).
FOUND_CHARS = 140


def _found(probe: ProbeReport, failure: AttemptReport | None) -> str:
    if failure is not None:
        text = "serving: " + (failure.detail or str(failure.outcome))
    elif probe.status == "ready":
        text = "ready"
    else:
        text = probe.detail or "not probed"
    text = " ".join(text.split())
    return text if len(text) <= FOUND_CHARS else text[: FOUND_CHARS - 1] + "…"


READINESS_HEADER = (
    "prio",
    "account",
    "model",
    "tier",
    "preflight",
    "http",
    "first_byte_s",
    "latency_s",
    "found",
    "served",
)
ATTEMPT_HEADER = ("#", "start_s", "route", "for", "phase", "outcome", "http", "elapsed_s")


def readiness_table(catalog: Rows, readiness: Rows, served_by: Any, attempts: Rows = ()) -> str:
    """The selection and readiness table as aligned text."""
    if not catalog:
        return "No routes selected."
    return align(READINESS_HEADER, readiness_rows(catalog, readiness, served_by, attempts))


def attempt_rows(attempts: Rows) -> list[list[Any]]:
    """One row per attempt, numbered from 1."""
    return [
        [i, a.started_s, a.agent_id, a.purpose, a.phase, a.outcome, a.http_status, a.elapsed_s]
        for i, a in enumerate(_typed(AttemptReport, attempts), 1)
    ]


def attempt_timeline(attempts: Rows) -> str:
    """Every serving attempt in order, as aligned text."""
    if not attempts:
        return "No serving attempts."
    return align(ATTEMPT_HEADER, attempt_rows(attempts))


# --------------------------------------------------------------------------------------------
# Markdown (the sticky PR comment and the step summary)

COMMENT_LIMIT = 65_536
DECISION_TITLES = {
    "request_changes": "🔴 Changes requested",
    "comment": "💬 Comments",
    "approve": "✅ No findings",
    "unavailable": "⚠️ Review unavailable",
}
#: Bidirectional controls (Trojan Source: a path that displays as another) shown as U+FFFD.
_BIDI = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)], "\ufffd")
#: Escaped with a backslash: emphasis, code, links, headings, tables, strike-through, and ``$``
#: (GitHub renders ``$...$`` and ``$$`` blocks as math, which could swallow what follows).
_MD_SPECIAL = str.maketrans(
    {c: f"\\{c}" for c in "\\`*_{}[]()#!|~$"}
    | {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\r": " ", "\n": " "}
    | _BIDI
)


#: An issue or pull-request reference (``#12``, ``org/repo#12``) once ``#`` is escaped.
_ISSUE_REF = re.compile(r"\\#(?=\w)")
#: GitHub's other issue-reference form, ``GH-12``.
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)


def md_text(value: Any, limit: int = 1000) -> str:
    """Hostile text made inert for Markdown: escaped, one line, length-capped.

    At most ``limit`` characters of ``value`` are kept (``…`` marks a cut); escaping can make
    the result up to 5 times longer (``&`` -> ``&amp;``). ``<`` is escaped, so no HTML, no
    hidden comment and no marker can start; every ``@`` is followed by U+200B, so no
    ``@user`` or ``@org/team`` mention can ping anyone; autolinks (``://``, ``www.``) and
    issue references (``#12``, ``GH-12``) are broken the same way, so hostile text makes no
    live link and no cross-reference event; bidirectional controls become U+FFFD (no text
    displayed reversed, as in "Trojan Source").
    """
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.translate(_MD_SPECIAL).replace("@", "@\u200b")
    text = _GH_REF.sub("\\1\u200b-", _ISSUE_REF.sub("\\#\u200b", text))
    return text.replace("://", ":\u200b//").replace("www.", "www\u200b.")


def md_code(value: Any, limit: int = 200) -> str:
    """Hostile text shown as inline code: one line, length-capped, and a fence longer than any
    backtick run inside, so it cannot be closed early. GitHub links no mention inside code;
    ``<!--`` gets a U+200B after ``<`` so the raw body never holds a hidden comment (a forged
    sticky marker) outside the lines we write; bidirectional controls become U+FFFD."""
    text = str(value).replace("\r", " ").replace("\n", " ").translate(_BIDI)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("<!--", "<\u200b!--")
    longest = 0
    run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_cell(value: Any) -> str:
    """A table cell: numbers as they are, text escaped."""
    if value is None or isinstance(value, int | float):
        return _cell(value)
    return md_text(value, 200)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; cells must already be Markdown-safe."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _finding_link(f: ReportFinding, ctx: Mapping[str, Any]) -> str:
    """``path:line`` as a link to the head (RIGHT) or base (LEFT) commit, when the PR is known."""
    label = md_code(f"{f.path}:{f.line}{' (old)' if f.side == 'LEFT' else ''}")
    sha = ctx.get("base_sha") if f.side == "LEFT" else ctx.get("head_sha")
    if not (ctx.get("server_url") and ctx.get("repo") and sha):
        return label
    from urllib.parse import quote

    url = f"{ctx['server_url']}/{ctx['repo']}/blob/{sha}/{quote(str(f.path))}#L{int(f.line)}"
    return f"[{label}]({url})"


def _findings_md(
    findings: Sequence[ReportFinding], ctx: Mapping[str, Any], *, suggestions: bool = True
) -> str:
    lines = []
    for f in findings:
        quote = f" — {md_code(f.quote, 120)}" if f.quote else ""
        lines.append(
            f"- **{md_text(f.severity, 10)}** {_finding_link(f, ctx)}: {md_text(f.message)}{quote}"
        )
        if suggestions and f.suggestion is not None and f.replaces:
            lines.append("\n" + suggestion_diff(f.replaces, f.suggestion, indent="  "))
    return "\n".join(lines)


def suggestion_block(suggestion: str) -> str:
    """A GitHub ``suggestion`` block (committable from the review comment). The text goes in
    as it is: it was checked (:func:`relay_review.review.verdict.suggestion_problem`: no control
    or bidi characters, no fence line) and any change would change the code committed; the
    fence is longer than any backtick run inside, so it cannot end the block early."""
    lines = suggestion_lines(suggestion) if suggestion else []
    fence = fence_for(lines)
    return "\n".join([f"{fence}suggestion", *lines, fence])


def line_comment_body(finding: Mapping[str, Any]) -> str:
    """An inline review comment for a verified finding: severity and message (escaped), and
    its checked suggestion as a ``suggestion`` block when it carries one."""
    body = (
        f"**relay-review · {md_text(finding.get('severity', ''), 10)}**: "
        f"{md_text(finding.get('message', ''), 3000)}"
    )
    suggestion = finding.get("suggestion")
    if isinstance(suggestion, str) and finding.get("replaces"):
        body += "\n\n" + suggestion_block(suggestion)
    return body


#: Lines of a suggestion shown in the sticky comment's diff block (the rest is cut, and said).
SUGGESTION_SHOW_LINES = 60


def _code_line(text: str) -> str:
    """One line inside a code block: no hidden-comment opener, no bidi control, no CR."""
    return text.replace("\r", "").translate(_BIDI).replace("<!--", "<\u200b!--")


def fence_for(lines: Sequence[str]) -> str:
    """A backtick fence longer than any backtick run in ``lines`` (at least three), so the
    content can never close it."""
    longest = max((len(run) for ln in lines for run in re.findall(r"`+", ln)), default=0)
    return "`" * max(3, longest + 1)


def suggestion_diff(replaces: Sequence[str], suggestion: str, *, indent: str = "") -> str:
    """A suggestion as a fenced ``diff`` block: the current lines as ``-``, the replacement as
    ``+``. Model text is made inert (:func:`_code_line`) and fenced longer than any backtick run
    inside, so it cannot end the block early."""
    body = [f"- {_code_line(t)}" for t in replaces]
    new = suggestion_lines(suggestion) if suggestion else []
    body += [f"+ {_code_line(t)}" for t in new]
    if len(body) > SUGGESTION_SHOW_LINES:
        body = [*body[:SUGGESTION_SHOW_LINES], f"  … {len(body) - SUGGESTION_SHOW_LINES} more"]
    fence = fence_for(body)
    out = [f"{fence}diff", *body, fence]
    return "\n".join(indent + ln for ln in out)


def _summary_md(summary: str) -> str:
    """The model's summary: one escaped paragraph per non-empty line."""
    return "\n\n".join(md_text(line, 4000) for line in summary.splitlines() if line.strip())


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


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
        summary = f"No verdict: {md_text(why)}. Every route's fate is in the table below."
        return ("head", f"{head}\n\n{summary}", f"{head}\n\n{summary}")
    raw = v.summary
    summary = _summary_md(raw)
    # the short form is cut before escaping, so never inside an escape
    short = _summary_md(raw if len(raw) <= 2000 else raw[:1999] + "…")
    if v.partial:
        note = _partial_md(v.partial, [f for f in report.files if f.left_out])
        summary, short = note + summary, note + short
    return ("head", f"{head}\n\n{summary}", f"{head}\n\n{short}")


def _findings_section(report: RunReport) -> Section | None:
    findings = report.verdict.findings
    ctx = report.context or {}
    if not findings:
        if report.decision == Decision.UNAVAILABLE:
            return None
        return ("findings", "No verified findings.", "No verified findings.")
    title = f"### Findings ({len(findings)} verified)"
    full = f"{title}\n\n{_findings_md(findings, ctx)}"
    if len(findings) <= SHORT_FINDINGS:
        if any(f.suggestion is not None for f in findings):
            brief = f"{title}\n\n{_findings_md(findings, ctx, suggestions=False)}"
            return ("findings", full, brief + "\n\n_Suggestions are in the JSON report._")
        return ("findings", full, full)
    short = (
        f"{title}\n\n{_findings_md(findings[:SHORT_FINDINGS], ctx, suggestions=False)}\n\n"
        f"_{len(findings) - SHORT_FINDINGS} more findings are in the JSON report._"
    )
    return ("findings", full, short)


def _unverified_line(u: UnverifiedFinding) -> str:
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
        _details(title, body),
        f"_{len(unverified)} unverified findings omitted._",
    )


#: Longest file note shown in the walkthrough (characters).
NOTE_SHOW_CHARS = 300


def _walkthrough_section(report: RunReport) -> Section | None:
    """The model's note per reviewed file (issue 22); none given: the summary stands alone."""
    noted = [f for f in report.files if f.note]
    if not noted:
        return None
    body = "\n".join(f"- {md_code(f.path)}: {md_text(f.note, NOTE_SHOW_CHARS)}" for f in noted)
    title = f"Walkthrough ({len(noted)} of {len(report.files)} files)"
    return ("walkthrough", _details(title, body), f"_{len(noted)} file notes omitted._")


def _files_section(report: RunReport) -> Section | None:
    skipped: list[FileReport] = [f for f in report.files if f.status != "reviewed"]
    if not skipped:
        return None
    body = "\n".join(f"- {md_code(f.path)}: {md_text(f.reason or f.status, 200)}" for f in skipped)
    title = f"Files not reviewed ({len(skipped)} of {len(report.files)})"
    return ("files", _details(title, body), f"_{len(skipped)} files were not reviewed._")


def _reused_section(report: RunReport) -> Section | None:
    """Files an earlier run reviewed, unchanged since: their findings were reused unasked."""
    reused = [f for f in report.files if f.reused_from is not None]
    if not reused:
        return None

    def since(f: FileReport) -> str:
        return f"reviewed at {md_code(f.reused_from)}" if f.reused_from else "reviewed earlier"

    body = "\n".join(f"- {md_code(f.path)}: {since(f)}, unchanged since" for f in reused)
    title = f"Files reused from an earlier run ({len(reused)} of {len(report.files)})"
    return ("reused", _details(title, body), f"_{len(reused)} files reused from an earlier run._")


def _readiness_section(report: RunReport) -> Section:
    """Every catalog route's preflight result and fault, and which routes served."""
    chunk_servers = [c.served_by for c in report.chunks if c.served_by and not c.reused]
    servers = chunk_servers or ([report.served_by] if report.served_by else [])
    rows = [
        [_md_cell(c) for c in row]
        for row in readiness_rows(
            report.catalog.selected, report.readiness, servers, report.attempts
        )
    ]
    names = sorted({s.agent_id for s in servers})
    served_line = (
        "Served by " + ", ".join(md_code(n) for n in names) + "." if names else "No route served."
    )
    title = "### Routes: selection and readiness"
    table = md_table(READINESS_HEADER, rows) if rows else "No routes were selected."
    full = f"{title}\n\n{table}\n\n{served_line}"
    keep = [r for r in rows if r[-1]] + [r for r in rows if not r[-1]][:SHORT_ROUTES]
    if len(keep) == len(rows):
        return ("readiness", full, full)
    short = (
        f"{title}\n\n{md_table(READINESS_HEADER, keep)}\n\n"
        f"{served_line} _{len(rows) - len(keep)} rows omitted._"
    )
    return ("readiness", full, short)


def _attempts_section(report: RunReport) -> Section | None:
    attempts = report.attempts
    if not attempts:
        return None
    rows = [[_md_cell(c) for c in row] for row in attempt_rows(attempts)]
    full = _details(f"Attempt timeline ({len(attempts)})", md_table(ATTEMPT_HEADER, rows))
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
        foot.append(
            f"memory ({m.store}): {remembered} routes remembered, {m.reused_chunks} chunks "
            f"reused, {m.requests_avoided} requests saved"
        )
    foot.append("decision computed from verified findings, never taken from the model")
    text = "<sub>" + " · ".join(foot) + "</sub>"
    return ("footer", text, text)


def comment_sections(report: RunReport | Mapping[str, Any]) -> list[Section]:
    """(name, full Markdown, shortened Markdown) for each part of the comment, in display order."""
    report = RunReport.from_json(report)
    parts = (
        _head_section(report),
        _findings_section(report),
        _walkthrough_section(report),
        _unverified_section(report),
        _files_section(report),
        _reused_section(report),
        _readiness_section(report),
        _attempts_section(report),
        _footer_section(report),
    )
    return [p for p in parts if p is not None]


#: Which parts give way first when the comment is too long.
TRUNCATION_ORDER = (
    "walkthrough",
    "attempts",
    "reused",
    "unverified",
    "files",
    "readiness",
    "findings",
    "head",
)


def comment_markdown(
    report: RunReport | Mapping[str, Any], *, marker: str = "", limit: int = COMMENT_LIMIT
) -> str:
    """The sticky comment body: fits ``limit`` characters, shortening the least important first."""
    sections = comment_sections(report)
    chosen = {name: full for name, full, _ in sections}
    shortened: list[str] = []

    def body() -> str:
        parts = [chosen[name] for name, _, _ in sections]
        if shortened:
            parts.insert(
                -1,
                f"_Shortened to fit GitHub's size limit ({limit:,} characters here): "
                f"{', '.join(shortened)}. "
                "The full report is in the workflow's JSON report._",
            )
        return (marker + "\n" if marker else "") + "\n\n".join(parts) + "\n"

    text = body()
    shorts = {name: short for name, _, short in sections}
    for name in TRUNCATION_ORDER:
        if len(text) <= limit:
            break
        if name in chosen and chosen[name] != shorts[name]:
            chosen[name] = shorts[name]
            shortened.append(name)
            text = body()
    if len(text) > limit:
        text = _hard_cut(text, limit, marker)
    return text


_CUT_NOTE = "\n\n_[cut at the size limit]_\n"
_CLOSE_DETAILS = "\n\n</details>"


_FENCE_OPEN = re.compile(r"^( *)(`{3,})diff$")


def _open_fence(lines: Sequence[str]) -> str:
    """The closing line of a suggestion block (:func:`suggestion_diff`) left open, or ``""``.
    Its content lines start with ``-``, ``+`` or a space after the indent, so none closes it."""
    closing = ""
    for ln in lines:
        if closing:
            if ln == closing:
                closing = ""
        elif m := _FENCE_OPEN.match(ln):
            closing = m.group(1) + m.group(2)
    return closing


def _hard_cut(text: str, limit: int, marker: str) -> str:
    """``text`` cut to ``limit`` at a line end (hostile text is one line per field, so no code
    span, escape or table row is split), with every ``<details>`` it opened closed."""
    room = limit - len(_CUT_NOTE)
    while True:
        kept = text[: max(room, 0)]
        kept = kept[: kept.rfind("\n") + 1] if "\n" in kept else ""
        if marker and not kept.startswith(marker):
            kept = marker + "\n"
        lines = kept.split("\n")
        # ours only: _details() starts a line with <details> and ends with a </details> line
        unclosed = sum(ln.startswith("<details>") for ln in lines) - lines.count("</details>")
        fence = _open_fence(lines)
        cut = kept.rstrip("\n") + (f"\n{fence}" if fence else "")
        cut += _CLOSE_DETAILS * unclosed + _CUT_NOTE
        if len(cut) <= limit or room <= 0:
            return cut[:limit]
        room -= max(len(cut) - limit, 1)
