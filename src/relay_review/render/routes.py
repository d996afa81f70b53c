"""The routes' story as rows: the catalog's selection, the selection and readiness table (what
each route's probe found, which failure ended it, which served) and the attempt timeline, as
aligned text; the comment lays the same rows out in Markdown. Also who served a run, or that
no model was needed (every file reused).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from relay_review.records import Attempt, Catalog, Probe, RunReport, SelectedRoute, ServedBy
from relay_review.render.terminal import (
    MAX_CELL_LINES,
    TEXT_WIDTH,
    align,
    layout,
    plain,
    plural,
    render_row,
)

#: The route that served, or for a review in several chunks every route that served one.
Servers = ServedBy | Sequence[ServedBy] | None


def served_ids(served_by: Servers) -> set[str]:
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
    served = served_ids(served_by)
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
    widths, cells = layout(header, body, width=width, flex={header.index("model"): 24})
    lines = render_row(cells[0], widths)
    for row, full in zip(cells[1:], rows, strict=True):
        lines += render_row(row, widths)
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


def servers_of(report: RunReport) -> list[ServedBy]:
    chunk_servers = [c.served_by for c in report.chunks if c.served_by and not c.reused]
    return chunk_servers or ([report.served_by] if report.served_by else [])


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
