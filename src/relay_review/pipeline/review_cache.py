"""The review cache: a file reviewed before gets that run's verified findings back, unasked.

The cache unit is a **file**, not a chunk: at the default chunk size a typical pull request is
one chunk, so a chunk-keyed cache would re-send the whole diff for a one-line change. A file is
known by the hash (:func:`unit_key`) of its rendered patch with its context
(:func:`relay_review.review.chunks.unit_text`, independent of the other files) under the
review's **scope** (:func:`scope_key`): the repository, the prompt's rules, the pull request's
title and description, the maintainers' instructions and every review setting. Each chunk a
model reviewed is also kept once, by :func:`chunk_key`, with its summary; its files' units point
at it (``group``). A memo names the route that reviewed it by identity (``{account
identity}/{model}``): the pipeline reuses it only while the catalog still selects that route.
Reused findings are validated again against the current diff (a finding whose line no longer
matches is dropped). The cache holds hashes, paths, times, verified findings and summaries
(model output) only, never the patch: a finding keeps its location, the SHA-256 of the cited
line and of its quote, and its quote is read again from the current diff on reuse.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from relay_review.config import ReviewPolicy
from relay_review.records import Finding
from relay_review.review.chunks import Chunk
from relay_review.review.citations import citation_problem
from relay_review.review.diff import DiffIndex
from relay_review.review.prompt import system_message
from relay_review.review.suggestions import with_suggestion
from relay_review.state.memory import ChunkMemo, Memory, ReusedFinding

#: Bump when the meaning of a cached review changes without the prompt text changing.
#: 3: the cache unit is a file (chunk memos of version 2 are never looked up again).
CACHE_VERSION = "3"
#: What may stand around a quote's span of the cited line (a copied marker, whitespace).
_PRE = re.compile(r"[\sRL0-9+-]{0,16}")
_POST = re.compile(r"\s{0,16}")


def line_sha(text: str) -> str:
    """The SHA-256 (hex) of a cited line's text (or a quote), as a stored finding keeps it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def scope_key(
    review: ReviewPolicy,
    title: str | None,
    body: str | None,
    instructions: str = "",
    *,
    repo: str = "",
) -> str:
    """The hash (hex, 16 characters) of everything but the diff that shapes a review:
    ``instructions`` as the system message carries them, ``repo`` the reviewed repository (a
    verdict is never reused in another one, even through a shared Redis)."""
    shape = {
        "repo": repo,
        "instructions": instructions,
        "v": CACHE_VERSION,
        "rules": system_message("0" * 32),
        "review": review.model_dump(mode="json"),
        "title": title or "",
        "body": body or "",
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _key(kind: bytes, scope: str, text: str) -> str:
    h = hashlib.sha256(kind + b"\0" + scope.encode() + b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def unit_key(scope: str, text: str) -> str:
    """A file unit's key (hex, 32): its :func:`~relay_review.review.chunks.unit_text` under
    ``scope``."""
    return _key(b"file", scope, text)


def chunk_key(chunk: Chunk, scope: str) -> str:
    """A chunk review's key (hex, 32): its rendered text under ``scope``."""
    return _key(b"chunk", scope, chunk.text)


def _quote_of(f: ReusedFinding, text: str) -> str:
    """The finding's quote read again from the cited line ``text`` (whose hash matched)."""
    if f.quote_span is not None and f.quote_hash is not None:
        start, end = f.quote_span
        if 0 <= start <= end <= len(text):
            quote = f.quote_pre + text[start:end] + f.quote_post
            if line_sha(quote)[:32] == f.quote_hash:
                return quote
    return text.strip()


def _quote_span(quote: str, text: str) -> tuple[tuple[int, int], str, str] | None:
    """Where ``quote`` sits in the cited line: (span, before, after), or None when it is not
    one piece of the line between a copied marker or whitespace."""
    core = quote.strip()
    while core:
        at = text.find(core)
        if at != -1:
            head, _, tail = quote.partition(core)
            if _PRE.fullmatch(head) and _POST.fullmatch(tail):
                return (at, at + len(core)), head, tail
            return None
        m = re.match(r"(?:[RL]\d+\s*)?[+-]\s*", core)  # a copied diff marker inside the strip
        if not m or not m.end():
            return None
        core = core[m.end() :]
    return None


@dataclass
class Reused:
    """One file's earlier review, still valid: its memo and its findings verified again."""

    memo: ChunkMemo
    findings: list[Finding]
    #: Each finding's place in its chunk's reply (``ReusedFinding.n``).
    ranks: list[int] = field(default_factory=list)


def reuse(memory: Memory, key: str, index: DiffIndex, now: float) -> Reused:
    """The file unit under ``key`` and its findings that still verify against ``index`` (the
    current diff), or KeyError. Each quote is read from the current diff at the finding's
    location, whose line must hash as it did; a suggestion is checked again (and its
    ``replaces`` read from the diff)."""
    memo = memory.chunks.get(key)
    if memo is None or memo.until <= now or not memo.group or len(memo.paths) != 1:
        raise KeyError(key)
    kept: list[Finding] = []
    ranks: list[int] = []
    for f in sorted(memo.findings, key=lambda f: f.n):
        if f.path != memo.paths[0]:
            continue
        text = index.line(f.path, f.line, f.side)  # type: ignore[arg-type]
        if text is None or line_sha(text) != f.quote_sha:
            continue
        fields = f.model_dump(include={"path", "line", "side", "severity", "message"})
        fields.update(quote=_quote_of(f, text), end_line=f.end_line, suggestion=f.suggestion)
        try:
            finding = Finding.model_validate(fields)
        except ValueError:
            continue
        if citation_problem(finding, index) is None:
            kept.append(with_suggestion(finding, index))
            ranks.append(f.n)
    return Reused(memo, kept, ranks)


def unit_memo(
    path: str,
    findings: list[tuple[Finding, DiffIndex, int]],
    *,
    now: float,
    ttl: float,
    head: str,
    route: str,
    scope: str,
    group: str,
) -> ChunkMemo | None:
    """What to keep of one file a model reviewed this run, whose replies were accepted:
    ``findings`` each with the index of the chunk that showed it and its place in that chunk's
    verified findings (None: a finding too long to keep, or not on a shown line; the file is
    asked again next time)."""
    try:
        kept = [_reused(f, n, index) for f, index, n in findings if f.path == path]
        if len(route) > 300:
            raise LookupError("route key too long to keep")
        return ChunkMemo(
            at=round(now, 3),
            until=round(now + ttl),
            head=head[:12],
            route=route,
            paths=[path],
            findings=kept,
            scope=scope,
            group=group,
        )
    except (ValidationError, LookupError):
        return None


def chunk_memo(
    chunk: Chunk, summary: str, *, now: float, ttl: float, head: str, route: str, scope: str
) -> ChunkMemo | None:
    """What to keep of a chunk review: its files and summary (None: too long to keep)."""
    try:
        return ChunkMemo(
            at=round(now, 3),
            until=round(now + ttl),
            head=head[:12],
            route=route,
            paths=chunk.paths,
            summary=summary,
            part=chunk.number,
            parts=chunk.total,
            scope=scope,
        )
    except ValidationError:
        return None


def _reused(f: Finding, n: int, index: DiffIndex) -> ReusedFinding:
    text = index.line(f.path, f.line, f.side)
    if text is None:
        raise LookupError(f"{f.path}:{f.line} is not a shown line")
    where = _quote_span(f.quote, text)
    span, pre, post = where if where is not None else (None, "", "")
    return ReusedFinding(
        path=f.path,
        line=f.line,
        side=f.side,
        quote_sha=line_sha(text),
        severity=f.severity,
        message=f.message,
        end_line=f.end_line if f.suggestion is not None else None,
        suggestion=f.suggestion,
        quote_span=list(span) if span is not None else None,
        quote_pre=pre,
        quote_post=post,
        quote_hash=line_sha(f.quote)[:32] if span is not None else None,
        n=n,
    )
