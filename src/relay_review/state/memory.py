"""The memory record: what one run leaves for the next, typed, versioned and size-bounded.

It holds route ids, outcome kinds, times (Unix seconds), content hashes and verified findings
(their location, severity and message, and a hash of the cited line: never the line itself)
only: never a key, a prompt, a reply text or a diff's patch. :func:`encode` writes it as compact
JSON cut to a byte bound (oldest entries go first); :func:`decode` reads it back or says why not.

Everything read back is hostile input (any store can be written by someone else, or by a bug):
:func:`decode` refuses a record too big, not UTF-8, nested deeper than ours ever is (before it is
parsed: no ``RecursionError``) or not ours, and validates each entry on its own (:func:`entry`,
strictly typed, finite, within :class:`Limits`), so one bad entry is dropped and the others kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

#: The record's version: a store written by another version is ignored (never migrated).
VERSION: Literal[2] = 2
#: The most bytes a stored record may take (the sticky comment's hidden payload must stay small).
MAX_BYTES = 16 * 1024
#: The deepest a stored record may nest (ours nests 5 levels); deeper is refused unparsed.
MAX_DEPTH = 16
#: Seconds a stored time may run ahead of this runner's clock (runners' clocks disagree a little).
CLOCK_SKEW_S = 300.0
#: No stored time is after this (year 5138): keeps every time finite and every TTL an int.
MAX_TIME = 1e11
#: The longest first byte (seconds) a route memo may hold (:attr:`RouteMemo.first_byte_s`):
#: a longer one measured is stored as this; a record holding more is not one we wrote.
MAX_FIRST_BYTE_S = 600.0
#: The longest a memory key (a route id, an account name, a content hash) may be.
MAX_KEY_CHARS = 512

RouteState = Literal["proven", "dead", "cooling"]
_Time = Field(ge=0, le=MAX_TIME)


@dataclass(frozen=True)
class Limits:
    """What a stored entry's times may be when read at ``now``: its ``at`` no later than ``now``
    plus the clock skew, its ``until`` no later than ``now`` plus ``horizon`` (the policy's
    longest ``[memory]`` time, :func:`relay_review.pipeline.memory.limits`) plus the skew."""

    now: float
    horizon: float
    skew: float = CLOCK_SKEW_S
    #: the longest a finding's state across pushes may count (``[memory] findings``)
    findings: float = 0.0

    def problem(self, at: float, until: float, longest: float | None = None) -> str | None:
        """Why an entry with these times cannot be true now (None: they can); ``longest``: its
        section's longest time (:attr:`horizon` when None)."""
        if at > self.now + self.skew:
            return "a time in the future"
        if until < at:
            return "an end before its start"
        if until > self.now + (self.horizon if longest is None else longest) + self.skew:
            return "an end beyond the longest [memory] time"
        return None


class _Record(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)


class _Timed(_Record):
    """An entry with a start (``at``) and an end (``until``); read with :class:`Limits` in the
    validation context (as :func:`entry` does), they must be possible at that time."""

    at: float = _Time
    until: float = _Time

    def _longest(self, limits: Limits) -> float | None:
        return None  # the limits' horizon

    @model_validator(mode="after")
    def _possible(self, info: ValidationInfo) -> Any:
        limits = (info.context or {}).get("limits")
        if isinstance(limits, Limits):
            problem = limits.problem(self.at, self.until, self._longest(limits))
            if problem:
                raise ValueError(problem)
        return self


class RouteMemo(_Timed):
    """One route's (or account's) last outcome: ``proven`` served, ``dead`` will not serve,
    ``cooling`` may serve after ``until``. ``strikes``: timeouts in a row (the cooldown doubles).
    ``first_byte_s``: a proven route's first byte when it served (the hedge delay derives from
    it: :func:`relay_review.routing.board.hedge_delay`), finite, 0 to ``MAX_FIRST_BYTE_S``."""

    state: RouteState
    outcome: str = Field(max_length=40)
    strikes: int = Field(0, ge=0, le=32)
    first_byte_s: float | None = Field(None, ge=0, le=MAX_FIRST_BYTE_S)


