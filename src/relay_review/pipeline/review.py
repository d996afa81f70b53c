"""The review flow: ``chunks -> preflight (background) -> failover serving per chunk ->
citation checks and one repair round -> decision -> RunReport``.

This module plans the chunks, gathers what every chunk came to (served by :mod:`.serve`, or
reused from an earlier run by :mod:`.reuse`) and concludes the verdict and the report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relay_review.config import Policy
from relay_review.pipeline.memory import RunMemory
from relay_review.pipeline.reuse import (
    ReusedUnit,
    instructions_key,
    mark_reused,
    remember_units,
    reused_files,
)
from relay_review.pipeline.review_cache import scope_key, unit_key
from relay_review.pipeline.routes import (
    RunSecrets,
    published_health,
    quota_report,
    session_for,
    spent,
)
from relay_review.pipeline.serve import ChunkVerdict, chunk_budget, serve_chunks
from relay_review.providers.health import PublishedHealth
from relay_review.records import (
    Attempt,
    Catalog,
    ChunkReport,
    Decision,
    FileReport,
    Finding,
    ReviewStatus,
    RunReport,
    ServedBy,
    Stopped,
    Verdict,
)
from relay_review.review.chunks import ChunkPlan, plan_chunks, unit_text
from relay_review.review.citations import points_at_shown_code
from relay_review.review.context import HeadFiles
from relay_review.review.decision import decide, merge_findings, partial_note
from relay_review.review.diff import DiffIndex, Side
from relay_review.review.evidence import has_word, loops
from relay_review.review.fingerprint import finding_fingerprint
from relay_review.review.noise import unique
from relay_review.review.paths import DEFAULT_EXCLUDES
from relay_review.review.prompt import Instructions
from relay_review.routing.failover import ServeResult
from relay_review.routing.send import ChatFn
from relay_review.state import Store, latest_unit

log = logging.getLogger("relay_review.pipeline")

#: Reads the routes' published health: the catalog ranked by it, and what was read.
HealthRead = Callable[[Catalog], Awaitable[tuple[Catalog, PublishedHealth]]]


@dataclass
class Collected:
    """The chunks' results gathered: what served, what verified, what was left out."""

    chunks: list[ChunkReport] = field(default_factory=list)
    verified: list[list[Finding]] = field(default_factory=list)
    unverified: list[Finding] = field(default_factory=list)
    #: (verified findings, summary) of each chunk whose summary is believed.
    summaries: list[tuple[int, str]] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    #: Findings on shown changed lines that could not be verified.
    dropped: int = 0
    #: Chunks whose accepted reply was cut off (their complete findings count).
    cut: int = 0

    @property
    def served(self) -> list[ServedBy]:
        return [c.served_by for c in self.chunks if c.served_by]


#: Why a chunk's files were not reviewed, by how its serving stopped (a route that ran out at
#: 30 s of a 600 s run was said to have missed "the deadline").
NOT_SERVED = {
    "deadline": "no route could review it before the run's deadline",
    "exhausted": "no route could review it: every route failed or was ruled out",
}


