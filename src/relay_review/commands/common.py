"""Flags and loaders shared by the commands that build a catalog (catalog, preflight, chat)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from relay_review.errors import UsageError
from relay_review.models import Catalog
from relay_review.routing.catalog import build_catalog, parse_discovery, parse_zdr_feed


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
    parser.add_argument("--limit", type=positive_int, default=12, help="routes to select (12)")
    parser.add_argument(
        "--account-cap", type=positive_int, default=8, help="most routes from one account (8)"
    )
    parser.add_argument(
        "--pool", choices=("free", "auto"), default="free", help="free only, or free then priced"
    )
    parser.add_argument("--require-zdr", action="store_true", help="keep ZDR routes only")


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


def catalog_from_args(args: argparse.Namespace) -> Catalog:
    """Load the discovery report (and ZDR feed) named by the flags and build the catalog."""
    routes = parse_discovery(read_json(args.discovery, "discovery report"))
    zdr_ids = parse_zdr_feed(read_json(args.zdr_feed, "ZDR feed")) if args.zdr_feed else None
    return build_catalog(
        routes,
        zdr_ids,
        limit=args.limit,
        account_cap=args.account_cap,
        pool=args.pool,
        require_zdr=args.require_zdr,
    )
