"""Renderings of a run for people: the catalog, readiness and attempt tables as text, and the
sticky PR comment (also the step summary) as Markdown built on the same rows.

The text side is plain text for terminals and CI logs: no Markdown escapes, no control
characters from hostile text (an ANSI escape in a model's message is shown as U+FFFD), and
tables at most :data:`TEXT_WIDTH` columns wide (long cells wrap inside their column, the
readiness table's ``found`` goes on a line of its own).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from relay_review._text import scrub_text, show_invisible
from relay_review.records import (
    Attempt,
    Catalog,
    Decision,
    FileReport,
    Finding,
    Probe,
    QuotaReport,
    RunContext,
    RunReport,
    SelectedRoute,
    ServedBy,
)
from relay_review.review.verdict import suggestion_lines

#: Where the findings link to: the run's context and the pull request's number.
Where = tuple[RunContext | None, int | None]

#: The route that served, or for a review in several chunks every route that served one.
Servers = ServedBy | Sequence[ServedBy] | None


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


#: Widest line of a text table or text report (terminals, CI logs).
TEXT_WIDTH = 100
#: Columns are separated by this.
_GAP = "  "


def align(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int | None = TEXT_WIDTH,
    flex: Mapping[int, int] | None = None,
) -> str:
    """Left-aligned text columns separated by two spaces.

    When the table is wider than ``width``, the columns in ``flex`` (index -> narrowest width,
    shrunk in that order) get narrower and their long cells wrap inside the column, preferring
    a break after ``/``, ``-`` or a space; a cell too long even then is cut with ``…``.
    """
    return "\n".join(_align_lines(header, rows, width=width, flex=flex or {}))


def _align_lines(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int | None,
    flex: Mapping[int, int],
) -> list[str]:
    widths, cells = _layout(header, rows, width=width, flex=flex)
    return [line for row in cells for line in _render_row(row, widths)]


def _layout(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int | None,
    flex: Mapping[int, int],
) -> tuple[list[int], list[list[str]]]:
    """Column widths fitted to ``width`` (see :func:`align`) and the cells as text, header first."""
    cells = [[plain(c, 400) for c in header]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    if width is not None:
        over = sum(widths) + len(_GAP) * (len(widths) - 1) - width
        for column, narrowest in flex.items():
            if over <= 0:
                break
            floor = max(narrowest, len(cells[0][column]))
            cut = min(over, max(widths[column] - floor, 0))
            widths[column] -= cut
            over -= cut
    return widths, cells


def _render_row(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    """One table row as one or more lines (its long cells wrapped inside their columns)."""
    wrapped = [wrap_cell(c, w) for c, w in zip(row, widths, strict=True)]
    return [
        _GAP.join(
            (w[k] if k < len(w) else "").ljust(n) for w, n in zip(wrapped, widths, strict=True)
        ).rstrip()
        for k in range(max(len(w) for w in wrapped))
    ]


#: At most this many lines of one wrapped cell; the last is cut with ``…``.
MAX_CELL_LINES = 3


def wrap_cell(text: str, width: int, max_lines: int = MAX_CELL_LINES) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken after a ``/`` (else a space, else
    ``-`` or ``,``) in the last two thirds of a line, else hard; beyond ``max_lines``, cut with
    ``…``."""
    if width <= 0 or len(text) <= width:
        return [text]
    lines: list[str] = []
    rest = text
    while rest and len(lines) < max_lines:
        if len(rest) <= width:
            lines.append(rest)
            rest = ""
            break
        head = rest[:width]
        cut = width
        for breaks in ("/", " ", "-,"):  # a path segment whole first, then a word
            at = max(head.rfind(ch) for ch in breaks)
            if at >= (1 if breaks == "/" else width // 3):
                cut = at + 1
                break
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        last = lines[-1]
        lines[-1] = (last if len(last) < width else last[: width - 1]) + "…"
    return lines


#: C0 and C1 control characters (ESC starts terminal escape sequences), tab and newline aside.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(value: Any, limit: int = 1000) -> str:
    """Untrusted text for a terminal: one line (whitespace runs become one space), control and
    bidirectional characters shown as U+FFFD, at most ``limit`` characters (cut with ``…``)."""
    text = " ".join(_CONTROLS.sub("\ufffd", scrub_text(str(value))).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return plain(value, 400)


def _served_ids(served_by: Servers) -> set[str]:
    """Agent ids of one route or a list of routes."""
    if not served_by:
        return set()
    if isinstance(served_by, ServedBy):
        served_by = [served_by]
    return {r.agent_id for r in served_by if r}


def catalog_table(catalog: Catalog) -> str:
    """The catalog's selection and counts as aligned text for people."""
    if not catalog.selected:
        lines = ["No routes selected."]
    else:
        rows = [
            (e.priority, e.agent_id, e.account, e.cost.value, "yes" if e.zdr else "no")
            for e in catalog.selected
        ]
        lines = [align(("priority", "agent_id", "account", "cost", "zdr"), rows, flex={1: 24})]
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
    catalog: Sequence[SelectedRoute],
    readiness: Sequence[Probe],
    served_by: Servers,
    attempts: Sequence[Attempt] = (),
) -> list[list[Any]]:
    """One row per catalog route: priority, route, tier, preflight result, what was found,
    whether it served.

    ``served_by`` is one route or, for a review in several chunks, every route that served one.
    ``found`` names the fault: the route's last failed serving attempt (from ``attempts``), else
    its probe's detail when the probe did not find it ready.
    """
    by_id = {r.agent_id: r for r in readiness}
    failures = {a.agent_id: a for a in attempts if a.outcome != "ok"}
    served = _served_ids(served_by)
    rows = []
    for c in catalog:
        r = by_id.get(c.agent_id) or Probe(agent_id=c.agent_id)
        rows.append(
            [
                c.priority,
                c.account,
                c.model,
                f"{c.cost}{'+zdr' if c.zdr else ''}" + _uptime(c.uptime),
                r.column,
                r.http_status,
                r.first_byte_s,
                r.latency_s,
                _found(r, failures.get(c.agent_id)),
                "SERVED" if c.agent_id in served else "",
            ]
        )
    return rows


def _uptime(value: Any) -> str:
    """``, uptime 62 %``: a route's published uptime (the prior), for the tier column."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    return f", uptime {round(min(100.0, max(0.0, float(value))), 1):g} %"


def quota_line(quota: QuotaReport | None, code: Any = plain) -> str | None:
    """What the review cost: ``3 requests; 3 on `openrouter` of its 50 free a day (free
    tier; ...)``, from the report's ``quota`` (requests let out per account, probes included,
    and what OpenRouter's key endpoint said). None when the run has no such record. Every
    number is the report's (input): only counts >= 0 are shown."""
    if quota is None:
        return None
    sent = {k: v for k, v in quota.requests_by_account.items() if v >= 0}
    parts = [plural(sum(sent.values()), "request")]
    for name, info in sorted(quota.keys.items()):
        n = sent.get(name, 0)
        per_day = info.free_per_day
        if per_day is not None and per_day > 0:
            parts.append(
                f"{n} on {code(name, 80)} of its {per_day} free a day (free tier; OpenRouter "
                "does not report how many are left today)"
            )
        elif info.is_free_tier is False:
            parts.append(f"{n} on {code(name, 80)} (not on the free tier)")
    return "; ".join(parts)


#: Characters of the ``found`` column (a probe's or an attempt's detail, cut with ``…``).
FOUND_CHARS = 140


#: A timeout's detail when nothing at all came back (:mod:`relay_review.providers.chat.timeouts`).
_NO_BYTE = ("no headers", "no body byte")


def _stall(detail: str, elapsed: float | None) -> str | None:
    """``stalled: no byte in 20 s`` for a timeout that got no byte back, else ``None``."""
    if elapsed is None or not any(w in detail for w in _NO_BYTE):
        return None
    n = float(elapsed)
    said = f"stalled: no byte in {n:.1f} s" if n < 10 else f"stalled: no byte in {n:.0f} s"
    return f"{said} ({detail})"  # the detail still names the phase and the bound that struck


def _found(probe: Probe, failure: Attempt | None) -> str:
    if failure is not None:
        stall = (
            _stall(failure.detail or "", failure.elapsed_s)
            if failure.outcome == "timeout"
            else None
        )
        text = "serving: " + (stall or failure.detail or str(failure.outcome))
    elif probe.status == "ready":
        text = "ready"
    elif probe.status == "timeout":
        text = _stall(probe.detail or "", probe.latency_s) or probe.detail or "timeout"
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


#: ``found`` texts the readiness table's text form leaves out (its preflight column says it).
_FOUND_SAID = frozenset({"ready", "not probed"})
#: Where a route's ``found`` line starts in the text table (under the account column).
_FOUND_INDENT = " " * 6


def readiness_table(
    catalog: Sequence[SelectedRoute],
    readiness: Sequence[Probe],
    served_by: Servers,
    attempts: Sequence[Attempt] = (),
    *,
    width: int = TEXT_WIDTH,
) -> str:
    """The selection and readiness table as aligned text at most ``width`` columns wide: one line
    per route (a long model id wraps inside its column), and below it, indented, what was found
    when that says more than the preflight column (``found: rate_limited retry after 30s ...``)."""
    if not catalog:
        return "No routes selected."
    rows = readiness_rows(catalog, readiness, served_by, attempts)
    at = READINESS_HEADER.index("found")
    header = [h for i, h in enumerate(READINESS_HEADER) if i != at]
    body = [[c for i, c in enumerate(r) if i != at] for r in rows]
    widths, cells = _layout(header, body, width=width, flex={header.index("model"): 24})
    lines = _render_row(cells[0], widths)
    for row, full in zip(cells[1:], rows, strict=True):
        lines += _render_row(row, widths)
        found = plain(full[at], 1000)
        if found not in _FOUND_SAID:
            lines += textwrap.wrap(
                "found: " + found,
                width,
                initial_indent=_FOUND_INDENT,
                subsequent_indent=_FOUND_INDENT + " " * len("found: "),
                max_lines=MAX_CELL_LINES,
                placeholder=" …",
            )
    return "\n".join(lines)


def attempt_rows(attempts: Sequence[Attempt]) -> list[list[Any]]:
    """One row per attempt, numbered from 1."""
    return [
        [i, a.started_s, a.agent_id, a.purpose, a.phase, a.outcome, a.http_status, a.elapsed_s]
        for i, a in enumerate(attempts, 1)
    ]


def attempt_timeline(attempts: Sequence[Attempt]) -> str:
    """Every serving attempt in order, as aligned text."""
    if not attempts:
        return "No serving attempts."
    return align(ATTEMPT_HEADER, attempt_rows(attempts), flex={ATTEMPT_HEADER.index("route"): 24})


# --------------------------------------------------------------------------------------------
# Markdown (the sticky PR comment and the step summary)

COMMENT_LIMIT = 65_536
DECISION_TITLES = {
    "request_changes": "🔴 Changes requested",
    "comment": "💬 Comments",
    "approve": "✅ No findings",
    "unavailable": "⚠️ Review unavailable",
}
#: Escaped with a backslash: emphasis, code, links, headings, tables, strike-through, and ``$``
#: (GitHub renders ``$...$`` and ``$$`` blocks as math, which could swallow what follows).
_MD_SPECIAL = str.maketrans(
    {c: f"\\{c}" for c in "\\`*_{}[]()#!|~$"}
    | {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\r": " ", "\n": " "}
)


#: An issue or pull-request reference (``#12``, ``org/repo#12``) once ``#`` is escaped.
_ISSUE_REF = re.compile(r"\\#(?=\w)")
#: GitHub's other issue-reference form, ``GH-12``.
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)


def md_text(value: Any, limit: int = 1000) -> str:
    """Hostile text made inert for Markdown: escaped, one line, length-capped.

    At most ``limit`` characters of ``value`` are kept (``…`` marks a cut); escaping can make
    the result longer (``&`` -> ``&amp;``, U+E0041 -> ``&lt;U+E0041&gt;``). ``<`` is escaped,
    so no HTML, no hidden comment and no marker can start; every ``@`` is followed by U+200B,
    so no ``@user`` or ``@org/team`` mention can ping anyone; autolinks (``://``, ``www.``) and
    issue references (``#12``, ``GH-12``) are broken the same way, so hostile text makes no
    live link and no cross-reference event; every invisible or format character (bidirectional
    controls, zero-width characters, tags, variation selectors, Hangul fillers:
    :func:`relay_review._text.invisible_class`) is shown as a visible ``<U+200E>`` escape (no
    text displayed reversed or hidden, as in "Trojan Source").
    """
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = show_invisible(text.replace("\r", " ").replace("\n", " "))
    text = text.translate(_MD_SPECIAL).replace("@", "@\u200b")
    text = _GH_REF.sub("\\1\u200b-", _ISSUE_REF.sub("\\#\u200b", text))
    return text.replace("://", ":\u200b//").replace("www.", "www\u200b.")


def md_code(value: Any, limit: int = 200) -> str:
    """Hostile text shown as inline code: one line, length-capped, and a fence longer than any
    backtick run inside, so it cannot be closed early. GitHub links no mention inside code;
    ``<!--`` gets a U+200B after ``<`` so the raw body never holds a hidden comment (a forged
    sticky marker) outside the lines we write; invisible and format characters are shown as
    visible ``<U+200E>`` escapes (:func:`relay_review._text.show_invisible`)."""
    text = str(value).replace("\r", " ").replace("\n", " ")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = show_invisible(text)
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


def _findings_md(findings: Sequence[Finding], ctx: Where, *, suggestions: bool = True) -> str:
    lines = []
    for f in findings:
        quote = f" — {md_code(f.quote, 120)}" if f.quote else ""
        lines.append(
            f"- **{md_text(f.severity, 10)}** {_finding_link(f, ctx)}{_state_md(f)}: "
            f"{md_text(f.message)}{quote}"
        )
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
    full = f"{head}\n\n" + _details(f"Findings of earlier pushes ({len(earlier)})", body)
    return ("lifecycle", full, head)


def suggestion_block(suggestion: str) -> str:
    """A GitHub ``suggestion`` block (committable from the review comment). The text goes in
    as it is: it was checked (:func:`relay_review.review.verdict.suggestion_problem`: no
    invisible or format character, no fence line) and any change would change the code
    committed; the fence is longer than any backtick run inside, so it cannot end the block
    early."""
    lines = suggestion_lines(suggestion) if suggestion else []
    fence = fence_for(lines)
    return "\n".join([f"{fence}suggestion", *lines, fence])


def line_comment_body(finding: Finding) -> str:
    """An inline review comment for a verified finding: severity and message (escaped), and
    its checked suggestion as a ``suggestion`` block when it carries one."""
    body = f"**relay-review · {md_text(finding.severity, 10)}**: {md_text(finding.message, 3000)}"
    if finding.suggestion is not None and finding.replaces:
        body += "\n\n" + suggestion_block(finding.suggestion)
    return body


#: Lines of a suggestion shown in the sticky comment's diff block (the rest is cut, and said).
SUGGESTION_SHOW_LINES = 60


def _code_line(text: str) -> str:
    """One line inside a code block: no hidden-comment opener, no CR, and every invisible or
    format character shown as a visible ``<U+200E>`` escape (the diff shows what it holds)."""
    return show_invisible(text.replace("\r", "")).replace("<!--", "<\u200b!--")


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


def _details(summary: str, body: str, *, opened: bool = False) -> str:
    tag = "<details open>" if opened else "<details>"
    return f"{tag}<summary>{summary}</summary>\n\n{body}\n\n</details>"


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
        parts.append(_details(title, _findings_md(low, ctx, suggestions=suggestions)))
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
        f"{title}\n\n{_findings_md(findings[:SHORT_FINDINGS], ctx, suggestions=False)}\n\n"
        f"_{len(findings) - SHORT_FINDINGS} more findings are in the JSON report._"
    )
    return ("findings", full, short)


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
        _details(title, body),
        f"_{len(unverified)} unverified findings omitted._",
    )


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
    if report.memory.not_reused:
        body += f"\n\nSent to a model again: {md_text(report.memory.not_reused, 600)}."
    title = f"Files reused from an earlier run ({len(reused)} of {len(report.files)})"
    return ("reused", _details(title, body), f"_{len(reused)} files reused from an earlier run._")


