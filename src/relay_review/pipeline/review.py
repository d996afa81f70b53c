"""The review flow: ``chunks -> preflight (background) -> failover serving per chunk ->
citation checks and one repair round -> decision -> RunReport``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relay_review.models import (
    Attempt,
    AttemptReport,
    Catalog,
    CatalogEntry,
    CatalogSummary,
    ChunkReport,
    Decision,
    FileReport,
    Outcome,
    ProbeReport,
    ReportFinding,
    ReviewStatus,
    RouteRef,
    RunReport,
    ServedBy,
    Stopped,
    UnverifiedFinding,
    Verdict,
)
from relay_review.pipeline.memory import RunMemory
from relay_review.pipeline.routes import session_for
from relay_review.review.chunks import (
    DEFAULT_EXCLUDES,
    MIN_CHUNK_TOKENS,
    Chunk,
    ChunkPlan,
    HeadFiles,
    plan_chunks,
)
from relay_review.review.decision import decide, merge_findings, partial_note
from relay_review.review.diff import DiffIndex, Side
from relay_review.review.fingerprint import finding_fingerprint
from relay_review.review.prompt import (
    JSON_OBJECT_FORMAT,
    RESPONSE_FORMAT,
    Instructions,
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
from relay_review.routing.board import ChatFn
from relay_review.routing.failover import Accept, ServeResult
from relay_review.routing.session import RoutingSession
from relay_review.settings import Policy
from relay_review.state import Store
from relay_review.state.chunks import chunk_key, chunk_memo, reuse
from relay_review.state.memory import ChunkMemo

log = logging.getLogger("relay_review.pipeline")
#: A finding's suggestion keys: kept on verified findings only (an unverified one is not shown).
SUGGESTION_KEYS = {"end_line", "suggestion", "replaces"}


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


def chunk_budget(
    catalog: Catalog,
    policy: Policy,
    title: str | None,
    body: str | None,
    instructions: Instructions | None = None,
) -> int:
    """Diff tokens per chunk: what the smallest context window leaves, capped by the policy."""
    r = policy.review
    budget = diff_budget(
        context_window(catalog, policy),
        r.max_output_tokens,
        title=title,
        body=body,
        instructions=instructions,
    )
    if r.chunk_tokens:
        budget = min(budget, r.chunk_tokens)
    return max(budget, MIN_CHUNK_TOKENS)


@dataclass
class Collected:
    """The chunks' results gathered: what served, what verified, what was left out."""

    chunks: list[ChunkReport] = field(default_factory=list)
    verified: list[list[Finding]] = field(default_factory=list)
    unverified: list[UnverifiedFinding] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    #: Findings on shown changed lines that could not be verified.
    dropped: int = 0

    @property
    def served(self) -> list[RouteRef]:
        return [c.served_by for c in self.chunks if c.served_by]


def collect(
    plan: ChunkPlan,
    results: list[ServeResult],
    files: dict[str, FileReport],
    reused: Mapping[int, ChunkMemo] | None = None,
) -> Collected:
    """Gather every chunk's result; a chunk no route served marks its files skipped and left
    out (in ``files``, in place). A chunk in ``reused`` (by number) was reviewed in an earlier
    run: it counts as served, and its files say since which head they are unchanged."""
    out = Collected()
    reused = reused or {}
    for chunk, result in zip(plan.chunks, results, strict=True):
        out.attempts.extend(result.attempts)
        served = RouteRef(**result.served_by.model_dump()) if result.served_by else None
        out.chunks.append(
            ChunkReport(
                number=chunk.number,
                total=chunk.total,
                paths=chunk.paths,
                served_by=served,
                stopped=result.stopped,
                reused=chunk.number in reused,
            )
        )
        if not result.ok:
            for path in chunk.paths:
                files[path] = FileReport(
                    path=path,
                    status=ReviewStatus.SKIPPED,
                    reason=f"no route could review it before the deadline ({result.stopped})",
                    left_out=True,
                )
            continue
        verdict: ChunkVerdict = result.value
        if verdict.repair is not None:
            out.attempts.append(verdict.repair)
        out.verified.append(verdict.verified)
        out.unverified += [
            UnverifiedFinding(**f.model_dump(exclude=SUGGESTION_KEYS), reason=why)
            for f, why in verdict.unverified
        ]
        out.dropped += sum(1 for f, _ in verdict.unverified if points_at_shown_code(f, chunk.index))
        if verdict.summary:
            prefix = f"Part {chunk.number}/{chunk.total}: " if chunk.total > 1 else ""
            out.summaries.append(prefix + verdict.summary)
    return out


