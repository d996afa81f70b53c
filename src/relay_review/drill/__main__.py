"""``python -m relay_review.drill --serve --config FILE``: the fault fleet in its own process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from relay_review.drill.fleet import FaultFleet, load_config


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m relay_review.drill --serve --config FILE [--port N]``.

    Prints one JSON line ``{"port", "url", "accounts": {name: base_url}}`` once listening, then
    serves until SIGTERM/SIGINT.
    """
    parser = argparse.ArgumentParser(
        prog="python -m relay_review.drill", description="Serve the fault fleet on 127.0.0.1."
    )
    parser.add_argument("--serve", action="store_true", required=True, help="run the server")
    parser.add_argument("--config", type=Path, required=True, help="fleet config (.json/.toml)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        fleet = FaultFleet.from_config(load_config(args.config), port=args.port)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"drill: bad config {args.config}: {exc}", file=sys.stderr)
        return 2
    asyncio.run(_serve_forever(fleet))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
