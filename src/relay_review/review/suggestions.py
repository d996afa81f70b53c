"""Suggestions: the replacement code a verified finding may carry, kept only if it applies.

A suggestion becomes a GitHub suggested change a maintainer can commit in one click, so it must
replace added lines the model was shown, be plain code (no invisible characters, fences or diff
markers) and change something; one that does not is dropped and the finding stays.
"""

from __future__ import annotations

import re

from relay_review._text import find_invisible
from relay_review.records.finding import Finding
from relay_review.review.diff import DiffIndex
from relay_review.review.rejection import numbers

#: A suggestion (replacement code) longer than this is dropped, never cut (cut code is broken).
MAX_SUGGESTION_CHARS = 8000
#: Most RIGHT lines one suggestion may replace (``line`` .. ``end_line``).
MAX_SUGGESTION_LINES = 50

_RENDERED_LINE = re.compile(r"^(?:[RLC] \d+ [+ -] |[+-] )")


def suggestion_lines(text: str) -> list[str]:
    """A suggestion's lines (``\r\n`` read as ``\n``; one final newline is not a line)."""
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n")


def suggestion_problem(finding: Finding, index: DiffIndex) -> str | None:
    """Why ``finding.suggestion`` cannot be applied to the lines it names (``None``: it can).

    It must replace RIGHT lines only, ``line`` .. ``end_line`` (at most
    ``MAX_SUGGESTION_LINES``), each one an added line shown in ``index``; be code to commit (no
    invisible or format character of :func:`relay_review._text.invisible_class`: controls,
    bidirectional controls, zero-width characters, tags, variation selectors, Hangul fillers,
    any ``Cf``; no Markdown fence, not the diff's rendered lines); at most
    ``MAX_SUGGESTION_CHARS``; and change something.
    """
    text = finding.suggestion
    if text is None:
        return None
    end = finding.line if finding.end_line is None else finding.end_line
    if finding.side != "RIGHT":
        return "a suggestion replaces RIGHT (added) lines only"
    if end < finding.line:
        return f"end_line {end} is before line {finding.line}"
    if end - finding.line + 1 > MAX_SUGGESTION_LINES:
        return f"a suggestion replaces at most {MAX_SUGGESTION_LINES} lines"
    missing = [
        n for n in range(finding.line, end + 1) if index.line(finding.path, n, "RIGHT") is None
    ]
    if missing:
        return f"lines {numbers(missing[:5])} are not added lines shown in the diff"
    if len(text) > MAX_SUGGESTION_CHARS:
        return f"longer than {MAX_SUGGESTION_CHARS} characters"
    if (hidden := find_invisible(text)) is not None:
        ch, name = hidden
        return f"holds an invisible or format character: U+{ord(ch):04X} ({name})"
    lines = suggestion_lines(text)
    if any(ln.lstrip().startswith("```") for ln in lines):
        return "holds a Markdown fence"
    if all(_RENDERED_LINE.match(ln) for ln in lines if ln.strip()) and text.strip():
        return "holds diff markers, not the code to commit"
    current = [index.line(finding.path, n, "RIGHT") or "" for n in range(finding.line, end + 1)]
    if lines == current:
        return "changes nothing"
    return None


def with_suggestion(finding: Finding, index: DiffIndex) -> Finding:
    """A verified finding with its suggestion checked: kept with the replaced lines' text
    (``replaces``), or dropped (the finding stays) when it does not apply."""
    if finding.suggestion is None or suggestion_problem(finding, index) is not None:
        if finding.suggestion is None and finding.end_line is None and not finding.replaces:
            return finding
        return finding.model_copy(update={"suggestion": None, "end_line": None, "replaces": ()})
    end = finding.line if finding.end_line is None else finding.end_line
    current = tuple(
        index.line(finding.path, n, "RIGHT") or "" for n in range(finding.line, end + 1)
    )
    return finding.model_copy(update={"end_line": end, "replaces": current})
