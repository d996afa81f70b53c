"""The model's reply: extraction, schema validation and citation checks.

Model output is hostile input. A reply is accepted only as one JSON object matching
:class:`ModelReply` (extra keys, including an advisory ``decision``, are ignored); a finding is
*verified* only if it cites a commentable location of the diff (see :mod:`.diff`) and quotes that
line's text. Nothing here renders or escapes: texts are kept raw (length-capped) for later stages.

Caps (documented limits, applied without failing the reply):

- ``MAX_FINDINGS`` findings per reply are checked; later ones are rejected as over the limit.
- ``message`` is cut to ``MAX_MESSAGE_CHARS``, ``summary`` to ``MAX_SUMMARY_CHARS``, ``path`` to
  ``MAX_PATH_CHARS`` (suffix "…"; a path that long is in no diff, so the finding stays unverified).
- Lone surrogates (legal as JSON escapes) in any text become U+FFFD, so every text encodes as UTF-8.
- A reply longer than ``MAX_REPLY_CHARS`` is refused as malformed.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from relay_review._text import find_invisible
from relay_review.errors import RelayReviewError
from relay_review.records.finding import (
    MAX_MESSAGE_CHARS,
    MAX_PATH_CHARS,
    REPLY_KEYS,
    Finding,
)
from relay_review.records.finding import clean_text as _text
from relay_review.records.finding import cut as _cut
from relay_review.redact import REPLACEMENT
from relay_review.review.diff import DiffIndex, Side, scrub_text
from relay_review.review.paths import show_path

MAX_FINDINGS = 30
MAX_SUMMARY_CHARS = 4000
#: A suggestion (replacement code) longer than this is dropped, never cut (cut code is broken).
MAX_SUGGESTION_CHARS = 8000
#: Most RIGHT lines one suggestion may replace (``line`` .. ``end_line``).
MAX_SUGGESTION_LINES = 50
MAX_REPLY_CHARS = 1_000_000
#: Longest file note (``files[].summary``) kept; most notes kept per reply.
MAX_NOTE_CHARS = 600
MAX_NOTES = 200
#: Longest excerpt of a diff line or a model-supplied string quoted in a rejection reason.
SHOW_CHARS = 160

_MAX_SCAN = 2000
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks in one linear pass (a lazy regex over hostile text
    with many unclosed tags is quadratic); an unclosed tag and what follows it are kept."""
    out: list[str] = []
    pos = 0
    while (start := _THINK_OPEN.search(text, pos)) is not None:
        out.append(text[pos : start.start()])
        end = _THINK_CLOSE.search(text, start.end())
        if end is None:
            out.append(text[start.start() :])
            return "".join(out)
        pos = end.end()
    out.append(text[pos:])
    return "".join(out)


_QUOTE_PREFIX = re.compile(r"^(?:[RL]\d+)?[+-]")


class VerdictParseError(RelayReviewError):
    """The reply holds no usable JSON verdict (the failover counts it as a failed attempt)."""


class ModelReply(BaseModel):
    """The reply object: a summary and findings. Other keys (``decision``...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    summary: str = ""
    findings: list[Finding] = []
    #: Short notes per file of the chunk (``parse_reply_parts`` fills them; optional).
    files: list[FileNote] = []

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, value: Any) -> Any:
        return "" if value is None else _text(value, MAX_SUMMARY_CHARS)

    @field_validator("findings", mode="before")
    @classmethod
    def _findings(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, list):  # only what a reply may say of a finding
            return [
                {k: f[k] for k in REPLY_KEYS if k in f} if isinstance(f, dict) else f for f in value
            ]
        return value


class Rejection(NamedTuple):
    """A finding that failed verification, why, and its 1-based position in the reply.
    ``over_limit``: rejected unchecked, past the per-reply cap (its citation may be fine)."""

    finding: Finding
    reason: str
    position: int
    over_limit: bool = False


_REPLY_KEYS = ("summary", "findings")
#: Keys under which an echoed JSON Schema (or a request body) nests reply-like keys.
_SCHEMA_KEYS = ("properties", "schema", "json_schema", "$schema", "items", "response_format")


def is_schema(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is (part of) a JSON Schema or request body echoed by the model, not a
    reply: it declares ``properties``/``$schema``/``json_schema``, or its ``summary`` is a
    schema node (``{"type": "string"}``) rather than a text."""
    if any(k in obj for k in ("$schema", "json_schema", "response_format")):
        return True
    if obj.get("type") == "object" and isinstance(obj.get("properties"), dict):
        return True
    summary = obj.get("summary")
    return isinstance(summary, dict) and "type" in summary


