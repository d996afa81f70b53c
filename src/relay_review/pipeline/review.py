"""The review flow: ``chunks -> preflight (background) -> failover serving per chunk ->
citation checks and one repair round -> decision -> RunReport``."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relay_review.config import Policy
from relay_review.pipeline.memory import RunMemory
from relay_review.pipeline.review_cache import (
    chunk_key,
    chunk_memo,
    reuse,
    scope_key,
    unit_key,
    unit_memo,
)
from relay_review.pipeline.routes import (
    published_health,
    quota_report,
    session_for,
    spent,
)
from relay_review.providers.chat.forms import DOCUMENTED_RESPONSE_FORMS, refuses_response_format
from relay_review.records import (
    Attempt,
    Catalog,
    CatalogEntry,
    ChunkReport,
    Decision,
    FileReport,
    Finding,
    Outcome,
    ReviewStatus,
    RunReport,
    ServedBy,
    Stopped,
    Verdict,
)
from relay_review.review.chunks import MIN_CHUNK_TOKENS, Chunk, ChunkPlan, plan_chunks, unit_text
from relay_review.review.citations import points_at_shown_code
from relay_review.review.context import HeadFiles
from relay_review.review.decision import decide, merge_findings, partial_note
from relay_review.review.diff import DiffIndex, Side
from relay_review.review.evidence import all_invented, evidence_problem, has_word, loops
from relay_review.review.fingerprint import finding_fingerprint
from relay_review.review.noise import unique
from relay_review.review.paths import DEFAULT_EXCLUDES
from relay_review.review.prompt import (
    RESPONSE_FORMS,
    Instructions,
    Prompt,
    build_messages,
    diff_budget,
    findings_cap,
    malformed_repair_messages,
    next_form,
    repair_messages,
    reply_schema,
    response_format,
)
from relay_review.review.reply import FileNote, ParsedReply, VerdictParseError, parse_reply_parts
from relay_review.review.verdict import validate_parts
from relay_review.routing.board import ChatFn
from relay_review.routing.failover import Accept, ServeResult
from relay_review.routing.session import RoutingSession
from relay_review.state import Store, latest_unit
from relay_review.state.memory import ChunkMemo, Memory

log = logging.getLogger("relay_review.pipeline")


# --------------------------------------------------------------------------------------------
# the review


@dataclass
class ChunkVerdict:
    """What one chunk's accepted reply came to, after its repair round (if any)."""

    summary: str
    verified: list[Finding]
    unverified: list[tuple[Finding, str]]
    repair: Attempt | None = None
    #: The accepted reply was cut off (``max_tokens`` or a stream that stopped mid-object): its
    #: complete findings count, and the chunk is partial.
    cut: bool = False
    #: The model's notes per file (optional; the comment falls back to the summary).
    notes: list[FileNote] = field(default_factory=list)


class ResponseForms:
    """Which ``response_format`` each route is asked with this run, and its step down.

    Per account (``[[accounts]] response_format``): a fixed form, or ``auto``: the form the
    listing declares (OpenRouter), else the one the kind documents, else ``json_schema``. A
    route that refuses its form (400/422/500 naming it) is asked once more one form down, and
    keeps that form for the rest of the run. The repair round sends the same form.
    """

    def __init__(self, policy: Policy) -> None:
        self.settings = {a.name: a.response_format for a in policy.accounts}
        self.temperature = policy.review.temperature
        self.chosen: dict[str, str] = {}

    def form(self, entry: CatalogEntry) -> str:
        if entry.agent_id in self.chosen:
            return self.chosen[entry.agent_id]
        setting = self.settings.get(entry.account, "auto")
        if setting != "auto":
            return setting
        declared = entry.route.response_format
        if declared in RESPONSE_FORMS:
            return declared
        documented = DOCUMENTED_RESPONSE_FORMS.get(entry.route.provider, "json_schema")
        return "none" if documented == "listing" else documented

    def body(self, entry: CatalogEntry, schema: dict[str, Any], form: str | None = None) -> dict:
        """The request fields for ``entry``: temperature and its response form."""
        fmt = response_format(form or self.form(entry), schema)
        body: dict[str, Any] = {"temperature": self.temperature}
        if fmt is not None:
            body["response_format"] = fmt
        return body

    def downgrade(
        self, entry: CatalogEntry, outcome: Outcome, schema: dict[str, Any]
    ) -> dict | None:
        """The fields to ask again with after ``outcome`` refused the form, or None."""
        current = self.form(entry)
        if current == "none" or not refuses_response_format(outcome.http_status, outcome.detail):
            return None
        lower = next_form(current)
        if lower is None:
            return None
        self.chosen[entry.agent_id] = lower
        log.info("route %s refused response_format %s: now %s", entry.agent_id, current, lower)
        return self.body(entry, schema, lower)


def context_window(catalog: Catalog, policy: Policy) -> int:
    """The smallest context window in the catalog (so any route can serve any chunk)."""
    known = [e.route.context_length for e in catalog.selected if e.route.context_length]
    return min(known, default=policy.review.context_tokens)


