"""Context around changes: whole hunks widened with enclosing lines of the head version.

Up to ``context_lines`` lines above and below each whole hunk (``C`` lines, never citable), ring
by ring across a chunk's hunks, only in the room the chunk has left once its changed lines are
packed: context is always dropped before any changed line is, so the packing is the same with
context as without. Neighbouring hunks share the lines between them half and half, so no line
is shown twice; a head file that does not match the diff lends no context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from relay_review.review.chunk_text import render_line
from relay_review.review.diff import DiffLine, FileDiff, Hunk
from relay_review.review.tokens import line_tokens

#: The most context lines shown above and below a hunk (``review.context_lines`` is capped here).
MAX_CONTEXT_LINES = 200
#: A context line longer than this is cut (with "…"): it is never cited, only read.
CONTEXT_LINE_CHARS = 300
#: The head version of files, by path: line ``n`` of the file is ``lines[n - 1]``.
HeadFiles = Mapping[str, Sequence[str]]


class PackedUnit(Protocol):
    """A hunk (or a slice of one) as packed into a chunk."""

    @property
    def hunk(self) -> Hunk: ...
    @property
    def whole(self) -> bool: ...


class PackedPiece(Protocol):
    """A file (or a piece of one) as packed into a chunk."""

    @property
    def file(self) -> FileDiff: ...
    @property
    def units(self) -> Sequence[PackedUnit]: ...


def _new_range(hunk: Hunk) -> tuple[int, int]:
    """(first, last) new-file line a hunk covers; last < first for a hunk that only removes."""
    first = hunk.new_start + (0 if hunk.new_len else 1)
    return first, first + hunk.new_len - 1


def _head_matches(f: FileDiff, lines: Sequence[str]) -> bool:
    """Whether ``lines`` is the head version this diff was made against (every shown new-file
    line reads the same), so a stale or wrong file never lends context."""
    for hunk in f.hunks:
        for ln in hunk.lines:
            if (
                ln.kind != "-"
                and ln.new is not None
                and (ln.new > len(lines) or lines[ln.new - 1].rstrip("\r") != ln.text)
            ):
                return False
    return True


@dataclass
class _Grow:
    """One hunk being widened: its bounds and how many lines it took above and below."""

    hunk: Hunk
    lines: Sequence[str]
    lowest: int  # the lowest new-file line it may take above
    highest: int  # the highest it may take below
    above: int = 0
    below: int = 0
    stopped: list[bool] = field(default_factory=lambda: [False, False])

    def line(self, n: int, above: bool) -> DiffLine:
        h = self.hunk
        first, last = _new_range(h)
        old_first = h.old_start + (0 if h.old_len else 1)
        offset = old_first - first if above else (old_first + h.old_len) - (last + 1)
        text = self.lines[n - 1].rstrip("\r")
        if len(text) > CONTEXT_LINE_CHARS:
            text = text[: CONTEXT_LINE_CHARS - 1] + "…"
        return DiffLine(" ", n + offset, n, text)

    def header(self, above: int, below: int) -> str:
        return _widened(self.hunk, above, below, []).header

    def build(self) -> Hunk:
        """The hunk with its context lines, its header numbers widened to match."""
        if not (self.above or self.below):
            return self.hunk
        first, last = _new_range(self.hunk)
        top = [self.line(n, True) for n in range(first - self.above, first)]
        bottom = [self.line(n, False) for n in range(last + 1, last + 1 + self.below)]
        return _widened(self.hunk, self.above, self.below, [*top, *self.hunk.lines, *bottom])


def _widened(h: Hunk, above: int, below: int, lines: list[DiffLine]) -> Hunk:
    """``h`` with ``above`` lines before it and ``below`` after it (header numbers adjusted)."""
    if not (above or below):
        return Hunk(h.old_start, h.old_len, h.new_start, h.new_len, h.heading, lines)
    old_first = h.old_start + (0 if h.old_len else 1)
    new_first = h.new_start + (0 if h.new_len else 1)
    return Hunk(
        old_first - above,
        h.old_len + above + below,
        new_first - above,
        h.new_len + above + below,
        h.heading,
        lines,
    )


def _growers(
    f: FileDiff, units: Sequence[PackedUnit], lines: Sequence[str], context: int
) -> list[_Grow]:
    """A :class:`_Grow` for each whole hunk of ``units``; the lines between two hunks of the
    file are split between them (the upper half to the hunk above)."""
    out: list[_Grow] = []
    spans = [_new_range(h) for h in f.hunks]
    for unit in units:
        if not unit.whole:
            continue
        k = next((i for i, h in enumerate(f.hunks) if h is unit.hunk), None)
        if k is None:
            continue
        first, last = spans[k]
        lowest, highest = max(1, first - context), min(len(lines), last + context)
        if k > 0:
            prev_last = spans[k - 1][1]
            gap = first - prev_last - 1
            lowest = max(lowest, prev_last + 1 + (gap + 1) // 2)
        if k + 1 < len(f.hunks):
            next_first = spans[k + 1][0]
            gap = next_first - last - 1
            highest = min(highest, last + (gap + 1) // 2)
        out.append(_Grow(unit.hunk, lines, lowest, highest))
    return out


def widen(
    content: Sequence[PackedPiece], head_files: HeadFiles, context: int, room: int
) -> tuple[list[list[Hunk]], int]:
    """Every piece's hunks, widened ring by ring (one line above, one below, for each hunk in
    turn) while each line and the header change it brings fit in ``room`` tokens; and how many
    context lines were added."""
    growers: list[list[_Grow]] = []
    for piece in content:
        lines = head_files.get(piece.file.path)
        if lines is None or piece.file.status == "deleted" or not _head_matches(piece.file, lines):
            growers.append([])
            continue
        growers.append(_growers(piece.file, piece.units, lines, context))
    everyone = [g for gs in growers for g in gs]
    added = 0
    for _ in range(context):
        moved = False
        for g in everyone:
            first, last = _new_range(g.hunk)
            for side, above in ((0, True), (1, False)):
                if g.stopped[side]:
                    continue
                n = first - g.above - 1 if above else last + g.below + 1
                if (n < g.lowest) if above else (n > g.highest):
                    g.stopped[side] = True
                    continue
                new_above, new_below = g.above + above, g.below + (not above)
                cost = sum(line_tokens(s) for s in render_line(g.line(n, above)))
                cost += line_tokens(g.header(new_above, new_below)) - line_tokens(
                    g.header(g.above, g.below)
                )
                if cost > room:
                    g.stopped[side] = True
                    continue
                room -= cost
                g.above, g.below = new_above, new_below
                added += 1
                moved = True
        if not moved:
            break
    by_hunk = {id(g.hunk): g for g in everyone}
    out = []
    for piece in content:
        out.append(
            [by_hunk[id(u.hunk)].build() if id(u.hunk) in by_hunk else u.hunk for u in piece.units]
        )
    return out, added