def conclude(
    got: Collected,
    findings: list[Finding],
    files: list[FileReport],
    *,
    unlisted_files: int,
    allow_approve: bool,
) -> Verdict:
    """The verdict over every chunk: unavailable when none served; else the decision over the
    verified findings, never ``approve`` for a partial review (files left out or beyond GitHub's
    listing, or findings on shown lines that could not be verified)."""
    verdict = Verdict(
        summary="\n".join(got.summaries),
        findings=[ReportFinding(**f.model_dump()) for f in findings],
        unverified=got.unverified,
    )
    served = got.served
    if not served:
        stops = sorted({c.stopped for c in got.chunks})
        verdict.decision = Decision.UNAVAILABLE
        verdict.stopped = ", ".join(stops)
        verdict.why = (
            "no route produced a valid verdict before the deadline"
            if Stopped.DEADLINE in stops
            else "every route failed or was ruled out"
        )
        return verdict
    decision = Decision(decide(findings, allow_approve=allow_approve))
    not_reviewed = sum(1 for f in files if f.left_out)
    partial = partial_note(not_reviewed, len(files), unlisted_files, got.dropped)
    if partial and decision == Decision.APPROVE:  # no findings in part of a diff approves nothing
        decision = Decision.COMMENT
        partial += "; a partial review never approves"
    complete = len(served) == len(got.chunks)
    verdict.decision = decision
    verdict.stopped = Stopped.SERVED if complete else Stopped.PARTIAL
    verdict.why = "" if complete else "some chunks could not be reviewed"
    verdict.partial = partial
    return verdict


