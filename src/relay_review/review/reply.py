"""The model's reply: the JSON object found in its text, read against the reply schema.

Model output is hostile input. The reply is the first reply-shaped object outside thinking
blocks (echoed schemas skipped; almost-JSON read by :mod:`.lenient_json`), validated as
:class:`ModelReply` (extra keys, including an advisory ``decision``, are ignored); each finding
is validated on its own, so one bad finding does not sink the rest. Texts are kept raw and
length-capped (lone surrogates become U+FFFD, so every text encodes as UTF-8); nothing here
renders or escapes. Whether a finding cites the diff is :mod:`.citations`' question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from relay_review.errors import RelayReviewError
from relay_review.records.finding import (
    MAX_MESSAGE_CHARS,
    MAX_PATH_CHARS,
    REPLY_KEYS,
    Finding,
)
from relay_review.records.finding import clean_text as _text
from relay_review.records.finding import cut as _cut
from relay_review.review.diff import scrub_text
from relay_review.review.lenient_json import LenientReader, NotJson
from relay_review.review.rejection import Rejection, show

#: Longest summary kept (cut with "…", like a finding's message and path).
MAX_SUMMARY_CHARS = 4000
#: A reply longer than this is refused as malformed.
MAX_REPLY_CHARS = 1_000_000
#: Longest file note (``files[].summary``) kept; most notes kept per reply.
MAX_NOTE_CHARS = 600
MAX_NOTES = 200

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


#: Most characters the tolerant reader may consume over all tries on one reply (bounds the work
#: of many false starts on hostile text to a small multiple of its length).
_LENIENT_BUDGET = 4 * MAX_REPLY_CHARS


class Extracted(NamedTuple):
    """The reply object found in a model's text, and whether the text cut it off."""

    obj: dict[str, Any]
    cut: bool
    #: The model's other complete reply objects outside thinking (a draft and its correction):
    #: their findings are read too, so a finding the model wrote is never lost to an earlier
    #: object that has none (each one is still checked against the diff).
    more: tuple[dict[str, Any], ...] = ()


def _candidates(text: str) -> Iterable[tuple[dict[str, Any], bool]]:
    """Reply-shaped objects in ``text`` in order, as ``(object, complete)``: strict JSON first at
    each ``{``, else the tolerant reader; echoed schemas are skipped."""
    decoder = json.JSONDecoder()
    lenient = LenientReader(text)
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
            except (NotJson, RecursionError):
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
    outside, inside, _ = _split_thinking(text)
    return outside, inside


def _split_thinking(text: str) -> tuple[str, str, bool]:
    """:func:`split_thinking`, and whether the last block was left unclosed (the text ended
    while the model was still thinking)."""
    outside: list[str] = []
    inside: list[str] = []
    pos = 0
    while (start := _THINK_OPEN.search(text, pos)) is not None:
        outside.append(text[pos : start.start()])
        end = _THINK_CLOSE.search(text, start.end())
        if end is None:
            inside.append(text[start.end() :])
            return "".join(outside), "\n".join(inside), True
        inside.append(text[start.end() : end.start()])
        pos = end.end()
    outside.append(text[pos:])
    return "".join(outside), "\n".join(inside), False


def extract_reply(text: str, quoted: Callable[[dict], bool] | None = None) -> Extracted:
    """The reply object in a model's text (see :func:`parse_reply` for what is tolerated).

    Outside thinking blocks the first reply-shaped object wins (a complete one before a cut
    one), except that one ``quoted`` from the pull request (the model citing a planted verdict)
    yields to a later one that is not; the model's other complete objects come back in
    ``more`` (their findings count too); only when there is none, the *last* one inside the
    thinking (a draft there never beats the answer), and it counts as cut when the thinking
    was never closed (an unfinished thought is no finished answer: partial, never approve).
    Raises :class:`VerdictParseError` when there is none.
    """
    outside, inside, unclosed = _split_thinking(text)
    found = list(_candidates(outside))
    complete = [obj for obj, done in found if done]
    if complete:
        own = [obj for obj in complete if not (quoted and quoted(obj))]
        chosen = (own or complete)[0]
        return Extracted(chosen, False, tuple(obj for obj in own if obj is not chosen))
    if found:
        return Extracted(found[0][0], True)
    drafts = list(_candidates(inside)) if inside.strip() else []
    done = [obj for obj, ok in drafts if ok]
    if done:
        return Extracted(done[-1], unclosed)
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
    #: The paths of file notes that fail the schema (a summary that is not text): not notes,
    #: but what they name is still evidence of which diff the model read.
    named: tuple[str, ...] = ()


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
        shown = f" (got {show(repr(given), 60)})" if not isinstance(given, dict) else ""
        parts.append(f"{where}: {err['msg']}{shown}")
    return _cut("does not match the schema: " + "; ".join(parts), 500)


def parse_reply_parts(text: str, quoted: Callable[[dict], bool] | None = None) -> ParsedReply:
    """Parse a model reply leniently, validate each finding on its own.

    Tolerated: prose and Markdown fences around the object, an echoed schema before it, thinking
    blocks (closed or not), literal control characters in strings, trailing commas, single
    quotes, bare keys, Python literals, a cut-off end. An object ``quoted`` from the pull
    request yields to the model's own (:func:`extract_reply`). Raises
    :class:`VerdictParseError` when no object with ``summary`` or ``findings`` is found, or the
    reply is empty or too long.
    """
    if not isinstance(text, str) or not text.strip():
        raise VerdictParseError("empty reply")
    if len(text) > MAX_REPLY_CHARS:
        raise VerdictParseError(f"reply of {len(text)} characters exceeds {MAX_REPLY_CHARS}")
    obj, cut, more = extract_reply(text, quoted)
    raw_findings = obj.get("findings")
    extra = [f for o in more if isinstance(o.get("findings"), list) for f in o["findings"]]
    if extra and (raw_findings is None or isinstance(raw_findings, list)):
        # a later object's findings (a correction) are the model's words too
        raw_findings = [*(raw_findings if isinstance(raw_findings, list) else []), *extra]
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
    named: list[str] = []
    if isinstance(raw_files, list):
        for note in raw_files[:MAX_NOTES]:
            try:
                notes.append(FileNote.model_validate(note))
            except ValidationError:
                path = note.get("path") if isinstance(note, dict) else None
                if isinstance(path, str):
                    named.append(_text(path, MAX_PATH_CHARS))
    reply = reply.model_copy(update={"findings": findings, "files": notes})
    return ParsedReply(reply, invalid, cut, positions, tuple(named))


def parse_reply(text: str) -> ModelReply:
    """Parse a model reply into :class:`ModelReply`, or raise :class:`VerdictParseError`
    (findings that fail the schema on their own are left out: see :func:`parse_reply_parts`)."""
    return parse_reply_parts(text).reply
