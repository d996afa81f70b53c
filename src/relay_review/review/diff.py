"""The diff index: which lines of a pull request a review may cite, and what they say.

A :class:`DiffIndex` is built from a unified diff (``git diff`` output, bytes or text) or from the
GitHub pull-request files API (one ``patch`` per file). It records every file with its status and
hunks, and answers two questions for citation checks: what is the text of line N on side S of a
file, and which commentable lines are nearest to N.

Commentable locations follow GitHub's review-comment sides: ``RIGHT`` = an added line, numbered in
the new file; ``LEFT`` = a removed line, numbered in the old file. Context lines are kept (for
rendering) but are not commentable.

Decoding: bytes are decoded as UTF-8 with ``errors="replace"`` (invalid bytes become U+FFFD), and
in text (a patch or file name from the files API's JSON, where ``\\udcff`` escapes are legal)
every lone surrogate becomes U+FFFD too (:func:`scrub_text`). The texts end up in JSON prompts,
logs and comments, where a lone surrogate cannot be encoded as UTF-8; a replaced character only
makes an exact quote of that line impossible to type, never shifts a line number. ``\\r\\n`` is
treated as a line break and a leading BOM is dropped; other ``\\r`` characters stay inside the
line text (except a trailing one, which is stripped).

Paths: git's C-style quoting is undone and the ``a/``/``b/`` (or mnemonic) prefix dropped; a
renamed or copied file is recorded under its new path, with ``old_path`` kept.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from unidiff import PatchSet
from unidiff.constants import DEV_NULL

from relay_review._text import scrub_text
from relay_review.errors import UsageError
from relay_review.records.finding import Side

FileStatus = Literal["added", "modified", "deleted", "renamed", "copied", "binary"]

SIDES: tuple[Side, Side] = ("RIGHT", "LEFT")

#: Reasons a file carries no reviewable lines (also used by the chunk plan's file report).
REASON_BINARY = "binary file"
REASON_NO_PATCH = "no patch from the API (binary or too large)"
REASON_NO_CHANGES = "no changed lines"
REASON_DUPLICATE = "duplicate entry for this path in the diff (only the first is reviewed)"

_GIT_SECTION = re.compile(r"^diff --(?:git|cc|combined) ", re.MULTILINE)
_GIT_HEADER = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)\s*$')
_PREFIX = re.compile(r"^[abciow12]/")
_C_ESCAPES = {
    "a": 7,
    "b": 8,
    "t": 9,
    "n": 10,
    "v": 11,
    "f": 12,
    "r": 13,
    '"': 34,
    "\\": 92,
}
_API_STATUS: dict[str, FileStatus] = {
    "added": "added",
    "removed": "deleted",
    "deleted": "deleted",
    "modified": "modified",
    "changed": "modified",
    "unchanged": "modified",
    "renamed": "renamed",
    "copied": "copied",
}


class DiffParseError(UsageError):
    """The input is not a unified diff this index can read (the CLI exits 2)."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One hunk line. ``kind`` is ``"+"`` (added), ``"-"`` (removed) or ``" "`` (context)."""

    kind: str
    old: int | None
    new: int | None
    text: str
    no_eol: bool = False  # "\ No newline at end of file" followed this line