class ReusedFinding(_Record):
    """A verified finding kept for a file (:class:`relay_review.records.Finding`): its
    location and ``quote_sha``, the SHA-256 of the cited line as the diff showed it (a line
    that no longer matches drops it). The quote is never kept: it is read again from the
    current diff, as ``quote_span`` of the cited line (character offsets) between the model's
    ``quote_pre`` and ``quote_post`` (a copied diff marker or whitespace, nothing else), and
    must hash as ``quote_hash`` did (else the whole line stands for it). ``end_line`` and
    ``suggestion`` (model output, scrubbed like every record) are checked again against the
    diff on reuse, which gives ``replaces`` back. ``n``: its place in its chunk's reply."""

    path: str = Field(max_length=4096)
    line: int = Field(ge=0, le=10**9)
    side: str = "RIGHT"
    quote_sha: str = Field(pattern=r"^[0-9a-f]{64}$")
    severity: str = Field(max_length=20)
    message: str = Field("", max_length=4000)
    end_line: int | None = Field(None, ge=0, le=10**9)
    suggestion: str | None = Field(None, max_length=8000)
    #: a JSON array of two offsets (a list: strict validation takes no array as a tuple)
    quote_span: list[Annotated[int, Field(ge=0, le=10**6)]] | None = Field(
        None, min_length=2, max_length=2
    )
    quote_pre: str = Field("", max_length=16, pattern=r"^[\sRL0-9+-]*$")
    quote_post: str = Field("", max_length=16, pattern=r"^\s*$")
    quote_hash: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    n: int = Field(0, ge=0, le=10_000)


class ChunkMemo(_Timed):
    """A review kept for reuse: when, at which head, by which route (``{account identity}/
    {model}``, see :mod:`relay_review.pipeline.memory`).

    Two kinds, both under a content hash (:mod:`relay_review.pipeline.review_cache`):
    a **file unit** (``group`` set: ``paths`` is the one file, ``findings`` its verified
    findings, ``scope`` a hash of the review's settings, ``group`` the key of the chunk review
    it came from), and a **chunk review** (``group`` empty: ``paths`` every file of the chunk,
    ``summary`` the model's summary, ``part`` of ``parts``), which the file units of that chunk
    share, so a summary is kept once, not once per file."""

    head: str = Field("", max_length=64)
    route: str = Field("", max_length=300)
    paths: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list, max_length=2000
    )
    findings: list[ReusedFinding] = Field(default_factory=list, max_length=500)
    group: str = Field("", max_length=32)
    scope: str = Field("", max_length=32)
    summary: str = Field("", max_length=4000)
    part: int = Field(1, ge=1, le=100_000)
    parts: int = Field(1, ge=1, le=100_000)


FindingState = Literal["open", "fixed", "dismissed"]
#: The side of the diff a finding's cited lines are on (RIGHT: the head's added lines, LEFT:
#: the base's removed lines), as GitHub spells it: ``records.finding.Side``, spelled here so
#: loading memory (before the first request) does not import the findings' records.
FindingSide = Literal["RIGHT", "LEFT"]


class FindingMemo(_Timed):
    """A finding seen on an earlier push, by fingerprint (:mod:`relay_review.review.fingerprint`):
    its path, its cited lines' hash, the commit it was first seen at, and its state; ``how`` says
    how it was fixed or dismissed (``fixed``, ``code changed``, ``won't fix``, ``👎``, ...). A
    ``dismissed`` one is never posted again. ``side``: the side its cited lines are on, where a
    later push looks for them (``None``: written before sides were kept; either side); read
    strictly like every field, so anything but ``RIGHT`` or ``LEFT`` drops the entry."""

    path: str = Field(max_length=4096)
    cited: str = Field("", max_length=40)
    first: str = Field("", max_length=64)
    state: FindingState = "open"
    how: str = Field("", max_length=40)
    side: FindingSide | None = None

    def _longest(self, limits: Limits) -> float | None:
        return max(limits.horizon, limits.findings)


