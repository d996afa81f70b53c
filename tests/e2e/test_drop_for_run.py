"""402 (no credits), 404 (no endpoints) and 413 (request too large for the tier) end a route for
the run at once, with the reason in the readiness table (issue 25), through ``relay-review chat``
on the fault fleet at the default (hedged) policy; the fleet's call log is the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_review.drill.scenarios import Scenario, fleet_for
from tests.e2e.test_hedged_preflight import chat, route

pytestmark = pytest.mark.integration

MODEL = "deepseek-ai/deepseek-v4-flash"


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("402", "no credits"),
        ("404", "no endpoints for this model"),
        ("413", "request too large for this route"),
    ],
)
def test_the_route_is_dropped_for_the_run_with_the_reason(
    script: str, why: str, tmp_path: Path
) -> None:
    # the faulty route ranks first, so it gets the real request (hedged: no probe before it)
    scenario = Scenario(
        "drop", "a faulty route first", {"nim_a": {MODEL: script}, "nim_b": {MODEL: "healthy@0.05"}}
    )
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    faulty = f"nim_a/{MODEL}"
    assert report["served_by"]["agent_id"] == f"nim_b/{MODEL}"
    assert [route(r) for r in sent].count(faulty) == 1  # never retried
    row = next(r for r in report["readiness"] if r["agent_id"] == faulty)
    assert row["status"] == "rejected" and row["http_status"] == int(script)
    assert row["detail"].startswith(f"dropped for this run: {why}"), row
