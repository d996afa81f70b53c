"""A chunk's verdict: the parsed reply's findings split into verified and rejected.

The one entry the review flow calls after parsing (:mod:`.reply`): each finding's citation is
checked (:mod:`.citations`) and a verified finding's suggestion kept only if it applies
(:mod:`.suggestions`); findings past the per-reply cap are rejected unchecked.
"""

from __future__ import annotations

from relay_review.records.finding import Finding
from relay_review.review.citations import citation_problem
from relay_review.review.diff import DiffIndex
from relay_review.review.rejection import Rejection
from relay_review.review.reply import ModelReply, ParsedReply
from relay_review.review.suggestions import with_suggestion

#: Findings checked per reply; later ones are rejected as over the limit.
MAX_FINDINGS = 30


def validate(
    reply: ModelReply, index: DiffIndex, *, max_findings: int = MAX_FINDINGS
) -> tuple[list[Finding], list[Rejection]]:
    """Split the reply's findings into (verified, rejected-with-reason), in reply order.

    Validate a chunk's reply against ``chunk.index`` so only lines shown to the model count.
    Findings past ``max_findings`` are rejected unchecked ("over the limit"); a finding repeated
    word for word in one reply is taken once and does not count toward that limit. A verified
    finding's suggestion that does not apply to its lines is dropped (:func:`with_suggestion`).
    """
    verified: list[Finding] = []
    rejected: list[Rejection] = []
    seen: set[str] = set()
    for position, finding in enumerate(reply.findings, start=1):
        said = finding.model_dump_json()
        if said in seen:  # the same finding again, word for word: said once, not capped
            continue
        seen.add(said)
        if len(seen) > max_findings:
            reason = f"over the limit of {max_findings} findings per reply"
            rejected.append(Rejection(finding, reason, position, over_limit=True))
            continue
        problem = citation_problem(finding, index)
        if problem is None:
            verified.append(with_suggestion(finding, index))
        else:
            rejected.append(Rejection(finding, problem, position))
    return verified, rejected


def validate_parts(
    parsed: ParsedReply, index: DiffIndex, *, max_findings: int = MAX_FINDINGS
) -> tuple[list[Finding], list[Rejection]]:
    """:func:`validate` over a parsed reply: findings keep their reply positions, and those that
    failed the schema on their own are rejected with their reason (the rest stand)."""
    verified, rejected = validate(parsed.reply, index, max_findings=max_findings)
    positions = parsed.positions
    rejected = [
        r._replace(position=positions[r.position - 1]) if r.position <= len(positions) else r
        for r in rejected
    ]
    rejected = sorted([*rejected, *parsed.invalid], key=lambda r: r.position)
    return verified, rejected