class Memory(_Record):
    """Everything remembered: routes and accounts by id, reviewed chunks by content hash, and
    (optional) the pull request's findings by fingerprint."""

    version: Literal[2] = VERSION
    routes: dict[str, RouteMemo] = Field(default_factory=dict)
    accounts: dict[str, RouteMemo] = Field(default_factory=dict)
    chunks: dict[str, ChunkMemo] = Field(default_factory=dict)
    findings: dict[str, FindingMemo] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        routes: Mapping[str, RouteMemo] | None = None,
        accounts: Mapping[str, RouteMemo] | None = None,
        chunks: Mapping[str, ChunkMemo] | None = None,
        findings: Mapping[str, FindingMemo] | None = None,
    ) -> Memory:
        """A memory of memos already validated (each read by :func:`entry`, or made by this
        run), put together without the record's own validator: building it (every section's
        schema) cost about 2 % of the start-up, and it is needed only to write the record."""
        return cls.model_construct(
            version=VERSION,
            routes=dict(routes or {}),
            accounts=dict(accounts or {}),
            chunks=dict(chunks or {}),
            findings=dict(findings or {}),
        )

    def route_memory(self) -> Memory:
        """Its route and account memos only (what a shared store keeps without a state key)."""
        return Memory.of(routes=self.routes, accounts=self.accounts)

    def review_memory(self) -> Memory:
        """Its review cache and findings' states only (what decides a verdict)."""
        return Memory.of(chunks=self.chunks, findings=self.findings)

    def fresh(self, now: float) -> Memory:
        """Only the entries whose time has not run out at ``now``."""
        return Memory.of(
            routes={k: v for k, v in self.routes.items() if v.until > now},
            accounts={k: v for k, v in self.accounts.items() if v.until > now},
            chunks={k: v for k, v in self.chunks.items() if v.until > now},
            findings={k: v for k, v in self.findings.items() if v.until > now},
        )


def newer_routes(own: Memory, other: Memory) -> tuple[Memory, set[str], set[str]]:
    """``own`` with ``other``'s route and account memos where ``own`` has none or an older one
    (by ``at``; ``own`` wins a tie), its chunks and findings untouched; and the route and
    account keys taken from ``other``."""
    merged: dict[str, dict[str, RouteMemo]] = {}
    taken: dict[str, set[str]] = {}
    for name in ("routes", "accounts"):
        mine: dict[str, RouteMemo] = dict(getattr(own, name))
        taken[name] = set()
        for key, memo in getattr(other, name).items():
            if key not in mine or memo.at > mine[key].at:
                mine[key] = memo
                taken[name].add(key)
        merged[name] = mine
    return own.model_copy(update=merged), taken["routes"], taken["accounts"]


class Unusable(ValueError):
    """A stored record that cannot be used; the message says why (for the one warning)."""


def _dump(memory: Memory) -> bytes:
    data = memory.model_dump(mode="json")
    # a reviewed file's memo leaves out the fields at their defaults (a pull request's files
    # share the comment's 16 KB): decoding fills them in again
    data["chunks"] = {
        k: v.model_dump(mode="json", exclude_defaults=True) for k, v in memory.chunks.items()
    }
    # a finding whose side is not known is written as before sides were kept (no ``side``)
    data["findings"] = {
        k: v.model_dump(mode="json", exclude_none=True) for k, v in memory.findings.items()
    }
    return json.dumps(data, separators=(",", ":"), ensure_ascii=True).encode()


def encode(memory: Memory, limit: int = MAX_BYTES) -> bytes:
    """Compact JSON of ``memory`` in at most ``limit`` bytes: the oldest chunks, then the oldest
    routes, then the oldest findings are dropped until it fits."""
    data = _dump(memory)
    chunks = sorted(memory.chunks.items(), key=lambda kv: kv[1].at)
    routes = sorted(memory.routes.items(), key=lambda kv: kv[1].at)
    findings = sorted(memory.findings.items(), key=lambda kv: kv[1].at)
    while len(data) > limit and (chunks or routes or findings):
        if chunks:
            chunks.pop(0)
        elif routes:
            routes.pop(0)
        else:
            findings.pop(0)
        memory = memory.model_copy(
            update={"chunks": dict(chunks), "routes": dict(routes), "findings": dict(findings)}
        )
        data = _dump(memory)
    return data


