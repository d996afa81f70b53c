"""A finding that failed verification, and how a reason quotes the reply.

Every check (schema, citation, the per-reply cap) rejects with a reason that goes back to the
model in the repair round and into the report, so the texts it quotes from the model or the diff
are path-escaped and cut the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from relay_review.records.finding import Finding
from relay_review.records.finding import cut as _cut
from relay_review.review.paths import show_path

#: Longest excerpt of a diff line or a model-supplied string quoted in a rejection reason.
SHOW_CHARS = 160


class Rejection(NamedTuple):
    """A finding that failed verification, why, and its 1-based position in the reply.
    ``over_limit``: rejected unchecked, past the per-reply cap (its citation may be fine)."""

    finding: Finding
    reason: str
    position: int
    over_limit: bool = False


def show(text: str, limit: int = SHOW_CHARS) -> str:
    """``text`` (a path, a line, a repr of what the model sent) escaped and cut for a reason."""
    return _cut(show_path(text), limit)


def numbers(nums: Sequence[int]) -> str:
    """Line numbers as a reason lists them (``3, 7, 12``)."""
    return ", ".join(str(n) for n in nums)
