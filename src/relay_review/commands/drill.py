"""``relay-review drill``: run the pipeline against a local fleet of scripted faults.

With no ``--scenario`` it reviews a bundled sample diff end to end (catalog, preflight, failover,
verdict validation with a repair round) and prints the PR comment it would post. With a
scenario it serves one chat request and prints the readiness table, the attempt timeline and
time-to-reply against the healthy route's own direct latency. Operators use it to see how their
deadlines behave before trusting a free pool.
"""

from __future__ import annotations

import argparse
import json

from relay_review import pipeline
from relay_review.commands.common import add_serving_args, policy_from_args
from relay_review.render import attempt_timeline, comment_markdown, readiness_table
from relay_review.scenarios import (
    REVIEW_SCENARIO,
    SCENARIOS,
    fleet_for,
    run_review_drill,
    run_scenario,
)
from relay_review.settings import Policy


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "drill",
        help="run the pipeline against a local fleet of scripted faults (default: review a "
        "bundled sample diff and print the comment)",
        description="Start a local fault fleet and run the pipeline against it with your "
        "settings. Without --scenario: review a bundled sample diff and print the PR comment. "
        "Scenarios: " + "; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values()),
    )
    p.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        help="serve one chat request under this scenario (default: the whole review drill)",
    )
    p.add_argument("--policy", metavar="FILE", help="policy TOML whose bounds to try")
    add_serving_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text")


async def _drill(name: str, policy: Policy) -> dict:
    scenario = SCENARIOS[name]
    async with fleet_for(scenario) as fleet:
        return await run_scenario(scenario, policy, fleet)


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


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    if args.scenario is None:
        report = pipeline.run_sync(run_review_drill(policy))
        if args.format == "json":
            print(json.dumps(report, indent=2))
        else:
            print(f"scenario review: {REVIEW_SCENARIO.description}\n")
            print(comment_markdown(report, marker=""))
        return 0 if report["decision"] != "unavailable" else 1
    result = pipeline.run_sync(_drill(args.scenario, policy))
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(format_drill(result))
    return 0 if result["served_by"] else 1
