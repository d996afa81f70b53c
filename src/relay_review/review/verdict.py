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
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from relay_review._text import find_invisible
from relay_review.errors import RelayReviewError
from relay_review.redact import REPLACEMENT
from relay_review.review.chunks import show_path
from relay_review.review.diff import DiffIndex, Side, scrub_text

Severity = Literal["high", "medium", "low"]

MAX_FINDINGS = 30
MAX_MESSAGE_CHARS = 2000
MAX_SUMMARY_CHARS = 4000
#: Longer than any path a checkout can hold (Linux ``PATH_MAX``).
MAX_PATH_CHARS = 4096
#: A suggestion (replacement code) longer than this is dropped, never cut (cut code is broken).
MAX_SUGGESTION_CHARS = 8000
#: Most RIGHT lines one suggestion may replace (``line`` .. ``end_line``).
MAX_SUGGESTION_LINES = 50
MAX_REPLY_CHARS = 1_000_000
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
_SIDE_ALIASES = {
    "RIGHT": "RIGHT",
    "R": "RIGHT",
    "NEW": "RIGHT",
    "ADDED": "RIGHT",
    "+": "RIGHT",
    "LEFT": "LEFT",
    "L": "LEFT",
    "OLD": "LEFT",
    "REMOVED": "LEFT",
    "DELETED": "LEFT",
    "-": "LEFT",
}
_SEVERITY_ALIASES = {
    "high": "high",
    "critical": "high",
    "blocker": "high",
    "severe": "high",
    "major": "high",
    "error": "high",
    "medium": "medium",
    "moderate": "medium",
    "warning": "medium",
    "med": "medium",
    "low": "low",
    "minor": "low",
    "info": "low",
    "nit": "low",
    "trivial": "low",
    "suggestion": "low",
}


class VerdictParseError(RelayReviewError):
    """The reply holds no usable JSON verdict (the failover counts it as a failed attempt)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(value: Any, limit: int | None = None) -> Any:
    """A model-supplied string made encodable and capped; anything else unchanged (the schema
    then refuses it)."""
    if not isinstance(value, str):
        return value
    value = scrub_text(value)
    return value if limit is None else _cut(value, limit)


class Finding(BaseModel):
    """One review finding as the model states it (raw texts; rendering escapes them later)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str
    line: int
    side: Side = "RIGHT"
    quote: str = ""
    severity: Severity
    message: str
    #: Last RIGHT line a suggestion replaces (``line`` is the first); ``None``: ``line`` only.
    end_line: int | None = None
    #: Replacement text for the RIGHT lines ``line`` .. ``end_line`` (``None``: no suggestion).
    suggestion: str | None = None
    #: The current text of the lines the suggestion replaces: set only by :func:`validate` from
    #: the diff (anything a reply puts here is discarded on parsing).
    replaces: tuple[str, ...] = ()

    @field_validator("replaces", mode="before")
    @classmethod
    def _replaces(cls, value: Any) -> Any:
        return ()

    @field_validator("end_line", mode="before")
    @classmethod
    def _end_line(cls, value: Any) -> Any:
        return None if isinstance(value, bool) or not isinstance(value, int) else value

    @field_validator("suggestion", mode="before")
    @classmethod
    def _suggestion(cls, value: Any) -> Any:
        return scrub_text(value) if isinstance(value, str) else None

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return _text(value, MAX_PATH_CHARS)

    @field_validator("side", mode="before")
    @classmethod
    def _side(cls, value: Any) -> Any:
        if value is None:
            return "RIGHT"
        if isinstance(value, str):
            return _SIDE_ALIASES.get(value.strip().upper(), value)
        return value

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _SEVERITY_ALIASES.get(value.strip().lower(), value)
        return value

    @field_validator("quote", mode="before")
    @classmethod
    def _quote(cls, value: Any) -> Any:
        return "" if value is None else _text(value)

    @field_validator("message", mode="before")
    @classmethod
    def _message(cls, value: Any) -> Any:
        return "" if value is None else _text(value, MAX_MESSAGE_CHARS)


class ModelReply(BaseModel):
    """The reply object: a summary and findings. Other keys (``decision``...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    summary: str = ""
    findings: list[Finding] = []

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, value: Any) -> Any:
        return "" if value is None else _text(value, MAX_SUMMARY_CHARS)

    @field_validator("findings", mode="before")
    @classmethod
    def _findings(cls, value: Any) -> Any:
        return [] if value is None else value


class Rejection(NamedTuple):
    """A finding that failed verification, why, and its 1-based position in the reply.
    ``over_limit``: rejected unchecked, past the per-reply cap (its citation may be fine)."""

    finding: Finding
    reason: str
    position: int
    over_limit: bool = False


_REPLY_KEYS = ("summary", "findings")


def _reply_shaped(obj: dict[str, Any]) -> dict[str, Any] | None:
    if any(k in obj for k in _REPLY_KEYS):
        return obj
    for value in obj.values():  # one level of wrapping: {"review": {...}}
        if isinstance(value, dict) and any(k in value for k in _REPLY_KEYS):
            return value
    return None


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``, tolerating code fences and prose around it.

    Tries ``json.JSONDecoder.raw_decode`` at each ``{`` (at most 2,000 of them). The first object
    shaped like a reply (a ``summary`` or ``findings`` key, directly or one level down) wins;
    otherwise the first object found. Raises :class:`VerdictParseError` when there is none.
    """
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    pos = text.find("{")
    tries = 0
    while pos != -1 and tries < _MAX_SCAN:
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            shaped = _reply_shaped(obj)
            if shaped is not None:
                return shaped
            if first is None:
                first = obj
        pos = text.find("{", max(end, pos + 1))
    if first is None:
        raise VerdictParseError("no JSON object in the reply")
    return first


def parse_reply(text: str) -> ModelReply:
    """Parse a model reply into :class:`ModelReply`, or raise :class:`VerdictParseError`."""
    if not isinstance(text, str) or not text.strip():
        raise VerdictParseError("empty reply")
    if len(text) > MAX_REPLY_CHARS:
        raise VerdictParseError(f"reply of {len(text)} characters exceeds {MAX_REPLY_CHARS}")
    obj = extract_json(strip_thinking(text))
    if not any(k in obj for k in _REPLY_KEYS):
        raise VerdictParseError("JSON object has neither 'summary' nor 'findings'")
    try:
        return ModelReply.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise VerdictParseError(_cut(f"reply does not match the schema: {problems}", 500)) from exc


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