def collect(plan: ChunkPlan, results: list[ServeResult], files: dict[str, FileReport]) -> Collected:
    """Gather every chunk's result; a chunk no route served marks its files skipped and left
    out (in ``files``, in place). Files reused from memory are added by :func:`add_reused`."""
    out = Collected()
    for chunk, result in zip(plan.chunks, results, strict=True):
        out.attempts.extend(result.attempts)
        served = result.served_by
        out.chunks.append(
            ChunkReport(
                number=chunk.number,
                total=chunk.total,
                paths=chunk.paths,
                served_by=served,
                stopped=result.stopped,
            )
        )
        if not result.ok:
            for path in chunk.paths:
                files[path] = FileReport(
                    path=path,
                    status=ReviewStatus.SKIPPED,
                    reason=NOT_SERVED.get(result.stopped, NOT_SERVED["exhausted"]),
                    left_out=True,
                )
            continue
        verdict: ChunkVerdict = result.value
        if verdict.repair is not None:
            out.attempts.append(verdict.repair)
        if verdict.cut:
            out.cut += 1
        for note in verdict.notes:  # the walkthrough: the first note on a file wins
            f = files.get(note.path)
            if f is not None and not f.note and has_word(note.summary) and not loops(note.summary):
                files[note.path] = f.model_copy(update={"note": note.summary})
        out.verified.append(verdict.verified)
        out.unverified += [f.unverified(why) for f, why in verdict.unverified]
        out.dropped += sum(1 for f, _ in verdict.unverified if points_at_shown_code(f, chunk.index))
        # a summary is believed only from a reply that verified a finding or had none rejected
        # (a liar's "critical problems everywhere" over rejected findings says nothing)
        if verdict.summary and (verdict.verified or not verdict.unverified):
            out.chunks[-1].summary = verdict.summary
            out.summaries.append((len(verdict.verified), verdict.summary))
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
    # one summary for the whole review: the believed one of the chunk with most verified
    # findings (the first of equals); every chunk's is in its report (the comment's walkthrough)
    best = max(got.summaries, key=lambda s: s[0], default=(0, ""))
    verdict = Verdict(
        summary=best[1],
        findings=findings,
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
    if got.cut:
        s = "" if got.cut == 1 else "s"
        cut = f"the reply for {got.cut} chunk{s} was cut off (its complete findings are kept)"
        partial = f"{partial}; {cut}" if partial else cut
    if partial and decision == Decision.APPROVE:  # no findings in part of a diff approves nothing
        decision = Decision.COMMENT
        partial += "; a partial review never approves"
    complete = len(served) == len(got.chunks)
    verdict.decision = decision
    verdict.stopped = Stopped.SERVED if complete else Stopped.PARTIAL
    verdict.why = "" if complete else "some chunks could not be reviewed"
    verdict.partial = partial
    return verdict


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
    health: HealthRead | None = None,
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
    are added). ``health``: reads the routes' published health (a prior on their order, and
    the keys' free-tier facts for ``quota``) once it is known a request will be sent: a run
    whose every file is reused reads nothing from any provider.
    """
    r = policy.review
    started = time.monotonic() if started_at is None else started_at
    excludes = [*(DEFAULT_EXCLUDES if r.default_excludes else ()), *r.exclude]
    if instructions is None and (r.paths or r.language):
        instructions = Instructions(
            paths=tuple((p.glob, p.instructions) for p in r.paths), language=r.language
        )
    budget = chunk_budget(catalog, policy, title, body, instructions)

    def planned(reused: Collection[str] = ()) -> ChunkPlan:
        return plan_chunks(
            index,
            budget,
            exclude=excludes,
            trusted_excludes=r.trusted_excludes,
            max_line_chars=r.max_line_chars,
            max_chunks=r.max_chunks,
            head_files=head_files,
            context_lines=r.context_lines,
            reused=reused,
        )

    plan = whole = planned()
    if not plan.chunks:
        files = {f.path: f for f in plan.files}
        report = RunReport(files=list(files.values()), catalog=catalog.summary())
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

    scope = scope_key(r, title, body, instructions_key(instructions), repo=repo)
    packable = {
        f.path
        for f in whole.files
        if f.status == "reviewed" or (f.reason or "").startswith("beyond limits")
    }
    units = {
        f.path: unit_key(scope, unit_text(f, head_files, r.context_lines))
        for f in index.files
        if f.path in packable
    }
    # a store of one key per entry (Redis) reads only these: the files' units (and each file's
    # latest unit, whatever its content: "changed since"), then the chunk reviews (their
    # summaries) those units point to
    memory = RunMemory.load(
        store,
        entries=catalog.selected,
        environ=environ,
        secrets=secrets,
        policy=policy.memory,
        chunks=units.values(),
        latest=[latest_unit(scope, path) for path in units],
    )
    memory.load_chunks(
        {m.group for k in units.values() if (m := memory.memory.chunks.get(k)) and m.group},
        policy=policy.memory,
    )
    reused: dict[str, ReusedUnit] = {}
    if reuse_reviews and memory.store.reviews_off:
        memory.not_reused = memory.store.reviews_off
    elif reuse_reviews:
        reused, memory.not_reused = reused_files(index, units, scope, memory, catalog)
    elif memory.store.keeps:
        memory.not_reused = "asked again: every file goes to a model"
        log.info("review: asked again, every file goes to a model (no cached verdict)")
    else:
        memory.not_reused = "memory is off"
    if reused:
        plan = planned(reused)
        reused = {p: reused[p] for p in plan.reused}
    files = {f.path: f for f in plan.files}
    report = RunReport(files=list(files.values()), catalog=catalog.summary())
    log.info(
        "review: %d files (%d reused), %d chunks of at most %d tokens, over %d routes",
        len(plan.files),
        len(reused),
        len(plan.chunks),
        budget,
        len(catalog.selected),
    )
    session = None
    results: list[ServeResult] = []
    read = PublishedHealth()
    if plan.chunks:
        if health is not None:
            catalog, read = await health(catalog)
            report.catalog = catalog.summary()  # the selection in its new order
        session = session_for(
            catalog, policy, environ, chat_fn, started, store=store, secrets=secrets
        )
        memory.recall_onto(session)
        results = await serve_chunks(session, plan.chunks, policy, title, body, instructions)
    got = collect(plan, results, files)
    add_reused(got, reused, memory, fresh=bool(plan.chunks))
    mark_reused(files, reused)
    findings = merge_findings(got.verified)
    served = [c.served_by for c in got.chunks if c.served_by and not c.reused]
    report.files = list(files.values())
    report.served_by = served[0] if served else None
    report.chunks = got.chunks
    report.attempts = sorted(got.attempts, key=lambda a: a.started_s or 0.0)
    asked: list[str] | None = None  # the routes that served; None: no request was needed
    if session is not None:
        board = session.board
        report.readiness = session.readiness()
        report.probes_sent = session.probes_sent
        report.quota = spent(session)
        asked = [s.agent_id for s in served]
    else:  # every file reused: no request, but the table says what memory holds
        board = memory.recall_only(catalog.selected)
        report.readiness = [p.model_copy() for p in board.rows()]
        report.probes_sent = 0
    memory.reused_files = len(reused)
    memory.reused_chunks = len({u.memo.group for u in reused.values()})
    memory.chunks_avoided = max(0, len(whole.chunks) - len(plan.chunks))
    if health is not None:
        report.quota = quota_report(read, report.quota)
    report.memory = memory.report(board, environ, policy, asked)
    remember_units(memory, plan, results, units, scope, policy, head_sha)
    memory.save(session, policy)
    report.elapsed_s = round(time.monotonic() - started, 3)
    report.verdict = conclude(
        got,
        findings,
        report.files,
        unlisted_files=unlisted_files,
        allow_approve=r.allow_approve,
    )
    report.verdict.findings = unique(with_fingerprints(report.verdict.findings, index))
    return report


async def review_with_health(
    index: DiffIndex, catalog: Catalog, policy: Policy, environ: Mapping[str, str], **kwargs: Any
) -> RunReport:
    """:func:`review` over the catalog ranked by its routes' published health (read only when
    a request will be sent), with what the review cost each account (``quota``; the
    ``review`` command's flow)."""

    async def health(ranked: Catalog) -> tuple[Catalog, PublishedHealth]:
        return await published_health(ranked, policy, environ)

    report = await review(index, catalog, policy, environ, health=health, **kwargs)
    return report.scrubbed(RunSecrets.of(catalog, environ))  # a reply may quote a key


def with_fingerprints(findings: list[Finding], index: DiffIndex) -> list[Finding]:
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


def add_reused(
    got: Collected,
    reused: Mapping[str, ReusedUnit],
    memory: RunMemory,
    *,
    fresh: bool,
) -> None:
    """Add the reused files to ``got`` (in place), grouped by the chunk review they came from:
    one reused chunk report per group (its number of then), its findings in reply order, and
    its summary, as it read then when no chunk was sent this run (so the same diff again is
    the same review), else marked with the commit it was reviewed at."""
    groups: dict[str, list[ReusedUnit]] = {}
    for unit in reused.values():
        groups.setdefault(unit.memo.group, []).append(unit)
    chunks = memory.memory.chunks

    def order(group: str) -> tuple[float, int, str]:
        head = chunks.get(group)
        first = groups[group][0].memo
        return (head.at if head else first.at, head.part if head else 1, group)

    for group in sorted(groups, key=order):
        units = groups[group]
        head = chunks.get(group)
        memo = units[0].memo
        entry = units[0].entry
        got.chunks.append(
            ChunkReport(
                number=head.part if head else None,
                total=head.parts if head else None,
                paths=[u.memo.paths[0] for u in units],
                served_by=entry.served_by,
                stopped=Stopped.SERVED,
                reused=True,
            )
        )
        ranked = [(n, f) for u in units for n, f in zip(u.ranks, u.findings, strict=True)]
        got.verified.append([f for _, f in sorted(ranked, key=lambda nf: nf[0])])
        if head is None or head.group or not head.summary:
            continue
        prefix = f"Reused from {memo.head[:12] or 'an earlier run'}: " if fresh else ""
        got.chunks[-1].summary = head.summary
        got.summaries.append((len(ranked), prefix + head.summary))
