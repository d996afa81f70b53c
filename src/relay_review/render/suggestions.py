"""Line comments and code suggestions: a verified finding's inline review comment with its
committable ``suggestion`` block, and the ``diff`` block the sticky comment shows it as. Model
text inside a block is made inert and fenced longer than any backtick run it holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from relay_review._text import show_invisible
from relay_review.records import Finding
from relay_review.render.markdown import md_text
from relay_review.review.suggestions import suggestion_lines


def suggestion_block(suggestion: str) -> str:
    """A GitHub ``suggestion`` block (committable from the review comment). The text goes in
    as it is: it was checked (:func:`relay_review.review.suggestions.suggestion_problem`: no
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
