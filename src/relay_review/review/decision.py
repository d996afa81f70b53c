"""The verdict's decision, computed from verified findings only (never taken from the model),
and the merge of findings from several chunks or rounds."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal

from relay_review.records import Finding

Decision = Literal["approve", "comment", "request_changes"]

SEVERITY_RANK: dict[str, int] = {"high": 3, "medium": 2, "low": 1}
#: Two messages on the same line at least this similar (difflib ratio) are one finding.
SIMILAR_MESSAGES = 0.85


def decide(verified: Iterable[Finding], *, allow_approve: bool = True) -> Decision:
    """``request_changes`` if any verified finding is high; ``comment`` if any verified finding;
    otherwise ``approve`` (``comment`` when ``allow_approve`` is off).

    Pass verified findings only: unverified ones never count, and the model's own ``decision``
    is never consulted.
    """
    severities = {f.severity for f in verified}
    if "high" in severities:
        return "request_changes"
    if severities:
        return "comment"
    return "approve" if allow_approve else "comment"


def partial_note(left_out: int, listed: int, unlisted: int = 0, dropped: int = 0) -> str:
    """Why a served review is partial (``""`` when it is whole): ``left_out`` of ``listed`` files
    change content no model was shown, ``unlisted`` files are beyond the files GitHub lists, and
    ``dropped`` findings cite shown changed lines but could not be verified (their quote names a
    changed line, or is an excerpt of any length of the exact line they cite:
    :func:`relay_review.review.citations.points_at_shown_code`). Any of them keeps the decision
    from ``approve``."""
    parts: list[str] = []
    if left_out or unlisted:
        text = (
            f"{left_out + unlisted} of {listed + unlisted} files change content no model was"
            " shown (listed below with the reason"
        )
        if unlisted:
            text += f"; {unlisted} beyond the 3,000 files GitHub lists are not"
        parts.append(text + ")")
    if dropped:
        s = "" if dropped == 1 else "s"
        parts.append(
            f"{dropped} finding{s} on changed lines could not be verified (listed as unverified)"
        )
    return "; ".join(parts)


def _norm(message: str) -> str:
    return " ".join(message.casefold().split()).rstrip(" .!;:")


def _similar(a: str, b: str) -> bool:
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return (
        m.real_quick_ratio() >= SIMILAR_MESSAGES
        and m.quick_ratio() >= SIMILAR_MESSAGES
        and m.ratio() >= SIMILAR_MESSAGES
    )


def merge_findings(lists: Iterable[Iterable[Finding]]) -> list[Finding]:
    """Concatenate finding lists, dropping duplicates; first-seen order is kept.

    Two findings are duplicates when they cite the same (path, line, side) and their messages are
    equal after case/whitespace normalisation or at least ``SIMILAR_MESSAGES`` similar. Of two
    duplicates, the higher severity survives (in the first one's place).
    """
    merged: list[Finding] = []
    at: dict[tuple[str, int, str], list[int]] = {}
    for findings in lists:
        for f in findings:
            key = (f.path, f.line, f.side)
            norm = _norm(f.message)
            slots = at.setdefault(key, [])
            for slot in slots:
                kept = merged[slot]
                kept_norm = _norm(kept.message)
                same = norm == kept_norm or _similar(norm, kept_norm)
                if same:
                    if SEVERITY_RANK[f.severity] > SEVERITY_RANK[kept.severity]:
                        merged[slot] = f
                    break
            else:
                slots.append(len(merged))
                merged.append(f)
    return merged
