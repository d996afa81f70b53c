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


def test_every_scenario_row_with_and_without_a_reply() -> None:
    scenarios = [arg for name in ("mixed", "rate-limited") for arg in ("--scenario", name)]
    with_baseline = subprocess.run(
        [sys.executable, str(BENCH), "--scale", "0.01", "--no-defaults", *scenarios],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert with_baseline.returncode == 0, with_baseline.stderr
    lines = with_baseline.stdout.splitlines()
    for name in ("mixed", "rate-limited"):
        for side in ("relay-review", "serial baseline"):
            assert any(line.startswith(f"{name} {side} ") for line in lines), (name, side)
    assert "(gave up)" in with_baseline.stdout  # the rows without a reply are printed too
    assert (
        sum("baseline / relay-review" in line or "produced no reply" in line for line in lines) == 2
    )

    every = subprocess.run(
        [sys.executable, str(BENCH), "--scale", "0.01", "--no-defaults", "--no-baseline"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert every.returncode == 0, every.stderr
    rows = {
        line.split(" relay-review")[0]
        for line in every.stdout.splitlines()
        if " relay-review " in line
    }
    assert rows == set(SCENARIOS)