def _reply_shaped(obj: dict[str, Any]) -> dict[str, Any] | None:
    if is_schema(obj):
        return None
    if any(k in obj for k in _REPLY_KEYS):
        return obj
    for key, value in obj.items():  # one level of wrapping: {"review": {...}}
        if key in _SCHEMA_KEYS or not isinstance(value, dict) or is_schema(value):
            continue
        if any(k in value for k in _REPLY_KEYS):
            return value
    return None


# -- tolerant JSON ------------------------------------------------------------------------------
#
# Small models write almost-JSON: literal newlines and tabs inside strings, trailing commas,
# single quotes, Python's None/True/False, bare keys, comments, and replies cut at max_tokens.
# ``_Lenient`` reads all of that in one linear pass from a given position. A value cut by the end
# of the text is *incomplete*: an array keeps its complete items (a cut reply keeps its complete
# findings), an object keeps its complete members, anything else cut is dropped.

_MAX_DEPTH = 64
#: Most characters the tolerant reader may consume over all tries on one reply (bounds the work
#: of many false starts on hostile text to a small multiple of its length).
_LENIENT_BUDGET = 4 * MAX_REPLY_CHARS
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_WORD_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
    "NaN": None,
    "undefined": None,
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\"}
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}


class _Bad(Exception):
    """Not (tolerable) JSON at this position."""


