"""``bench/fault_drill.py`` runs every row, including runs that end without a reply (their
``time_to_reply_s`` is None): it once crashed with a TypeError there, before the rows the README
quotes. Run with tiny bounds so every scenario gives up fast; no figure is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from relay_review.drill.scenarios import SCENARIOS

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fault_drill.py"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(BENCH), "--scale", "0.01", "--no-defaults", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_every_scenario_row_with_and_without_a_reply() -> None:
    # the runs are independent (each its own fleets, nothing timed is asserted): at once, and
    # the two scenarios with their baseline each in its own run (their rows read together)
    names = ("mixed", "rate-limited")
    runs = [*(start("--scenario", name) for name in names), start("--no-baseline")]
    *pair, (every_code, every_out, every_err) = (finish(p) for p in runs)
    for code, _, err in pair:
        assert code == 0, err
    out = "".join(out for _, out, _ in pair)
    lines = out.splitlines()
    for name in names:
        for side in ("relay-review", "serial baseline"):
            assert any(line.startswith(f"{name} {side} ") for line in lines), (name, side)
    assert "(gave up)" in out  # the rows without a reply are printed too
    assert (
        sum("baseline / relay-review" in line or "produced no reply" in line for line in lines) == 2
    )

    assert every_code == 0, every_err
    rows = {
        line.split(" relay-review")[0]
        for line in every_out.splitlines()
        if " relay-review " in line
    }
    assert rows == set(SCENARIOS)