async def serve_chunks(
    session: RoutingSession,
    chunks: list[Chunk],
    policy: Policy,
    title: str | None,
    body: str | None,
    instructions: Instructions | None = None,
) -> list[ServeResult]:
    """Serve every chunk with failover, ``review.concurrency`` at a time, in chunk order."""
    r = policy.review
    limit = asyncio.Semaphore(r.concurrency)

    async def one(chunk: Chunk) -> ServeResult:
        prompt = build_messages(
            chunk,
            title=title,
            body=body,
            part=chunk.number,
            parts=chunk.total,
            instructions=instructions,
        )
        async with limit:
            return await session.serve(
                prompt.messages,
                accept=make_accept(session, chunk, prompt, policy),
                max_tokens=r.max_output_tokens,
                extra_body=structured_output,
            )

    async with session:
        return list(await asyncio.gather(*(one(c) for c in chunks)))


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
    instructions: Instructions | None = None,
    head_files: HeadFiles | None = None,
    store: Store | None = None,
    head_sha: str | None = None,
    repo: str = "",
    reuse_reviews: bool = True,
    secrets: Iterable[str] = (),
) -> RunReport:
    """Review a diff: chunk it, serve every chunk with failover, validate, decide, report.

    ``started_at`` (monotonic clock) is when the run's deadline started counting, if earlier
    than now (the action starts it before discovery). ``unlisted_files``: files the PR changes
    that ``index`` does not hold (the files API lists 3,000 at most); they make it partial.
    ``instructions``: the maintainers' (guidelines, path instructions, language), in every
    request's system message. ``head_files``: head versions of files, for context around hunks
    (``review.context_lines``, in the room chunks have left).
    ``store``: memory across runs (routes' outcomes; chunks reviewed before, reused with no
    model request); ``head_sha``: the commit reviewed, kept with each chunk's review;
    ``repo``: the reviewed repository (a cached review is reused in that repository only);
    ``reuse_reviews`` False asks the models again for every chunk (``/relay-review``; route
    memory still applies); ``secrets``: values no stored record may hold (the catalog's keys
    are added).
    """
    r = policy.review
    started = time.monotonic() if started_at is None else started_at
    excludes = [*(DEFAULT_EXCLUDES if r.default_excludes else ()), *r.exclude]
    if instructions is None and (r.paths or r.language):
        instructions = Instructions(
            paths=tuple((p.glob, p.instructions) for p in r.paths), language=r.language
        )
    budget = chunk_budget(catalog, policy, title, body, instructions)
    plan = plan_chunks(
        index,
        budget,
        exclude=excludes,
        trusted_excludes=r.trusted_excludes,
        max_line_chars=r.max_line_chars,
        max_chunks=r.max_chunks,
        head_files=head_files,
        context_lines=r.context_lines,
    )
    files = {
        f.path: FileReport(**f.model_dump(include={"path", "status", "reason", "left_out"}))
        for f in plan.files
    }
    report = RunReport(files=list(files.values()), catalog=catalog_summary(catalog))
    if not plan.chunks:
        report.verdict = Verdict(
            decision=Decision.COMMENT,
            summary="Nothing to review: no file of this diff has reviewable changed lines.",
            why="every file was skipped",
            partial=partial_note(
                sum(1 for f in plan.files if f.left_out), len(plan.files), unlisted_files
            ),
        )
        report.elapsed_s = round(time.monotonic() - started, 3)
        return report

    log.info(
        "review: %d files, %d chunks of at most %d tokens, over %d routes",
        len(plan.files),
        len(plan.chunks),
        budget,
        len(catalog.selected),
    )
    shape = instructions_key(instructions)
    keys = {c.number: chunk_key(c, r, title, body, shape, repo=repo) for c in plan.chunks}
    memory = RunMemory.load(
        store,
        entries=catalog.selected,
        environ=environ,
        secrets=secrets,
        policy=policy.memory,
        chunks=keys.values(),
    )
    if reuse_reviews:
        reused, results_of = reused_chunks(plan.chunks, keys, memory, catalog)
    else:
        reused, results_of = {}, {}
        log.info("review: asked again, every chunk goes to a model (no cached verdict)")
    to_serve = [c for c in plan.chunks if c.number not in reused]
    session = None
    if to_serve:
        session = session_for(catalog, policy, environ, chat_fn, started, store=store)
        memory.recall_onto(session)
        served_now = await serve_chunks(session, to_serve, policy, title, body, instructions)
        results_of.update(zip((c.number for c in to_serve), served_now, strict=True))
    results = [results_of[c.number] for c in plan.chunks]
    got = collect(plan, results, files, reused)
    mark_reused(files, plan.chunks, reused)
    findings = merge_findings(got.verified)
    served = [c.served_by for c in got.chunks if c.served_by and not c.reused]
    report.files = list(files.values())
    report.served_by = served[0] if served else None
    report.chunks = got.chunks
    report.attempts = [
        AttemptReport(**a.model_dump()) for a in sorted(got.attempts, key=lambda a: a.started_s)
    ]
    if session is not None:
        report.readiness = [ProbeReport(**p) for p in session.readiness()]
        report.probes_sent = session.probes_sent
    memory.reused_chunks = len(reused)
    report.memory = memory.report(catalog.selected, report.probes_sent or 0, environ, policy)
    remember_chunks(memory, plan.chunks, keys, results_of, reused, policy, head_sha)
    memory.save(session, policy)
    report.elapsed_s = round(time.monotonic() - started, 3)
    report.verdict = conclude(
        got,
        findings,
        report.files,
        unlisted_files=unlisted_files,
        allow_approve=r.allow_approve,
    )
    report.verdict.findings = with_fingerprints(report.verdict.findings, index)
    return report