class _Lenient:
    """A forgiving JSON reader over ``text`` (see the section comment)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.consumed = 0

    def parse(self, pos: int) -> tuple[Any, int, bool]:
        """``(value, end, complete)`` of the value starting at ``pos``; raises :class:`_Bad`."""
        value, end, complete = self._value(pos, 0)
        self.consumed += end - pos
        return value, end, complete

    def _ws(self, i: int) -> int:
        t, n = self.text, self.n
        while i < n:
            c = t[i]
            if c in " \t\r\n\ufeff\xa0":
                i += 1
            elif t.startswith("//", i):
                j = t.find("\n", i)
                i = n if j < 0 else j + 1
            elif t.startswith("/*", i):
                j = t.find("*/", i + 2)
                i = n if j < 0 else j + 2
            else:
                break
        return i

    def _value(self, i: int, depth: int) -> tuple[Any, int, bool]:
        i = self._ws(i)
        if i >= self.n:
            return None, i, False
        c = self.text[i]
        if c == "{":
            return self._object(i + 1, depth + 1)
        if c == "[":
            return self._array(i + 1, depth + 1)
        if c in "\"'":
            return self._string(i)
        number = _NUMBER.match(self.text, i)
        if number:
            end = number.end()
            raw = number.group().lstrip("+")
            try:
                value: Any = int(raw) if raw.lstrip("-").isdigit() else float(raw)
            except ValueError:  # e.g. an int too long for int()
                raise _Bad(i) from None
            return value, end, end < self.n  # a number at the very end may be cut
        word = _WORD_RE.match(self.text, i)
        if word and word.group() in _LITERALS:
            return _LITERALS[word.group()], word.end(), True
        raise _Bad(i)

    def _string(self, i: int) -> tuple[str, int, bool]:
        quote = self.text[i]
        stop = _STRING_STOP[quote]
        t = self.text
        out: list[str] = []
        i += 1
        while True:
            m = stop.search(t, i)
            if m is None:
                out.append(t[i:])
                return "".join(out), self.n, False
            j = m.start()
            out.append(t[i:j])
            if t[j] == quote:
                return "".join(out), j + 1, True
            if j + 1 >= self.n:  # a backslash at the very end
                return "".join(out), self.n, False
            e = t[j + 1]
            if e == "u":
                hexa = t[j + 2 : j + 6]
                if len(hexa) < 4:
                    return "".join(out), self.n, False
                try:
                    code = int(hexa, 16)
                except ValueError:
                    out.append("u")
                    i = j + 2
                    continue
                i = j + 6
                if 0xD800 <= code < 0xDC00 and t.startswith("\\u", i):
                    try:
                        low = int(t[i + 2 : i + 6], 16)
                    except ValueError:
                        low = -1
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                out.append(chr(code))
                continue
            out.append(_ESCAPES.get(e, e))
            i = j + 2

    def _key(self, i: int) -> tuple[str, int, bool]:
        if self.text[i] in "\"'":
            return self._string(i)
        word = _WORD_RE.match(self.text, i)
        if word is None:
            raise _Bad(i)
        return word.group(), word.end(), True

    def _object(self, i: int, depth: int) -> tuple[dict[str, Any], int, bool]:
        if depth > _MAX_DEPTH:
            raise _Bad(i)
        out: dict[str, Any] = {}
        while True:
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            c = self.text[i]
            if c == "}":
                return out, i + 1, True
            if c == ",":
                i += 1
                continue
            key, i, complete = self._key(i)
            if not complete:
                return out, i, False
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            if self.text[i] != ":":
                raise _Bad(i)
            value, i, complete = self._value(i + 1, depth)
            if not complete:
                if isinstance(value, list | dict) and value:
                    out[key] = value
                return out, i, False
            out[key] = value

    def _array(self, i: int, depth: int) -> tuple[list[Any], int, bool]:
        if depth > _MAX_DEPTH:
            raise _Bad(i)
        out: list[Any] = []
        while True:
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            c = self.text[i]
            if c == "]":
                return out, i + 1, True
            if c == ",":
                i += 1
                continue
            value, i, complete = self._value(i, depth)
            if not complete:
                return out, i, False  # the cut item is dropped
            out.append(value)


class Extracted(NamedTuple):
    """The reply object found in a model's text, and whether the text cut it off."""

    obj: dict[str, Any]
    cut: bool


def _candidates(text: str) -> Iterable[tuple[dict[str, Any], bool]]:
    """Reply-shaped objects in ``text`` in order, as ``(object, complete)``: strict JSON first at
    each ``{``, else the tolerant reader; echoed schemas are skipped."""
    decoder = json.JSONDecoder()
    lenient = _Lenient(text)
    pos = text.find("{")
    tries = 0
    while pos != -1 and tries < _MAX_SCAN:
        tries += 1
        obj: Any = None
        complete = True
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            if lenient.consumed > _LENIENT_BUDGET:
                return
            try:
                obj, end, complete = lenient.parse(pos)
            except (_Bad, RecursionError):
                pos = text.find("{", pos + 1)
                continue
        if isinstance(obj, dict):
            shaped = _reply_shaped(obj)
            if shaped is not None:
                yield shaped, complete
        if not complete:
            return
        pos = text.find("{", max(end, pos + 1))


def split_thinking(text: str) -> tuple[str, str]:
    """``(outside, inside)`` of ``<think>``/``<thinking>`` blocks in one linear pass: closed
    blocks move inside; an unclosed tag and everything after it are inside."""
    outside: list[str] = []
    inside: list[str] = []
    pos = 0
    while (start := _THINK_OPEN.search(text, pos)) is not None:
        outside.append(text[pos : start.start()])
        end = _THINK_CLOSE.search(text, start.end())
        if end is None:
            inside.append(text[start.end() :])
            return "".join(outside), "\n".join(inside)
        inside.append(text[start.end() : end.start()])
        pos = end.end()
    outside.append(text[pos:])
    return "".join(outside), "\n".join(inside)


