"""A refused budget waits, never spins (issue 19): ``relay-review review`` of six chunks over one
route at ``rpm = 2`` under an 8 s deadline, counted as a user feels it (attempts logged, wall,
CPU, bytes printed), and with a second account that has budget, which serves meanwhile.

The 75 s deadline case (a window that frees inside the run) is measured by bench/budget_spin.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from budget_wait import CHUNKS, run_review

pytestmark = pytest.mark.integration

DEADLINE = 8.0


def test_one_route_out_of_budget_ends_by_the_deadline_without_spinning(tmp_path: Path) -> None:
    result = run_review(tmp_path, deadline=DEADLINE)
    assert len(result.report["chunks"]) == CHUNKS, result.stderr[-2000:]
    # hedged preflight sends no probe: two chunks use the two slots; the window frees only
    # after the deadline
    assert result.received == {"solo": 2}
    assert result.served_by() == {"solo": 2}
    assert result.report["partial"]  # it says five files were not reviewed, and why
    assert len(result.attempts) <= 30, len(result.attempts)
    assert len(result.notes()) == 1  # one deferral note for the one route and window
    assert result.wall_s <= DEADLINE + 2
    assert result.cpu_s < 2.0
    assert result.output_bytes < 256 * 1024


def test_a_second_account_with_budget_serves_the_chunks_meanwhile(tmp_path: Path) -> None:
    result = run_review(tmp_path, deadline=DEADLINE, spare=True)
    assert result.code == 0, result.stderr[-2000:]
    served = result.served_by()
    assert sum(served.values()) == CHUNKS and served.get("spare", 0) >= CHUNKS - 2, served
    assert result.received["solo"] <= 2  # its budget is never overrun
    assert len(result.notes()) <= 1
    assert len(result.attempts) <= 30
    assert result.report["elapsed_s"] < DEADLINE / 2  # served within seconds, not at the end
    assert result.cpu_s < 2.0 and result.output_bytes < 256 * 1024
