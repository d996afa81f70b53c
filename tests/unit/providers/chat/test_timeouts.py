"""A chat call's timeout detail (``providers/chat/timeouts.py``), issue 21: the messages are a
table looked up by the phase that struck and what had arrived. These pin every message the
branches gave before the table, and that the table answers for every phase a timer reports."""

from __future__ import annotations

import pytest

from relay_review.providers.chat.timeouts import Arrived, timeout_detail
from relay_review.records import Deadlines, Phase

D = Deadlines(connect=1.5, first_byte=2.25, idle=3.333, attempt=9.95483, first_token=4)
NO_REPLY = "no complete reply within the attempt bound 9.95s"


@pytest.mark.parametrize(
    ("struck", "arrived", "phase", "detail"),
    [
        (Phase.FIRST_BYTE, Arrived.NOTHING, Phase.FIRST_BYTE, "no headers within 2.25s"),
        (
            Phase.FIRST_BYTE,
            Arrived.HEADERS,
            Phase.FIRST_BYTE,
            "headers but no body byte within 2.25s",
        ),
        (Phase.IDLE, Arrived.EVENTS, Phase.IDLE, "silent for 3.33s after 7 bytes"),
        (
            Phase.FIRST_TOKEN,
            Arrived.NOTHING,
            Phase.FIRST_TOKEN,
            "first_token: no headers within 4s",
        ),
        (
            Phase.FIRST_TOKEN,
            Arrived.HEADERS,
            Phase.FIRST_TOKEN,
            "first_token: headers but no body byte within 4s",
        ),
        (
            Phase.FIRST_TOKEN,
            Arrived.KEEPALIVE,
            Phase.FIRST_TOKEN,
            "first_token: keep-alive only (7 bytes of SSE comments, no token within 4s)",
        ),
        (
            Phase.FIRST_TOKEN,
            Arrived.PARTIAL,
            Phase.FIRST_TOKEN,
            "first_token: no event finished (7 bytes, no token within 4s)",
        ),
        (
            Phase.FIRST_TOKEN,
            Arrived.EVENTS,
            Phase.FIRST_TOKEN,
            "first_token: no content or reasoning delta within 4s",
        ),
        (Phase.ATTEMPT, Arrived.NOTHING, Phase.ATTEMPT, f"{NO_REPLY} (no headers)"),
        (Phase.ATTEMPT, Arrived.HEADERS, Phase.ATTEMPT, f"{NO_REPLY} (headers, but no body byte)"),
        (
            Phase.ATTEMPT,
            Arrived.KEEPALIVE,
            Phase.ATTEMPT,
            f"{NO_REPLY} (7 bytes received, keep-alive only)",
        ),
        (
            Phase.ATTEMPT,
            Arrived.PARTIAL,
            Phase.ATTEMPT,
            f"{NO_REPLY} (7 bytes received, no event finished)",
        ),
        (Phase.ATTEMPT, Arrived.EVENTS, Phase.ATTEMPT, f"{NO_REPLY} (7 bytes received)"),
    ],
)
def test_each_timeout_message(struck: Phase, arrived: Arrived, phase: Phase, detail: str) -> None:
    assert timeout_detail(struck, arrived, connecting=False, bytes_seen=7, deadlines=D) == (
        phase,
        detail,
    )


@pytest.mark.parametrize(
    ("struck", "detail"),
    [
        (Phase.FIRST_BYTE, "still connecting when the first_byte bound (2.25s) struck"),
        (Phase.FIRST_TOKEN, "still connecting when the first_token bound (4s) struck"),
        (Phase.ATTEMPT, "still connecting when the review bound (9.95s) struck"),
    ],
)
def test_a_timer_striking_while_connecting_is_reported_as_connect(
    struck: Phase, detail: str
) -> None:
    named = D.model_copy(update={"attempt_name": "review bound"})
    for arrived in Arrived:
        got = timeout_detail(struck, arrived, connecting=True, bytes_seen=0, deadlines=named)
        assert got == (Phase.CONNECT, detail)


def test_idle_is_never_reported_as_connecting_and_every_phase_has_a_message() -> None:
    for struck in (Phase.FIRST_BYTE, Phase.IDLE, Phase.FIRST_TOKEN, Phase.ATTEMPT):
        for arrived in Arrived:
            for connecting in (False, True):
                phase, detail = timeout_detail(
                    struck, arrived, connecting=connecting, bytes_seen=3, deadlines=D
                )
                assert detail and "{" not in detail
                assert phase is (
                    Phase.CONNECT if connecting and struck is not Phase.IDLE else struck
                )
