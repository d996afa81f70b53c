"""Serve the fault fleet in its own process: ``relay-review drill --serve --config FILE``.

Shared by the ``drill`` command and ``python -m relay_review.drill``. The fleet listens on
127.0.0.1 only, prints one JSON line ``{"port", "url", "accounts": {name: base_url}}`` once it
listens (so a caller can wait for it), then serves until SIGTERM or SIGINT. Fleet configs:
``examples/fleet.toml`` and ``examples/fleet.json`` (the format is :func:`fleet.load_config`'s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import tomllib
from pathlib import Path

from relay_review.drill.fleet import FaultFleet, load_config

__all__ = ["serve_config"]


async def _serve_forever(fleet: FaultFleet) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with fleet:
        ready = {
            "port": fleet.port,
            "url": fleet.root_url,
            "accounts": {name: fleet.base_url(name) for name in fleet.accounts},
        }
        print(json.dumps(ready), flush=True)
        await stop.wait()


def load_fleet(path: Path, port: int = 0) -> FaultFleet:
    """The fleet a config file describes; ValueError names the file and what is wrong in it."""
    try:
        return FaultFleet.from_config(load_config(path), port=port)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:  # UnicodeDecodeError too
        raise ValueError(f"bad fleet config {path}: {exc}") from None
    except RecursionError:
        raise ValueError(f"bad fleet config {path}: nested too deeply") from None
    except (AttributeError, TypeError, KeyError):  # a value of the wrong type somewhere
        raise ValueError(
            f"bad fleet config {path}: expected a table of accounts, each with a list or a "
            "table of models whose behaviours are text (see relay_review.drill.script)"
        ) from None


def serve_config(path: Path, port: int = 0) -> int:
    """Serve the fleet of ``path`` on 127.0.0.1:``port`` (0: a free one) until a signal; 2 on a
    bad config (one line on stderr naming the file), 0 after a clean stop."""
    try:
        fleet = load_fleet(path, port)
    except ValueError as exc:
        print(f"drill: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve_forever(fleet))
    except OSError as exc:  # the port is taken, ...
        print(f"drill: cannot listen on 127.0.0.1:{port}: {exc}", file=sys.stderr)
        return 2
    return 0
