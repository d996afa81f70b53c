"""HTTP helpers shared by both edges (GitHub and the LLM providers).

Kept in a neutral module so ``github/`` and ``providers/`` never import each other for them.
"""

from __future__ import annotations

import email.utils
import re
from datetime import UTC, datetime

__all__ = ["parse_duration", "parse_retry_after"]


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


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)", re.IGNORECASE)
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | None) -> float | None:
    """Seconds from a Go-style duration (``2s``, ``1m30s``, ``6m0s``, ``350ms``, ``0.5s``) or a
    bare number of seconds (``7``, ``1.25``), as the ``x-ratelimit-reset-*`` headers carry them.

    Returns None when absent or unparsable; never negative.
    """
    if value is None:
        return None
    text = value.strip().lower()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None
    if not _DURATION.fullmatch(text):
        return None
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
