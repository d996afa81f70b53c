"""Citation checks: a finding is *verified* only if it cites a shown changed line and quotes it.

The location must be a commentable line of the diff (see :mod:`.diff`) and the quote must
identify that line (the whole line, or a long enough excerpt no other changed line holds), so a
model cannot attach a finding to code it was not shown. Reasons say what the line reads and which
lines are near, for the repair round.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from relay_review.records.finding import Finding
from relay_review.redact import REPLACEMENT
from relay_review.review.diff import DiffIndex, Side
from relay_review.review.rejection import numbers, show

#: A diff marker a model may copy before its quote (``+``, ``-``, optionally after ``R12``/``L7``).
_QUOTE_PREFIX = re.compile(r"^(?:[RL]\d+)?[+-]")


def squash(text: str) -> str:
    """``text`` with all whitespace removed (the basis of whitespace-insensitive quote matching)."""
    return "".join(text.split())


#: A quote shorter than the whole line is accepted as an excerpt only when the cited line holds more
#: than this many non-space characters, and the excerpt holds at least this many (see
#: :func:`quote_matches`).
MIN_EXCERPT_CHARS = 40
_ELLIPSIS = re.compile(r"…|\.\.\.")


def _in_order(fragments: Sequence[str], text: str) -> bool:
    pos = 0
    for fragment in fragments:
        found = text.find(fragment, pos)
        if found == -1:
            return False
        pos = found + len(fragment)
    return True


def quote_matches(quote: str, line_text: str, others: Iterable[str] = ()) -> bool:
    """Whether ``quote`` identifies the line ``line_text``. An empty quote never matches.

    The rule (whitespace is ignored throughout; a leading diff marker copied by the model,
    ``+``/``-`` optionally after ``R12``/``L7``, is tolerated):

    1. the whole line: the quote is the line's text; or
    2. an excerpt, for a line of more than ``MIN_EXCERPT_CHARS`` non-space characters: the quote
       is one verbatim piece of the line, or several pieces joined by ``…`` (or ``...``) that
       occur in the line in that order, holding at least ``MIN_EXCERPT_CHARS`` characters in
       all, and it matches none of ``others`` (the other changed lines of the file on the same
       side), so an excerpt never points at a line it does not single out.

    Rule 2 exists because replies are capped (``review.max_output_tokens``) while a changed line
    may be up to ``review.max_line_chars`` long: a model must be able to cite any shown line.
    """
    q = squash(quote)
    if not q:
        return False
    t = squash(line_text)
    stripped = _QUOTE_PREFIX.sub("", q, count=1)
    if t in (q, stripped) and t:
        return True
    if len(t) <= MIN_EXCERPT_CHARS:
        return False
    rest: list[str] | None = None  # the other lines, squashed only when an excerpt needs them
    for candidate in dict.fromkeys((q, stripped)):
        pieces = [p for p in _ELLIPSIS.split(candidate) if p]
        if sum(len(p) for p in pieces) < MIN_EXCERPT_CHARS or not _in_order(pieces, t):
            continue
        rest = [squash(other) for other in others] if rest is None else rest
        if not any(_in_order(pieces, other) for other in rest):
            return True
    return False


def citation_problem(finding: Finding, index: DiffIndex) -> str | None:
    """Why ``finding`` is not verified against ``index`` (``None`` when it is)."""
    path, line, side = finding.path, finding.line, finding.side
    shown = show(path, 200)
    f = index.file(path)
    if f is None:
        reason = f"{shown} is not a file in this diff"
        renamed = index.renamed_to(path)
        if renamed is not None:
            return f"{reason}; it was renamed or copied to {show(renamed, 200)}: cite that path"
        close = difflib.get_close_matches(path, index.paths, n=1, cutoff=0.75)
        return f"{reason}; did you mean {show(close[0], 200)}?" if close else reason
    if f.skip_reason:
        return f"{shown} has no reviewable lines ({f.skip_reason})"
    text = index.line(path, line, side)
    if text is None:
        other: Side = "LEFT" if side == "RIGHT" else "RIGHT"
        near = index.nearest(path, line, side)
        if not near:
            kind = "added" if side == "RIGHT" else "removed"
            reason = f"{shown} has no {side} ({kind}) lines"
            other_near = index.nearest(path, line, other)
            if other_near:
                reason += f"; its {other} lines nearest to {line}: {numbers(other_near)}"
            return reason
        reason = (
            f"line {line} of {shown} ({side}) is not a changed line;"
            f" nearest changed lines: {numbers(near)}"
        )
        if index.line(path, line, other) is not None:
            reason += f"; line {line} ({other}) is one: did you mean side {other}?"
        return reason
    if not squash(text):
        return (
            f"line {line} of {shown} ({side}) is blank and cannot be cited; cite a non-blank line"
        )
    if not squash(finding.quote):
        return f"quote is empty; line {line} of {shown} ({side}) reads `{show(text)}`"
    others = (t for n, t in index.texts(path, side) if n != line)
    if not quote_matches(finding.quote, text, others):
        return (
            f"quote does not match line {line} of {shown} ({side}): the line reads `{show(text)}`"
            + (
                f" (quote the whole line, or at least {MIN_EXCERPT_CHARS} characters of it that"
                " no other changed line holds)"
                if len(squash(text)) > MIN_EXCERPT_CHARS
                else ""
            )
        )
    if not finding.message.strip():
        return "message is empty"
    return None


def excerpt_of(quote: str, line_text: str) -> bool:
    """Whether ``quote`` is one contiguous piece of ``line_text``, of any length (whitespace
    ignored, a copied leading diff marker tolerated). An empty quote is no excerpt. A quote
    holding the redaction mark (a secret the reply quoted, scrubbed before parsing) is an
    excerpt when its other pieces occur in the line in order: a finding about a committed key
    must block approve like any other.

    Too weak to *verify* a finding on a short line (one character is in most lines), but
    enough, at the exact location a finding cites, to say it is about that shown line."""
    q = squash(quote)
    t = squash(line_text)
    if not q or not t:
        return False
    if REPLACEMENT in q:  # the reply quoted a secret of the run, scrubbed before parsing
        pieces = [p for p in _QUOTE_PREFIX.sub("", q, count=1).split(REPLACEMENT) if p]
        return not pieces or _in_order(pieces, t)
    return q in t or _QUOTE_PREFIX.sub("", q, count=1) in t


def points_at_shown_code(finding: Finding, index: DiffIndex) -> bool:
    """Whether a rejected finding is still about changed code the model was shown: its citation
    holds (it was dropped only by the per-reply cap); its path, line and side name a shown
    changed line and its quote is an excerpt of that line (:func:`excerpt_of`: any length, as
    the code part of ``    return a / b  # divisor checked by caller``); or its quote identifies
    another changed line of ``index`` (only its path, side or number is off). A review that
    drops such a finding never approves and is never cached as clean; an invented quote (a
    hallucination) or an empty one does not count."""
    if citation_problem(finding, index) is None:
        return True
    if not squash(finding.quote):
        return False
    cited = index.line(finding.path, finding.line, finding.side)
    if cited is not None and excerpt_of(finding.quote, cited):
        return True
    return any(quote_matches(finding.quote, text) for *_, text in index.locations())


def covers(repaired: Finding, rejected: Finding) -> bool:
    """Whether the repair round's ``repaired`` finding restates the first round's ``rejected``
    one: the same file, and the same line or a quote that identifies the repaired finding's
    quoted line (the model fixed the number). A first-round finding about shown code that no
    repaired finding covers was dropped by the repair reply, and still keeps approve away."""
    if repaired.path != rejected.path:
        return False
    return repaired.line == rejected.line or quote_matches(rejected.quote, repaired.quote)
