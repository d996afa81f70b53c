"""Chunks under a token budget: the diff split by file (and by hunk, then by line) so each request
fits a context window, with an account of every file (reviewed, or skipped and why).

Chunk text format (the prompt explains it to the model)::

    ### FILE src/app.py [modified]
    @@ -10,7 +10,8 @@ def handler(request):
    C 10   unchanged context line (new-file number; not citable)
    L 11 - a removed line (old-file number; cite as side LEFT, line 11)
    R 11 + an added line (new-file number; cite as side RIGHT, line 11)
    \\ no newline at end of file

Other file headers: ``[added]``, ``[deleted]``, ``[renamed from old/path.py]``, ``[copied from
x.py]``; a file split across chunks adds ``(part 2/3)``; a hunk split across chunks continues
under ``@@ (hunk continued) @@``. Every line carries its own number, so splitting never shifts a
citation.

Context around changes: given the head version of a file (``head_files``), each whole hunk is
widened with up to ``context_lines`` enclosing lines above and below (``C`` lines, never
citable), ring by ring across the chunk's hunks, only in the room a chunk has left once its
changed lines are packed. So the packing (which changed lines go in which chunk, how many chunks)
is the same with context as without: context is always dropped before any changed line is.
Neighbouring hunks share the lines between them half and half, so no line is shown twice.

Token estimate (:func:`estimate_tokens`), deliberately conservative across BPE tokenizers
(cl100k/o200k, Llama 3, Qwen, Mistral's 32k SentencePiece): per line,
``ceil(ascii_chars / 3) + 2 * non_ascii_chars + 1``. Code averages 3.5-4.5 characters per token
on these tokenizers; numbered line prefixes and symbols cost more, hence 3 and the +1 per line.
Non-ASCII characters can cost 1-3 tokens each, hence 2. No tokenizer library is used: routes
run many different models, and tokenizer packages fetch their vocabularies at run time, which
an offline runner cannot do; an estimate that errs large is the safe side.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from relay_review.records import FileReport
from relay_review.review.diff import (
    REASON_NO_CHANGES,
    DiffIndex,
    DiffLine,
    FileDiff,
    Hunk,
)

#: Default exclusion globs: lock files, minified/generated output, vendored dependencies.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    "*.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "Cargo.lock",
    "go.sum",
    "*.min.js",
    "*.min.css",
    "*.generated.*",
    "vendor/**",
    "third_party/**",
    "node_modules/**",
    "dist/**",
)

#: Below this many tokens per chunk, chunking is refused (a route that small cannot review).
MIN_CHUNK_TOKENS = 256
#: The most context lines shown above and below a hunk (``review.context_lines`` is capped here).
MAX_CONTEXT_LINES = 200
#: A context line longer than this is cut (with "…"): it is never cited, only read.
CONTEXT_LINE_CHARS = 300
#: The head version of files, by path: line ``n`` of the file is ``lines[n - 1]``.
HeadFiles = Mapping[str, Sequence[str]]
#: Tokens set aside in a file header for a "(part i/n)" tag when a file is split.
_PART_TAG_TOKENS = 8
_CONTINUED = "@@ (hunk continued) @@"
_UNSAFE_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def line_tokens(line: str) -> int:
    """Estimated tokens of one rendered line, newline included (see the module doc)."""
    if line.isascii():
        return -(-len(line) // 3) + 1
    ascii_chars = len(line.encode("ascii", errors="ignore"))
    return -(-ascii_chars // 3) + 2 * (len(line) - ascii_chars) + 1


def estimate_tokens(text: str) -> int:
    """Estimated tokens of a text: :func:`line_tokens` summed over its ``\\n``-separated lines."""
    if not text:
        return 0
    return sum(line_tokens(line) for line in text.split("\n"))


# -- exclusion globs ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> tuple[re.Pattern[str], bool]:
    """Compile a glob. Returns (regex, match_basename_only)."""
    basename_only = "/" not in pattern
    anchored = pattern.startswith("/")
    pat = pattern.lstrip("/")
    out: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pat.find("]", i + 2 if pat[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    if not basename_only and not anchored:
        body = "(?:.*/)?" + body
    return re.compile(body + r"\Z", re.DOTALL), basename_only


def glob_match(path: str, pattern: str) -> bool:
    """Match a repository path against an exclusion glob.

    Rules: a pattern without ``/`` matches the file name at any depth (``*.lock``); a pattern with
    ``/`` matches the whole path, at any depth unless it starts with ``/`` (``vendor/**`` matches
    ``vendor/a.go`` and ``web/vendor/b.js``; ``/vendor/**`` only the first). ``*`` and ``?`` stay
    within one path segment, ``**`` spans segments, ``[...]`` is a character class. Case-sensitive.
    """
    regex, basename_only = _glob_regex(pattern)
    target = path.rsplit("/", 1)[-1] if basename_only else path
    return regex.match(target) is not None


def excluded_by(path: str, patterns: Iterable[str]) -> str | None:
    """The first of ``patterns`` that excludes ``path``, or ``None``."""
    for pattern in patterns:
        if pattern and glob_match(path, pattern):
            return pattern
    return None


# -- records ------------------------------------------------------------------------------------


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


# -- rendering ----------------------------------------------------------------------------------


def show_path(path: str) -> str:
    """A path as rendered in chunk headers: control and line-separator characters escaped."""
    return _UNSAFE_PATH_CHARS.sub(lambda m: f"\\x{ord(m.group(0)):02x}", path)


def file_header(f: FileDiff, part: tuple[int, int] | None = None) -> str:
    """``### FILE path [status]``, with ``(part i/n)`` for a file split across chunks."""
    if f.status in ("renamed", "copied") and f.old_path:
        tag = f"[{f.status} from {show_path(f.old_path)}]"
    else:
        tag = f"[{f.status}]"
    tail = f" (part {part[0]}/{part[1]})" if part else ""
    return f"### FILE {show_path(f.path)} {tag}{tail}"


def render_line(ln: DiffLine) -> list[str]:
    """The rendered form of one diff line (two lines when it lacks a final newline)."""
    if ln.kind == "+":
        out = f"R {ln.new} + {ln.text}"
    elif ln.kind == "-":
        out = f"L {ln.old} - {ln.text}"
    else:
        out = f"C {ln.new}   {ln.text}"
    return [out, "\\ no newline at end of file"] if ln.no_eol else [out]


def render_file(f: FileDiff, part: tuple[int, int] | None = None) -> str:
    """A file (or file piece) in the chunk format described in the module doc."""
    out = [file_header(f, part)]
    for hunk in f.hunks:
        out.append(_hunk_header(hunk))
        for ln in hunk.lines:
            out.extend(render_line(ln))
    return "\n".join(out)


def _hunk_header(hunk: Hunk) -> str:
    return _CONTINUED if hunk.heading == _CONTINUED else hunk.header


# -- planning -----------------------------------------------------------------------------------


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
        head = max(line_tokens(hunk.header), line_tokens(_CONTINUED))
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
    heading = hunk.heading if first else _CONTINUED
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
    the room each chunk has left (see the module doc); the packing does not change.

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
    :mod:`relay_review.state.chunks`) changes only when its own text, or the context a chunk
    could show around it, changes."""
    piece = _Piece(0, f, [_Unit(h, 0) for h in f.hunks])
    hunks = [list(f.hunks)]
    context = min(max(context_lines, 0), MAX_CONTEXT_LINES)
    if head_files and context:
        hunks, _ = _widen([piece], head_files, context, sys.maxsize)
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
            hunks, added = _widen(content, head_files, context_lines, room)
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


# -- context around changes ---------------------------------------------------------------------


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


def _growers(f: FileDiff, units: list[_Unit], lines: Sequence[str], context: int) -> list[_Grow]:
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


def _widen(
    content: list[_Piece], head_files: HeadFiles, context: int, room: int
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
