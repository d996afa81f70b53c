"""The ``drill`` command's report for people: a scenario's readiness, timeline and timing."""

from __future__ import annotations

import textwrap

from relay_review.drill.scenarios import DrillResult
from relay_review.render import TEXT_WIDTH, attempt_timeline, plain, readiness_table


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def format_drill(result: DrillResult) -> str:
    """The drill's report for people (plain text, at most :data:`TEXT_WIDTH` columns)."""
    chat = result.chat
    lines = [
        *textwrap.wrap(f"scenario {result.scenario}: {result.description}", TEXT_WIDTH),
        "",
        readiness_table(chat.catalog.selected, chat.readiness, chat.served_by, chat.attempts),
        "",
        attempt_timeline(chat.attempts),
        "",
    ]
    if chat.served_by:
        served = f"served by {chat.served_by.agent_id}: {plain(chat.reply, 300)!r}"
        lines += textwrap.wrap(served, TEXT_WIDTH)
        ratio = result.ratio
        lines.append(
            f"time to reply {_seconds(chat.time_to_reply_s)}; healthy route direct "
            f"{_seconds(result.direct_latency_s)}; ratio "
            + ("-" if ratio is None else f"{ratio:.2f}")
        )
    else:
        lines.append(f"no route served ({chat.stopped}); gave up after {chat.elapsed_s:.2f}s")
    lines.append(
        f"probes sent {chat.probes_sent} (at most {result.max_probe_tokens} output "
        f"tokens each, {result.probe_tokens_requested} in all)"
    )
    return "\n".join(lines)
