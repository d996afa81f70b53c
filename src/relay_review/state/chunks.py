"""The review cache: a chunk reviewed before gets that run's verified findings back, unasked.

A chunk is known by the hash of what shaped its review (:func:`chunk_key`): its rendered patch
text, the prompt's rules, the pull request's title and description, and the review settings
that change a request. Reused findings are validated again against the chunk's diff index (a
finding whose line no longer matches is dropped). The cache holds hashes, paths, times and
verified findings only, never the patch itself.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import ValidationError

from relay_review.review.chunks import Chunk
from relay_review.review.prompt import system_message
from relay_review.review.verdict import Finding, citation_problem
from relay_review.settings import ReviewPolicy
from relay_review.state.memory import ChunkMemo, Memory, ReusedFinding

_FIELDS = set(ReusedFinding.model_fields)
#: Bump when the meaning of a cached review changes without the prompt text changing.
CACHE_VERSION = "1"


def chunk_key(
    chunk: Chunk,
    review: ReviewPolicy,
    title: str | None,
    body: str | None,
    instructions: str = "",
) -> str:
    """The content hash of one chunk's review request (hex, 32 characters); ``instructions``:
    the maintainers' instructions as the system message carries them."""
    shape = {
        "instructions": instructions,
        "v": CACHE_VERSION,
        "rules": system_message("0" * 32),
        "max_output_tokens": review.max_output_tokens,
        "max_line_chars": review.max_line_chars,
        "title": title or "",
        "body": body or "",
    }
    h = hashlib.sha256(json.dumps(shape, sort_keys=True).encode())
    h.update(b"\0")
    h.update(chunk.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def reuse(memory: Memory, key: str, chunk: Chunk, now: float) -> tuple[ChunkMemo, list[Finding]]:
    """The chunk's cached review and its findings that still verify, or KeyError."""
    memo = memory.chunks.get(key)
    if memo is None or memo.until <= now:
        raise KeyError(key)
    kept: list[Finding] = []
    for f in memo.findings:
        try:
            finding = Finding.model_validate(f.model_dump())
        except ValueError:
            continue
        if citation_problem(finding, chunk.index) is None:
            kept.append(finding)
    return memo, kept


def chunk_memo(
    chunk: Chunk, findings: list[Finding], *, now: float, ttl: float, head: str, route: str
) -> ChunkMemo | None:
    """What to keep of a chunk a model reviewed and whose reply was accepted (None: a finding
    too long to keep; the chunk is asked again next time)."""
    try:
        return _chunk_memo(chunk, findings, now=now, ttl=ttl, head=head, route=route)
    except ValidationError:
        return None


def _chunk_memo(
    chunk: Chunk, findings: list[Finding], *, now: float, ttl: float, head: str, route: str
) -> ChunkMemo:
    return ChunkMemo(
        at=now,
        until=now + ttl,
        head=head[:64],
        route=route[:300],
        paths=chunk.paths,
        findings=[ReusedFinding(**f.model_dump(include=_FIELDS)) for f in findings],
    )
