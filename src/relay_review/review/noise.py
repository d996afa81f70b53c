"""Noise controls (pure): which verified findings become inline comments, and which stay in
the sticky comment only.

Users' first complaint about AI review is noise, so by default only ``medium`` and ``high``
findings are posted inline, at most 10 a run (most severe first, then in report order); every
finding stays in the sticky comment, where ``low`` ones are folded. The same finding (one
fingerprint: :mod:`relay_review.review.fingerprint`) reported by several chunks or routes is
kept once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from relay_review.records import Inline
from relay_review.review.decision import SEVERITY_RANK

#: The defaults of ``inline-min-severity`` and ``max-inline-comments`` (policy
#: ``github.inline_min_severity`` and ``github.max_inline``).
DEFAULT_FLOOR = "medium"
DEFAULT_CAP = 10

T = TypeVar("T")


def _get(finding: Any, key: str) -> Any:
    return finding.get(key) if isinstance(finding, Mapping) else getattr(finding, key, None)


def rank(finding: Any) -> int:
    """The finding's severity rank (high 3, medium 2, low 1; anything else 0)."""
    return SEVERITY_RANK.get(str(_get(finding, "severity") or "").lower(), 0)


def unique(findings: Sequence[T]) -> list[T]:
    """``findings`` with each fingerprint kept once (the first; a finding without one kept),
    in order: the same finding from two chunks or two routes is one finding."""
    seen: set[str] = set()
    out = []
    for f in findings:
        fp = _get(f, "fingerprint")
        if isinstance(fp, str) and fp:
            if fp in seen:
                continue
            seen.add(fp)
        out.append(f)
    return out


@dataclass
class Noise:
    """The noise policy of one run: the severity floor and the cap of inline comments."""

    floor: str = DEFAULT_FLOOR
    cap: int = DEFAULT_CAP


@dataclass
class InlinePlan:
    """Indices (into the findings given) to post inline, and those held back, with why."""

    post: list[int] = field(default_factory=list)
    below_floor: list[int] = field(default_factory=list)
    over_cap: list[int] = field(default_factory=list)

    def summary(self, noise: Noise) -> Inline:
        return Inline(
            min_severity=noise.floor,
            max_inline=noise.cap,
            inline=len(self.post),
            below_floor=len(self.below_floor),
            over_cap=len(self.over_cap),
        )


def inline_plan(findings: Sequence[Any], noise: Noise) -> InlinePlan:
    """Which of ``findings`` to post inline: at or above ``noise.floor``, one per fingerprint,
    at most ``noise.cap`` of them (most severe first, then in order); posted in report order."""
    floor = SEVERITY_RANK.get(noise.floor, SEVERITY_RANK[DEFAULT_FLOOR])
    out = InlinePlan()
    seen: set[str] = set()
    eligible = []
    for i, f in enumerate(findings):
        fp = _get(f, "fingerprint")
        if isinstance(fp, str) and fp:
            if fp in seen:
                continue  # posted once
            seen.add(fp)
        if rank(f) < floor:
            out.below_floor.append(i)
        else:
            eligible.append(i)
    by_severity = sorted(eligible, key=lambda i: (-rank(findings[i]), i))
    keep = set(by_severity[: max(noise.cap, 0)])
    out.post = [i for i in eligible if i in keep]
    out.over_cap = [i for i in eligible if i not in keep]
    return out