def with_fingerprints(findings: list[ReportFinding], index: DiffIndex) -> list[ReportFinding]:
    """Each verified finding with its fingerprint and cited-lines hash (from the diff's own
    text, never the model's quote)."""
    out = []
    for f in findings:
        end = f.end_line if f.suggestion is not None and f.replaces else None
        side: Side = "LEFT" if f.side == "LEFT" else "RIGHT"
        ident = finding_fingerprint(index, f.path, f.line, f.severity, end_line=end, side=side)
        if ident is not None:
            f = f.model_copy(update={"fingerprint": ident[0], "cited": ident[1]})
        out.append(f)
    return out


# --------------------------------------------------------------------------------------------
# the review cache (memory across runs)


def instructions_key(instructions: Instructions | None) -> str:
    """The maintainers' instructions as they shape every request (part of a chunk's key)."""
    return instructions.render() if instructions is not None else ""


def reused_chunks(
    chunks: list[Chunk], keys: Mapping[int, str], memory: RunMemory, catalog: Catalog
) -> tuple[dict[int, ChunkMemo], dict[int, ServeResult]]:
    """Chunks an earlier run reviewed with identical content (same repository, settings and
    prompt: the key) on a route this run's catalog still selects (same account identity and
    model): their memos and results (findings validated again against the chunk; no request)."""
    memos: dict[int, ChunkMemo] = {}
    results: dict[int, ServeResult] = {}
    now = memory.clock()
    selected = {e.agent_id: e for e in catalog.selected}
    for chunk in chunks:
        try:
            memo, kept = reuse(memory.memory, keys[chunk.number], chunk, now)
        except KeyError:
            continue
        entry = selected.get(memory.agent_of(memo.route) or "")
        if entry is None:  # that route left the catalog (or the account changed): ask again
            continue
        memos[chunk.number] = memo
        results[chunk.number] = ServeResult(
            value=ChunkVerdict("", kept, []),
            served_by=ServedBy(
                agent_id=entry.agent_id, account=entry.account, model=entry.route.model
            ),
            stopped=Stopped.SERVED,
        )
    if memos:
        log.info("review: %d of %d chunks unchanged since an earlier run", len(memos), len(chunks))
    return memos, results


def mark_reused(
    files: dict[str, FileReport], chunks: list[Chunk], reused: Mapping[int, ChunkMemo]
) -> None:
    """Files all of whose chunks were reused say since which head (in ``files``, in place)."""
    since: dict[str, str] = {}
    fresh: set[str] = set()
    for chunk in chunks:
        memo = reused.get(chunk.number)
        for path in chunk.paths:
            if memo is None:
                fresh.add(path)
            else:
                since.setdefault(path, memo.head[:12])
    for path, head in since.items():
        if path in files and path not in fresh and not files[path].left_out:
            files[path] = files[path].model_copy(update={"reused_from": head})


def remember_chunks(
    memory: RunMemory,
    chunks: list[Chunk],
    keys: Mapping[int, str],
    results: Mapping[int, ServeResult],
    reused: Mapping[int, ChunkMemo],
    policy: Policy,
    head_sha: str | None,
) -> None:
    """Keep each chunk a model reviewed this run, unless a finding on its shown lines failed
    verification (that chunk stays partial, so it is asked again next time)."""
    now = memory.clock()
    kept = dict(memory.memory.chunks)
    for chunk in chunks:
        result = results[chunk.number]
        if chunk.number in reused or not result.ok or result.served_by is None:
            continue
        verdict: ChunkVerdict = result.value
        if any(points_at_shown_code(f, chunk.index) for f, _ in verdict.unverified):
            continue
        route = memory.route_of(result.served_by.agent_id)
        if route is None:
            continue
        memo = chunk_memo(
            chunk,
            verdict.verified,
            now=now,
            ttl=policy.memory.review,
            head=head_sha or "",
            route=route,
        )
        if memo is not None:
            kept[keys[chunk.number]] = memo
    memory.memory = memory.memory.model_copy(update={"chunks": kept})


def catalog_summary(catalog: Catalog) -> CatalogSummary:
    """The catalog as the report holds it."""
    return CatalogSummary.model_validate(catalog.to_json())
