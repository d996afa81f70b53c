"""Rate-limit hints: when a route may be asked again, and whether a per-day quota is used up.

One parser for every form the providers send (pure: headers, parsed body and ``now`` in, a
:class:`RateHint` out). The wait, in order of precedence:

=====================================  =======================================================
form                                   where it comes from
=====================================  =======================================================
``Retry-After`` (seconds or HTTP-date)  RFC 9110; most providers on a 429
``retry-after-ms``                     OpenAI-style APIs
``llm_provider-retry-after``           LiteLLM proxy passing an upstream ``Retry-After`` on
``error.metadata.headers``             OpenRouter: the same headers echoed inside the 429 body
``error.metadata.retry_after``         a number of seconds
``RetryInfo.retryDelay`` (``45s``)     Gemini's ``RESOURCE_EXHAUSTED`` details
"try again in 5.289s", "retry in 45s"  Groq's and Gemini's messages
``X-RateLimit-Reset``                  OpenRouter: epoch milliseconds (epoch seconds and plain
                                       seconds are read too), in headers or the body's metadata
``x-ratelimit-reset-requests/-tokens`` Groq/OpenAI: durations (``2s``, ``1m30s``, ``6m0s``,
                                       ``350ms``); the one whose ``remaining`` is 0, else the
                                       later one
=====================================  =======================================================

Per-day quota signals (``daily``): OpenRouter's ``free-models-per-day`` message, a Gemini
``quotaId`` containing ``PerDay``, Cloudflare's error code 4006 ("daily free allocation",
resets 00:00 UTC). For a daily signal the wait is the *latest* of the forms present (plus the
documented reset: 00:00 UTC for Cloudflare, midnight Pacific time for Gemini), since a short
``retry in 45s`` on a per-day quota only says when the next per-minute window opens.
``exhausted``: ``X-RateLimit-Remaining: 0`` (OpenRouter counts it per account, across models).

Every number here is hostile input: a wait is never negative, never NaN and at most
:data:`MAX_WAIT_S` (``Retry-After: 1e999`` or ``99999999999`` reads as that cap), so no later
sum, date or sleep can overflow. Routing caps it further at the time left in the run, memory at
the policy's longest ``[memory]`` TTL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from relay_review._http import parse_duration, parse_retry_after

__all__ = ["MAX_WAIT_S", "RateHint", "bounded_wait", "error_payload", "read_rate_hint", "reset_at"]

#: Cloudflare Workers AI: "you have used up your daily free allocation of 10,000 neurons".
CLOUDFLARE_DAILY_CODE = 4006

#: The longest wait a provider's hint is believed for: a week, beyond any published quota
#: window (a day); a longer or infinite one is read as this.
MAX_WAIT_S = 7 * 86_400.0

_AGAIN_RE = re.compile(
    r"(?:try again|retry)\s+in\s+((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s))+)", re.IGNORECASE
)


@dataclass(frozen=True)
class RateHint:
    """What a rate-limited reply says about waiting.

    ``retry_after``: seconds until the route may be asked again (None: the reply does not say);
    ``daily``: a per-day quota is used up; ``exhausted``: the account's request allowance is 0;
    ``source``: the form the wait was read from (for details and tests).
    """

    retry_after: float | None = None
    daily: bool = False
    exhausted: bool = False
    source: str = ""


def error_payload(payload: Any) -> Any:
    """The error object of a body: Gemini's OpenAI endpoint wraps it in a one-item list."""
    if isinstance(payload, list) and len(payload) == 1 and isinstance(payload[0], dict):
        return payload[0]
    return payload