def chunk_findings_cap(chunk: Chunk, policy: Policy) -> int:
    """How many findings one reply for ``chunk`` may hold (its schema's ``maxItems``)."""
    changed = sum(1 for _ in chunk.index.locations())
    return findings_cap(changed, policy.review.max_output_tokens)


@dataclass
class ChunkAsk:
    """What every request for one chunk carries: its prompt, schema, forms and cap."""

    chunk: Chunk
    prompt: Prompt
    schema: dict[str, Any]
    forms: ResponseForms
    max_findings: int
    #: Repair-round attempts, accepted or not (the report lists every attempt).
    repairs: list[Attempt] = field(default_factory=list)

    def body(self, entry: CatalogEntry) -> dict:
        return self.forms.body(entry, self.schema)

    def downgrade(self, entry: CatalogEntry, outcome: Outcome) -> dict | None:
        return self.forms.downgrade(entry, outcome, self.schema)


def make_accept(session: RoutingSession, ask: ChunkAsk, policy: Policy) -> Accept:
    """The reply check for one chunk: a reply is a review only with evidence that it is one.

    Parse tolerantly (a malformed reply gets one repair round); refuse a reply whose summary is
    junk or whose notes name a file not in the chunk, and one whose findings were all invented
    (none points at shown code); one repair round for rejected findings, and a failed repair is
    a refusal. Refused replies are ``bad_reply`` for the route: failover goes on.
    """
    chunk, prompt = ask.chunk, ask.prompt
    max_tokens = policy.review.max_output_tokens

    async def repair(entry: CatalogEntry, messages: list[dict]) -> tuple[Outcome, Attempt]:
        outcome, attempt = await session.call(
            entry, messages, max_tokens=max_tokens, extra_body=ask.body(entry)
        )
        ask.repairs.append(attempt)
        return outcome, attempt

    async def accept(entry: CatalogEntry, outcome: Outcome) -> tuple[bool, Any, str]:
        content = outcome.content or ""
        repaired_once = False
        try:
            parsed = parse_reply_parts(content)
        except VerdictParseError as exc:
            again, _ = await repair(entry, malformed_repair_messages(prompt, content, str(exc)))
            if not again.ok:
                return False, None, f"malformed verdict: {exc}; repair round failed"
            try:
                parsed = parse_reply_parts(again.content or "")
            except VerdictParseError as exc2:
                return False, None, f"malformed verdict: {exc}; repair reply: {exc2}"
            content, repaired_once = again.content or "", True
        refused = refusal(parsed, chunk, ask.max_findings)
        if refused:
            return False, None, refused
        verified, rejected = validate_parts(parsed, chunk.index, max_findings=ask.max_findings)
        verdict = ChunkVerdict(
            parsed.reply.summary,
            verified,
            [(r.finding, r.reason) for r in rejected],
            cut=parsed.cut,
            notes=list(parsed.reply.files),
        )
        if not rejected or repaired_once:
            return True, verdict, ""
        messages = repair_messages(prompt, content, rejected, max_findings=ask.max_findings)
        again, _ = await repair(entry, messages)
        if not again.ok:
            return False, None, f"{len(rejected)} finding(s) unverified; repair round failed"
        try:
            second = parse_reply_parts(again.content or "")
        except VerdictParseError as exc:
            return False, None, f"{len(rejected)} finding(s) unverified; repair reply: {exc}"
        refused = refusal(second, chunk, ask.max_findings)
        if refused:
            return False, None, f"repair reply: {refused}"
        verified2, rejected2 = validate_parts(second, chunk.index, max_findings=ask.max_findings)
        verdict.verified = merge_findings([verified, verified2])
        verdict.unverified = [
            (r.finding, f"{r.reason} (after the repair round)") for r in rejected2
        ]
        verdict.summary = second.reply.summary or parsed.reply.summary
        verdict.cut = second.cut
        verdict.notes = list(second.reply.files) or verdict.notes
        return True, verdict, ""

    return accept