def _servers(report: RunReport) -> list[ServedBy]:
    chunk_servers = [c.served_by for c in report.chunks if c.served_by and not c.reused]
    return chunk_servers or ([report.served_by] if report.served_by else [])


def _fault_word(probe: Probe, failure: Attempt | None) -> str | None:
    """A route's fault in one word for the route summary (``stalled``, ``429``, ``no key``),
    or ``None`` when it did not fail (ready, or never tried)."""
    if failure is not None:
        if failure.outcome == "timeout":
            return "stalled"
        return str(failure.http_status) if failure.http_status else str(failure.outcome)
    status = probe.column
    if status in ("timeout", "abandoned"):
        return "stalled"
    if status in ("rejected", "deferred"):
        if probe.http_status:
            return str(probe.http_status)
        detail = probe.detail or ""
        return "no key" if detail.startswith("missing key") else detail.split(" ", 1)[0] or status
    return None


def route_summary(report: RunReport) -> str:
    """One line: who served, after how many probes, how many routes failed and how (``Served by
    `x` after 2 probes; 3 of 6 routes failed: stalled, 429, 404.``)."""
    servers = _servers(report)
    names = sorted({s.agent_id for s in servers})
    served = _served_ids(servers)
    failures = {a.agent_id: a for a in report.attempts if a.outcome != "ok"}
    by_id = {r.agent_id: r for r in report.readiness}
    words: dict[str, int] = {}
    routes = report.catalog.selected
    for c in routes:
        if c.agent_id in served:
            continue
        probe = by_id.get(c.agent_id) or Probe(agent_id=c.agent_id)
        word = _fault_word(probe, failures.get(c.agent_id))
        if word:
            words[word] = words.get(word, 0) + 1
    head = "Served by " + ", ".join(md_code(n) for n in names) if names else "No route served"
    if report.probes_sent:
        head += f" after {plural(report.probes_sent, 'probe')}"
    failed = sum(words.values())
    if not routes:
        return head + "; no route was selected."
    if not failed:
        return head + f"; {plural(len(routes), 'route')} selected, none failed."
    how = ", ".join(md_text(w, 40) + (f" ×{k}" if k > 1 else "") for w, k in words.items())
    return head + f"; {failed} of {plural(len(routes), 'route')} failed — {how}."