def _table(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (hostile bodies vary in shape)."""
    return value if isinstance(value, dict) else {}


def read_rate_hint(
    headers: Mapping[str, str], payload: Any, *, now: datetime | None = None
) -> RateHint:
    """Read every rate-limit hint form of a reply (status 429, or a mid-stream error event)."""
    now = now or datetime.now(UTC)
    payload = error_payload(payload)
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    error = _table(payload.get("error") if isinstance(payload, dict) else None)
    metadata = _table(error.get("metadata"))
    meta = {str(k).lower(): str(v) for k, v in _table(metadata.get("headers")).items()}

    waits: list[tuple[str, float]] = []  # (form, seconds), in order of precedence

    def add(form: str, seconds: float | None) -> None:
        wait = bounded_wait(seconds)
        if wait is not None:
            waits.append((form, wait))

    for where, source in (("", lower), ("metadata ", meta)):
        add(where + "retry-after", parse_retry_after(source.get("retry-after"), now=now))
        millis = parse_retry_after(source.get("retry-after-ms"))
        add(where + "retry-after-ms", None if millis is None else millis / 1000)
        add(
            where + "llm_provider-retry-after",
            parse_retry_after(source.get("llm_provider-retry-after"), now=now),
        )
    for key in ("retry_after", "retry_after_seconds"):
        value = metadata.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            add(f"metadata {key}", max(0.0, float(min(value, MAX_WAIT_S))))  # 1e400: no float
    quota_ids, delays = _google_details(error.get("details"))
    for delay in delays:
        add("retryDelay", parse_duration(delay))
    messages = _messages(payload, error)
    for text in messages:
        match = _AGAIN_RE.search(text)
        if match:
            add("message", parse_duration(match.group(1).replace(" ", "")))
            break
    for where, source in (("", lower), ("metadata ", meta)):
        add(where + "x-ratelimit-reset", _epoch_or_seconds(source.get("x-ratelimit-reset"), now))
    add("x-ratelimit-reset-*", _reset_durations(lower))

    cloudflare = _cloudflare_daily(payload)
    gemini_daily = any("perday" in q.lower() for q in quota_ids)
    openrouter_daily = any("free-models-per-day" in text.lower() for text in messages)
    daily = cloudflare or gemini_daily or openrouter_daily
    if cloudflare:
        add("cloudflare 4006 (00:00 UTC)", _until_midnight(now, UTC))
    if gemini_daily:
        add("gemini PerDay (midnight Pacific)", _until_midnight(now, _pacific()))
    remaining = lower.get("x-ratelimit-remaining", meta.get("x-ratelimit-remaining"))
    exhausted = remaining is not None and remaining.strip() == "0"

    if not waits:
        return RateHint(daily=daily, exhausted=exhausted)
    form, seconds = max(waits, key=lambda w: w[1]) if daily else waits[0]
    return RateHint(retry_after=seconds, daily=daily, exhausted=exhausted, source=form)


def bounded_wait(seconds: float | None) -> float | None:
    """``seconds`` as a wait: None for none or NaN, else within 0 and :data:`MAX_WAIT_S`."""
    if seconds is None or seconds != seconds:
        return None
    return min(max(0.0, float(seconds)), MAX_WAIT_S)


def reset_at(retry_after: float | None, now: datetime | None = None) -> str | None:
    """When a wait ends, as an ISO-8601 UTC time to the second (for reports); None if unknown."""
    wait = bounded_wait(retry_after)
    if wait is None:
        return None
    try:
        when = (now or datetime.now(UTC)) + timedelta(seconds=wait)
    except OverflowError:  # a ``now`` at the end of the calendar
        return None
    return when.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- the forms


def _messages(payload: Any, error: dict) -> list[str]:
    """Every human message of an error body (OpenAI/OpenRouter, Gemini, Cloudflare, NIM)."""
    texts = [error.get("message")]
    if isinstance(payload, dict):
        texts += [payload.get("message"), payload.get("detail")]
        errors = payload.get("errors")
        if isinstance(errors, list):
            texts += [e.get("message") for e in errors if isinstance(e, dict)]
    return [t for t in texts if isinstance(t, str) and t]


def _google_details(details: Any) -> tuple[list[str], list[str]]:
    """(quota ids, retry delays) from Google's ``error.details`` (QuotaFailure, RetryInfo)."""
    quota_ids: list[str] = []
    delays: list[str] = []
    if not isinstance(details, list):
        return quota_ids, delays
    for item in details:
        if not isinstance(item, dict):
            continue
        violations = item.get("violations")
        if isinstance(violations, list):
            quota_ids += [
                v["quotaId"]
                for v in violations
                if isinstance(v, dict) and isinstance(v.get("quotaId"), str)
            ]
        if isinstance(item.get("retryDelay"), str):
            delays.append(item["retryDelay"])
    return quota_ids, delays


def _cloudflare_daily(payload: Any) -> bool:
    if not isinstance(payload, dict) or not isinstance(payload.get("errors"), list):
        return False
    return any(
        isinstance(e, dict) and e.get("code") == CLOUDFLARE_DAILY_CODE for e in payload["errors"]
    )


def _epoch_or_seconds(value: str | None, now: datetime) -> float | None:
    """``X-RateLimit-Reset``: epoch milliseconds (OpenRouter), epoch seconds, or seconds."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return parse_duration(value)
    if number != number:
        return None
    if number > 1e11:
        return max(0.0, number / 1000 - now.timestamp())
    if number > 1e9:
        return max(0.0, number - now.timestamp())
    return max(0.0, number)


def _reset_durations(lower: Mapping[str, str]) -> float | None:
    """``x-ratelimit-reset-requests``/``-tokens``: the exhausted one's, else the later one."""
    found: dict[str, float] = {}
    for what in ("requests", "tokens"):
        seconds = parse_duration(lower.get(f"x-ratelimit-reset-{what}"))
        if seconds is not None:
            found[what] = seconds
    if not found:
        return None
    empty = [w for w in found if lower.get(f"x-ratelimit-remaining-{w}", "").strip() == "0"]
    return max(found[w] for w in empty) if empty else max(found.values())


def _until_midnight(now: datetime, tz: Any) -> float:
    local = now.astimezone(tz)
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(0.0, (midnight - local).total_seconds())


def _pacific() -> Any:
    """Pacific time (Google's daily quotas reset at its midnight); UTC-8 without a tz database."""
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo("America/Los_Angeles")
    except Exception:  # no tz database in a slim image
        return timezone(timedelta(hours=-8))
