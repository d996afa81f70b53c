"""The ``drill`` command's report for people: a scenario's readiness, timeline and timing."""

from __future__ import annotations

from relay_review.render import attempt_timeline, readiness_table


def format_drill(result: dict) -> str:
    """The drill's report for people."""
    lines = [
        f"scenario {result['scenario']}: {result['description']}",
        "",
        readiness_table(
            result["catalog"]["selected"],
            result["readiness"],
            result["served_by"],
            result["attempts"],
        ),
        "",
        attempt_timeline(result["attempts"]),
        "",
    ]
    if result["served_by"]:
        lines.append(f"served by {result['served_by']['agent_id']}: {result['reply']!r}")
        lines.append(
            f"time to reply {result['time_to_reply_s']:.2f}s; healthy route direct "
            f"{result['direct_latency_s']:.2f}s; ratio {result['ratio']:.2f}"
        )
    else:
        lines.append(
            f"no route served ({result['stopped']}); gave up after {result['elapsed_s']:.2f}s"
        )
    lines.append(
        f"probes sent {result['probes_sent']} (at most {result['max_probe_tokens']} output "
        f"tokens each, {result['probe_tokens_requested']} in all)"
    )
    return "\n".join(lines)