def _readiness_section(report: RunReport) -> Section:
    """The one-line route summary, with every catalog route's preflight result and fault
    folded under it (open when the review is unavailable or partial: then it is the story)."""
    servers = _servers(report)
    rows = [
        [_md_cell(c) for c in row]
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
    full = f"{line}\n\n{_details(title, table, opened=opened)}"
    keep = [r for r in rows if r[-1]] + [r for r in rows if not r[-1]][:SHORT_ROUTES]
    if len(keep) == len(rows):
        return ("readiness", full, full)
    shown = md_table(READINESS_HEADER, keep) + f"\n\n_{len(rows) - len(keep)} rows omitted._"
    return ("readiness", full, f"{line}\n\n{_details(title, shown, opened=opened)}")


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


def reused_heads(report: RunReport) -> list[str] | None:
    """The commits (12 hex digits, "" when unknown) every file of a run that sent no request
    was reused from; None when some chunk went to a model (or nothing was reviewed)."""
    if not report.chunks or not all(c.reused for c in report.chunks):
        return None
    return sorted({f.reused_from for f in report.files if f.reused_from is not None})


def no_model_line(heads: Sequence[str], code: Any = plain) -> str:
    """The routes section's line for a run whose every file was reused from memory."""
    known = [code(h) for h in heads if h]
    since = " from " + ", ".join(known) if known else " from an earlier run"
    return (
        f"No model was needed: every file was reused{since}, unchanged since"
        " (no request, no probe)."
    )


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


#: Which parts give way first when the comment is too long.
TRUNCATION_ORDER = (
    "walkthrough",
    "attempts",
    "reused",
    "unverified",
    "lifecycle",
    "files",
    "readiness",
    "findings",
    "head",
)


def comment_markdown(report: RunReport, *, marker: str = "", limit: int = COMMENT_LIMIT) -> str:
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
        unclosed = sum(
            ln.startswith(("<details>", "<details open>")) for ln in lines
        ) - lines.count("</details>")
        fence = _open_fence(lines)
        cut = kept.rstrip("\n") + (f"\n{fence}" if fence else "")
        cut += _CLOSE_DETAILS * unclosed + _CUT_NOTE
        if len(cut) <= limit or room <= 0:
            return cut[:limit]
        room -= max(len(cut) - limit, 1)


# --------------------------------------------------------------------------------------------
# Plain text (``--format text``: a review for a terminal or a CI log)

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
