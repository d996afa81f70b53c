"""Reusing earlier reviews in a run: which files an earlier run reviewed (and why the others
are not reused), and what this run's accepted chunks leave for the next one.

The keys and memos themselves are :mod:`.review_cache`; this module applies them to one run's
plan, catalog and results through the run's memory (:mod:`.memory`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from relay_review.config import Policy
from relay_review.pipeline.memory import RunMemory
from relay_review.pipeline.review_cache import chunk_key, chunk_memo, reuse, unit_memo
from relay_review.pipeline.serve import ChunkVerdict
from relay_review.records import Catalog, CatalogEntry, FileReport, Finding
from relay_review.review.chunks import Chunk, ChunkPlan
from relay_review.review.citations import points_at_shown_code
from relay_review.review.diff import DiffIndex
from relay_review.review.prompt import Instructions
from relay_review.routing.failover import ServeResult
from relay_review.state.memory import ChunkMemo, Memory

log = logging.getLogger("relay_review.pipeline")


def instructions_key(instructions: Instructions | None) -> str:
    """The maintainers' instructions as they shape every request (part of a chunk's key)."""
    return instructions.render() if instructions is not None else ""


@dataclass
class ReusedUnit:
    """A file whose earlier review is reused: its memo, findings verified again, and the
    route (of this run's catalog) that made it."""

    memo: ChunkMemo
    findings: list[Finding]
    entry: CatalogEntry
    #: Each finding's place in the reply of the chunk it came from (reply order is kept).
    ranks: list[int] = field(default_factory=list)


def reused_files(
    index: DiffIndex,
    units: Mapping[str, str],
    scope: str,
    memory: RunMemory,
    catalog: Catalog,
) -> tuple[dict[str, ReusedUnit], str]:
    """Files an earlier run reviewed with identical text (and context) under the same scope
    (repository, settings, prompt, description: the key) on a route this run's catalog still
    selects (same account identity and model), with their findings validated again against the
    current diff (no request); and why the others are not reused (one line, "" when all are)."""
    found: dict[str, ReusedUnit] = {}
    why: dict[str, list[str]] = {}
    now = memory.clock()
    selected = {e.agent_id: e for e in catalog.selected}
    earlier = earlier_units(memory.memory, scope)
    for path, key in units.items():
        try:
            unit = reuse(memory.memory, key, index, now)
        except KeyError:
            before = earlier.get(path)
            reason = f"changed since {before}" if before is not None else "no earlier review"
            why.setdefault(reason, []).append(path)
            continue
        entry = selected.get(memory.agent_of(unit.memo.route) or "")
        if entry is None:  # that route left the catalog (or the account changed): ask again
            why.setdefault("the route that reviewed it is no longer selected", []).append(path)
            continue
        found[path] = ReusedUnit(unit.memo, unit.findings, entry, unit.ranks)
    if not memory.store.keeps:
        return found, "memory is off"
    if found:
        log.info("review: %d of %d files unchanged since an earlier run", len(found), len(units))
    return found, "; ".join(_why(reason, paths, len(units)) for reason, paths in why.items())


def _why(reason: str, paths: list[str], of: int, shown: int = 3) -> str:
    """``changed since abc: a.py, b.py and 3 more`` (``every file`` when it is all of them)."""
    if len(paths) == of:
        return reason if reason == "no earlier review" else f"{reason}: every file"
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return f"{reason}: " + ", ".join(paths[:shown]) + more


def earlier_units(memory: Memory, scope: str) -> dict[str, str]:
    """Path -> the commit (12 hex digits, or "an earlier run") of the latest file unit kept
    under ``scope``: a file that has one but missed its key has changed since."""
    latest: dict[str, ChunkMemo] = {}
    for memo in memory.chunks.values():
        if memo.group and memo.scope == scope and len(memo.paths) == 1:
            path = memo.paths[0]
            if path not in latest or latest[path].at < memo.at:
                latest[path] = memo
    return {p: (m.head[:12] or "an earlier run") for p, m in latest.items()}


def mark_reused(files: dict[str, FileReport], reused: Mapping[str, ReusedUnit]) -> None:
    """Reused files say since which head they are unchanged (in ``files``, in place)."""
    for path, unit in reused.items():
        if path in files and not files[path].left_out:
            files[path] = files[path].model_copy(update={"reused_from": unit.memo.head[:12]})


def remember_units(
    memory: RunMemory,
    plan: ChunkPlan,
    results: list[ServeResult],
    units: Mapping[str, str],
    scope: str,
    policy: Policy,
    head_sha: str | None,
) -> None:
    """Keep each chunk a model reviewed this run (its summary) and each file all of whose
    chunks were accepted, unless a finding on a chunk's shown lines failed verification (that
    chunk's files stay partial, so they are asked again next time)."""
    now = memory.clock()
    ttl, head = policy.memory.review, head_sha or ""
    kept = dict(memory.memory.chunks)
    clean: dict[int, tuple[str, ChunkVerdict, str]] = {}  # chunk number -> (key, verdict, route)
    for chunk, result in zip(plan.chunks, results, strict=True):
        if not result.ok or result.served_by is None:
            continue
        verdict: ChunkVerdict = result.value
        if verdict.cut or any(points_at_shown_code(f, chunk.index) for f, _ in verdict.unverified):
            continue
        route = memory.route_of(result.served_by.agent_id)
        if route is None:
            continue
        key = chunk_key(chunk, scope)
        memo = chunk_memo(
            chunk, verdict.summary, now=now, ttl=ttl, head=head, route=route, scope=scope
        )
        if memo is not None:
            kept[key] = memo
        clean[chunk.number] = (key, verdict, route)
    holding: dict[str, list[Chunk]] = {}
    for chunk in plan.chunks:
        for piece in chunk.files:
            holding.setdefault(piece.path, []).append(chunk)
    for path, chunks in holding.items():
        if path not in units or any(c.number not in clean for c in chunks):
            continue
        group, _, route = clean[chunks[0].number]
        findings = [
            (f, c.index, n)
            for c in chunks
            for n, f in enumerate(clean[c.number][1].verified)
            if f.path == path
        ]
        memo = unit_memo(
            path,
            findings,
            now=now,
            ttl=ttl,
            head=head,
            route=route,
            scope=scope,
            group=group,
        )
        if memo is not None:
            kept[units[path]] = memo
    memory.memory = memory.memory.model_copy(update={"chunks": kept})