#: Each section of the record: the model of its entries.
SECTIONS: dict[str, type[RouteMemo] | type[ChunkMemo] | type[FindingMemo]] = {
    "routes": RouteMemo,
    "accounts": RouteMemo,
    "chunks": ChunkMemo,
    "findings": FindingMemo,
}


@dataclass
class Loaded:
    """What a store held that can be used, and how many entries were not (the first one's
    reason, for the one warning)."""

    memory: Memory
    ignored: int = 0
    why: str = ""

    def drop(self, why: str) -> None:
        """Count one ignored entry (the first reason is kept)."""
        self.ignored += 1
        self.why = self.why or why


#: What :func:`depth` looks at: an escape (two characters), a quote or a bracket.
_TOKEN = re.compile(r'\\.|["\[\]{}]', re.S)


def depth(text: str) -> int:
    """How deep the JSON in ``text`` nests (brackets outside strings), without parsing it: one
    pass over its quotes, escapes and brackets (linear in the text: a stored record of
    unterminated escaped quotes costs no more than any other record of its size)."""
    deepest = level = 0
    in_string = False
    for match in _TOKEN.finditer(text):
        mark = match.group()
        if mark == '"':
            in_string = not in_string
        elif not in_string and len(mark) == 1:
            level = level + 1 if mark in "[{" else level - 1
            deepest = max(deepest, level)
    return deepest


def parse(data: bytes | str, limit: int) -> Any:
    """The JSON value in ``data`` (at most ``limit`` bytes of UTF-8, nested at most
    :data:`MAX_DEPTH`); raises :class:`Unusable` saying which of those it is not."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > limit:
        raise Unusable(f"{len(raw)} bytes, more than the {limit} allowed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unusable("not UTF-8") from None
    if depth(text) > MAX_DEPTH:
        raise Unusable(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)  # NaN and Infinity parse; no entry accepts them
    except (ValueError, RecursionError):
        raise Unusable("not valid JSON") from None


def entry(
    section: str, key: Any, value: Any, limits: Limits | None
) -> tuple[RouteMemo | ChunkMemo | FindingMemo | None, str]:
    """One stored entry of ``section`` validated strictly (types, bounds, finite numbers, and
    times possible under ``limits``): ``(the memo, "")`` or ``(None, why not)``."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
        return None, f"{section}: a key that is not a short line of text"
    model = SECTIONS[section]
    try:
        memo = model.model_validate(value, strict=True, context={"limits": limits})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"])[:60]
        return None, f"{section} entry malformed{' at ' + where if where else ''}: {error['msg']}"[
            :200
        ]
    return memo, ""


def decode(data: bytes | str, limit: int = MAX_BYTES, limits: Limits | None = None) -> Loaded:
    """The usable entries of the record in ``data``; raises :class:`Unusable` when the record
    as a whole is not (oversized, not UTF-8, too deep, not JSON, another version); an entry that
    is not usable is dropped and counted (:class:`Loaded`)."""
    return read_record(parse(data, limit), limits)


def read_record(obj: Any, limits: Limits | None = None) -> Loaded:
    """:func:`decode` of the JSON value ``obj`` already parsed (by :func:`parse`)."""
    if not isinstance(obj, dict):
        raise Unusable("not a JSON object")
    if type(obj.get("version")) is not int or obj["version"] != VERSION:
        raise Unusable(f"version {str(obj.get('version'))[:20]!r}, this release reads {VERSION}")
    loaded = Loaded(Memory.of())
    kept: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for name, section in obj.items():
        if name == "version":
            continue
        if name not in SECTIONS:
            loaded.drop(f"an unknown section {name[:40]!r}")
            continue
        if not isinstance(section, dict):
            loaded.drop(f"{name} is not an object")
            continue
        for key, value in section.items():
            memo, why = entry(name, key, value, limits)
            if memo is None:
                loaded.drop(why)
            else:
                kept[name][key] = memo
    loaded.memory = Memory.of(**kept)  # each entry validated by entry()
    return loaded
