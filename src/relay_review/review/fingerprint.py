"""A verified finding's identity across pushes: its fingerprint, and whether its cited lines
are still in the diff.

The fingerprint hashes the path, the cited lines' text (whitespace runs collapsed, ends
trimmed) and the kind of problem (the finding's severity: findings carry no other category).
The line *number* is left out on purpose: a push that adds lines above a finding moves it, and
it must stay the same finding. Changing the cited text makes it a different finding. Pure: no
I/O, no clock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from relay_review.review.diff import DiffIndex, Side

#: The fingerprint's version prefix (a new recipe gets a new prefix, never a silent change).
PREFIX = "f1"
#: Hex digits kept of each SHA-256 (80 bits: no collision among a pull request's findings).
DIGITS = 20
#: Most cited lines one finding may span (a suggestion's range is capped lower already).
MAX_CITED_LINES = 200

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """A line's text with every run of whitespace made one space and the ends trimmed, so
    re-indenting or reflowing spaces keeps the finding's identity."""
    return _SPACE.sub(" ", text).strip()


def content_hash(lines: Sequence[str]) -> str:
    """The hash of the cited lines' normalised text, with how many lines were cited
    (``<hex>:<n>``): what a later push compares to tell "unchanged" from "changed"."""
    joined = "\n".join(normalise(t) for t in lines)
    digest = hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:DIGITS]
    return f"{digest}:{len(lines)}"


def fingerprint(path: str, lines: Sequence[str], kind: str) -> str:
    """The stable identity of a finding on ``lines`` of ``path`` of the given ``kind``."""
    material = "\0".join((path, normalise(kind).lower(), content_hash(lines)))
    digest = hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:DIGITS]
    return f"{PREFIX}-{digest}"


def cited_lines(
    index: DiffIndex, path: str, line: int, end_line: int | None = None, side: Side = "RIGHT"
) -> list[str] | None:
    """The text of lines ``line`` .. ``end_line`` of ``path`` as the diff shows them, or
    ``None`` when any of them is not in the diff."""
    last = end_line if end_line is not None and end_line > line else line
    if last - line + 1 > MAX_CITED_LINES:
        return None
    out = []
    for n in range(line, last + 1):
        text = index.line(path, n, side)
        if text is None:
            return None
        out.append(text)
    return out


def finding_fingerprint(
    index: DiffIndex,
    path: str,
    line: int,
    kind: str,
    *,
    end_line: int | None = None,
    side: Side = "RIGHT",
) -> tuple[str, str] | None:
    """``(fingerprint, content hash)`` of a finding citing ``line`` .. ``end_line`` of
    ``path``, or ``None`` when its cited lines are not in ``index`` (an unverified finding)."""
    lines = cited_lines(index, path, line, end_line, side)
    if lines is None:
        return None
    return fingerprint(path, lines, kind), content_hash(lines)


def still_cited(index: DiffIndex, path: str, cited: str, side: Side = "RIGHT") -> int | None:
    """The first line (on ``side``) where ``cited`` (a :func:`content_hash`) is found again in
    ``path``'s diff: consecutive lines whose normalised text hashes the same, wherever they
    moved. ``None``: the cited lines changed or left the diff."""
    _, _, count = cited.partition(":")
    if not count.isdigit() or not 0 < int(count) <= MAX_CITED_LINES:
        return None
    n = int(count)
    texts = dict(index.texts(path, side))
    for start in sorted(texts):
        if not all(start + i in texts for i in range(n)):
            continue
        if content_hash([texts[start + i] for i in range(n)]) == cited:
            return start
    return None
