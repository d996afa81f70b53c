"""Plain-text renderings of a run for people: the readiness table and the attempt timeline.

Markdown renderings for the PR comment build on the same rows (see :mod:`relay_review.report`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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


def readiness_rows(
    catalog: Sequence[Mapping[str, Any]],
    readiness: Sequence[Mapping[str, Any]],
    served_by: Mapping[str, Any] | None,
) -> list[list[Any]]:
    """One row per catalog route: priority, route, tier, preflight result, whether it served."""
    by_id = {r["agent_id"]: r for r in readiness}
    served = served_by["agent_id"] if served_by else None
    rows = []
    for c in catalog:
        r = by_id.get(c["agent_id"], {})
        rows.append(
            [
                c["priority"],
                c["account"],
                c["model"],
                f"{c['cost']}{'+zdr' if c['zdr'] else ''}",
                r.get("status", "unprobed"),
                r.get("http_status"),
                r.get("first_byte_s"),
                r.get("latency_s"),
                "SERVED" if c["agent_id"] == served else "",
            ]
        )
    return rows


READINESS_HEADER = (
    "prio",
    "account",
    "model",
    "tier",
    "preflight",
    "http",
    "first_byte_s",
    "latency_s",
    "served",
)
ATTEMPT_HEADER = ("#", "start_s", "route", "phase", "outcome", "http", "elapsed_s")


def readiness_table(
    catalog: Sequence[Mapping[str, Any]],
    readiness: Sequence[Mapping[str, Any]],
    served_by: Mapping[str, Any] | None,
) -> str:
    """The selection and readiness table as aligned text."""
    if not catalog:
        return "No routes selected."
    return align(READINESS_HEADER, readiness_rows(catalog, readiness, served_by))


def attempt_rows(attempts: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            i,
            a.get("started_s"),
            a["agent_id"],
            a["phase"],
            a["outcome"],
            a.get("http_status"),
            a["elapsed_s"],
        ]
        for i, a in enumerate(attempts, 1)
    ]


def attempt_timeline(attempts: Sequence[Mapping[str, Any]]) -> str:
    """Every serving attempt in order, as aligned text."""
    if not attempts:
        return "No serving attempts."
    return align(ATTEMPT_HEADER, attempt_rows(attempts))
