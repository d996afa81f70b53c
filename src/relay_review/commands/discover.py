"""``relay-review discover``: list every keyed account's chat models into a discovery report.

Exit codes: 0 when the report was written and at least one account listed its models (failed
accounts' errors are in the report), 1 when no account has a key or every keyed account failed
(the report is still written), 2 for a bad policy or unwritable output.

The policy file: ``--policy FILE``, else ``.github/relay-review.toml`` (the action's own path)
when it exists in the current directory, else built-in defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from relay_review._files import WRITE_A_FILE, not_a_file
from relay_review.commands.common import policy_path
from relay_review.config import (
    key_conventions,
    load_policy,
    resolve_accounts,
)
from relay_review.config.layers import DEFAULT_POLICY_PATH
from relay_review.errors import UsageError
from relay_review.providers.discovery import discover, write_report
from relay_review.records import has_key
from relay_review.render import plural


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``discover`` and its options."""
    parser = subparsers.add_parser(
        "discover",
        help="list each account's chat models with price evidence (a discovery report)",
        description=(
            "Ask every account that has a key for its model list (concurrently, bounded by "
            "[discovery] timeout), keep chat-capable text models, attach price evidence, and "
            "write a discovery report. OpenRouter's ZDR feed is saved beside it as "
            "<report stem>.zdr.json."
        ),
    )
    parser.add_argument("--out", required=True, type=Path, help="where to write the report JSON")
    parser.add_argument(
        "--policy",
        type=Path,
        default=None,
        help=f"policy file (default: ./{DEFAULT_POLICY_PATH}, the action's path, if it exists; "
        "else built-in defaults)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Discover routes, write the report, print one progress line per account to stderr."""
    out: Path = args.out
    problem = not_a_file(out)
    if problem:
        raise UsageError(f"--out {out}: {problem}; {WRITE_A_FILE}")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: directory {out.parent} does not exist")
    policy = load_policy(policy_path(args.policy))
    environ = dict(os.environ)
    accounts = resolve_accounts(policy, environ)
    if not any(has_key(acc, environ) for acc in accounts):
        looked_for = key_conventions() + sorted(
            {acc.api_key_env for acc in accounts if acc.source == "policy"}
        )
        print(
            "relay-review discover: no account has a key; set one of: " + ", ".join(looked_for),
            file=sys.stderr,
        )
        return 1

    result = asyncio.run(discover(accounts, environ, policy.discovery))
    try:
        report = write_report(result, out)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})") from None

    for summary in result.accounts:
        if summary.status == "ok":
            line = f"{summary.kept} of {summary.listed} models kept"
            if dropped := summary.dropped_text():
                line += f" (dropped: {dropped})"
        elif summary.status == "skipped":
            line = f"skipped ({summary.error})"
        else:
            line = f"error: {summary.error}"
        print(f"discover: {summary.account} ({summary.kind}): {line}", file=sys.stderr)
    for error in result.errors:
        if error.account in {s.account for s in result.accounts}:
            continue
        print(f"discover: {error.account}: error: {error.error}", file=sys.stderr)
    feed = report["zdr_feed"]
    print(
        f"discover: wrote {out} ({plural(len(report['routes']), 'route')}, "
        f"{plural(len(report['errors']), 'error')}"
        + (f", ZDR feed {feed})" if feed else ", no ZDR feed)"),
        file=sys.stderr,
    )
    if not any(s.status == "ok" for s in result.accounts):
        print("relay-review discover: every account with a key failed", file=sys.stderr)
        return 1
    return 0
