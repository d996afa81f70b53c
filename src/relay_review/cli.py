"""Command line: ``relay-review <command>``.

Each command lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``;
this module only wires them. Exit codes: 0 success, 1 no verdict/reply, 2 bad input or usage,
130/143 cancelled by SIGINT/SIGTERM (see :mod:`relay_review._signals`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from relay_review import __version__
from relay_review._signals import Cancelled, cancellable
from relay_review.errors import UsageError

#: command name -> module implementing it (imported lazily so ``--help`` stays fast).
COMMANDS: dict[str, str] = {
    "discover": "relay_review.commands.discover",
    "catalog": "relay_review.commands.catalog",
    "preflight": "relay_review.commands.preflight",
    "chat": "relay_review.commands.chat",
    "run": "relay_review.commands.run",
    "review": "relay_review.commands.review",
    "drill": "relay_review.commands.drill",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relay-review",
        description="Review pull requests over free or cheap LLM routes with bounded failover.",
    )
    parser.add_argument("--version", action="version", version=f"relay-review {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relay-review`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # per-request lines add noise, not facts
    module = importlib.import_module(COMMANDS[args.command])
    try:
        with cancellable(args.command):
            return int(module.run(args))
    except UsageError as exc:
        print(f"relay-review {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Cancelled as cancelled:  # the handler already said so, in one line
        return cancelled.code
