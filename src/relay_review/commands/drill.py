"""``relay-review drill``: run the pipeline against a local fleet of scripted faults.

With no ``--scenario`` it reviews a bundled sample diff end to end (catalog, preflight, failover,
verdict validation with a repair round) and prints the review as plain text, or with
``--format markdown`` the PR comment it would post. With a
scenario it serves one chat request and prints the readiness table, the attempt timeline and
time-to-reply against the healthy route's own direct latency. Operators use it to see how their
deadlines behave before trusting a free pool. With ``--serve --config FILE`` it only serves the
fleet the file describes (``examples/fleet.toml``), as a local OpenAI-compatible server to point
the other commands, or any client, at; the flags of a pipeline run (``--policy``, the serving
bounds, ``--state``, ``--format`` other than json) are refused with it, never ignored.

With memory (``--state``, or ``RELAY_REVIEW_STATE``) and no ``RELAY_DRILL_PORT``, the fleet
listens on a port derived from the memory's location
(:func:`~relay_review.drill.scenarios.drill_fleet`): memory knows an account by its base URL, so
the next drill with that memory meets the same addresses and starts warm.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

from relay_review import pipeline
from relay_review.commands.common import (
    FLAG_KEYS,
    add_format_arg,
    add_serving_args,
    add_state_arg,
    policy_from_args,
    policy_path,
    store_from_args,
)
from relay_review.drill.report import format_drill
from relay_review.drill.review import REVIEW_SCENARIO, run_review_drill
from relay_review.drill.scenarios import PORT_ENV, SCENARIOS, STABLE_PORTS, run_named
from relay_review.drill.serve import serve_config
from relay_review.errors import UsageError
from relay_review.pipeline.store import cli_state_url, store_location
from relay_review.records import Decision
from relay_review.render import TEXT_WIDTH, comment_markdown, review_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "drill",
        help="run the pipeline against a local fleet of scripted faults (default: review a "
        "bundled sample diff), or serve a fleet (--serve --config FILE)",
        description="Start a local fault fleet and run the pipeline against it with your "
        "settings. Without --scenario: review a bundled sample diff and print the review "
        "(--format markdown: the PR comment). "
        "With --serve --config FILE: only serve the fleet FILE describes on 127.0.0.1 (one JSON "
        "line with its base URLs, then until SIGTERM/Ctrl-C); it takes --port and -v, and "
        "refuses the flags of a pipeline run (--policy, serving flags, --state, --format other "
        "than json): give those to the commands pointed at the fleet. "
        "Scenarios: " + "; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values()),
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="serve the fleet of --config on 127.0.0.1 until SIGTERM/Ctrl-C; prints one JSON "
        'line {"port", "url", "accounts": {name: base_url}} once listening',
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="fleet config for --serve (.toml or .json; examples/fleet.toml shows the format)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="port for --serve on 127.0.0.1 (default: a free one)",
    )
    p.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        help="serve one chat request under this scenario (default: the whole review drill)",
    )
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="policy TOML whose bounds to try (default: ./.github/relay-review.toml if it "
        "exists, else built-in settings; not with --serve)",
    )
    add_serving_args(p)
    add_format_arg(p, ("json", "text", "markdown"), default="text")  # markdown: comment only
    p.set_defaults(format=None)  # None: not given (text), so --serve can refuse a given one
    add_state_arg(
        p,
        tail=f"; the fleet then listens on a port derived from this memory's location (one of "
        f"{STABLE_PORTS.start}-{STABLE_PORTS.stop - 1}, the same for every drill with it; "
        f"{PORT_ENV} picks another), as memory knows an account by its base URL: the next "
        "drill with it starts warm (a port in use: a free one, with a warning; that drill "
        "starts cold)",
    )


def run(args: argparse.Namespace) -> int:
    if args.serve or args.config is not None:
        return _serve(args)
    if args.port:
        raise UsageError("--port belongs to --serve")
    fmt = args.format or "text"
    policy = policy_from_args(args)
    store = store_from_args(args, os.environ, policy)
    state = store_location(cli_state_url(args.state, os.environ))  # picks the fleet's port
    if args.scenario is None:
        path = policy_path(getattr(args, "policy", None))
        origin = f"drill policy {path}" if path else "built-in drill policy"
        report = pipeline.run_sync(run_review_drill(policy, store, origin, state=state))
        if fmt == "json":
            print(json.dumps(report.to_json(), indent=2))
        elif fmt == "markdown":  # the comment alone (tools/render_comment_png.py)
            print(comment_markdown(report, marker=""), end="")
        else:  # plain text for a terminal; --format markdown is the comment itself
            print(
                *textwrap.wrap(f"scenario review: {REVIEW_SCENARIO.description}", TEXT_WIDTH),
                sep="\n",
            )
            print()
            print(review_text(report), end="")
        return 0 if report.decision != Decision.UNAVAILABLE else 1
    if fmt == "markdown":
        raise UsageError("--format markdown is the review drill's comment; use text or json")
    result = pipeline.run_sync(run_named(args.scenario, policy, store, state=state))
    if fmt == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_drill(result))
    return 0 if result.chat.served_by else 1


def _serve(args: argparse.Namespace) -> int:
    """``--serve --config FILE``: the fleet alone, in this process, until a signal."""
    if args.config is None:
        raise UsageError("--serve needs --config FILE (a fleet config; see examples/fleet.toml)")
    if not args.serve:
        raise UsageError("--config is the fleet config of --serve; add --serve")
    if args.scenario is not None:
        raise UsageError("--serve serves a config, --scenario plays a built-in one; pick one")
    refused = _pipeline_flags(args)
    if refused:
        them = "it" if len(refused) == 1 else "them"
        raise UsageError(
            f"{', '.join(refused)}: not with --serve, whose fleet runs no pipeline (no policy, "
            f"bounds or memory); give {them} to the command you point at the fleet"
        )
    if args.format not in (None, "json"):
        raise UsageError(
            f"--format {args.format}: not with --serve, which prints one JSON line (--format json "
            "is its only format)"
        )
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: expected 0 (a free port) to 65535")
    return serve_config(args.config, args.port)


def _pipeline_flags(args: argparse.Namespace) -> list[str]:
    """The flags of a pipeline run given with ``--serve`` (``--policy``, the serving bounds,
    ``--state``), as the command line spells them."""
    given = [d for d in ("policy", *FLAG_KEYS, "state") if getattr(args, d, None) is not None]
    return ["--" + dest.replace("_", "-") for dest in given]
