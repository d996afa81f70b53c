"""The ``text`` format is plain text that fits :data:`render.TEXT_WIDTH` columns: no Markdown
escapes to read through, hostile text without control characters (an ANSI escape from a model
cannot recolour or rewrite the terminal), long cells wrapped inside their column or cut with
``…``, and every route's fault still named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forked_cli import run_at_once
from relay_review.records import Attempt, RunReport
from relay_review.render import (
    TEXT_WIDTH,
    attempt_timeline,
    plain,
    readiness_table,
    review_text,
    wrap_cell,
)

LONG_MODEL = "meta-llama/llama-3.3-70b-instruct:free"
ANSI = "\x1b[2J\x1b[31mowned\x1b[0m"


def route(i: int, model: str, account: str = "router") -> dict:
    return {
        "agent_id": f"{account}/{model}",
        "account": account,
        "provider": "openrouter",
        "model": model,
        "cost": "free",
        "zdr": False,
        "priority": 10 - i,
    }


def test_wrap_cell_breaks_after_a_path_segment_and_cuts_what_is_left() -> None:
    assert wrap_cell(LONG_MODEL, 29) == ["meta-llama/", "llama-3.3-70b-instruct:free"]
    assert wrap_cell("short", 29) == ["short"]
    lines = wrap_cell("x" * 200, 20)
    assert len(lines) == 3 and all(len(line) <= 20 for line in lines)
    assert lines[-1].endswith("…")


def test_plain_is_one_line_without_controls() -> None:
    out = plain(f"a\nb\t{ANSI} \u202eevil", 1000)
    assert "\n" not in out and "\x1b" not in out and "\u202e" not in out
    assert out.startswith("a b ") and "\ufffd" in out
    assert plain("y" * 50, 10) == "y" * 9 + "…"


def test_readiness_table_fits_with_long_models_and_long_faults() -> None:
    catalog = [route(i, f"vendor-{i}/{LONG_MODEL}-{'q' * i}") for i in range(6)]
    readiness = [
        {
            "agent_id": c["agent_id"],
            "status": "deferred",
            "http_status": 429,
            "first_byte_s": 0.01,
            "latency_s": 0.01,
            "detail": "rate_limited retry after 30s - HTTP 429: " + "Rate limit exceeded. " * 20,
        }
        for c in catalog
    ]
    rows = RunReport.from_json({"catalog": {"selected": catalog}, "readiness": readiness})
    text = readiness_table(rows.catalog.selected, rows.readiness, None)
    lines = text.splitlines()
    assert max(map(len, lines)) <= TEXT_WIDTH, "\n".join(lines)
    assert sum(line.startswith("      found: rate_limited retry after 30s") for line in lines) == 6
    assert "…" in text  # the long faults are cut, not dropped


def test_attempt_timeline_fits_a_long_route_id() -> None:
    attempts = [
        {
            "agent_id": f"nvidia_nim_sub/{LONG_MODEL}/{'z' * 40}",
            "phase": "first_byte",
            "outcome": "timeout",
            "http_status": None,
            "elapsed_s": 20.0,
            "started_s": 0.1,
            "purpose": "serve",
        }
    ]
    lines = attempt_timeline([Attempt.model_validate(a) for a in attempts]).splitlines()
    assert max(map(len, lines)) <= TEXT_WIDTH
    assert len(lines) > 2  # the route wrapped inside its column


def hostile_report() -> dict:
    evil = f"nim_a {ANSI} eval() on `user` input (RIGHT) *bold* | pipe"
    return {
        "decision": "request_changes",
        "summary": f"Summary with {ANSI} and\nline two",
        "findings": [
            {
                "path": "app/a_b.py",
                "line": 3,
                "side": "RIGHT",
                "quote": "x = eval(input())",
                "severity": "high",
                "message": evil,
            }
        ],
        "unverified": [
            {
                "path": "app/c.py",
                "line": 9,
                "severity": "low",
                "message": evil,
                "reason": "line 9 (RIGHT) is not changed",
            }
        ],
        "files": [{"path": "app/a_b.py", "status": "reviewed"}],
        "served_by": {"agent_id": "nim_a/m", "account": "nim_a", "model": "m"},
        "chunks": [],
        "attempts": [],
        "readiness": [],
        "catalog": {"selected": [route(0, "m", "nim_a")], "report": {}},
    }


def test_review_text_is_plain_and_keeps_hostile_text_inert() -> None:
    text = review_text(RunReport.from_json(hostile_report()))
    assert text.startswith("relay-review: changes requested\n")
    assert "\x1b" not in text and "\ufffd" in text
    assert "nim_a" in text and "(RIGHT)" in text and "`user`" in text  # as written, unescaped
    assert "\\_" not in text and "\\(" not in text and "\\`" not in text and "&lt;" not in text
    assert "- high  app/a_b.py:3" in text and "| x = eval(input())" in text
    assert max(map(len, text.splitlines())) <= TEXT_WIDTH


@pytest.mark.integration
def test_drill_text_format_is_plain_and_fits(tmp_path: Path) -> None:
    """``relay-review drill`` (text, the default) against the bundled fleet: the issue's examples
    (``nim\\_a``, ``\\(RIGHT\\)``) are gone and no line is wider than the limit; ``--format
    markdown`` still prints the comment. The three runs at once, each its own process forked
    from a warm fork server (tests/support/forked_cli.py: cli.main without interpreter start-up;
    the console script: tests/e2e/test_routing_fleet.py)."""
    text, scenario, md = run_at_once(
        ["drill"], ["drill", "--scenario", "mixed"], ["drill", "--format", "markdown"],
        outdir=tmp_path,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "nim_a" in out and "found: not_found - HTTP 404" in out  # (the liar is refused now)
    assert "\\_" not in out and "\\(" not in out and "| --- |" not in out and "<details>" not in out
    assert max(map(len, out.splitlines())) <= TEXT_WIDTH, out
    assert scenario.returncode == 0, scenario.stderr
    assert max(map(len, scenario.stdout.splitlines())) <= TEXT_WIDTH, scenario.stdout
    assert md.returncode == 0 and "nim\\_a" in md.stdout and "| prio |" in md.stdout
    assert json.dumps(md.stdout)  # printable
