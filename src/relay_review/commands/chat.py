"""``relay-review chat``: one chat request served with preflight and failover."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from relay_review import pipeline
from relay_review.commands.common import (
    add_catalog_args,
    add_format_arg,
    add_serving_args,
    add_state_arg,
    catalog_from_args,
    missing_keys_line,
    policy_from_args,
    store_from_args,
)
from relay_review.errors import UsageError

if TYPE_CHECKING:
    from relay_review.records import ChatMessage


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="send one message through preflight + failover; prints who served and every attempt",
        description="Serve one message over the catalog. Exit 0 when a route served, 1 when none "
        "did before the deadline (the report is still printed), 2 on bad input.",
    )
    add_catalog_args(p)
    add_serving_args(p)
    add_state_arg(p)
    msg = p.add_mutually_exclusive_group(required=True)
    msg.add_argument("--message", metavar="TEXT", help="the user message")
    msg.add_argument("--message-file", metavar="FILE", help="read the user message from FILE")
    add_format_arg(p, ("json", "text"))


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    catalog = catalog_from_args(args, policy)
    if args.message_file:
        try:
            text = Path(args.message_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--message-file {args.message_file}: cannot read ({exc})") from None
    else:
        text = args.message
    messages: list[ChatMessage] = [{"role": "user", "content": text}]
    store = store_from_args(args, os.environ, policy)
    report = pipeline.run_sync(pipeline.chat(catalog, policy, os.environ, messages, store=store))
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        # loaded after the reply: the renderer is no part of the path to the first request
        from relay_review.render import attempt_timeline, readiness_table

        print(
            readiness_table(
                report.catalog.selected, report.readiness, report.served_by, report.attempts
            )
        )
        print()
        print(attempt_timeline(report.attempts))
        print()
        if report.served_by:
            print(f"served by {report.served_by.agent_id} in {report.elapsed_s:.1f}s")
            print(report.reply)
        else:
            print(f"no route served ({report.stopped}) after {report.elapsed_s:.1f}s")
    if not report.served_by:
        why = missing_keys_line(catalog, os.environ)
        why = why or f"no route produced a reply ({report.stopped})"
        print(f"relay-review chat: {why}", file=sys.stderr)
        return 1
    return 0