@dataclass(slots=True)
class Hunk:
    """A hunk: its header numbers, the optional section heading and its lines."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    heading: str
    lines: list[DiffLine]

    @property
    def header(self) -> str:
        tail = f" {self.heading}" if self.heading else ""
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@{tail}"


@dataclass(slots=True)
class FileDiff:
    """One file of the diff. ``skip_reason`` is set when the file has nothing reviewable;
    ``left_out`` when it changes content that cannot be shown to a model (a binary file, no patch
    from the API except for a pure rename or mode change, a patch that cannot be parsed, or a
    second entry for one path): a review without it is partial and never approves."""

    path: str
    old_path: str | None
    status: FileStatus
    hunks: list[Hunk] = field(default_factory=list)
    skip_reason: str | None = None
    left_out: bool = False

    @property
    def additions(self) -> int:
        return sum(1 for h in self.hunks for ln in h.lines if ln.kind == "+")

    @property
    def deletions(self) -> int:
        return sum(1 for h in self.hunks for ln in h.lines if ln.kind == "-")


class DiffIndex:
    """Every file of a diff, and the commentable locations ``(path, side, line) -> text``."""

    def __init__(self, files: Iterable[FileDiff]) -> None:
        self.files: list[FileDiff] = list(files)
        self._by_path: dict[str, FileDiff] = {}
        self._by_old_path: dict[str, str] = {}
        self._loc: dict[tuple[str, Side], dict[int, str]] = {}
        self._sorted: dict[tuple[str, Side], list[int]] = {}
        for f in self.files:
            self._by_path.setdefault(f.path, f)
            if f.old_path and f.old_path != f.path:
                self._by_old_path.setdefault(f.old_path, f.path)
            if f.skip_reason:
                continue
            right = self._loc.setdefault((f.path, "RIGHT"), {})
            left = self._loc.setdefault((f.path, "LEFT"), {})
            for hunk in f.hunks:
                for ln in hunk.lines:
                    if ln.kind == "+":
                        right[ln.new] = ln.text  # type: ignore[index]
                    elif ln.kind == "-":
                        left[ln.old] = ln.text  # type: ignore[index]

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_diff(cls, data: str | bytes) -> DiffIndex:
        """Index a unified diff (``git diff`` output or plain ``diff -u``); see the module doc.

        Raises :class:`DiffParseError` when non-empty input holds no file at all, or when a
        non-git diff cannot be parsed. In a git diff, a file whose section cannot be parsed is
        kept as a skipped file with the parser's reason, so one bad section never hides others.
        """
        text = _decode(data)
        if not text.strip():
            return cls([])
        starts = [m.start() for m in _GIT_SECTION.finditer(text)]
        files: list[FileDiff] = []
        if not starts:
            try:
                files.extend(_files_from_patchset(_patchset(text)))
            except Exception as exc:
                raise DiffParseError(f"not a unified diff: {_short(str(exc))}") from exc
        else:
            preamble = text[: starts[0]]
            if "\n+++ " in "\n" + preamble:  # a non-git diff before the git part
                try:
                    files.extend(_files_from_patchset(_patchset(preamble)))
                except Exception as exc:
                    raise DiffParseError(f"not a unified diff: {_short(str(exc))}") from exc
            bounds = [*starts, len(text)]
            for begin, end in itertools.pairwise(bounds):
                files.extend(_parse_git_section(text[begin:end]))
        if not files:
            raise DiffParseError("no file found in the diff (expected 'diff --git' or '---/+++')")
        return cls(_mark_duplicates(files))

    @classmethod
    def from_api_files(cls, entries: Iterable[Mapping[str, Any] | Any]) -> DiffIndex:
        """Index the PR files API entries: ``PullFile`` records (as
        :func:`relay_review.github.pr.list_files` gives them) or the API's JSON objects.

        Each entry: ``filename``, ``status``, optional ``previous_filename`` and ``patch``. A
        missing patch marks the file skipped (``REASON_NO_PATCH``, or ``REASON_NO_CHANGES`` for
        a rename, copy or mode change with ``changes`` 0); a patch that cannot be parsed marks
        it skipped with the parser's reason.
        """
        files = [_file_from_api(entry) for entry in entries]
        return cls(_mark_duplicates(files))

    # -- lookups --------------------------------------------------------------------------------

    @property
    def paths(self) -> list[str]:
        """Every file path, in diff order."""
        return [f.path for f in self.files]

    def file(self, path: str) -> FileDiff | None:
        """The file recorded under ``path`` (the new path for renames), if any."""
        return self._by_path.get(path)

    def renamed_to(self, old_path: str) -> str | None:
        """The new path of a file renamed or copied from ``old_path``, if any."""
        return self._by_old_path.get(old_path)

    def line(self, path: str, line: int, side: Side = "RIGHT") -> str | None:
        """Text of a commentable line, or ``None`` when (path, line, side) is not one."""
        loc = self._loc.get((path, side))
        return None if loc is None else loc.get(line)

    def texts(self, path: str, side: Side = "RIGHT") -> Iterator[tuple[int, str]]:
        """``(line, text)`` of every commentable line of ``path`` on ``side``."""
        yield from self._loc.get((path, side), {}).items()

    def lines(self, path: str, side: Side = "RIGHT") -> list[int]:
        """Sorted commentable line numbers of ``path`` on ``side``."""
        key = (path, side)
        cached = self._sorted.get(key)
        if cached is None:
            cached = sorted(self._loc.get(key, ()))
            self._sorted[key] = cached
        return cached

    def nearest(self, path: str, line: int, side: Side = "RIGHT", k: int = 2) -> list[int]:
        """The ``k`` commentable lines closest to ``line`` (ties: the lower first), ascending."""
        nums = self.lines(path, side)
        if not nums or k <= 0:
            return []
        i = bisect.bisect_left(nums, line)
        lo, hi = i - 1, i
        picked: list[int] = []
        while len(picked) < k and (lo >= 0 or hi < len(nums)):
            take_lo = hi >= len(nums) or (lo >= 0 and line - nums[lo] <= nums[hi] - line)
            if take_lo:
                picked.append(nums[lo])
                lo -= 1
            else:
                picked.append(nums[hi])
                hi += 1
        return sorted(picked)

    def locations(self) -> Iterator[tuple[str, Side, int, str]]:
        """Every commentable location as ``(path, side, line, text)``, in diff order."""
        for f in self.files:
            if f.skip_reason:
                continue
            for hunk in f.hunks:
                for ln in hunk.lines:
                    if ln.kind == "+":
                        yield f.path, "RIGHT", ln.new, ln.text  # type: ignore[misc]
                    elif ln.kind == "-":
                        yield f.path, "LEFT", ln.old, ln.text  # type: ignore[misc]

    def __len__(self) -> int:
        """Number of commentable locations."""
        return sum(len(v) for v in self._loc.values())


# -- internals ----------------------------------------------------------------------------------


def _decode(data: str | bytes) -> str:
    if isinstance(data, bytes | bytearray | memoryview):
        text = bytes(data).decode("utf-8", errors="replace")
    else:
        text = scrub_text(data)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


def _short(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _patchset(text: str) -> PatchSet:
    if not text.endswith("\n"):
        text += "\n"
    return PatchSet(text)


def unquote_git_path(raw: str) -> str:
    """Undo git's C-style quoting (``"a/caf\\303\\251.py"`` -> ``a/café.py``); others unchanged."""
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567":
                digits = body[i + 1 : i + 4]
                octal = re.match(r"[0-7]{1,3}", digits)
                assert octal is not None
                out.append(int(octal.group(0), 8) & 0xFF)
                i += 1 + len(octal.group(0))
                continue
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
        out.extend(ch.encode("utf-8", errors="replace"))
        i += 1
    return out.decode("utf-8", errors="replace")


