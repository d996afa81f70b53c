"""Flags and loaders shared by the commands that build a catalog (catalog, preflight, chat)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay_review.errors import UsageError
from relay_review.models import Catalog
from relay_review.routing.catalog import build_catalog, parse_discovery, parse_zdr_feed
from relay_review.settings import (
    Layer,
    OverrideError,
    Policy,
    check_override,
    file_layer,
    merge_layers,
    resolve_require_zdr,
)


def whole_number(text: str) -> int:
    """Read a flag's text as a whole number (its range is the policy's to check)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def seconds(text: str) -> float:
    """Read a flag's text as a number of seconds (its range is the policy's to check)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None


def policy_flag(key: str, read: Callable[[str], Any] = str) -> Callable[[str], Any]:
    """argparse type of a flag that overrides the policy key ``key`` (``catalog.limit``).

    The text is read by ``read``, then checked by the policy's own rules
    (:func:`~relay_review.settings.check_override`), so ``--limit 0`` is refused as argparse
    refuses a bad flag, in the words a policy file with ``limit = 0`` gets.
    """

    def parse(text: str) -> Any:
        try:
            return check_override(key, read(text))
        except OverrideError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = key  # argparse names the type in some messages
    return parse


#: flag (its argparse ``dest``) -> the policy key it overrides. Flags a command lacks are skipped.
FLAG_KEYS: dict[str, str] = {
    "limit": "catalog.limit",
    "account_cap": "catalog.account_cap",
    "pool": "catalog.pool",
    "require_zdr": "catalog.require_zdr",
    "probe_budget": "preflight.probe_budget",
    "probe_timeout": "preflight.probe_timeout",
    "connect_timeout": "serving.connect",
    "deadline": "serving.deadline",
    "first_byte_timeout": "serving.first_byte",
    "first_token_timeout": "serving.first_token",
    "idle_timeout": "serving.idle",
    "attempt_timeout": "serving.attempt",
}
#: How the flags name their layer in errors about the merged policy.
FLAGS_SOURCE = "command line"


def add_catalog_args(parser: argparse.ArgumentParser) -> None:
    """The catalog contract's flags."""
    parser.add_argument("--discovery", required=True, metavar="FILE", help="discovery report JSON")
    parser.add_argument(
        "--zdr-feed", metavar="FILE", help="ZDR feed JSON shaped like OpenRouter's /endpoints/zdr"
    )
    parser.add_argument(
        "--limit", type=policy_flag("catalog.limit", whole_number), help="routes to select (12)"
    )
    parser.add_argument(
        "--account-cap",
        type=policy_flag("catalog.account_cap", whole_number),
        help="most routes from one account (8)",
    )
    parser.add_argument(
        "--pool",
        type=policy_flag("catalog.pool"),
        metavar="{free,auto}",
        help="free only (default), or free then priced",
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

    The catalog flags are already laid over the policy's ``[catalog]`` (:func:`policy_from_args`);
    ``require_zdr = "auto"`` means false here (the command line knows no repository; the action
    resolves it from the repository's visibility).
    """
    policy = policy or policy_from_args(args)
    routes = parse_discovery(read_json(args.discovery, "discovery report"))
    zdr_ids = parse_zdr_feed(read_json(args.zdr_feed, "ZDR feed")) if args.zdr_feed else None
    c = policy.catalog
    return build_catalog(
        routes,
        zdr_ids,
        limit=c.limit,
        account_cap=c.account_cap,
        pool=c.pool,
        require_zdr=resolve_require_zdr(c.require_zdr, repo_private=False),
    )


def add_serving_args(parser: argparse.ArgumentParser, *, serving: bool = True) -> None:
    """Preflight and serving bounds; defaults come from the policy (``--policy``) or built-ins."""

    def flag(name: str, key: str, read: Callable[[str], Any], help: str) -> None:
        parser.add_argument(name, type=policy_flag(key, read), help=help)

    flag("--probe-budget", "preflight.probe_budget", whole_number, "most probes per run (6)")
    flag("--probe-timeout", "preflight.probe_timeout", seconds, "bound of one probe, s (10)")
    flag("--connect-timeout", "serving.connect", seconds, "TCP/TLS connect, s (5)")
    flag("--deadline", "serving.deadline", seconds, "whole run, probes included (600)")
    if serving:
        flag("--first-byte-timeout", "serving.first_byte", seconds, "request -> first byte, s (20)")
        flag(
            "--first-token-timeout",
            "serving.first_token",
            seconds,
            "request -> first content or reasoning token; keep-alive comments do not count, "
            "s (60, at most the attempt bound)",
        )
        flag("--idle-timeout", "serving.idle", seconds, "longest silent gap while streaming (30)")
        flag("--attempt-timeout", "serving.attempt", seconds, "one whole attempt, s (180)")


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as a policy-shaped mapping (flags not given, or not defined, left out)."""
    table: dict[str, dict[str, Any]] = {}
    for dest, key in FLAG_KEYS.items():
        value = getattr(args, dest, None)
        if value is not None:
            section, name = key.split(".")
            table.setdefault(section, {})[name] = value
    return table


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The policy file named by ``--policy`` (or built-in defaults) with the flags laid over it.

    Both are layers merged and validated by :func:`~relay_review.settings.merge_layers`, so a
    flag that conflicts with another key (``--attempt-timeout 900 --deadline 5``) is refused
    as the policy file would refuse it; ``--deadline`` alone lowers a longer attempt bound.
    """
    layers = [file_layer(args.policy)] if getattr(args, "policy", None) else []
    flags = flag_overrides(args)
    if flags:
        layers.append(Layer(FLAGS_SOURCE, flags, caps_attempt=True))
    return merge_layers(layers)
