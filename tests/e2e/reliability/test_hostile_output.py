"""Hostile model output (issue 6, item 4), end to end through ``relay-review run``.

The reviewer's reply carries the hostile payloads of :mod:`hostile_checks` in its summary,
finding messages and paths, lone surrogates, oversized texts, and findings citing paths outside
the diff (``../../etc/passwd``, a path with a newline and a table row, the sticky marker, an
absolute path...). Everything it says is escaped and capped; only the one finding citing a real
changed line is verified, posted inline and counted in the decision.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from action_harness import (
    FLEET_KEY,
    NUMBER,
    QUERY_LINE,
    SECRETS,
    policy_toml,
    posted_bodies,
    run_action,
)
from github_mock import MockGitHub
from hostile_checks import (
    CANARY,
    COMMANDS,
    MARKUP,
    MENTIONS,
    hostile_text,
    log_problems,
    markdown_problems,
    region_text,
)
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER
from relay_review.records import RunReport
from relay_review.records.finding import MAX_MESSAGE_CHARS, MAX_PATH_CHARS
from relay_review.render import comment_markdown, md_text
from relay_review.review.reply import MAX_SUMMARY_CHARS

SHORT = f"{MENTIONS[0]} {MARKUP[4]} {COMMANDS[0]} {MARKER} {MARKUP[0]}"
LONG_PATH = "deep/" * 20_000 + "x.py"  # 100 KB
#: Paths outside the diff: each finding citing one must stay unverified.
OUTSIDE_PATHS = (
    "../../etc/passwd",
    "app/auth.py\n| x | y |",
    f"{MARKER}app/auth.py",
    "app/other.py",
    f"@octocat </details> <!-- | `::error::{CANARY}` ##[add-mask]{CANARY}",
    "/app/auth.py",
    "./app/auth.py",
    "APP/AUTH.PY",
    LONG_PATH,
)


def finding(path: str, line: int, quote: str, severity: str, message: str) -> dict[str, Any]:
    return {
        "path": path,
        "line": line,
        "side": "RIGHT",
        "quote": quote,
        "severity": severity,
        "message": message,
    }


def hostile_verdict() -> dict[str, Any]:
    """One verified low finding, and high findings that must all stay unverified."""
    findings = [
        finding("app/auth.py", 11, QUERY_LINE, "low", hostile_text() + " M" + "m" * 50_000),
        finding("app/auth.py", 11, f"{QUERY_LINE} {SHORT}", "high", f"wrong quote {SHORT}"),
        finding("app/auth.py", 99, "nope", "high", f"not a changed line {SHORT}"),
        finding("app/auth.py", 10**30, QUERY_LINE, "high", f"no such line {SHORT}"),
        finding("app/auth.py", -11, QUERY_LINE, "high", f"a negative line {SHORT}"),
        *(finding(p, 11, QUERY_LINE, "high", f"outside the diff {SHORT}") for p in OUTSIDE_PATHS),
    ]
    return {
        "summary": hostile_text() + "\udcff\ud800 " + "S" * 20_000,
        "decision": "approve",
        "findings": findings,
    }


def hostile_reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return json.dumps(hostile_verdict())  # the repair round gets the same reply


@pytest.fixture(scope="module")
def liar() -> Iterator[FaultFleet]:
    accounts = {"liar": {"models": {"liar/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=hostile_reply) as running:
        yield running


def test_hostile_reply_is_escaped_capped_and_only_real_lines_count(
    tmp_path: Path, github_mock: MockGitHub, liar: FaultFleet
) -> None:
    inputs = {"policy": policy_toml(liar, "liar"), "inline-comments": "true"}
    inputs["inline-min-severity"] = "low"  # every verified finding inline, low ones too
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = run.report
    assert report is not None

    # only the finding on a real changed line, quoted exactly, is verified and counted
    assert report["decision"] == "comment"  # every high finding is unverified
    assert [(f["path"], f["line"], f["severity"]) for f in report["findings"]] == [
        ("app/auth.py", 11, "low")
    ]
    assert run.outputs["decision"] == "comment" and run.outputs["findings"] == "1"
    rejected = {u["path"] for u in report["unverified"]}
    assert rejected == {"app/auth.py", *OUTSIDE_PATHS[:-1], LONG_PATH[: MAX_PATH_CHARS - 1] + "…"}
    assert len(report["unverified"]) == 4 + len(OUTSIDE_PATHS)
    assert all("after the repair round" in u["reason"] for u in report["unverified"])
    # capped and encodable
    assert len(report["findings"][0]["message"]) == MAX_MESSAGE_CHARS
    assert len(report["summary"]) <= MAX_SUMMARY_CHARS
    assert "\ufffd" in report["summary"]  # lone surrogates became U+FFFD

    # the log: hostile text only inside stop-commands regions, lines capped
    assert log_problems(run.stdout, run.stderr, SECRETS) == []
    assert CANARY in region_text(run.stdout)
    assert max(len(line) for line in run.stdout.splitlines()) < 20_000

    # the sticky comment and the step summary
    (body,) = posted_bodies(github_mock)
    assert markdown_problems(body) == []
    assert markdown_problems(run.summary, marker=None) == []
    assert len(body) <= 65_536
    assert "Unverified findings (13)" in body
    assert "m" * 1000 not in body and "S" * 4000 not in body  # capped
    assert md_text("@octocat") in body  # shown, neutralised

    # line comments: the verified finding only, on its real line, escaped
    (review,) = github_mock.calls("POST", f"/pulls/{NUMBER}/reviews$")
    comments = review.body["comments"]
    assert [(c["path"], c["line"], c["side"]) for c in comments] == [("app/auth.py", 11, "RIGHT")]
    assert markdown_problems(comments[0]["body"], marker=None) == []
    assert markdown_problems(review.body["body"], marker=None) == []
    assert report["elapsed_s"] <= 20  # the harness policy's deadline
    assert len(comments[0]["body"]) < 20_000
    sent = json.dumps([c.body for c in github_mock.calls()])
    assert "etc/passwd" not in json.dumps(comments)
    assert all(secret not in sent for secret in SECRETS)


# --- pure: every field the comment shows, hostile at once ---------------------------------------


def hostile_report(n: int = 3, decision: str = "comment") -> dict[str, Any]:
    text = hostile_text()
    route = {"agent_id": f"a/{SHORT}", "account": f"a{SHORT}", "model": SHORT}
    return {
        "decision": decision,
        "summary": text,
        "why": text,
        "findings": [
            {**finding(f"{SHORT}/{i}.py", i + 1, text, "high", text), "side": "LEFT"}
            for i in range(n)
        ],
        "unverified": [
            {**finding(f"{SHORT}\n{i}", i, text, "high", text), "reason": text} for i in range(n)
        ],
        "files": [{"path": f"{SHORT}\n{i}", "status": "skipped", "reason": text} for i in range(n)],
        "catalog": {
            "selected": [{**route, "cost": SHORT, "zdr": True, "priority": i} for i in range(n)]
        },
        "readiness": [{**route, "status": SHORT, "http_status": 200, "detail": SHORT}],
        "served_by": route,
        "chunks": [{"served_by": route}],
        "attempts": [
            {**route, "phase": SHORT, "outcome": SHORT, "elapsed_s": 1.0, "purpose": SHORT}
        ]
        * n,
        "provenance": text,
        "context": {"server_url": "https://github.com", "repo": "o/r", "head_sha": "f" * 40},
        "elapsed_s": 1.0,
        "probes_sent": 1,
    }


@pytest.mark.parametrize("decision", ["comment", "unavailable", "request_changes"])
@pytest.mark.parametrize(("n", "limit"), [(3, 65_536), (400, 65_536), (60, 12_000), (5, 3_000)])
def test_every_field_of_the_comment_contains_hostile_text(
    decision: str, n: int, limit: int
) -> None:
    body = comment_markdown(
        RunReport.from_json(hostile_report(n, decision)), marker=MARKER, limit=limit
    )
    assert len(body) <= limit
    assert markdown_problems(body) == []
    assert (
        markdown_problems(
            comment_markdown(RunReport.from_json(hostile_report(n, decision))), marker=None
        )
        == []
    )


_HOSTILE_CHARS = st.sampled_from(
    [*"@<>!-|`\\$#[]()*_~&:/\r\n \t", "\u202e", "\u2028", "\udcff", "<!--", "://", "www."]
)
_hostile_strings = st.lists(st.one_of(_HOSTILE_CHARS, st.text(max_size=4)), max_size=40).map(
    "".join
)


@settings(max_examples=150, deadline=None)
@given(summary=_hostile_strings, path=_hostile_strings, message=_hostile_strings)
def test_comment_properties_hold_for_any_text(summary: str, path: str, message: str) -> None:
    report = hostile_report(2)
    report["summary"] = summary
    report["findings"][0].update(path=path, message=message, quote=message)
    report["unverified"][0].update(path=path, message=message, reason=summary)
    report["files"][0].update(path=path, reason=message)
    body = comment_markdown(RunReport.from_json(report), marker=MARKER)
    assert markdown_problems(body) == []
