"""The comment, reviewer first (issue 26): decision, findings linked to the diff line, a short
walkthrough, one line on the routes with the table folded (open when unavailable or partial),
stalls said as stalls, and next steps when no verdict came; one believed summary."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from cli_harness import run_cli
from relay_review.records import RunReport
from relay_review.render import comment_markdown, route_summary

ROOT = Path(__file__).resolve().parents[2]


def route(agent_id: str, priority: int) -> dict[str, Any]:
    account, model = agent_id.split("/", 1)
    return {"agent_id": agent_id, "account": account, "model": model, "priority": priority}


def report(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "decision": "comment",
        "summary": "Adds an export command.",
        "findings": [
            {
                "path": "app/export.py",
                "line": 15,
                "side": "RIGHT",
                "quote": "run(cmd, shell=True)",
                "severity": "medium",
                "message": "shell=True with arguments",
            }
        ],
        "files": [{"path": "app/export.py"}, {"path": "app/settings.py"}],
        "catalog": {
            "selected": [
                route("a/stall", 4),
                route("b/busy", 3),
                route("c/gone", 2),
                route("d/good", 1),
            ]
        },
        "readiness": [
            {"agent_id": "a/stall", "status": "abandoned", "detail": "stalled: no byte in 12 s"},
            {"agent_id": "b/busy", "status": "deferred", "http_status": 429, "retry_after": 30},
            {"agent_id": "c/gone", "status": "rejected", "http_status": 404},
            {"agent_id": "d/good", "status": "ready", "http_status": 200},
        ],
        "served_by": {"agent_id": "d/good", "account": "d", "model": "good"},
        "probes_sent": 4,
        "context": {"server_url": "https://github.com", "repo": "o/r", "head_sha": "f" * 40},
        "pull_request": {"number": 7},
    }
    base.update(over)
    return base


def test_the_reviewer_reads_decision_findings_walkthrough_then_one_route_line() -> None:
    body = comment_markdown(
        RunReport.from_json(
            report(
                files=[
                    {"path": "app/export.py", "note": "New tar export."},
                    {"path": "app/settings.py"},
                ]
            )
        )
    )
    order = [
        "## relay-review: 💬 Comments",
        "Adds an export command.",
        "### Findings (1 verified)",
        "**Walkthrough (1 of 2 files)**",
        "- `app/export.py`: New tar export.",
        "Served by `d/good` after 4 probes; 2 of 4 routes failed — 429, 404; 1 probe not "
        "answered yet when the run finished.",
        "<details><summary>Routes: selection and readiness</summary>",
    ]
    at = [body.index(s) for s in order]
    assert at == sorted(at), body
    # severity, a link to the diff line, message, quoted line
    anchor = hashlib.sha256(b"app/export.py").hexdigest()
    link = f"(https://github.com/o/r/pull/7/files#diff-{anchor}R15)"
    assert f"- **medium** [`app/export.py:15`]{link}: shell=True with arguments — `" in body


def test_the_walkthrough_is_tolerant_of_replies_without_file_notes() -> None:
    body = comment_markdown(RunReport.from_json(report()))
    assert "Walkthrough" not in body  # one part, no notes: the summary says it
    assert "Adds an export command." in body


def test_a_review_in_parts_has_one_summary_and_parts_named_by_their_files() -> None:
    chunks = [
        {"number": 1, "total": 3, "paths": ["app/export.py"], "summary": "Adds an export."},
        {"number": 2, "total": 3, "paths": ["app/settings.py"], "summary": "Turns DEBUG on."},
        {"number": 3, "total": 3, "paths": ["README.md"], "summary": ""},
    ]
    body = comment_markdown(RunReport.from_json(report(summary="Adds an export.", chunks=chunks)))
    assert body.count("Adds an export.") == 1  # the head's summary is not repeated
    assert "- `app/settings.py`: Turns DEBUG on." in body
    assert "Part " not in body


def test_the_table_opens_only_when_unavailable_or_partial() -> None:
    closed = "<details><summary>Routes: selection and readiness</summary>"
    opened = "<details open><summary>Routes: selection and readiness</summary>"
    assert closed in comment_markdown(RunReport.from_json(report()))
    assert opened in comment_markdown(
        RunReport.from_json(report(partial="1 of 2 files were not reviewed"))
    )
    none = report(decision="unavailable", findings=[], served_by=None)
    assert opened in comment_markdown(RunReport.from_json(none))


def test_the_unavailable_comment_ends_with_what_to_do_next() -> None:
    readiness = [
        {"agent_id": "a/stall", "status": "timeout", "detail": "timeout - no headers within 10s"},
        {"agent_id": "b/busy", "status": "deferred", "http_status": 429, "retry_after": 30},
        {"agent_id": "c/gone", "status": "rejected", "detail": "missing key C_API_KEY"},
        {"agent_id": "d/good", "status": "rejected", "detail": "missing key C_API_KEY"},
    ]
    body = comment_markdown(
        RunReport.from_json(
            report(decision="unavailable", findings=[], served_by=None, readiness=readiness)
        )
    )
    tail = body[body.index("**What to do next**") :]
    assert "`b/busy` asked to wait: it frees about 30 s after the run" in tail
    assert "set the secret `C_API_KEY`" in tail
    assert tail.index("Comment `/relay-review`") > tail.index("C_API_KEY")
    assert tail.index("<sub>") > tail.index("/relay-review")  # only the footer after it
    line = route_summary(RunReport.from_json(report(served_by=None, readiness=readiness)))
    assert line == "No route served after 4 probes; 4 of 4 routes failed — stalled, 429, no key ×2."


def test_a_bad_reply_inside_a_200_and_a_cancelled_loser_are_named_not_numbered() -> None:
    """A liar's HTTP 200 is no status fault, and a route cancelled when a faster one took over
    did not stall: the summary says what happened to each."""
    attempts = [
        {"agent_id": "a/stall", "phase": "first_byte", "outcome": "cancelled"},
        {"agent_id": "c/gone", "phase": "body", "outcome": "bad_reply", "http_status": 200},
        {"agent_id": "d/good", "phase": "body", "outcome": "ok", "http_status": 200},
    ]
    line = route_summary(RunReport.from_json(report(attempts=attempts)))
    assert line.endswith("; 3 of 4 routes failed — too slow, 429, bad reply."), line


def test_routes_memory_kept_out_are_said_so_not_cut_to_a_colon() -> None:
    """Helper audit: a catalog memory kept out rendered "1 route failed — remembered:."."""
    readiness = [
        {
            "agent_id": "a/stall",
            "status": "deferred",
            "detail": "remembered: timeout, 2 min ago; cooling for 3 min more",
        },
        {
            "agent_id": "b/busy",
            "status": "rejected",
            "detail": "remembered from #12: not_found, 1 h ago",
        },
        {"agent_id": "c/gone", "status": "rejected", "http_status": 404},
        {"agent_id": "d/good", "status": "ready", "http_status": 200},
    ]
    line = route_summary(RunReport.from_json(report(readiness=readiness)))
    assert line.endswith("; 3 of 4 routes failed — remembered cooling, remembered dead, 404."), line


def test_a_reply_whose_findings_were_all_rejected_gives_no_summary() -> None:
    unverified = [
        {
            "path": "a.py",
            "line": 9,
            "severity": "low",
            "message": "m",
            "reason": "not a changed line",
        }
    ]
    body = comment_markdown(
        RunReport.from_json(report(summary="", findings=[], unverified=unverified))
    )
    assert "No summary: every finding of the reply cited lines not in the diff" in body


@pytest.mark.integration
def test_the_drill_comment_believes_only_the_honest_summary_and_says_stalls() -> None:
    """The review drill: an honest reviewer and a liar serve one chunk each; the liar's
    "Critical problems everywhere." over findings that all fail verification is not shown,
    and the two probes still stalled when the run ended say so."""
    run = run_cli("drill", "--format", "json", cwd=ROOT)  # cli.main, in this process
    assert run.returncode == 0, run.stderr
    out = run.stdout
    data = json.loads(out)
    assert data["summary"] == "Reviewed the changed lines shown; findings cite them exactly."
    believed = [c["summary"] for c in data["chunks"]]
    assert "Critical problems everywhere." not in believed
    body = comment_markdown(RunReport.from_json(data))
    assert "Critical problems everywhere." not in body and "Part " not in body
    stalled = [r for r in data["readiness"] if r["status"] == "abandoned"]
    assert stalled and all(r["detail"].startswith("stalled: no byte in ") for r in stalled)
    assert "abandoned when the run finished" not in body


def test_many_long_findings_are_fewer_not_a_cut_that_loses_the_routes_and_footer() -> None:
    """Helper audit: 3 chunks of 20 findings with long messages and the 16 KB memory payload
    left ~49 KB; the 50 findings of the shortened list did not fit, and the hard cut dropped
    the route summary, the readiness table, the footer and the "Shortened" note, keeping low
    findings while high ones after the 50th were lost."""
    severities = ["low", "low", "medium", "high"]
    findings = [
        {
            "path": f"src/mod_{i:03d}.py",
            "line": 1,
            "side": "RIGHT",
            "quote": "x = eval(input())",
            "severity": severities[i % 4],
            "message": f"finding {i}: " + "y" * 1200,
        }
        for i in range(60)
    ]
    limit = 20_000
    body = comment_markdown(
        RunReport.from_json(report(decision="request_changes", findings=findings)), limit=limit
    )
    assert len(body) <= limit
    assert "cut at the size limit" not in body
    assert "Shortened to fit GitHub's size limit" in body and "findings" in body
    assert "Served by `d/good`" in body and "Routes: selection and readiness" in body
    assert "decision computed from verified findings" in body
    shown = [ln for ln in body.splitlines() if ln.startswith("- **")]
    assert (
        0 < len(shown) < 60 and f"_{60 - len(shown)} more findings are in the JSON report._" in body
    )
    highs = [ln for ln in shown if ln.startswith("- **high**")]
    assert len(highs) == 15 and shown[:15] == highs  # every high one, first


def test_a_probe_still_waiting_when_another_route_served_did_not_fail() -> None:
    """Helper audit: a healthy route whose first byte comes at 2 s (probe bound 10 s) was still
    in flight when a faster route served at 0.1 s; the route line counted it as failed
    ("2 of 3 routes failed — 404, stalled"). It was not needed, and the line says so."""
    readiness = [
        {"agent_id": "a/stall", "status": "rejected", "http_status": 404},
        {"agent_id": "b/busy", "status": "ready", "http_status": 200},
        {"agent_id": "c/gone", "status": "abandoned", "detail": "stalled: no byte in 0.1 s"},
    ]
    selected = [route("a/stall", 3), route("b/busy", 2), route("c/gone", 1)]
    served = {"agent_id": "b/busy", "account": "b", "model": "busy"}
    line = route_summary(
        RunReport.from_json(
            report(readiness=readiness, catalog={"selected": selected}, served_by=served)
        )
    )
    assert line == (
        "Served by `b/busy` after 4 probes; 1 of 3 routes failed — 404; 1 probe not answered "
        "yet when the run finished."
    ), line