def extract_reply(text: str) -> Extracted:
    """The reply object in a model's text (see :func:`parse_reply` for what is tolerated).

    Outside thinking blocks the first reply-shaped object wins (a complete one before a cut
    one); only when there is none, the *last* one inside the thinking (a draft there never beats
    the answer). Raises :class:`VerdictParseError` when there is none.
    """
    outside, inside = split_thinking(text)
    found = list(_candidates(outside))
    complete = [obj for obj, done in found if done]
    if complete:
        return Extracted(complete[0], False)
    if found:
        return Extracted(found[0][0], True)
    drafts = list(_candidates(inside)) if inside.strip() else []
    done = [obj for obj, ok in drafts if ok]
    if done:
        return Extracted(done[-1], False)
    if drafts:
        return Extracted(drafts[-1][0], True)
    if "{" in outside or "{" in inside:
        raise VerdictParseError("no JSON object with 'summary' or 'findings' in the reply")
    raise VerdictParseError("no JSON object in the reply")


def extract_json(text: str) -> dict[str, Any]:
    """The reply object in ``text`` (:func:`extract_reply` without the cut flag)."""
    return extract_reply(strip_thinking(text)).obj


class FileNote(BaseModel):
    """The model's short note on one file of its chunk (the evidence that it read the diff)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str
    summary: str = ""

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return _text(value, MAX_PATH_CHARS)

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, value: Any) -> Any:
        return "" if value is None else _text(value, MAX_NOTE_CHARS)


ModelReply.model_rebuild()


class ParsedReply(NamedTuple):
    """A parsed reply: its valid parts, the findings that failed the schema on their own, and
    whether the text was cut off (a cut reply keeps its complete findings)."""

    reply: ModelReply
    #: Findings that do not match the schema, each with its reason and position.
    invalid: list[Rejection]
    cut: bool
    #: The reply positions (1-based) of ``reply.findings``, in order.
    positions: list[int]


_LINE_TEXT = re.compile(r"^\s*[LRlr]?\s*(\d{1,9})(?:\s*[-–:,].*)?\s*$")


def _coerce_line(value: Any) -> Any:
    """``"12"``, ``"12-14"``, ``"R12"`` and ``12.0`` as 12; anything else unchanged."""
    if isinstance(value, str) and (m := _LINE_TEXT.match(value)):
        return int(m.group(1))
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _stand_in(item: Any) -> Finding:
    """A finding that failed the schema, kept as well as it reads (for its rejection only)."""
    raw = item if isinstance(item, dict) else {}

    def text(key: str, limit: int) -> str:
        value = raw.get(key)
        return _cut(scrub_text(value), limit) if isinstance(value, str) else ""

    line = _coerce_line(raw.get("line"))
    return Finding.model_construct(
        path=text("path", MAX_PATH_CHARS),
        line=line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 1,
        side="RIGHT",
        quote=text("quote", MAX_MESSAGE_CHARS),
        severity="low",
        message=text("message", MAX_MESSAGE_CHARS),
        end_line=None,
        suggestion=None,
        replaces=(),
    )


def _schema_reason(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "finding"
        given = err.get("input")
        shown = f" (got {_show(repr(given), 60)})" if not isinstance(given, dict) else ""
        parts.append(f"{where}: {err['msg']}{shown}")
    return _cut("does not match the schema: " + "; ".join(parts), 500)


def parse_reply_parts(text: str) -> ParsedReply:
    """Parse a model reply leniently, validate each finding on its own.

    Tolerated: prose and Markdown fences around the object, an echoed schema before it, thinking
    blocks (closed or not), literal control characters in strings, trailing commas, single
    quotes, bare keys, Python literals, a cut-off end. Raises :class:`VerdictParseError` when no
    object with ``summary`` or ``findings`` is found, or the reply is empty or too long.
    """
    if not isinstance(text, str) or not text.strip():
        raise VerdictParseError("empty reply")
    if len(text) > MAX_REPLY_CHARS:
        raise VerdictParseError(f"reply of {len(text)} characters exceeds {MAX_REPLY_CHARS}")
    obj, cut = extract_reply(text)
    raw_findings = obj.get("findings")
    raw_files = obj.get("files")
    head = {k: v for k, v in obj.items() if k not in ("findings", "files")}
    try:
        reply = ModelReply.model_validate(head)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise VerdictParseError(_cut(f"reply does not match the schema: {problems}", 500)) from exc
    findings: list[Finding] = []
    positions: list[int] = []
    invalid: list[Rejection] = []
    if raw_findings is not None and not isinstance(raw_findings, list):
        raise VerdictParseError("reply does not match the schema: findings: not a list")
    for position, item in enumerate(raw_findings or [], start=1):
        if not isinstance(item, dict):
            invalid.append(Rejection(_stand_in(item), "finding is not a JSON object", position))
            continue
        try:
            said = {k: item[k] for k in REPLY_KEYS if k in item}  # nothing a reply sets else
            finding = Finding.model_validate({**said, "line": _coerce_line(item.get("line"))})
        except ValidationError as exc:
            invalid.append(Rejection(_stand_in(item), _schema_reason(exc), position))
            continue
        findings.append(finding)
        positions.append(position)
    notes: list[FileNote] = []
    if isinstance(raw_files, list):
        for note in raw_files[:MAX_NOTES]:
            try:
                notes.append(FileNote.model_validate(note))
            except ValidationError:
                continue
    reply = reply.model_copy(update={"findings": findings, "files": notes})
    return ParsedReply(reply, invalid, cut, positions)


def parse_reply(text: str) -> ModelReply:
    """Parse a model reply into :class:`ModelReply`, or raise :class:`VerdictParseError`
    (findings that fail the schema on their own are left out: see :func:`parse_reply_parts`)."""
    return parse_reply_parts(text).reply


# -- evidence: is the reply a review at all? ------------------------------------------------------

#: A word: two letters or more (any script) standing alone, not inside a run of digits and
#: letters. A summary without one is junk (``"134428"``, ``","``, a hex token like ``"d6064bf1"``).
_WORD = re.compile(r"\b[^\W\d_]{2,}\b")


def has_word(text: str) -> bool:
    """Whether ``text`` holds a word (two letters or more standing alone, any script)."""
    return bool(_WORD.search(text or ""))


#: Word shingles (runs of this many words) a looping text repeats.
_SHINGLE_WORDS = 6


def loops(text: str) -> bool:
    """Whether ``text`` is a model stuck in a loop: among its runs of six words (at least 12 of
    them), fewer than half are distinct ("The report is a file that ... The report is a file
    that ..."). A real summary of one to three sentences never repeats itself like that."""
    words = re.findall(r"\w+", text.casefold())
    runs = [tuple(words[i : i + _SHINGLE_WORDS]) for i in range(len(words) - _SHINGLE_WORDS + 1)]
    return len(runs) >= 12 and len(set(runs)) * 2 < len(runs)


def evidence_problem(parsed: ParsedReply, paths: Sequence[str]) -> str | None:
    """Why the reply is not evidence of a review of a chunk holding ``paths`` (``None``: it is).

    A summary that is empty or junk (no word, or a loop repeating itself), or file notes naming
    a file that is not in the chunk, mean the model did not read this diff. Notes are optional
    (models omit them).
    """
    reply = parsed.reply
    if not reply.summary.strip():
        return "the summary is empty"
    if not has_word(reply.summary):
        return f"the summary holds no word ({_show(repr(reply.summary), 40)})"
    if loops(reply.summary):
        return f"the summary repeats itself ({_show(repr(reply.summary), 60)})"
    shown = set(paths)
    for note in reply.files:
        if note.path not in shown and note.path.removeprefix("./") not in shown:
            return f"a file note names {_show(note.path, 120)}, which is not in this chunk"
    return None


def all_invented(
    parsed: ParsedReply,
    verified: Sequence[Finding],
    rejected: Sequence[Rejection],
    index: DiffIndex,
) -> bool:
    """Whether the reply had findings and every one was rejected without pointing at code the
    model was shown (invented paths, lines and quotes: a hallucinated review)."""
    if verified or not rejected:
        return False
    return not any(points_at_shown_code(r.finding, index) for r in rejected)


# -- citation checks ----------------------------------------------------------------------------


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


def _show(text: str, limit: int = SHOW_CHARS) -> str:
    return _cut(show_path(text), limit)


def _nums(nums: Sequence[int]) -> str:
    return ", ".join(str(n) for n in nums)


def citation_problem(finding: Finding, index: DiffIndex) -> str | None:
    """Why ``finding`` is not verified against ``index`` (``None`` when it is)."""
    path, line, side = finding.path, finding.line, finding.side
    shown = _show(path, 200)
    f = index.file(path)
    if f is None:
        reason = f"{shown} is not a file in this diff"
        renamed = index.renamed_to(path)
        if renamed is not None:
            return f"{reason}; it was renamed or copied to {_show(renamed, 200)}: cite that path"
        close = difflib.get_close_matches(path, index.paths, n=1, cutoff=0.75)
        return f"{reason}; did you mean {_show(close[0], 200)}?" if close else reason
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
                reason += f"; its {other} lines nearest to {line}: {_nums(other_near)}"
            return reason
        reason = (
            f"line {line} of {shown} ({side}) is not a changed line;"
            f" nearest changed lines: {_nums(near)}"
        )
        if index.line(path, line, other) is not None:
            reason += f"; line {line} ({other}) is one: did you mean side {other}?"
        return reason
    if not squash(text):
        return (
            f"line {line} of {shown} ({side}) is blank and cannot be cited; cite a non-blank line"
        )
    if not squash(finding.quote):
        return f"quote is empty; line {line} of {shown} ({side}) reads `{_show(text)}`"
    others = (t for n, t in index.texts(path, side) if n != line)
    if not quote_matches(finding.quote, text, others):
        return (
            f"quote does not match line {line} of {shown} ({side}): the line reads `{_show(text)}`"
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
        return f"lines {_nums(missing[:5])} are not added lines shown in the diff"
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


def validate(
    reply: ModelReply, index: DiffIndex, *, max_findings: int = MAX_FINDINGS
) -> tuple[list[Finding], list[Rejection]]:
    """Split the reply's findings into (verified, rejected-with-reason), in reply order.

    Validate a chunk's reply against ``chunk.index`` so only lines shown to the model count.
    Findings past ``max_findings`` are rejected unchecked ("over the limit"). A verified
    finding's suggestion that does not apply to its lines is dropped (:func:`with_suggestion`).
    """
    verified: list[Finding] = []
    rejected: list[Rejection] = []
    for position, finding in enumerate(reply.findings, start=1):
        if position > max_findings:
            reason = f"over the limit of {max_findings} findings per reply"
            rejected.append(Rejection(finding, reason, position, over_limit=True))
            continue
        problem = citation_problem(finding, index)
        if problem is None:
            verified.append(with_suggestion(finding, index))
        else:
            rejected.append(Rejection(finding, problem, position))
    return verified, rejected


def validate_parts(
    parsed: ParsedReply, index: DiffIndex, *, max_findings: int = MAX_FINDINGS
) -> tuple[list[Finding], list[Rejection]]:
    """:func:`validate` over a parsed reply: findings keep their reply positions, and those that
    failed the schema on their own are rejected with their reason (the rest stand)."""
    verified, rejected = validate(parsed.reply, index, max_findings=max_findings)
    positions = parsed.positions
    rejected = [
        r._replace(position=positions[r.position - 1]) if r.position <= len(positions) else r
        for r in rejected
    ]
    rejected = sorted([*rejected, *parsed.invalid], key=lambda r: r.position)
    return verified, rejected