def _clean_path(raw: str | None) -> str | None:
    if raw is None:
        return None
    raw = raw.rstrip("\n")
    if raw == DEV_NULL:
        return None
    path = unquote_git_path(raw)
    return _PREFIX.sub("", path, count=1)


def _info_value(info: Iterable[str], key: str) -> str | None:
    prefix = key + " "
    for line in info:
        if line.startswith(prefix):
            return unquote_git_path(line[len(prefix) :].rstrip("\n"))
    return None


def _convert_hunks(patched: Any) -> list[Hunk]:
    hunks: list[Hunk] = []
    for h in patched:
        lines: list[DiffLine] = []
        for ln in h:
            kind = ln.line_type
            if kind == "\\":
                if lines:
                    last = lines[-1]
                    lines[-1] = DiffLine(last.kind, last.old, last.new, last.text, True)
                continue
            if kind not in ("+", "-", " "):
                continue
            text = ln.value
            if text.endswith("\n"):
                text = text[:-1]
            if text.endswith("\r"):
                text = text[:-1]
            lines.append(DiffLine(kind, ln.source_line_no, ln.target_line_no, text))
        hunks.append(
            Hunk(
                h.source_start,
                h.source_length,
                h.target_start,
                h.target_length,
                (h.section_header or "").strip(),
                lines,
            )
        )
    return hunks


