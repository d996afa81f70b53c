"""Serving chunks: every chunk asked with failover, and a reply accepted only as a review.

Each chunk is one prompt with its reply schema and findings cap, asked in the response form its
route takes (stepping down once when a route refuses it); a reply is accepted only with evidence
that it is a review of that chunk, after at most one repair round. A chunk a route found too long
(naming its limit, or any 413) is re-planned once into smaller ones.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from relay_review.config import Policy
from relay_review.providers.chat.forms import DOCUMENTED_RESPONSE_FORMS, refuses_response_format
from relay_review.records import Attempt, Catalog, CatalogEntry, ChatMessage, Finding, Outcome
from relay_review.review.chunks import MIN_CHUNK_TOKENS, Chunk, plan_chunks
from relay_review.review.citations import covers, points_at_shown_code
from relay_review.review.decision import merge_findings
from relay_review.review.diff import DiffIndex
from relay_review.review.echo import Echoes
from relay_review.review.evidence import all_invented, echo_problem, evidence_problem
from relay_review.review.prompt import (
    Instructions,
    Prompt,
    build_messages,
    diff_budget,
    malformed_repair_messages,
    repair_messages,
)
from relay_review.review.reply import FileNote, ParsedReply, VerdictParseError, parse_reply_parts
from relay_review.review.reply_schema import (
    RESPONSE_FORMS,
    findings_cap,
    next_form,
    reply_schema,
    response_format,
)
from relay_review.review.verdict import validate_parts
from relay_review.routing.failover import Accept, ServeResult
from relay_review.routing.session import RoutingSession

log = logging.getLogger("relay_review.pipeline")


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
    #: The words the model was shown as data (a reply made of them is no review).
    echoes: Echoes
    #: Repair-round attempts, accepted or not (the report lists every attempt).
    repairs: list[Attempt] = field(default_factory=list)
    #: Repair requests asked for this chunk so far, over all its routes (at most
    #: ``review.repair_rounds``; counted before the request is sent).
    repairs_asked: int = 0

    def body(self, entry: CatalogEntry) -> dict:
        return self.forms.body(entry, self.schema)

    def downgrade(self, entry: CatalogEntry, outcome: Outcome) -> dict | None:
        return self.forms.downgrade(entry, outcome, self.schema)


def make_accept(session: RoutingSession, ask: ChunkAsk, policy: Policy) -> Accept:
    """The reply check for one chunk: a reply is a review only with evidence that it is one.

    Parse tolerantly (a malformed reply gets one repair round); refuse a reply whose summary is
    junk or whose notes name a file not in the chunk, and one whose findings were all invented
    (none points at shown code); one repair round for rejected findings, and a failed repair is
    a refusal. Refused replies are ``bad_reply`` for the route: failover goes on. A chunk gets
    at most ``review.repair_rounds`` repair requests over all its routes; past that, a malformed
    reply is refused and rejected findings stay unverified without one.
    """
    chunk, prompt = ask.chunk, ask.prompt
    max_tokens = policy.review.max_output_tokens
    quoted = ask.echoes.copies_reply

    rounds = policy.review.repair_rounds

    def can_repair() -> bool:
        return ask.repairs_asked < rounds

    async def repair(entry: CatalogEntry, messages: list[ChatMessage]) -> tuple[Outcome, Attempt]:
        ask.repairs_asked += 1
        outcome, attempt = await session.call(
            entry, messages, max_tokens=max_tokens, extra_body=ask.body(entry)
        )
        ask.repairs.append(attempt)
        return outcome, attempt

    async def accept(entry: CatalogEntry, outcome: Outcome) -> tuple[bool, Any, str]:
        content = outcome.content or ""
        repaired_once = False
        try:
            parsed = parse_reply_parts(content, quoted)
        except VerdictParseError as exc:
            if not can_repair():
                return False, None, f"malformed verdict: {exc}; {no_round_left(rounds)}"
            again, _ = await repair(entry, malformed_repair_messages(prompt, content, str(exc)))
            if not again.ok:
                return False, None, f"malformed verdict: {exc}; repair round failed"
            try:
                parsed = parse_reply_parts(again.content or "", quoted)
            except VerdictParseError as exc2:
                return False, None, f"malformed verdict: {exc}; repair reply: {exc2}"
            content, repaired_once = again.content or "", True
        refused = refusal(parsed, chunk, ask.max_findings, ask.echoes)
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
        if not rejected or repaired_once or not can_repair():
            return True, verdict, ""
        messages = repair_messages(prompt, content, rejected, max_findings=ask.max_findings)
        again, _ = await repair(entry, messages)
        if not again.ok:
            return False, None, f"{len(rejected)} finding(s) unverified; repair round failed"
        try:
            second = parse_reply_parts(again.content or "", quoted)
        except VerdictParseError as exc:
            return False, None, f"{len(rejected)} finding(s) unverified; repair reply: {exc}"
        refused = refusal(second, chunk, ask.max_findings, ask.echoes)
        if refused:
            return False, None, f"repair reply: {refused}"
        verified2, rejected2 = validate_parts(second, chunk.index, max_findings=ask.max_findings)
        verdict.verified = merge_findings([verified, verified2])
        restated = [*verified2, *(r.finding for r in rejected2)]
        verdict.unverified = [
            (r.finding, f"{r.reason} (after the repair round)") for r in rejected2
        ] + [
            (r.finding, f"{r.reason} (dropped in the repair round)")
            for r in rejected
            if points_at_shown_code(r.finding, chunk.index)
            and not any(covers(f, r.finding) for f in restated)
        ]
        verdict.summary = second.reply.summary or parsed.reply.summary
        verdict.cut = second.cut
        verdict.notes = list(second.reply.files) or verdict.notes
        return True, verdict, ""

    return accept


def no_round_left(rounds: int) -> str:
    """Why a reply got no repair round: the chunk used its ``review.repair_rounds``."""
    return f"no repair round left for this chunk (review.repair_rounds = {rounds})"


def refusal(parsed: ParsedReply, chunk: Chunk, max_findings: int, echoes: Echoes) -> str:
    """Why a parsed reply is not a review of ``chunk`` (``""``: it may be one): no evidence
    (junk summary, notes on files not shown), every finding invented, or, with no verified
    finding, a summary or note copied from the pull request's own text (planted words obeyed)."""
    problem = evidence_problem(parsed, chunk.paths)
    if problem:
        return f"not a review: {problem}"
    verified, rejected = validate_parts(parsed, chunk.index, max_findings=max_findings)
    if all_invented(parsed, verified, rejected, chunk.index):
        return f"not a review: all {len(rejected)} finding(s) cite code this chunk does not show"
    echo = None if verified else echo_problem(parsed, echoes)
    return f"not a review: {echo}" if echo else ""


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
        echoes = Echoes.of(title, body, chunk.shown_text())
        ask = ChunkAsk(chunk, prompt, reply_schema(cap, len(chunk.paths)), forms, cap, echoes)
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
        room = r.max_chunks - len(chunks)  # chunks the re-planned parts may add, all told
        for i, (chunk, result) in enumerate(zip(chunks, results, strict=True)):
            smaller = replan_too_long(chunk, result, policy, max_parts=room + 1)
            if not smaller:
                continue
            # a 400 naming a context window: that route takes the smaller parts; a 413 (a
            # request too large for the route's tier) keeps the route out for the run
            session.readmit(
                {
                    a.agent_id
                    for a in result.attempts
                    if a.outcome == "context_too_long" and a.http_status != 413
                }
            )
            if not session.routes_left():
                log.info(
                    "review: chunk %d was too long; no route left to take it smaller", chunk.number
                )
                continue
            log.info(
                "review: chunk %d was too long for a route: re-planned into %d smaller chunks",
                chunk.number,
                len(smaller),
            )
            room -= len(smaller) - 1
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
#: The tier limit in Groq's 413 ("Request too large for model `m` in organization `o` service
#: tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 14137, please reduce your
#: message size ..."): the limit counts the prompt *and* ``max_tokens``, like a context window.
#: Each number is read only with the comma after it (a detail cut at its length cap can end in
#: the middle of one).
_TIER_LIMIT = re.compile(r"\bLimit\s+(\d{3,9}),(?:\s*Requested\s+(\d{1,9}),)?")


