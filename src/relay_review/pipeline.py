"""Wires the stages in order. The only module that knows the order of the pipeline.

``catalog -> preflight (background) -> failover serving -> (review engine) -> report``
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay_review.models import Attempt, Catalog, CatalogEntry, Outcome
from relay_review.review.chunks import DEFAULT_EXCLUDES, MIN_CHUNK_TOKENS, Chunk, plan_chunks
from relay_review.review.decision import decide, merge_findings, partial_note
from relay_review.review.diff import DiffIndex
from relay_review.review.prompt import (
    JSON_OBJECT_FORMAT,
    RESPONSE_FORMAT,
    Prompt,
    build_messages,
    diff_budget,
    repair_messages,
)
from relay_review.review.verdict import (
    Finding,
    VerdictParseError,
    parse_reply,
    points_at_shown_code,
    validate,
)
from relay_review.routing.failover import Accept, ServeResult
from relay_review.routing.preflight import ChatFn
from relay_review.routing.session import RoutingSession
from relay_review.settings import Policy

log = logging.getLogger("relay_review.pipeline")


def _session(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    chat: ChatFn | None,
    started_at: float | None = None,
) -> RoutingSession:
    return RoutingSession(
        catalog.selected,
        preflight=policy.preflight,
        serving=policy.serving,
        environ=environ,
        chat=chat,
        started_at=time.monotonic() if started_at is None else started_at,
    )


async def preflight(
    catalog: Catalog, policy: Policy, environ: Mapping[str, str], chat: ChatFn | None = None
) -> dict[str, Any]:
    """Probe the catalog and classify every route (the ``preflight`` command's report)."""
    async with _session(catalog, policy, environ, chat) as session:
        await session.wait_preflight()
    return {
        "catalog": catalog.to_json(),
        "readiness": session.readiness(),
        "probes_sent": session.probes_sent,
        "elapsed_s": session.elapsed(),
    }


async def chat(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    messages: list[dict],
    chat_fn: ChatFn | None = None,
) -> dict[str, Any]:
    """Serve one chat request with preflight and failover (the ``chat`` command's report)."""
    async with _session(catalog, policy, environ, chat_fn) as session:
        result = await session.serve(messages)
        time_to_reply = session.elapsed()  # before in-flight probes are cancelled at close
    return {
        "time_to_reply_s": time_to_reply,
        "reply": result.reply,
        "served_by": result.served_by.model_dump() if result.served_by else None,
        "stopped": result.stopped,
        "attempts": [a.model_dump() for a in result.attempts],
        "readiness": session.readiness(),
        "catalog": catalog.to_json(),
        "probes_sent": session.probes_sent,
        "elapsed_s": session.elapsed(),
    }


def run_sync(coro: Any) -> Any:
    """Run a pipeline coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro)


# --------------------------------------------------------------------------------------------
# the review


@dataclass
class ChunkVerdict:
    """What one chunk's accepted reply came to, after its repair round (if any)."""

    summary: str
    verified: list[Finding]
    unverified: list[tuple[Finding, str]]
    repair: Attempt | None = None


def structured_output(entry: CatalogEntry) -> dict | None:
    """Ask for JSON through ``response_format`` only where the route declares support."""
    if entry.route.response_format == "json_schema":
        return {"response_format": RESPONSE_FORMAT}
    if entry.route.response_format == "json_object":
        return {"response_format": JSON_OBJECT_FORMAT}
    return None


def context_window(catalog: Catalog, policy: Policy) -> int:
    """The smallest context window in the catalog (so any route can serve any chunk)."""
    known = [e.route.context_length for e in catalog.selected if e.route.context_length]
    return min(known, default=policy.review.context_tokens)


def make_accept(session: RoutingSession, chunk: Chunk, prompt: Prompt, policy: Policy) -> Accept:
    """The reply check for one chunk: parse, validate citations, one repair round on the route."""

    async def accept(entry: CatalogEntry, outcome: Outcome) -> tuple[bool, Any, str]:
        try:
            reply = parse_reply(outcome.content or "")
        except VerdictParseError as exc:
            return False, None, f"malformed verdict: {exc}"
        verified, rejected = validate(reply, chunk.index)
        verdict = ChunkVerdict(reply.summary, verified, [(r.finding, r.reason) for r in rejected])
        if not rejected:
            return True, verdict, ""
        messages = repair_messages(prompt, outcome.content or "", rejected)
        repaired, attempt = await session.call(
            entry, messages, max_tokens=policy.review.max_output_tokens
        )
        verdict.repair = attempt
        if not repaired.ok:
            verdict.unverified = [
                (f, f"{why} (repair round failed)") for f, why in verdict.unverified
            ]
            return True, verdict, ""
        try:
            second = parse_reply(repaired.content or "")
        except VerdictParseError as exc:
            verdict.unverified = [
                (f, f"{why} (repair reply malformed: {exc})") for f, why in verdict.unverified
            ]
            return True, verdict, ""
        verified2, rejected2 = validate(second, chunk.index)
        verdict.verified = merge_findings([verified, verified2])
        verdict.unverified = [
            (r.finding, f"{r.reason} (after the repair round)") for r in rejected2
        ]
        verdict.summary = second.summary or reply.summary
        return True, verdict, ""

    return accept


async def review(
    index: DiffIndex,
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    *,
    title: str | None = None,
    body: str | None = None,
    chat_fn: ChatFn | None = None,
    started_at: float | None = None,
    unlisted_files: int = 0,
) -> dict[str, Any]:
    """Review a diff: chunk it, serve every chunk with failover, validate, decide, report.

    ``started_at`` (monotonic clock) is when the run's deadline started counting, if earlier
    than now (the action starts it before discovery). ``unlisted_files``: files the PR changes
    that ``index`` does not hold (the files API lists 3,000 at most); they make it partial.
    """
    r = policy.review
    started = time.monotonic() if started_at is None else started_at
    excludes = [*(DEFAULT_EXCLUDES if r.default_excludes else ()), *r.exclude]
    budget = diff_budget(
        context_window(catalog, policy), r.max_output_tokens, title=title, body=body
    )
    if r.chunk_tokens:
        budget = min(budget, r.chunk_tokens)
    plan = plan_chunks(
        index,
        max(budget, MIN_CHUNK_TOKENS),
        exclude=excludes,
        trusted_excludes=r.trusted_excludes,
        max_line_chars=r.max_line_chars,
        max_chunks=r.max_chunks,
    )
    files = {
        f.path: f.model_dump(include={"path", "status", "reason", "left_out"}) for f in plan.files
    }
    report: dict[str, Any] = {
        "decision": "unavailable",
        "summary": "",
        "findings": [],
        "unverified": [],
        "files": list(files.values()),
        "served_by": None,
        "chunks": [],
        "attempts": [],
        "readiness": [],
        "catalog": catalog.to_json(),
        "probes_sent": 0,
        "elapsed_s": 0.0,
        "stopped": "nothing to review",
        "why": "",
        "partial": "",
    }
    if not plan.chunks:
        left_out = sum(1 for f in plan.files if f.left_out)
        report.update(
            decision="comment",
            summary="Nothing to review: no file of this diff has reviewable changed lines.",
            why="every file was skipped",
            partial=partial_note(left_out, len(plan.files), unlisted_files),
        )
        report["elapsed_s"] = round(time.monotonic() - started, 3)
        return report

    log.info(
        "review: %d files, %d chunks of at most %d tokens, over %d routes",
        len(plan.files),
        len(plan.chunks),
        budget,
        len(catalog.selected),
    )
    session = _session(catalog, policy, environ, chat_fn, started)
    limit = asyncio.Semaphore(r.concurrency)

    async def one(chunk: Chunk) -> ServeResult:
        prompt = build_messages(chunk, title=title, body=body, part=chunk.number, parts=chunk.total)
        async with limit:
            return await session.serve(
                prompt.messages,
                accept=make_accept(session, chunk, prompt, policy),
                max_tokens=r.max_output_tokens,
                extra_body=structured_output,
            )

    async with session:
        results = await asyncio.gather(*(one(c) for c in plan.chunks))
    verified: list[list[Finding]] = []
    unverified: list[dict] = []
    summaries: list[str] = []
    attempts: list[Attempt] = []
    dropped = 0  # findings on shown changed lines that could not be verified
    for chunk, result in zip(plan.chunks, results, strict=True):
        attempts.extend(result.attempts)
        report["chunks"].append(
            {
                "number": chunk.number,
                "total": chunk.total,
                "paths": chunk.paths,
                "served_by": result.served_by.model_dump() if result.served_by else None,
                "stopped": result.stopped,
            }
        )
        if not result.ok:
            for path in chunk.paths:
                files[path] = {
                    "path": path,
                    "status": "skipped",
                    "reason": f"no route could review it before the deadline ({result.stopped})",
                    "left_out": True,
                }
            continue
        verdict: ChunkVerdict = result.value
        if verdict.repair is not None:
            attempts.append(verdict.repair)
        verified.append(verdict.verified)
        unverified += [{**f.model_dump(), "reason": why} for f, why in verdict.unverified]
        dropped += sum(1 for f, _ in verdict.unverified if points_at_shown_code(f, chunk.index))
        if verdict.summary:
            prefix = f"Part {chunk.number}/{chunk.total}: " if chunk.total > 1 else ""
            summaries.append(prefix + verdict.summary)
    served = [c["served_by"] for c in report["chunks"] if c["served_by"]]
    findings = merge_findings(verified)
    report.update(
        files=list(files.values()),
        findings=[f.model_dump() for f in findings],
        unverified=unverified,
        summary="\n".join(summaries),
        served_by=served[0] if served else None,
        attempts=[a.model_dump() for a in sorted(attempts, key=lambda a: a.started_s)],
        readiness=session.readiness(),
        probes_sent=session.probes_sent,
        elapsed_s=round(time.monotonic() - started, 3),
    )
    if not served:
        stops = sorted({c["stopped"] for c in report["chunks"]})
        report.update(
            decision="unavailable",
            stopped=", ".join(stops),
            why="no route produced a valid verdict before the deadline"
            if "deadline" in stops
            else "every route failed or was ruled out",
        )
    else:
        decision = decide(findings, allow_approve=r.allow_approve)
        not_reviewed = [f for f in files.values() if f.get("left_out")]
        partial = partial_note(len(not_reviewed), len(plan.files), unlisted_files, dropped)
        if partial and decision == "approve":  # no findings in part of a diff approves nothing
            decision = "comment"
            partial += "; a partial review never approves"
        report.update(
            decision=decision,
            stopped="served" if len(served) == len(plan.chunks) else "partial",
            why="" if len(served) == len(plan.chunks) else "some chunks could not be reviewed",
            partial=partial,
        )
    return report
