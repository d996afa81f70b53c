"""Plain text for terminals and CI logs: hostile text on one line without control characters
(:func:`plain`), counts with their nouns, and aligned columns at most :data:`TEXT_WIDTH` wide whose
long cells wrap inside their column. Shared by every text rendering and by the Markdown tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from relay_review._text import scrub_text


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
    widths, cells = layout(header, rows, width=width, flex=flex)
    return [line for row in cells for line in render_row(row, widths)]


def layout(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int | None,
    flex: Mapping[int, int],
) -> tuple[list[int], list[list[str]]]:
    """Column widths fitted to ``width`` (see :func:`align`) and the cells as text, header first."""
    cells = [[plain(c, 400) for c in header]] + [[text_cell(c) for c in row] for row in rows]
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


def render_row(row: Sequence[str], widths: Sequence[int]) -> list[str]:
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


def text_cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return plain(value, 400)
