"""Benchmark: memory across runs (issue 13) through the fault fleet.

``mixed`` twice with one state file, ``--runs`` times: the first run probes and fails over as
usual; the second serves the remembered healthy route first, unprobed. Prints both runs'
time-to-reply against the healthy route's direct latency, probes sent, and requests to routes
other than the healthy one. Then the review drill twice with one state file: model requests of
each run and whether the findings and decision match.

    python bench/memory.py [--runs 5]

Goal: second ``mixed`` run 0 probes, 0 requests to routes dead/cooling/stalled in the first,
time to reply <= 1.05 x the healthy route's direct latency (median over runs).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import statistics
import tempfile
from pathlib import Path

from relay_review.config import Policy
from relay_review.drill.review import run_review_drill
from relay_review.drill.scenarios import PORT_ENV, run_named
from relay_review.state import FileStore

HEALTHY = "nim_b/meta/llama-3.3-70b-instruct"


async def mixed_twice(state: Path) -> tuple[dict, dict]:
    store = FileStore(state)
    first = (await run_named("mixed", Policy(), store)).to_json()
    second = (await run_named("mixed", Policy(), store)).to_json()
    return first, second


def others(result: dict) -> int:
    return sum(n for route, n in result["requests_per_route"].items() if route != HEALTHY)


async def review_twice(state: Path) -> tuple[dict, dict]:
    store = FileStore(state)
    first = await run_review_drill(Policy(), store)
    return first.to_json(), (await run_review_drill(Policy(), store)).to_json()


def pin_drill_port() -> None:
    """Memory knows an account by its base URL: both runs of a pair must meet the fleet on one
    port (``RELAY_DRILL_PORT``), as two runs of one setup do."""
    if not os.environ.get(PORT_ENV):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ[PORT_ENV] = str(s.getsockname()[1])


def main() -> None:
    pin_drill_port()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ratios: list[float] = []
    print("run  first: ttr  ratio probes others | second: ttr  ratio probes others saved")
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            one, two = asyncio.run(mixed_twice(Path(tmp) / "state.json"))
        ratios.append(two["ratio"])
        print(
            f"{i + 1:>3}  {one['time_to_reply_s']:>9.3f} {one['ratio']:>6.2f} "
            f"{one['probes_sent']:>6} {others(one):>6} | {two['time_to_reply_s']:>9.3f} "
            f"{two['ratio']:>6.2f} {two['probes_sent']:>6} {others(two):>6} "
            f"{two['memory']['requests_avoided']:>5}"
        )
    print(f"second run, median ratio to direct latency: {statistics.median(ratios):.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        one, two = asyncio.run(review_twice(Path(tmp) / "state.json"))
    served = [a for a in one["attempts"]]
    print(
        f"review drill: first run {len(served)} model requests ({one['probes_sent']} probes "
        f"besides); second run {len(two['attempts'])} model requests, {two['probes_sent']} "
        f"probes, {two['memory']['reused_chunks']} chunks reused; same findings: "
        f"{one['findings'] == two['findings']}, same decision: "
        f"{one['decision'] == two['decision']}"
    )


if __name__ == "__main__":
    main()
