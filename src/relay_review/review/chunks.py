"""Chunks under a token budget: the diff split by file (and by hunk, then by line) so each request
fits a context window, with an account of every file (reviewed, or skipped and why).

Every line of a chunk carries its own number (:mod:`.chunk_text`), so splitting never shifts a
citation; context is added in the room a chunk has left (:mod:`.context`), so it never changes
which changed lines go in which chunk.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from relay_review.records import FileReport
from relay_review.review.chunk_text import CONTINUED, file_header, render_file, render_line
from relay_review.review.context import MAX_CONTEXT_LINES, HeadFiles, widen
from relay_review.review.diff import (
    REASON_NO_CHANGES,
    DiffIndex,
    FileDiff,
    Hunk,
)
from relay_review.review.paths import DEFAULT_EXCLUDES, excluded_by
from relay_review.review.tokens import estimate_tokens, line_tokens

#: Below this many tokens per chunk, chunking is refused (a route that small cannot review).
MIN_CHUNK_TOKENS = 256
#: Tokens set aside in a file header for a "(part i/n)" tag when a file is split.
_PART_TAG_TOKENS = 8


@dataclass
class Chunk:
    """One request's worth of diff: its rendered text, token estimate and the file pieces in it."""

    number: int
    total: int
    text: str
    tokens: int
    files: list[FileDiff]
    #: Context lines added from head files around this chunk's hunks (beyond the diff's own).
    context: int = 0

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @cached_property
    def index(self) -> DiffIndex:
        """The locations shown in this chunk only: validate this chunk's reply against it."""
        return DiffIndex(self.files)

    def shown_text(self) -> Iterator[str]:
        """The diff's own text this chunk shows, line by line: hunk headings and lines, without
        the markers and numbers of the chunk's format."""
        for f in self.files:
            for hunk in f.hunks:
                yield hunk.heading
                yield from (ln.text for ln in hunk.lines)


@dataclass
class ChunkPlan:
    """Every chunk to send, and every file of the diff with its fate (in diff order)."""

    chunks: list[Chunk]
    files: list[FileReport]
    budget_tokens: int
    #: Files reported reviewed but packed in no chunk: an earlier review of them is reused.
    reused: list[str] = field(default_factory=list)

    @property
    def reviewed(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "reviewed"]

    @property
    def skipped(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "skipped"]


@dataclass
class _Unit:
    """A hunk, or a slice of one, with its estimated tokens (header included)."""

    hunk: Hunk
    tokens: int
    #: A whole hunk of the file (context is added around whole hunks only).
    whole: bool = True


@dataclass
class _Piece:
    pos: int
    file: FileDiff
    units: list[_Unit] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)


def _units(f: FileDiff, room: int) -> list[_Unit] | str:
    """Split a file into units of at most ``room`` tokens; a reason string if impossible."""
    units: list[_Unit] = []
    for hunk in f.hunks:
        costs = [sum(line_tokens(s) for s in render_line(ln)) for ln in hunk.lines]
        whole = line_tokens(hunk.header) + sum(costs)
        if whole <= room:
            units.append(_Unit(hunk, whole))
            continue
        head = max(line_tokens(hunk.header), line_tokens(CONTINUED))
        start, used = 0, head
        for i, cost in enumerate(costs):
            if head + cost > room:
                ln = hunk.lines[i]
                num = ln.new if ln.kind != "-" else ln.old
                side = "LEFT" if ln.kind == "-" else "RIGHT"
                return (
                    f"too large for any chunk: line {num} ({side}) alone needs ~{cost} tokens,"
                    f" over the chunk budget of {room}"
                )
            if used + cost > room:
                units.append(_slice(hunk, start, i, used, first=start == 0))
                start, used = i, head
            used += cost
        units.append(_slice(hunk, start, len(costs), used, first=start == 0))
    return units


def _slice(hunk: Hunk, start: int, end: int, tokens: int, *, first: bool) -> _Unit:
    heading = hunk.heading if first else CONTINUED
    sub = Hunk(hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len, heading, [])
    sub.lines = hunk.lines[start:end]
    return _Unit(sub, tokens, whole=False)


def _long_line(f: FileDiff, max_line_chars: int) -> str | None:
    """Why ``f`` is not reviewable for a changed line over ``max_line_chars``, else ``None``."""
    for hunk in f.hunks:
        for ln in hunk.lines:
            if ln.kind != " " and len(ln.text) > max_line_chars:
                num, side = (ln.old, "LEFT") if ln.kind == "-" else (ln.new, "RIGHT")
                return (
                    f"line too long: line {num} ({side}) has {len(ln.text):,} characters,"
                    f" over review.max_line_chars ({max_line_chars:,})"
                )
    return None


