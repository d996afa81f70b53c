"""The review cache: a chunk reviewed before gets that run's verified findings back, unasked.

A chunk is known by the hash of what shaped its review (:func:`chunk_key`): the repository, its
rendered patch text, the prompt's rules, the pull request's title and description, the
maintainers' instructions and every review setting. Its memo names the route that reviewed it
by identity (``{account identity}/{model}``): the pipeline reuses it only while the catalog
still selects that route. Reused findings are validated again against the chunk's diff index
(a finding whose line no longer matches is dropped). The cache holds hashes, paths, times and
verified findings only, never the patch itself: a finding keeps its location and the SHA-256 of
the cited line, and its quote is read again from the current diff on reuse.
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

#: Bump when the meaning of a cached review changes without the prompt text changing.
CACHE_VERSION = "2"


def line_sha(text: str) -> str:
    """The SHA-256 (hex) of a cited line's text, as a stored finding keeps it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_key(
    chunk: Chunk,
    review: ReviewPolicy,
    title: str | None,
    body: str | None,
    instructions: str = "",
    *,
    repo: str = "",
) -> str:
    """The content hash of one chunk's review request (hex, 32 characters); ``instructions``:
    the maintainers' instructions as the system message carries them; ``repo``: the reviewed
    repository (a verdict is never reused in another one, even through a shared Redis)."""
    shape = {
        "repo": repo,
        "instructions": instructions,
        "v": CACHE_VERSION,
        "rules": system_message("0" * 32),
        "review": review.model_dump(mode="json"),
        "title": title or "",
        "body": body or "",
    }
    h = hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode())
    h.update(b"\0")
    h.update(chunk.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def reuse(memory: Memory, key: str, chunk: Chunk, now: float) -> tuple[ChunkMemo, list[Finding]]:
    """The chunk's cached review and its findings that still verify, or KeyError. Each quote is
    read from the current diff at the finding's location and must hash as it did."""
    memo = memory.chunks.get(key)
    if memo is None or memo.until <= now:
        raise KeyError(key)
    kept: list[Finding] = []
    for f in memo.findings:
        text = chunk.index.line(f.path, f.line, f.side)  # type: ignore[arg-type]
        if text is None or line_sha(text) != f.quote_sha:
            continue
        try:
            finding = Finding.model_validate(
                {**f.model_dump(exclude={"quote_sha"}), "quote": text.strip()}
            )
        except ValueError:
            continue
        if citation_problem(finding, chunk.index) is None:
            kept.append(finding)
    return memo, kept


def chunk_memo(
    chunk: Chunk, findings: list[Finding], *, now: float, ttl: float, head: str, route: str
) -> ChunkMemo | None:
    """What to keep of a chunk a model reviewed and whose reply was accepted (None: a finding
    too long to keep, or not on a shown line; the chunk is asked again next time)."""
    try:
        return _chunk_memo(chunk, findings, now=now, ttl=ttl, head=head, route=route)
    except (ValidationError, LookupError):
        return None


def _chunk_memo(
    chunk: Chunk, findings: list[Finding], *, now: float, ttl: float, head: str, route: str
) -> ChunkMemo:
    kept = []
    for f in findings:
        text = chunk.index.line(f.path, f.line, f.side)
        if text is None:
            raise LookupError(f"{f.path}:{f.line} is not a shown line")
        kept.append(
            ReusedFinding(
                path=f.path,
                line=f.line,
                side=f.side,
                quote_sha=line_sha(text),
                severity=f.severity,
                message=f.message,
            )
        )
    if len(route) > 300:
        raise LookupError("route key too long to keep")
    return ChunkMemo(
        at=now, until=now + ttl, head=head[:64], route=route, paths=chunk.paths, findings=kept
    )