def _file_record(patched: Any) -> FileDiff:
    info = list(patched.patch_info or [])
    old = _info_value(info, "rename from") or _info_value(info, "copy from")
    new = _info_value(info, "rename to") or _info_value(info, "copy to")
    src = _clean_path(patched.source_file)
    tgt = _clean_path(patched.target_file)
    old_path = old or src
    new_path = new or tgt
    status: FileStatus
    if patched.is_binary_file:
        status = "binary"
    elif patched.source_file == DEV_NULL:
        status = "added"
    elif patched.target_file == DEV_NULL:
        status = "deleted"
    elif _info_value(info, "copy from") is not None:
        status = "copied"
    elif old_path and new_path and old_path != new_path:
        status = "renamed"
    elif patched.is_added_file:
        status = "added"
    elif patched.is_removed_file:
        status = "deleted"
    else:
        status = "modified"
    path = new_path or old_path or "?"
    record = FileDiff(
        path=path,
        old_path=old_path if status != "added" else None,
        status=status,
        hunks=[] if patched.is_binary_file else _convert_hunks(patched),
    )
    if patched.is_binary_file:
        record.skip_reason = REASON_BINARY
        record.left_out = True  # its change was not shown to any model
    elif not any(h.lines for h in record.hunks):
        record.skip_reason = REASON_NO_CHANGES
    return record


def _files_from_patchset(patchset: PatchSet) -> list[FileDiff]:
    return [_file_record(p) for p in patchset]


def _parse_git_section(section: str) -> list[FileDiff]:
    try:
        files = _files_from_patchset(_patchset(section))
    except Exception as exc:  # hostile input: any parser failure skips this file, with reason
        files = []
        reason = f"patch could not be parsed: {_short(str(exc), 120)}"
    else:
        if files:
            return files
        reason = "patch could not be parsed: no file header"
    first = section.split("\n", 1)[0]
    old, path = _header_paths(first)
    return [
        FileDiff(
            path=path or _short(first, 200),
            old_path=old if old != path else None,
            status="modified",
            skip_reason=reason,
            left_out=True,
        )
    ]


def _header_paths(first: str) -> tuple[str | None, str | None]:
    """(old, new) paths from a ``diff --git`` line, for sections the parser rejected."""
    m = _GIT_HEADER.match(first)
    if m:
        return _clean_path(m.group(1)), _clean_path(m.group(2))
    rest = first.removeprefix("diff --git ")
    if " b/" in rest:
        old, new = rest.rsplit(" b/", 1)
        return _clean_path(old), new
    return None, None


def _get(entry: Mapping[str, Any] | Any, key: str) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(key)
    return getattr(entry, key, None)


def _file_from_api(entry: Mapping[str, Any] | Any) -> FileDiff:
    path = scrub_text(str(_get(entry, "filename") or ""))
    previous = _get(entry, "previous_filename")
    status = _API_STATUS.get(str(_get(entry, "status") or "modified"), "modified")
    record = FileDiff(
        path=path,
        old_path=scrub_text(str(previous)) if previous else (None if status == "added" else path),
        status=status,
    )
    patch = _get(entry, "patch")
    if not patch:
        # The API reports 0 changes for binary files too: only a rename/copy/mode change with 0
        # changes is known to have no changed lines.
        pure = _get(entry, "changes") == 0 and _get(entry, "status") in (
            "renamed",
            "copied",
            "changed",
        )
        record.skip_reason = REASON_NO_CHANGES if pure else REASON_NO_PATCH
        # Binary files count 0 additions and deletions, like a pure rename: only the latter is
        # known to change nothing, so every other file without a patch was not shown to a model.
        record.left_out = not pure
        return record
    body = _decode(patch)
    try:
        patched = list(_patchset("--- a/f\n+++ b/f\n" + body))
    except Exception as exc:  # hostile input: any parser failure skips this file, with reason
        record.skip_reason = f"patch could not be parsed: {_short(str(exc), 120)}"
        record.left_out = True
        return record
    record.hunks = _convert_hunks(patched[0]) if patched else []
    if not any(h.lines for h in record.hunks):
        record.skip_reason = REASON_NO_CHANGES
    return record


def _mark_duplicates(files: list[FileDiff]) -> list[FileDiff]:
    seen: set[str] = set()
    for f in files:
        if f.path in seen:
            f.left_out = f.left_out or any(ln.kind != " " for h in f.hunks for ln in h.lines)
            f.skip_reason = REASON_DUPLICATE
            f.hunks = []
        seen.add(f.path)
    return files
