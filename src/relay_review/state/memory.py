"""The memory record: what one run leaves for the next, typed, versioned and size-bounded.

It holds route ids, outcome kinds, times (Unix seconds), content hashes and verified findings
(their location, severity and message, and a hash of the cited line: never the line itself)
only: never a key, a prompt, a reply text or a diff's patch. :func:`encode` writes it as compact
JSON cut to a byte bound (oldest entries go first); :func:`decode` reads it back or says why not.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: The record's version: a store written by another version is ignored (never migrated).
VERSION: Literal[2] = 2
#: The most bytes a stored record may take (the sticky comment's hidden payload must stay small).
MAX_BYTES = 16 * 1024

RouteState = Literal["proven", "dead", "cooling"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouteMemo(_Record):
    """One route's (or account's) last outcome: ``proven`` served, ``dead`` will not serve,
    ``cooling`` may serve after ``until``. ``strikes``: timeouts in a row (the cooldown doubles)."""

    state: RouteState
    outcome: str = Field(max_length=40)
    at: float
    until: float
    strikes: int = Field(0, ge=0, le=32)


class ReusedFinding(_Record):
    """A verified finding kept for a file (:class:`relay_review.review.verdict.Finding`): its
    location and ``quote_sha``, the SHA-256 of the cited line as the diff showed it (a line
    that no longer matches drops it). The quote is never kept: it is read again from the
    current diff, as ``quote_span`` of the cited line (character offsets) between the model's
    ``quote_pre`` and ``quote_post`` (a copied diff marker or whitespace, nothing else), and
    must hash as ``quote_hash`` did (else the whole line stands for it). ``end_line`` and
    ``suggestion`` (model output, scrubbed like every record) are checked again against the
    diff on reuse, which gives ``replaces`` back. ``n``: its place in its chunk's reply."""

    path: str = Field(max_length=4096)
    line: int
    side: str = "RIGHT"
    quote_sha: str = Field(pattern=r"^[0-9a-f]{64}$")
    severity: str = Field(max_length=20)
    message: str = Field("", max_length=4000)
    end_line: int | None = None
    suggestion: str | None = Field(None, max_length=8000)
    quote_span: tuple[int, int] | None = None
    quote_pre: str = Field("", max_length=16, pattern=r"^[\sRL0-9+-]*$")
    quote_post: str = Field("", max_length=16, pattern=r"^\s*$")
    quote_hash: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    n: int = Field(0, ge=0, le=10_000)


class ChunkMemo(_Record):
    """A review kept for reuse: when, at which head, by which route (``{account identity}/
    {model}``, see :mod:`relay_review.pipeline.memory`).

    Two kinds, both under a content hash (:mod:`relay_review.state.chunks`): a **file unit**
    (``group`` set: ``paths`` is the one file, ``findings`` its verified findings, ``scope`` a
    hash of the review's settings, ``group`` the key of the chunk review it came from), and a
    **chunk review** (``group`` empty: ``paths`` every file of the chunk, ``summary`` the
    model's summary, ``part`` of ``parts``), which the file units of that chunk share, so a
    summary is kept once, not once per file."""

    at: float
    until: float
    head: str = Field("", max_length=64)
    route: str = Field("", max_length=300)
    paths: list[str] = Field(default_factory=list)
    findings: list[ReusedFinding] = Field(default_factory=list)
    group: str = Field("", max_length=32)
    scope: str = Field("", max_length=32)
    summary: str = Field("", max_length=4000)
    part: int = Field(1, ge=1, le=100_000)
    parts: int = Field(1, ge=1, le=100_000)


FindingState = Literal["open", "fixed", "dismissed"]


class FindingMemo(_Record):
    """A finding seen on an earlier push, by fingerprint (:mod:`relay_review.review.fingerprint`):
    its path, its cited lines' hash, the commit it was first seen at, and its state; ``how`` says
    how it was fixed or dismissed (``fixed``, ``code changed``, ``won't fix``, ``👎``, ...). A
    ``dismissed`` one is never posted again."""

    path: str = Field(max_length=4096)
    cited: str = Field("", max_length=40)
    first: str = Field("", max_length=64)
    state: FindingState = "open"
    how: str = Field("", max_length=40)
    at: float
    until: float


class Memory(_Record):
    """Everything remembered: routes and accounts by id, reviewed chunks by content hash, and
    (optional) the pull request's findings by fingerprint."""

    version: Literal[2] = VERSION
    routes: dict[str, RouteMemo] = Field(default_factory=dict)
    accounts: dict[str, RouteMemo] = Field(default_factory=dict)
    chunks: dict[str, ChunkMemo] = Field(default_factory=dict)
    findings: dict[str, FindingMemo] = Field(default_factory=dict)

    def fresh(self, now: float) -> Memory:
        """Only the entries whose time has not run out at ``now``."""
        return Memory(
            routes={k: v for k, v in self.routes.items() if v.until > now},
            accounts={k: v for k, v in self.accounts.items() if v.until > now},
            chunks={k: v for k, v in self.chunks.items() if v.until > now},
            findings={k: v for k, v in self.findings.items() if v.until > now},
        )


class Unusable(ValueError):
    """A stored record that cannot be used; the message says why (for the one warning)."""


def _dump(memory: Memory) -> bytes:
    data = memory.model_dump(mode="json")
    # a reviewed file's memo leaves out the fields at their defaults (a pull request's files
    # share the comment's 16 KB): decoding fills them in again
    data["chunks"] = {
        k: v.model_dump(mode="json", exclude_defaults=True) for k, v in memory.chunks.items()
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


def decode(data: bytes | str, limit: int = MAX_BYTES) -> Memory:
    """The record in ``data``; raises :class:`Unusable` (oversized, not JSON, another version,
    wrong shape)."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > limit:
        raise Unusable(f"{len(raw)} bytes, more than the {limit} allowed")
    try:
        obj = json.loads(raw)
    except ValueError:
        raise Unusable("not valid JSON") from None
    if not isinstance(obj, dict):
        raise Unusable("not a JSON object")
    if obj.get("version") != VERSION:
        raise Unusable(f"version {str(obj.get('version'))[:20]!r}, this release reads {VERSION}")
    try:
        return Memory.model_validate(obj)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"])[:80]
        raise Unusable(f"malformed at {where}: {error['msg']}") from None
