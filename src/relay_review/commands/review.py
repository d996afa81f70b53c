"""``relay-review review``: review a unified diff through the catalog with failover."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from relay_review import pipeline
from relay_review._text import scrub_text
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
from relay_review.pipeline.review import review_with_health
from relay_review.records import Decision
from relay_review.render import comment_markdown
from relay_review.review.diff import DiffIndex, DiffParseError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review",
        help="review a unified diff: verified findings, computed decision, every route's fate",
        description="Review a unified diff (a file, or - for stdin) over the catalog. Exit 0 "
        "when a verdict was produced, 1 when no route produced one before the deadline (the "
        'report is still printed, with "decision": "unavailable"), 2 on bad input.',
    )
    p.add_argument("--diff", required=True, metavar="FILE|-", help="unified diff (git diff)")
    p.add_argument("--title", help="pull request title (untrusted: fenced in the prompt)")
    p.add_argument("--body-file", metavar="FILE", help="pull request description (untrusted)")
    add_catalog_args(p)
    add_serving_args(p)
    add_format_arg(p, ("json", "markdown"))
    add_state_arg(p)


def _read(path: str, what: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    catalog = catalog_from_args(args, policy)
    try:
        index = DiffIndex.from_diff(_read(args.diff, "--diff"))
    except DiffParseError as exc:
        raise UsageError(f"--diff {args.diff}: {exc}") from None
    if not index.files:
        raise UsageError(f"--diff {args.diff}: no file changes found (is it a unified diff?)")
    body = (
        _read(args.body_file, "--body-file").decode("utf-8", "replace") if args.body_file else None
    )
    title = scrub_text(args.title) if args.title else None  # argv may hold undecodable bytes
    report = pipeline.run_sync(
        review_with_health(
            index,
            catalog,
            policy,
            os.environ,
            title=title,
            body=body,
            store=store_from_args(args, os.environ, policy),
        )
    )
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(comment_markdown(report))
    if report.decision != Decision.UNAVAILABLE:
        return 0
    if why := missing_keys_line(catalog, os.environ):
        print(f"relay-review review: {why}", file=sys.stderr)
    return 1
