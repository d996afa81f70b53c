"""Noise controls (issue 26): a severity floor and a cap for inline comments, one finding per
fingerprint, low-severity findings folded in the sticky comment. The pure plan first, then
``relay-review run`` against Prism and a local fleet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FAST,
    FLEET_KEY,
    NUMBER,
    QUERY_LINE,
    finding,
    policy_toml,
    run_in_process,
)
from github_mock import MockGitHub
from relay_review.config import Policy
from relay_review.config.inputs import read_action_inputs
from relay_review.errors import UsageError
from relay_review.records import Inline, RunReport
from relay_review.render import comment_markdown
from relay_review.review.noise import DEFAULT_CAP, DEFAULT_FLOOR, Noise, inline_plan, unique


def f(severity: str, fp: str | None = None) -> dict[str, Any]:
    return {"path": "a.py", "line": 1, "severity": severity, "fingerprint": fp}


def test_the_defaults_are_medium_and_ten_everywhere() -> None:
    assert (DEFAULT_FLOOR, DEFAULT_CAP) == ("medium", 10)
    policy = Policy()
    assert (policy.github.inline_min_severity, policy.github.max_inline) == ("medium", 10)
    assert (Noise().floor, Noise().cap) == ("medium", 10)


def test_below_the_floor_stays_in_the_sticky_comment() -> None:
    plan = inline_plan([f("low", "a"), f("medium", "b"), f("high", "c")], Noise())
    assert (plan.post, plan.below_floor, plan.over_cap) == ([1, 2], [0], [])
    assert inline_plan([f("low", "a")], Noise(floor="low")).post == [0]
    assert inline_plan([f("medium", "a"), f("high", "b")], Noise(floor="high")).post == [1]


def test_the_cap_keeps_the_most_severe_and_posts_in_report_order() -> None:
    found = [f("medium", "a"), f("high", "b"), f("medium", "c"), f("high", "d")]
    plan = inline_plan(found, Noise(cap=3))
    assert plan.post == [0, 1, 3] and plan.over_cap == [2]
    assert inline_plan(found, Noise(cap=0)).post == []
    assert plan.summary(Noise(cap=3)) == Inline(
        min_severity="medium", max_inline=3, inline=3, below_floor=0, over_cap=1
    )


def test_one_fingerprint_is_one_finding() -> None:
    found = [f("high", "x"), f("high", "x"), f("medium", None), f("medium", None)]
    assert unique(found) == [found[0], found[2], found[3]]  # no fingerprint: never merged
    assert inline_plan(found, Noise()).post == [0, 2, 3]


def test_inputs_name_what_is_allowed() -> None:
    env = {"INPUT_GITHUB-TOKEN": "t", "INPUT_INLINE-MIN-SEVERITY": "High"}
    env["INPUT_MAX-INLINE-COMMENTS"] = "3"
    assert read_action_inputs(env).policy_overrides() == {
        "github": {"inline_min_severity": "high", "max_inline": 3}
    }
    with pytest.raises(UsageError, match="input `inline-min-severity`: 'critical' is not allowed"):
        read_action_inputs({"INPUT_GITHUB-TOKEN": "t", "INPUT_INLINE-MIN-SEVERITY": "critical"})
    with pytest.raises(UsageError, match="input `max-inline-comments`: '101' is not allowed"):
        read_action_inputs({"INPUT_GITHUB-TOKEN": "t", "INPUT_MAX-INLINE-COMMENTS": "101"})


def test_low_findings_are_folded_and_the_held_back_ones_said() -> None:
    report = {
        "decision": "comment",
        "summary": "s",
        "findings": [
            {"path": "a.py", "line": 1, "severity": "medium", "message": "mid"},
            {"path": "a.py", "line": 2, "severity": "low", "message": "nit"},
        ],
        "inline": {
            "min_severity": "medium",
            "max_inline": 10,
            "inline": 1,
            "below_floor": 1,
            "over_cap": 0,
        },
    }
    body = comment_markdown(RunReport.from_json(report))
    folded = body.index("<details><summary>Low-severity findings (1)</summary>")
    assert body.index("mid") < folded < body.index("nit")
    assert "1 finding posted as line comments; 1 below the severity floor (medium)" in body


# ------------------------------------------------------------------------- through the action

LINE12 = "rows = db.execute(query)"
LINE13 = "if rows:"
VERDICT: dict[str, Any] = {}


def _reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return json.dumps(VERDICT)


@pytest.fixture
def fleet() -> Iterator[Any]:
    from relay_review.drill import FaultFleet

    accounts = {"acme": {"models": {"acme/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=_reply) as running:
        yield running


@pytest.mark.integration
def test_the_action_posts_above_the_floor_up_to_the_cap_and_each_finding_once(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    VERDICT.update(
        summary="Three problems.",
        findings=[
            finding(11, QUERY_LINE, "high", "SQL injection: the name is formatted into SQL."),
            # the same finding again, worded otherwise (same line, text and kind): one finding
            finding(11, QUERY_LINE, "high", "Untrusted input reaches the query string unescaped."),
            finding(12, LINE12, "medium", "The cursor is never closed."),
            finding(13, LINE13, "low", "Name the condition."),
        ],
    )
    inputs = {
        "policy": policy_toml(fleet, "acme", head=FAST),
        "inline-comments": "true",
        "max-inline-comments": "1",
    }
    run = run_in_process(tmp_path, github_mock, inputs)  # the action's entrypoint, in process
    assert run.code == 0, run.stdout + run.stderr
    assert run.report is not None
    assert [x["line"] for x in run.report["findings"]] == [11, 12, 13]
    (review,) = [c.body for c in github_mock.calls("POST", f"/pulls/{NUMBER}/reviews$")]
    assert [c["line"] for c in review["comments"]] == [11]  # the cap: the most severe
    noise = run.report["github"]["review"]["noise"]
    assert noise == {
        "min_severity": "medium",
        "max_inline": 1,
        "inline": 1,
        "below_floor": 1,
        "over_cap": 1,
    }
    (body,) = [c.body["body"] for c in github_mock.calls("POST", f"/issues/{NUMBER}/comments$")]
    assert body.count("SQL injection") == 1 and "Untrusted input" not in body
    assert "<details><summary>Low-severity findings (1)</summary>" in body
    assert "1 below the severity floor (medium) and 1 over the cap of 1 a run" in body