def refusal(parsed: ParsedReply, chunk: Chunk, max_findings: int) -> str:
    """Why a parsed reply is not a review of ``chunk`` (``""``: it may be one): no evidence
    (junk summary, notes on files not shown) or every finding invented."""
    problem = evidence_problem(parsed, chunk.paths)
    if problem:
        return f"not a review: {problem}"
    verified, rejected = validate_parts(parsed, chunk.index, max_findings=max_findings)
    if all_invented(parsed, verified, rejected, chunk.index):
        return f"not a review: all {len(rejected)} finding(s) cite code this chunk does not show"
    return ""


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
                    reason=f"no route could review it before the deadline ({result.stopped})",
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
    forms = ResponseForms(policy)

    async def one(chunk: Chunk) -> ServeResult:
        cap = chunk_findings_cap(chunk, policy)
        prompt = build_messages(
            chunk,
            title=title,
            body=body,
            part=chunk.number,
            parts=chunk.total,
            max_findings=cap,
            instructions=instructions,
        )
        ask = ChunkAsk(chunk, prompt, reply_schema(cap, len(chunk.paths)), forms, cap)
        async with limit:
            result = await session.serve(
                prompt.messages,
                accept=make_accept(session, ask, policy),
                max_tokens=r.max_output_tokens,
                extra_body=ask.body,
                downgrade=ask.downgrade,
            )
        result.attempts.extend(ask.repairs)
        return result

    async with session:
        results = list(await asyncio.gather(*(one(c) for c in chunks)))
        for i, (chunk, result) in enumerate(zip(chunks, results, strict=True)):
            smaller = replan_too_long(chunk, result, policy)
            if not smaller:
                continue
            session.readmit(
                {a.agent_id for a in result.attempts if a.outcome == "context_too_long"}
            )
            log.info(
                "review: chunk %d was too long for a route: re-planned into %d smaller chunks",
                chunk.number,
                len(smaller),
            )
            parts = list(await asyncio.gather(*(one(c) for c in smaller)))
            results[i] = merge_parts(result, parts)
        return results


#: A context limit named in a ``context_too_long`` answer: llama-server's "available context
#: size (4096 tokens)", OpenAI's "maximum context length is 8192 tokens", vLLM's, ``n_ctx``.
_CONTEXT_LIMIT = re.compile(
    r"(?:context(?:[ _-](?:size|length|window|limit))|maximum context length|n_ctx)"
    r"\D{0,24}?(\d{3,8})",
    re.IGNORECASE,
)


def context_limit(detail: str) -> int | None:
    """The context window (tokens) a refusal names, if it names one."""
    m = _CONTEXT_LIMIT.search(detail or "")
    return int(m.group(1)) if m else None


def replan_too_long(chunk: Chunk, result: ServeResult, policy: Policy) -> list[Chunk]:
    """Smaller chunks for a chunk no route served because a route said it was too long *and*
    named its limit: planned for that limit (at most half the chunk); ``[]`` when there is no
    such answer or the chunk cannot shrink. Tried once (the parts are not re-planned again)."""
    if result.ok:
        return []
    limits = [
        n
        for a in result.attempts
        if a.outcome == "context_too_long" and (n := context_limit(a.detail)) is not None
    ]
    if not limits:
        return []
    r = policy.review
    fits = diff_budget(min(limits), r.max_output_tokens)
    budget = max(MIN_CHUNK_TOKENS, min(fits, chunk.tokens // 2))
    if budget >= chunk.tokens:
        return []
    plan = plan_chunks(DiffIndex(chunk.files), budget, exclude=(), max_line_chars=r.max_line_chars)
    if len(plan.chunks) < 2 or any(f.left_out for f in plan.files):
        return []
    return plan.chunks


def merge_parts(whole: ServeResult, parts: list[ServeResult]) -> ServeResult:
    """One chunk's result from its re-planned parts: served when every part was (their
    findings and summaries joined), else not served; every attempt is kept."""
    attempts = [*whole.attempts, *(a for p in parts for a in p.attempts)]
    if not all(p.ok for p in parts):
        stopped = next((p.stopped for p in parts if not p.ok), whole.stopped)
        return ServeResult(attempts=attempts, stopped=stopped)
    verdicts: list[ChunkVerdict] = [p.value for p in parts]
    value = ChunkVerdict(
        " ".join(v.summary for v in verdicts if v.summary),
        merge_findings([v.verified for v in verdicts]),
        [u for v in verdicts for u in v.unverified],
        cut=any(v.cut for v in verdicts),
        notes=[n for v in verdicts for n in v.notes],
    )
    return ServeResult(
        reply=parts[0].reply,
        value=value,
        served_by=parts[0].served_by,
        attempts=attempts,
        stopped=parts[0].stopped,
    )


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
    if reuse_reviews:
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
    if plan.chunks:
        session = session_for(catalog, policy, environ, chat_fn, started, store=store)
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
    if session is not None:
        report.readiness = session.readiness()
        report.probes_sent = session.probes_sent
        report.quota = spent(session)
    else:  # every file reused: no request, but the table says what memory holds
        board = memory.recall_only(catalog.selected)
        report.readiness = [p.model_copy() for p in board.rows()]
        report.probes_sent = 0
    memory.reused_files = len(reused)
    memory.reused_chunks = len({u.memo.group for u in reused.values()})
    memory.chunks_avoided = max(0, len(whole.chunks) - len(plan.chunks))
    report.memory = memory.report(catalog.selected, report.probes_sent or 0, environ, policy)
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
    """:func:`review` over the catalog ranked by its routes' published health, with what the
    review cost each account (``quota``; the ``review`` command's flow)."""
    catalog, health = await published_health(catalog, policy, environ)
    report = await review(index, catalog, policy, environ, **kwargs)
    report.quota = quota_report(health, report.quota)
    return report


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


# --------------------------------------------------------------------------------------------
# the review cache (memory across runs)


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
