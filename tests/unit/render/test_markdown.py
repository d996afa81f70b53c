"""Rendering: hostile text made inert, the readiness table, and the comment's size limit."""

from __future__ import annotations

from relay_review.records import RunReport
from relay_review.render import comment_markdown, md_code, md_text, readiness_table


def report(**over):
    base = {
        "decision": "request_changes",
        "summary": "Looks risky.",
        "findings": [
            {
                "path": "src/app.py",
                "line": 12,
                "side": "RIGHT",
                "quote": "eval(x)",
                "severity": "high",
                "message": "eval on input",
            }
        ],
        "unverified": [
            {
                "path": "a.py",
                "line": 99,
                "severity": "low",
                "message": "m",
                "reason": "line 99 is not a changed line",
            }
        ],
        "files": [
            {"path": "src/app.py", "status": "reviewed", "reason": ""},
            {"path": "logo.png", "status": "skipped", "reason": "binary"},
        ],
        "catalog": {
            "selected": [
                {
                    "agent_id": "a/m1",
                    "account": "a",
                    "provider": "p",
                    "model": "m1",
                    "cost": "free",
                    "zdr": True,
                    "priority": 2,
                },
                {
                    "agent_id": "b/m2",
                    "account": "b",
                    "provider": "p",
                    "model": "m2",
                    "cost": "free",
                    "zdr": False,
                    "priority": 1,
                },
            ]
        },
        "readiness": [
            {
                "agent_id": "a/m1",
                "status": "timeout",
                "http_status": None,
                "first_byte_s": None,
                "latency_s": 10.0,
                "detail": "timeout in first_byte - no byte within 10s (no headers)",
            },
            {
                "agent_id": "b/m2",
                "status": "ready",
                "http_status": 200,
                "first_byte_s": 0.3,
                "latency_s": 0.5,
            },
        ],
        "served_by": {"agent_id": "b/m2", "account": "b", "model": "m2"},
        "attempts": [
            {
                "agent_id": "b/m2",
                "phase": "stream",
                "outcome": "ok",
                "http_status": 200,
                "elapsed_s": 1.2,
                "started_s": 0.5,
            }
        ],
        "elapsed_s": 1.7,
        "probes_sent": 2,
        "provenance": "octo/policy@0123456789ab (resolved from main)",
        "context": {
            "server_url": "https://github.com",
            "repo": "octo/app",
            "head_sha": "f" * 40,
            "base_sha": "e" * 40,
        },
    }
    base.update(over)
    return base


def test_md_text_neutralises_markup_mentions_and_newlines():
    out = md_text("<img src=x onerror=alert(1)> @admin [x](http://evil)\n# title")
    assert "<img" not in out and "&lt;img" in out
    assert "@\u200badmin" in out
    assert "\n" not in out
    assert "\\[x\\]\\(http:\u200b//evil\\)" in out
    assert "http://" not in md_text("see https://phish.example and www.phish.example")
    assert "www." not in md_text("see www.phish.example")


def test_md_code_cannot_be_closed_by_backticks():
    out = md_code("a ``` b")
    assert out.startswith("````") and out.endswith("````")


def test_comment_has_decision_findings_table_and_served_route():
    body = comment_markdown(RunReport.from_json(report()), marker="<!-- m -->")
    assert body.startswith("<!-- m -->\n## relay-review: 🔴 Changes requested")
    assert f"/octo/app/blob/{'f' * 40}/src/app.py#L12" in body
    assert "| 1 | b | m2 | free | ready | 200 | 0.30 | 0.50 | ready | SERVED |" in body
    # the found column names the fault (the probe's detail, escaped)
    assert (
        "| 2 | a | m1 | free+zdr | timeout | - | - | 10.00 | stalled: no byte in 10 s "
        "\\(timeout in first\\_byte - no byte within 10s \\(no headers\\)\\) |  |" in body
    )
    # the route summary stands above the table, which is folded for a complete review
    assert "Served by `b/m2` after 2 probes; 1 of 2 routes failed — stalled." in body
    assert "<details><summary>Routes: selection and readiness</summary>" in body
    assert "Files not reviewed (1 of 2)" in body and "binary" in body
    assert "Unverified findings (1)" in body
    assert "octo/policy@0123456789ab (resolved from main)" in body


def test_unavailable_comment_still_shows_every_route():
    body = comment_markdown(
        RunReport.from_json(
            report(decision="unavailable", findings=[], served_by=None, why="deadline passed")
        )
    )
    assert "⚠️ Review unavailable" in body and "deadline passed" in body
    assert "No route served after 2 probes;" in body
    assert "<details open><summary>Routes: selection and readiness</summary>" in body
    assert body.count("| free") == 2
    assert body.rstrip().split("\n")[-3].startswith("- Comment `/relay-review`")