def _excluded(
    f: FileDiff, exclude: Sequence[str], trusted: Sequence[str]
) -> tuple[str, bool] | None:
    """(reason, left out) when an exclude glob matches ``f``, else ``None``.

    An excluded file that changes content is left out (the review is partial and never
    approves) unless one of ``trusted`` -- globs the maintainer's policy trusts to exclude --
    also matches it.
    """
    pattern = excluded_by(f.path, exclude)
    if pattern is None:
        return None
    origin = "a default" if pattern in DEFAULT_EXCLUDES else "the policy's"
    reason = f"excluded by {origin} pattern {pattern!r}"
    if f.skip_reason == REASON_NO_CHANGES:
        return reason, False
    vouched = excluded_by(f.path, trusted)
    if vouched is not None:
        return f"{reason} (trusted by review.trusted_excludes {vouched!r})", False
    return reason, True


def plan_chunks(
    index: DiffIndex,
    budget_tokens: int,
    *,
    exclude: Sequence[str] = DEFAULT_EXCLUDES,
    trusted_excludes: Sequence[str] = (),
    max_line_chars: int | None = None,
    max_chunks: int | None = None,
    include_deleted: bool = True,
    head_files: HeadFiles | None = None,
    context_lines: int = 0,
    reused: Collection[str] = (),
) -> ChunkPlan:
    """Pack the diff's files into chunks of at most ``budget_tokens`` estimated tokens each.

    Files are packed in diff order, greedily: a file goes whole into the current chunk if it
    fits, else whole into a new chunk, else it is split by hunk (and an oversized hunk by line)
    across consecutive chunks. Every file of ``index`` appears once in ``ChunkPlan.files``:
    reviewed, or skipped with a reason (excluded by a glob, binary, no patch, unparseable, no
    changed lines, deleted when ``include_deleted`` is off, a changed line over
    ``max_line_chars``, a single line over the budget, or beyond ``max_chunks`` -- a file cut by
    that limit is skipped whole, never half-sent). A skipped file that changes content is
    ``left_out`` (see :func:`_excluded` for excluded files).

    ``head_files`` and ``context_lines``: widen whole hunks with enclosing head-file lines in
    the room each chunk has left (:mod:`.context`); the packing does not change.

    ``reused``: paths whose earlier review is reused (see :func:`unit_text`): such a file, once
    it passes every check above, is reported reviewed and packed in no chunk, so the chunks
    hold only the other files (a changed file is reviewed alone or with the other changed ones).
    """
    if budget_tokens < MIN_CHUNK_TOKENS:
        raise ValueError(
            f"chunk budget of {budget_tokens} tokens is below the minimum of {MIN_CHUNK_TOKENS}"
        )
    reports: dict[int, FileReport] = {}
    chunks: list[list[_Piece]] = []
    used: list[int] = []
    pieces_of: dict[int, list[int]] = {}  # file position -> chunk numbers (0-based)
    kept: list[str] = []  # reused files, in diff order

    def skip(pos: int, f: FileDiff, reason: str, *, left_out: bool) -> None:
        reports[pos] = FileReport(
            path=f.path,
            status="skipped",
            reason=reason,
            change=f.status,
            old_path=f.old_path,
            left_out=left_out,
        )

    for pos, f in enumerate(index.files):
        excluded = _excluded(f, exclude, trusted_excludes)
        if excluded is not None:
            skip(pos, f, excluded[0], left_out=excluded[1])
            continue
        if f.skip_reason:
            skip(pos, f, f.skip_reason, left_out=f.left_out)
            continue
        if f.status == "deleted" and not include_deleted:
            skip(pos, f, "deleted file (deleted files are not reviewed)", left_out=True)
            continue
        too_long = _long_line(f, max_line_chars) if max_line_chars else None
        header = line_tokens(file_header(f)) + 1  # +1: the blank line between files
        units = too_long or _units(f, budget_tokens - header - _PART_TAG_TOKENS)
        if isinstance(units, str):
            skip(pos, f, units, left_out=True)
            continue
        if f.path in reused:
            reports[pos] = FileReport(
                path=f.path, status="reviewed", change=f.status, old_path=f.old_path
            )
            kept.append(f.path)
            continue
        _pack(pos, f, units, header, budget_tokens, chunks, used, pieces_of)

    if max_chunks is not None and len(chunks) > max_chunks:
        over = [pos for pos, where in pieces_of.items() if max(where) >= max_chunks]
        for pos in over:
            reason = f"beyond limits: the diff needs more than {max_chunks} chunks"
            skip(pos, index.files[pos], reason, left_out=True)
            del pieces_of[pos]
        dropped = set(over)
        chunks = [[p for p in c if p.pos not in dropped] for c in chunks[:max_chunks]]
        chunks = [c for c in chunks if c]

    context = min(max(context_lines, 0), MAX_CONTEXT_LINES)
    built, placed = _render_chunks(
        chunks,
        {pos: len(w) for pos, w in pieces_of.items()},
        budget_tokens,
        head_files if context else None,
        context,
    )
    for pos, f in enumerate(index.files):
        if pos in reports:
            continue
        where = placed[pos]
        parts = f"reviewed in {len(where)} parts (chunks {where[0]}-{where[-1]})"
        reports[pos] = FileReport(
            path=f.path,
            status="reviewed",
            reason=parts if len(where) > 1 else None,
            change=f.status,
            old_path=f.old_path,
        )
    return ChunkPlan(
        chunks=built,
        files=[reports[pos] for pos in range(len(index.files))],
        budget_tokens=budget_tokens,
        reused=kept,
    )


