"""A chat call's timeout in words: the phase it is reported in and what had arrived by then.

The messages are tables looked up by (phase, what arrived); :mod:`.call` only says which timer
struck and what it had seen.
"""

from __future__ import annotations

from enum import StrEnum

from relay_review.records import Deadlines, Phase


class Arrived(StrEnum):
    """How far the reply had come when a timer struck."""

    NOTHING = "nothing"
    HEADERS = "headers"  # headers, but no body byte
    KEEPALIVE = "keep-alive"  # body bytes, but only SSE comments
    PARTIAL = "partial"  # body bytes besides comments, but no event finished
    EVENTS = "events"  # body bytes, at least one event


#: A timeout that struck while still connecting, by the bound that struck.
STILL_CONNECTING: dict[Phase, str] = {
    Phase.FIRST_BYTE: "still connecting when the first_byte bound ({first_byte}) struck",
    Phase.FIRST_TOKEN: "still connecting when the first_token bound ({first_token}) struck",
    Phase.ATTEMPT: "still connecting when the {attempt_name} ({attempt}) struck",
}

_NO_REPLY = "no complete reply within the {attempt_name} {attempt}"
#: Any other timeout, by its phase and what had arrived (None: whatever had arrived).
TIMEOUT_DETAILS: dict[tuple[Phase, Arrived | None], str] = {
    (Phase.FIRST_BYTE, Arrived.NOTHING): "no headers within {first_byte}",
    (Phase.FIRST_BYTE, None): "headers but no body byte within {first_byte}",
    (Phase.IDLE, None): "silent for {idle} after {bytes} bytes",
    (Phase.FIRST_TOKEN, Arrived.NOTHING): "first_token: no headers within {first_token}",
    (Phase.FIRST_TOKEN, Arrived.HEADERS): (
        "first_token: headers but no body byte within {first_token}"
    ),
    (Phase.FIRST_TOKEN, Arrived.KEEPALIVE): (
        "first_token: keep-alive only ({bytes} bytes of SSE comments, "
        "no token within {first_token})"
    ),
    (Phase.FIRST_TOKEN, Arrived.PARTIAL): (
        "first_token: no event finished ({bytes} bytes, no token within {first_token})"
    ),
    (Phase.FIRST_TOKEN, Arrived.EVENTS): (
        "first_token: no content or reasoning delta within {first_token}"
    ),
    (Phase.ATTEMPT, Arrived.NOTHING): _NO_REPLY + " (no headers)",
    (Phase.ATTEMPT, Arrived.HEADERS): _NO_REPLY + " (headers, but no body byte)",
    (Phase.ATTEMPT, Arrived.KEEPALIVE): _NO_REPLY + " ({bytes} bytes received, keep-alive only)",
    (Phase.ATTEMPT, Arrived.PARTIAL): _NO_REPLY + " ({bytes} bytes received, no event finished)",
    (Phase.ATTEMPT, Arrived.EVENTS): _NO_REPLY + " ({bytes} bytes received)",
}


def timeout_detail(
    struck: Phase, arrived: Arrived, *, connecting: bool, bytes_seen: int, deadlines: Deadlines
) -> tuple[Phase, str]:
    """The phase a timeout is reported in and its detail, for the timer that ``struck``.

    A timer other than ``idle`` striking while the connection is still being set up is reported
    as ``connect`` (naming the bound that struck).
    """
    d = deadlines
    values = {
        "first_byte": _secs(d.first_byte),
        "idle": _secs(d.idle),
        "first_token": _secs(d.first_token),
        "attempt": _secs(d.attempt),
        "attempt_name": d.attempt_name,
        "bytes": bytes_seen,
    }
    if connecting and struck is not Phase.IDLE:
        return Phase.CONNECT, STILL_CONNECTING[struck].format_map(values)
    template = TIMEOUT_DETAILS.get((struck, arrived)) or TIMEOUT_DETAILS[(struck, None)]
    return struck, template.format_map(values)


def _secs(value: float) -> str:
    """A bound for people: ``10s``, ``9.95s`` (a bound cut to the deadline's remainder is not
    shown as ``9.95483s``)."""
    return f"{round(value, 2):g}s"
