"""One pull request's text can make a route time out (a prompt built to be slow to read or to
answer): with ``state: comment`` (the default), the memo its run leaves is borrowed by every
other pull request of the repository, so it cools the route for ``[memory] server_error`` at
most, never for the 5 minutes (doubling to an hour) of a route's own timeout. The action end
to end on the GitHub mock and the fault fleet, at the default policy; the fleet stalls only the
requests that carry the trigger text the attacker put in the pull request's description."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FLEET_KEY,
    NUMBER,
    SHA,
    VERDICTS,
    policy_toml,
    run_on_pr,
)
from github_mock import MockGitHub
from relay_review.config import MemoryPolicy
from relay_review.drill import FaultFleet
from relay_review.drill.script import TRIGGER

pytestmark = pytest.mark.integration

ATTACKER = 1
VERDICT = {**VERDICTS["acme/reviewer"], "findings": VERDICTS["acme/reviewer"]["findings"][:1]}
ROUTES = ("first/first/model", "tail/tail/reviewer")


def reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return json.dumps(VERDICT)


@pytest.fixture
def fleet() -> Iterator[FaultFleet]:
    accounts = {
        "first": {"models": {"first/model": "stall@trigger"}, "api_key": FLEET_KEY},
        "tail": {"models": {"tail/reviewer": "stall@trigger"}, "api_key": FLEET_KEY},
    }
    with FaultFleet(accounts, reply=reply) as running:
        yield running


def run_pr(tmp: Path, mock: MockGitHub, overlay: Any, fleet: FaultFleet, number: int, body: str):
    inputs = {"policy": policy_toml(fleet, "first", "tail", head="")}
    run = run_on_pr(tmp, mock, overlay, inputs, number, body=body)
    assert run.report is not None, run.stdout + run.stderr
    return run


def test_a_timeout_one_pull_requests_text_caused_cools_others_briefly(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    attacker = run_pr(tmp_path, github_mock, overlay, fleet, ATTACKER, f"see {TRIGGER}")
    assert attacker.report is not None and attacker.report["decision"] == "unavailable"
    victim = run_pr(tmp_path, github_mock, overlay, fleet, NUMBER, "an ordinary change")
    assert victim.report is not None
    rows = {r["agent_id"]: r for r in victim.report["readiness"]}
    cooled = [rows[a] for a in ROUTES if rows[a]["status"] == "deferred"]
    assert cooled, rows  # the memo is borrowed (the route timed out: it may be the route's)
    for row in cooled:
        assert "remembered from #1: timeout" in row["detail"], row
        left = re.search(r"cooling for (\d+) (s|min) more", row["detail"])
        assert left and left.group(2) == "s", row["detail"]  # was "4 min more"
        assert int(left.group(1)) <= MemoryPolicy().server_error
    assert victim.report["decision"] != "unavailable"
