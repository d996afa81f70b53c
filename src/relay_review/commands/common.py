"""Flags and loaders shared by the commands that build a catalog (catalog, preflight, chat)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from relay_review.errors import UsageError
from relay_review.models import Catalog
from relay_review.routing.catalog import build_catalog, parse_discovery, parse_zdr_feed
from relay_review.settings import Policy, load_policy, resolve_require_zdr


def positive_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def add_catalog_args(parser: argparse.ArgumentParser) -> None:
    """The catalog contract's flags."""
    parser.add_argument("--discovery", required=True, metavar="FILE", help="discovery report JSON")
    parser.add_argument(
        "--zdr-feed", metavar="FILE", help="ZDR feed JSON shaped like OpenRouter's /endpoints/zdr"
    )
    parser.add_argument("--limit", type=positive_int, help="routes to select (12)")
    parser.add_argument("--account-cap", type=positive_int, help="most routes from one account (8)")
    parser.add_argument(
        "--pool", choices=("free", "auto"), help="free only (default), or free then priced"
    )
    parser.add_argument(
        "--require-zdr", action="store_true", default=None, help="keep ZDR routes only"
    )
    parser.add_argument("--policy", metavar="FILE", help="policy TOML (default: built-in settings)")


def read_json(path: str, what: str) -> Any:
    """Read a JSON file, naming it in the error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} {path}: not valid JSON ({exc})") from None


def catalog_from_args(args: argparse.Namespace, policy: Policy | None = None) -> Catalog:
    """Load the discovery report (and ZDR feed) named by the flags and build the catalog.

    Flags win over the policy's ``[catalog]``; ``require_zdr = "auto"`` means false here (the
    command line knows no repository; the action resolves it from the repository's visibility).
    """
    policy = policy or policy_from_args(args)
    routes = parse_discovery(read_json(args.discovery, "discovery report"))
    zdr_ids = parse_zdr_feed(read_json(args.zdr_feed, "ZDR feed")) if args.zdr_feed else None
    c = policy.catalog
    return build_catalog(
        routes,
        zdr_ids,
        limit=c.limit if args.limit is None else args.limit,
        account_cap=c.account_cap if args.account_cap is None else args.account_cap,
        pool=args.pool or c.pool,
        require_zdr=args.require_zdr or resolve_require_zdr(c.require_zdr, repo_private=False),
    )


def add_serving_args(parser: argparse.ArgumentParser, *, serving: bool = True) -> None:
    """Preflight and serving bounds; defaults come from the policy (``--policy``) or built-ins."""
    parser.add_argument("--probe-budget", type=positive_int, help="most probes per run (6)")
    parser.add_argument("--probe-timeout", type=positive_float, help="bound of one probe, s (10)")
    parser.add_argument("--connect-timeout", type=positive_float, help="TCP/TLS connect, s (5)")
    parser.add_argument("--deadline", type=positive_float, help="whole run, probes included (600)")
    if serving:
        parser.add_argument(
            "--first-byte-timeout", type=positive_float, help="request -> first byte, s (20)"
        )
        parser.add_argument(
            "--idle-timeout", type=positive_float, help="longest silent gap while streaming (30)"
        )
        parser.add_argument(
            "--attempt-timeout", type=positive_float, help="one whole attempt, s (180)"
        )


_FLAG_TO_POLICY = {
    "probe_budget": ("preflight", "probe_budget"),
    "probe_timeout": ("preflight", "probe_timeout"),
    "connect_timeout": ("serving", "connect"),
    "deadline": ("serving", "deadline"),
    "first_byte_timeout": ("serving", "first_byte"),
    "idle_timeout": ("serving", "idle"),
    "attempt_timeout": ("serving", "attempt"),
}


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The policy file named by ``--policy`` (or built-in defaults) with the flags laid over it."""
    policy = load_policy(args.policy) if getattr(args, "policy", None) else Policy()
    updates: dict[str, dict[str, Any]] = {}
    for flag, (section, key) in _FLAG_TO_POLICY.items():
        value = getattr(args, flag, None)
        if value is not None:
            updates.setdefault(section, {})[key] = value
    return policy.model_copy(
        update={
            section: getattr(policy, section).model_copy(update=values)
            for section, values in updates.items()
        }
    )