def context_limit(detail: str) -> int | None:
    """The context window or tier limit (tokens) a refusal names, if it names one."""
    m = _CONTEXT_LIMIT.search(detail or "")
    if m:
        return int(m.group(1))
    tier = _TIER_LIMIT.search(detail or "")
    return int(tier.group(1)) if tier else None


def requested_tokens(detail: str) -> int | None:
    """The request size (tokens, prompt and ``max_tokens``) a tier limit's refusal counted."""
    tier = _TIER_LIMIT.search(detail or "")
    return int(tier.group(2)) if tier and tier.group(2) else None


def replan_too_long(
    chunk: Chunk, result: ServeResult, policy: Policy, max_parts: int | None = None
) -> list[Chunk]:
    """Smaller chunks for a chunk no route served because a route said it was too long.

    A refusal naming its limit (a context window, or the "Limit N" of Groq's 413): planned for
    the smallest such limit less ``max_output_tokens`` (and the repair round's room when the
    limit leaves a part of ``MIN_CHUNK_TOKENS`` beside it; when the refusal counted the request
    as "Requested M", at most the share of the chunk that fits N), at most half the chunk. A
    limit that leaves no room for the smallest part beside the reply is no guide (a part sized
    for it could not be sent either). A 413 naming no usable limit: half the chunk. ``[]``
    when there is no such answer, the chunk cannot shrink, or the parts would be more than
    ``max_parts`` (what ``review.max_chunks`` leaves: each part is a request). Tried once (the
    parts are not re-planned again).
    """
    if result.ok:
        return []
    too_long = [a for a in result.attempts if a.outcome == "context_too_long"]
    r = policy.review
    fits: list[int] = []
    for a in too_long:
        limit = context_limit(a.detail)
        fit = None if limit is None else part_budget(limit, r.max_output_tokens)
        if limit is None or fit is None:
            continue
        fits.append(fit)
        requested = requested_tokens(a.detail)
        if requested is not None and requested > max(limit, r.max_output_tokens):
            share = (limit - r.max_output_tokens) / (requested - r.max_output_tokens)
            fits.append(int(chunk.tokens * share))
    if not fits and not any(a.http_status == 413 for a in too_long):
        return []
    budget = max(MIN_CHUNK_TOKENS, min([*fits, chunk.tokens // 2]))
    if budget >= chunk.tokens or (max_parts is not None and max_parts < 2):
        return []
    plan = plan_chunks(
        DiffIndex(chunk.files),
        budget,
        exclude=(),
        max_line_chars=r.max_line_chars,
        max_chunks=max_parts,
    )
    cut = any(f.left_out for f in plan.files)
    if len(plan.chunks) < 2 or cut:
        if max_parts is not None and cut:
            log.info(
                "review: chunk %d was too long; %d-token parts would be more than the %d "
                "review.max_chunks leaves: not re-planned",
                chunk.number,
                budget,
                max_parts,
            )
        return []
    return plan.chunks


def part_budget(limit: int, max_output_tokens: int) -> int | None:
    """Diff tokens a part may hold for a route whose limit (context window or tier) is
    ``limit``: room for the repair round too when that leaves at least ``MIN_CHUNK_TOKENS``,
    else room for the reply alone; None when not even that leaves ``MIN_CHUNK_TOKENS``."""
    for repair_round in (True, False):
        fit = diff_budget(limit, max_output_tokens, repair_round=repair_round)
        if fit >= MIN_CHUNK_TOKENS:
            return fit
    return None


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
