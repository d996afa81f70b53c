"""The quota ledger under load: N concurrent ``relay-review chat`` processes over two accounts
with ``rpm`` each, sharing one real redis-server (Debian's package, started here on a free port).

Prints requests sent vs. budget per account, the most in any 60 s window, and served runs per
minute. Run: ``python bench/ledger_load.py [--processes 12] [--rpm 4]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from ledger_load import run_load  # noqa: E402
from redis_server import RedisServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=12)
    parser.add_argument("--rpm", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis")
        try:
            result = run_load(
                Path(tmp),
                server.url,
                processes=args.processes,
                rpm=args.rpm,
                deadline=args.deadline,
                prefix="bench:",
            )
        finally:
            server.stop()
    print(f"{args.processes} runs at once, 2 accounts x rpm {args.rpm}, one Redis")
    for account, times in result.received.items():
        most = result.most_in_any_window(account)
        print(
            f"  {account}: {len(times)} requests sent, budget {args.rpm}/min, "
            f"most in any 60 s: {most} (ratio {most / args.rpm:.2f})"
        )
    refused = sum(1 for c in result.codes if c == 1)
    print(
        f"  served runs: {result.served}, refused by the budget: {refused}, other: "
        f"{len(result.codes) - result.served - refused}"
    )
    print(
        f"  wall {result.wall_s:.1f} s: {result.served} runs served within one minute "
        f"(the budget allows {2 * args.rpm} per minute: ratio {result.served / (2 * args.rpm):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