def unit_text(f: FileDiff, head_files: HeadFiles | None = None, context_lines: int = 0) -> str:
    """One file as the review cache knows it: its whole rendered patch, widened with up to
    ``context_lines`` head-file lines around every hunk regardless of room. It does not depend
    on the other files of the diff or on where the file lands, so a file's cache key (see
    :mod:`relay_review.pipeline.review_cache`) changes only when its own text, or the context a
    chunk could show around it, changes."""
    piece = _Piece(0, f, [_Unit(h, 0) for h in f.hunks])
    hunks = [list(f.hunks)]
    context = min(max(context_lines, 0), MAX_CONTEXT_LINES)
    if head_files and context:
        hunks, _ = widen([piece], head_files, context, sys.maxsize)
    text, _ = _render_pieces([piece], [None], hunks)
    return text


def _pack(
    pos: int,
    f: FileDiff,
    units: list[_Unit],
    header: int,
    budget_tokens: int,
    chunks: list[list[_Piece]],
    used: list[int],
    pieces_of: dict[int, list[int]],
) -> None:
    """Place one file's units: whole into the current or a new chunk, else split across chunks."""
    total = header + sum(u.tokens for u in units)
    if chunks and used[-1] + total <= budget_tokens:
        chunks[-1].append(_Piece(pos, f, units))
        used[-1] += total
        pieces_of[pos] = [len(chunks) - 1]
        return
    if total <= budget_tokens:
        chunks.append([_Piece(pos, f, units)])
        used.append(total)
        pieces_of[pos] = [len(chunks) - 1]
        return
    # Split: fill the current chunk's remaining room first, then new chunks.
    head = header + _PART_TAG_TOKENS
    piece: _Piece | None = None
    for unit in units:
        if piece is None or used[-1] + unit.tokens > budget_tokens:
            if not chunks or used[-1] + head + unit.tokens > budget_tokens:
                chunks.append([])
                used.append(0)
            piece = _Piece(pos, f)
            chunks[-1].append(piece)
            used[-1] += head
            pieces_of.setdefault(pos, []).append(len(chunks) - 1)
        piece.units.append(unit)
        used[-1] += unit.tokens


def _render_chunks(
    chunks: list[list[_Piece]],
    parts_total: dict[int, int],
    budget_tokens: int = 0,
    head_files: HeadFiles | None = None,
    context_lines: int = 0,
) -> tuple[list[Chunk], dict[int, list[int]]]:
    """Render packed pieces (widened with context where ``head_files`` allow and the budget
    leaves room); also return file position -> chunk numbers holding it."""
    placed: dict[int, list[int]] = {}
    built: list[Chunk] = []
    for number, content in enumerate(chunks, start=1):
        parts: list[tuple[int, int] | None] = []
        for piece in content:
            where = placed.setdefault(piece.pos, [])
            where.append(number)
            total = parts_total.get(piece.pos, 1)
            parts.append((len(where), total) if total > 1 else None)

        hunks = [[u.hunk for u in p.units] for p in content]
        text, files = _render_pieces(content, parts, hunks)
        added = 0
        if head_files and context_lines:
            room = budget_tokens - estimate_tokens(text)
            hunks, added = widen(content, head_files, context_lines, room)
            if added:
                text, files = _render_pieces(content, parts, hunks)
        built.append(Chunk(number, len(chunks), text, estimate_tokens(text), files, added))
    return built, placed


def _render_pieces(
    content: list[_Piece], parts: list[tuple[int, int] | None], hunks: list[list[Hunk]]
) -> tuple[str, list[FileDiff]]:
    """One chunk's text and file pieces, each piece with the given ``hunks``."""
    files = [
        FileDiff(p.file.path, p.file.old_path, p.file.status, hs)
        for p, hs in zip(content, hunks, strict=True)
    ]
    text = "\n\n".join(render_file(f, part) for f, part in zip(files, parts, strict=True))
    return text, files
