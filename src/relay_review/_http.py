"""HTTP helpers shared by both edges (GitHub and the LLM providers).

Kept in a neutral module so ``github/`` and ``providers/`` never import each other for them.
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

__all__ = ["parse_retry_after"]


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP-date (RFC 9110).

    Returns None when absent or unparsable; never negative.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN is not a wait
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
