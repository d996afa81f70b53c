"""Flags and loaders shared by the commands that build a catalog (catalog, preflight, chat)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay_review.config import (
    Layer,
    OverrideError,
    Policy,
    check_override,
    file_layer,
    merge_layers,
)
from relay_review.config.layers import DEFAULT_POLICY_PATH  # not the action's inputs module
from relay_review.errors import UsageError
from relay_review.records import Catalog

if TYPE_CHECKING:
    from relay_review.pipeline.store import Store


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
    (:func:`~relay_review.config.check_override`), so ``--limit 0`` is refused as argparse
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
        "--zdr-feed",
        metavar="FILE",
        help="ZDR feed JSON shaped like OpenRouter's /endpoints/zdr (default: the report's "
        "zdr_feed, the file discover saved beside it)",
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
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help=f"policy TOML (default: ./{DEFAULT_POLICY_PATH} if it exists, else built-in settings)",
    )


#: Output formats, one vocabulary for every command: ``json`` (the default, for machines),
#: ``text`` (aligned tables for people), ``markdown`` (a comment, where there is one).
FORMATS = ("json", "text", "markdown")
#: Older spellings still accepted: ``table`` was ``text`` for catalog and preflight.
FORMAT_ALIASES = {"table": "text"}


def add_format_arg(
    parser: argparse.ArgumentParser, choices: tuple[str, ...], default: str = "json"
) -> None:
    """``--format`` with the shared vocabulary (:data:`FORMATS`); ``table`` is read as ``text``."""
    assert set(choices) <= set(FORMATS), choices
    parser.add_argument(
        "--format",
        choices=choices,
        default=default,
        type=lambda text: FORMAT_ALIASES.get(text, text),
        help=f"output format (default: {default})",
    )


def missing_keys_line(catalog: Catalog, environ: Mapping[str, str]) -> str | None:
    """One line naming the key variables to set when no selected route has its key, else None.

    Without it a keyless run probes nothing, serves nothing and ends as "exhausted", which says
    nothing about the cause.
    """
    wanted = sorted({e.route.api_key_env for e in catalog.selected})
    if not wanted or any(environ.get(name, "").strip() for name in wanted):
        return None
    return "no key for any selected route; set one of: " + ", ".join(wanted)


def zdr_feed_path(args: argparse.Namespace, report: Any) -> str | None:
    """The ZDR feed to use: ``--zdr-feed``, else the one ``discover`` saved beside its report
    (its ``zdr_feed`` field, relative to the report's folder), so ZDR is not lost between
    commands."""
    if args.zdr_feed:
        return str(args.zdr_feed)
    feed = report.get("zdr_feed") if isinstance(report, Mapping) else None
    if not isinstance(feed, str) or not feed:
        return None
    return str(Path(args.discovery).parent / feed)  # an absolute name stays absolute


def state_url(text: str) -> str:
    """argparse type of ``--state``: a path, ``file:PATH``, ``none`` or a Redis URL (never
    echoed in an error: it may hold a password)."""
    from relay_review.pipeline.store import check_store_url

    try:
        return check_store_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--state (value hidden): {exc}") from None


def add_state_arg(parser: argparse.ArgumentParser, tail: str = "") -> None:
    """``--state URL``: where memory across runs lives (default: ``$RELAY_REVIEW_STATE``);
    ``tail`` ends its help with what the command does with it besides."""
    from relay_review.pipeline.store import STATE_ENV  # its commands import the pipeline anyway

    parser.add_argument(
        "--state",
        type=state_url,
        metavar="URL",
        help=f"memory across runs: a JSON file (PATH or file:PATH), redis://HOST (shared by every "
        f"run, with the quota ledger) or none (default: ${STATE_ENV}, else none); remembered "
        "routes get no probe, unchanged chunks no request" + tail,
    )


def store_from_args(
    args: argparse.Namespace, environ: Mapping[str, str], policy: Policy | None = None
) -> Store:
    """The store ``--state`` names, else ``RELAY_REVIEW_STATE`` (checked the same way); its
    calls bounded by ``policy``'s ``[state] timeout_s``."""
    from relay_review.pipeline.store import open_cli_store

    url = getattr(args, "state", None)
    return open_cli_store(url, environ, timeout=policy.state.timeout_s if policy else None)


def read_json(path: str, what: str) -> Any:
    """Read a JSON file, naming it in the error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} {path}: not valid JSON ({exc})") from None
    except RecursionError:  # nested deeper than the interpreter's stack: no report is
        raise UsageError(f"{what} {path}: not valid JSON (nested too deeply)") from None


def catalog_from_args(args: argparse.Namespace, policy: Policy | None = None) -> Catalog:
    """Load the discovery report (and ZDR feed) named by the flags and build the catalog.

    The catalog flags are already laid over the policy's ``[catalog]`` (:func:`policy_from_args`);
    ``require_zdr = "auto"`` means false here (the command line knows no repository; the action
    resolves it from the repository's visibility).
    """
    from relay_review.pipeline.catalog import catalog_for, parse_discovery  # the one way

    policy = policy or policy_from_args(args)
    raw = read_json(args.discovery, "discovery report")
    feed = zdr_feed_path(args, raw)
    try:
        return catalog_for(
            parse_discovery(raw),
            policy.catalog,
            zdr_feed=(lambda: read_json(feed, "ZDR feed")) if feed else None,
        )
    except UsageError as exc:  # about a file's content: the file named
        raise UsageError(_in_file(str(exc), args.discovery, feed)) from None


def _in_file(message: str, discovery: str, feed: str | None) -> str:
    """``message`` about the discovery report's content (``discovery report: ...``, or
    ``routes[1].x: ...``) or the ZDR feed's (``ZDR feed: ...``), naming the file; any other
    (one that names its file already) as it is."""
    if feed and message.startswith("ZDR feed: "):
        return f"ZDR feed {feed}: {message.removeprefix('ZDR feed: ')}"
    if message.startswith(("discovery report: ", "routes[")):
        return f"discovery report {discovery}: {message.removeprefix('discovery report: ')}"
    return message


def add_serving_args(parser: argparse.ArgumentParser, *, serving: bool = True) -> None:
    """Preflight and serving bounds; defaults come from the policy (``--policy``) or built-ins."""

    def flag(name: str, key: str, read: Callable[[str], Any], help: str) -> None:
        parser.add_argument(name, type=policy_flag(key, read), help=help)

    flag(
        "--probe-budget",
        "preflight.probe_budget",
        whole_number,
        "eager preflight and the preflight command: most routes probed at the start (6); "
        "hedged: 0 sends no probes, any other value lets every other route be probed once "
        "when the first request is slow or fails",
    )
    flag("--probe-timeout", "preflight.probe_timeout", seconds, "bound of one probe, s (10)")
    flag("--connect-timeout", "serving.connect", seconds, "TCP/TLS connect, s (5)")
    flag("--deadline", "serving.deadline", seconds, "whole run, probes included, s (600)")
    if serving:
        flag("--first-byte-timeout", "serving.first_byte", seconds, "request -> first byte, s (20)")
        flag(
            "--first-token-timeout",
            "serving.first_token",
            seconds,
            "request -> first content or reasoning token; keep-alive comments do not count, "
            "s (60, at most the attempt bound)",
        )
        flag(
            "--idle-timeout", "serving.idle", seconds, "longest silent gap while streaming, s (30)"
        )
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


def policy_path(given: str | Path | None) -> Path | None:
    """The policy file every command reads: ``--policy FILE``, else ``.github/relay-review.toml``
    in the current directory when it exists (the path the action reads in a repository), else
    none (built-in defaults)."""
    if given:
        return Path(given)
    default = Path(DEFAULT_POLICY_PATH)
    return default if default.is_file() else None


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The policy file (:func:`policy_path`: ``--policy``, ``.github/relay-review.toml``, or
    built-in defaults) with the flags laid over it.

    Both are layers merged and validated by :func:`~relay_review.config.merge_layers`, so a
    flag that conflicts with another key (``--attempt-timeout 900 --deadline 5``) is refused
    as the policy file would refuse it; ``--deadline`` alone lowers a longer attempt bound.
    """
    path = policy_path(getattr(args, "policy", None))
    layers = [file_layer(str(path))] if path else []
    flags = flag_overrides(args)
    if flags:
        layers.append(Layer(FLAGS_SOURCE, flags, caps_attempt=True))
    return merge_layers(layers)