def test_comment_fits_the_limit_and_says_what_was_shortened():
    many = [
        {
            "agent_id": f"acct/m{i}",
            "phase": "first_byte",
            "outcome": "timeout",
            "http_status": None,
            "elapsed_s": 20.0,
            "started_s": float(i),
        }
        for i in range(3000)
    ]
    findings = [
        {
            "path": f"f{i}.py",
            "line": i + 1,
            "side": "RIGHT",
            "quote": "x" * 100,
            "severity": "low",
            "message": "y" * 400,
        }
        for i in range(400)
    ]
    body = comment_markdown(
        RunReport.from_json(report(attempts=many, findings=findings)), limit=65_536
    )
    assert len(body) <= 65_536
    assert "Shortened to fit" in body and "attempts" in body
    assert "SERVED" in body  # the readiness table outranks the attempt timeline


def test_readiness_table_text_marks_served_route():
    r = RunReport.from_json(report())
    text = readiness_table(r.catalog.selected, r.readiness, r.served_by)
    assert text.splitlines()[0].split() == [
        "prio",
        "account",
        "model",
        "tier",
        "preflight",
        "http",
        "first_byte_s",
        "latency_s",
        "served",
    ]  # `found` is a line of its own under a route's row, when it says more than preflight
    served = next(line for line in text.splitlines() if line.endswith("SERVED"))
    assert served.split()[4] == "ready"


def test_md_code_never_carries_a_hidden_comment():
    out = md_code("<!-- relay-review:sticky --> <!--x")
    assert "<!--" not in out and "<\u200b!-- relay-review:sticky -->" in out


def test_md_text_breaks_issue_references_but_not_other_hashes():
    out = md_text("fixes #12, org/repo#3 and C# ##[x]")
    assert "\\#\u200b12" in out and "repo\\#\u200b3" in out
    assert "C\\# " in out and "\\#\\#\\[x\\]" in out
    # GitHub's other form, GH-12 (any case), found by an audit; GHX-1 is no reference
    assert md_text("see GH-1, gh-22 and GHX-3") == "see GH\u200b-1, gh\u200b-22 and GHX-3"


def test_md_text_escapes_math_delimiters():
    assert md_text("$$ x $y$") == "\\$\\$ x \\$y\\$"


def test_hard_cut_keeps_whole_lines_the_marker_and_closed_details():
    findings = [
        {
            "path": "a.py",
            "line": i + 1,
            "side": "RIGHT",
            "quote": "`" * 3 + "q" * 100,
            "severity": "low",
            "message": "m|" * 400,
        }
        for i in range(60)
    ]
    # many findings are fitted, not cut: fewer of them, the rest of the comment kept
    body = comment_markdown(
        RunReport.from_json(report(findings=findings)), marker="<!-- m -->", limit=9000
    )
    assert len(body) <= 9000 and body.startswith("<!-- m -->\n")
    assert "more findings are in the JSON report" in body and "cut at the size limit" not in body
    assert body.rstrip().endswith("never taken from the model</sub>")
    assert all(line.count("````") % 2 == 0 for line in body.split("\n"))
    assert body.count("<details>") == body.count("</details>")
    # the last resort: a head too long for any room left is cut at a line end
    summary = "\n".join(["&" * 190] * 10)
    body = comment_markdown(
        RunReport.from_json(report(findings=findings, summary=summary)),
        marker="<!-- m -->",
        limit=3000,
    )
    assert len(body) <= 3000 and body.startswith("<!-- m -->\n")
    assert body.endswith("\n\n_[cut at the size limit]_\n")
    kept = body.split("\n")[:-3]
    assert all(line.count("````") % 2 == 0 for line in kept)  # no code span cut open
    assert body.count("<details>") == body.count("</details>")


def test_shortened_summary_is_cut_before_escaping():
    long = "&" * 3000
    body = comment_markdown(RunReport.from_json(report(summary=long, attempts=[])), limit=12_000)
    assert "head" in body.split("Shortened to fit")[1].split(".")[0]
    assert "&amp;" * 1999 + "…\n" in body  # 2,000 characters kept, each escaped whole


def test_bidi_controls_cannot_disguise_text():
    for out in (md_text("app/\u202eyp.htua"), md_code("a\u2066b\u2069")):
        assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in out)
        assert "U+202E" in out or "<U+2066>" in out  # shown as a visible escape


def test_found_names_a_serving_failure_before_the_probe():
    r = report()
    r["attempts"].insert(
        0,
        {
            "agent_id": "a/m1",
            "phase": "idle",
            "outcome": "timeout",
            "http_status": 200,
            "elapsed_s": 5.0,
            "started_s": 0.1,
            "detail": "timeout in idle - no byte for 5s " + "x" * 300,
        },
    )
    t = RunReport.from_json(r)
    text = readiness_table(t.catalog.selected, t.readiness, t.served_by, t.attempts)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if " m1 " in line)
    found = [
        line
        for line in lines[at + 1 :]
        if line.startswith("      found: ") or line.startswith("       ")
    ]
    row = " ".join([lines[at], *found[:3]])  # the row, then its wrapped `found:` line(s)
    assert "found: serving: timeout in idle - no byte for 5s" in row  # the later failure wins
    assert "first_byte" not in row
    assert row.rstrip().endswith("…")  # capped
    assert len(row) < 300
