"""The review flow: ``chunks -> preflight (background) -> failover serving per chunk ->
citation checks and one repair round -> decision -> RunReport``."""

from __future__ import annotations

import asyncio
import logging
import re
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
from relay_review.providers.chat import DOCUMENTED_RESPONSE_FORMS, refuses_response_format
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
from relay_review.review.verdict import (
    FileNote,
    Finding,
    ParsedReply,
    VerdictParseError,
    all_invented,
    evidence_problem,
    has_word,
    loops,
    parse_reply_parts,
    points_at_shown_code,
    validate_parts,
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
    unverified: list[UnverifiedFinding] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    #: Findings on shown changed lines that could not be verified.
    dropped: int = 0
    #: Chunks whose accepted reply was cut off (their complete findings count).
    cut: int = 0

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
        if verdict.cut:
            out.cut += 1
        for note in verdict.notes:  # the walkthrough: the first note on a file wins
            f = files.get(note.path)
            if f is not None and not f.note and has_word(note.summary) and not loops(note.summary):
                files[note.path] = f.model_copy(update={"note": note.summary})
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
    memory = RunMemory.load(
        store, entries=catalog.selected, environ=environ, secrets=secrets, policy=policy.memory
    )
    shape = instructions_key(instructions)
    keys = {c.number: chunk_key(c, r, title, body, shape, repo=repo) for c in plan.chunks}
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
        if verdict.cut or any(points_at_shown_code(f, chunk.index) for f, _ in verdict.unverified):
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
