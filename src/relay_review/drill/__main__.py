"""``python -m relay_review.drill --serve --config FILE``: the fault fleet in its own process.

The same as ``relay-review drill --serve --config FILE`` (:mod:`relay_review.drill.serve`),
kept for scripts that call the module.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from relay_review.drill.serve import serve_config


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
    return serve_config(args.config, args.port)


if __name__ == "__main__":
    raise SystemExit(main())
