"""The whole review over real sockets: chunks, failover, citation validation, repair, decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_harness import run_cli
from relay_review.config import Policy, PreflightPolicy, ServingPolicy
from relay_review.drill.review import (
    REVIEW_DRILL_CHUNK_TOKENS,
    drill_reply,
    run_review_drill,
    sample_diff,
)
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for
from relay_review.pipeline.review import review as run_review
from relay_review.records import RunReport
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import build_catalog, parse_discovery

pytestmark = pytest.mark.integration  # every test here starts a server or a subprocess

INDEX = DiffIndex.from_diff(sample_diff())


def policy(**review) -> Policy:
    p = Policy(
        preflight=PreflightPolicy(probe_budget=6, probe_timeout=1.0),
        serving=ServingPolicy(first_byte=1.0, idle=1.0, attempt=3.0, deadline=8.0),
    )
    return p.model_copy(update={"review": p.review.model_copy(update=review)})


async def review_with(
    models: dict[str, dict[str, str]], pol: Policy, index: DiffIndex = INDEX, **kw
) -> dict:
    scenario = Scenario("t", "test", models, healthy=None)
    async with fleet_for(scenario, reply=drill_reply) as fleet:
        catalog = build_catalog(parse_discovery(discovery_for(scenario, fleet)))
        report = await run_review(index, catalog, pol, drill_environ(scenario), **kw)
    return report.to_json()


def assert_cites_real_changed_lines(findings):
    for f in findings:
        text = INDEX.line(f["path"], f["line"], f["side"])
        assert text is not None, f
        assert "".join(f["quote"].split()) == "".join(text.split())


async def test_drill_review_end_to_end():
    report = (await run_review_drill(policy())).to_json()
    assert report["decision"] == "request_changes"  # the model itself said "approve"
    assert report["findings"], report
    assert_cites_real_changed_lines(report["findings"])
    assert any(f["severity"] == "high" and "shell=True" in f["quote"] for f in report["findings"])
    assert {f["path"]: f["status"] for f in report["files"]} == {
        "app/export.py": "reviewed",
        "app/settings.py": "reviewed",
    }
    assert len(report["chunks"]) == 2 and all(c["served_by"] for c in report["chunks"])
    for u in report["unverified"]:  # whatever the liar served stays out of the decision
        assert "after the repair round" in u["reason"]


async def test_a_liar_whose_findings_are_all_invented_is_a_bad_reply_never_an_approval():
    # issue 22: a reply whose findings all cite code the chunk does not show is no review
    report = await review_with({"a": {"vendor/liar": "healthy@0.05"}}, policy())
    assert report["served_by"] is None
    assert report["decision"] == "unavailable"
    outcomes = {(a["agent_id"], a["outcome"]) for a in report["attempts"]}
    assert outcomes == {("a/vendor/liar", "bad_reply")}
    assert all("not a review" in a["detail"] for a in report["attempts"])


async def test_a_liar_fails_over_to_the_honest_reviewer():
    models = {"a": {"vendor/liar": "healthy@0.05"}, "b": {"vendor/reviewer": "healthy@0.2"}}
    report = await review_with(models, policy(chunk_tokens=None))
    assert report["served_by"]["agent_id"] == "b/vendor/reviewer"
    assert report["decision"] == "request_changes"
    assert ("a/vendor/liar", "bad_reply") in {
        (a["agent_id"], a["outcome"]) for a in report["attempts"]
    }


async def test_malformed_verdict_is_a_failed_attempt_and_the_next_route_serves():
    models = {"a": {"vendor/broken": "healthy@0.05"}, "b": {"vendor/reviewer": "healthy@0.2"}}
    report = await review_with(models, policy(chunk_tokens=None))
    outcomes = [(a["agent_id"], a["outcome"]) for a in report["attempts"]]
    assert outcomes[0] == ("a/vendor/broken", "bad_reply")
    assert "malformed verdict" in report["attempts"][0]["detail"]
    assert report["served_by"]["agent_id"] == "b/vendor/reviewer"
    assert report["decision"] == "request_changes"


async def test_no_route_gives_unavailable_with_every_fate_and_files_not_reviewed():
    models = {"a": {"vendor/x": "stall"}, "b": {"vendor/y": "404"}}
    report = await review_with(models, policy())
    assert report["decision"] == "unavailable"
    assert report["served_by"] is None and report["why"]
    assert {r["status"] for r in report["readiness"]} == {"timeout", "rejected"}
    assert all(f["status"] == "skipped" for f in report["files"])


async def test_excluded_files_are_listed_not_dropped():
    report = await review_with(
        {"a": {"vendor/reviewer": "healthy@0.05"}}, policy(exclude=["app/settings.py"])
    )
    files = {f["path"]: f for f in report["files"]}
    assert files["app/settings.py"]["status"] == "skipped"
    assert "app/settings.py" in files["app/settings.py"]["reason"]
    assert all(f["path"] != "app/settings.py" for f in report["findings"])
    # the policy may exclude a file to save tokens, but its changes were not reviewed ...
    assert files["app/settings.py"]["left_out"] is True
    assert report["partial"].startswith("1 of 2 files change content no model was shown")


async def test_an_exclusion_the_policy_trusts_does_not_make_the_review_partial():
    models = {"a": {"vendor/quiet": "healthy@0.05"}}  # it finds nothing
    distrusted = await review_with(models, policy(exclude=["app/settings.py"]))
    trusted = await review_with(
        models, policy(exclude=["app/settings.py"], trusted_excludes=["app/*.py"])
    )
    assert distrusted["decision"] == "comment"
    assert "a partial review never approves" in distrusted["partial"]
    files = {f["path"]: f for f in trusted["files"]}
    assert files["app/settings.py"]["left_out"] is False
    assert "trusted by review.trusted_excludes 'app/*.py'" in files["app/settings.py"]["reason"]
    assert trusted["partial"] == "" and trusted["decision"] == "approve"


async def test_files_cut_by_max_chunks_make_a_partial_review_that_never_approves():
    # the quiet reviewer finds nothing: a full review by it approves (see above) ...
    models = {"a": {"vendor/quiet": "healthy@0.05"}}
    report = await review_with(models, policy(chunk_tokens=REVIEW_DRILL_CHUNK_TOKENS, max_chunks=1))
    files = {f["path"]: f for f in report["files"]}
    assert [f["status"] for f in files.values()] == ["reviewed", "skipped"]
    assert "more than 1 chunks" in files["app/settings.py"]["reason"]
    # ... but no findings in half of a diff is no approval of the whole
    assert report["findings"] == [] and report["decision"] == "comment"
    assert report["partial"].startswith("1 of 2 files change content no model was shown")
    assert "never approves" in report["partial"]
    from relay_review.render import comment_markdown

    md = comment_markdown(RunReport.from_json(report))
    assert "> **Partial review:** 1 of 2 files change content no model was shown" in md
    assert "> - `app/settings.py`: beyond limits: the diff needs more than 1 chunks" in md


async def test_a_chunk_no_route_could_serve_makes_the_review_partial():
    # one route: it answers the first chunk (its own probe: hedged preflight sends none), then
    # stalls
    models = {"a": {"vendor/quiet": "healthy@0.05*1>stall"}}
    pol = policy(chunk_tokens=REVIEW_DRILL_CHUNK_TOKENS, concurrency=1)
    report = await review_with(models, pol)
    served = [c["served_by"] is not None for c in report["chunks"]]
    assert served == [True, False]
    assert report["decision"] == "comment" and "1 of 2 files" in report["partial"]


def test_review_cli_reads_stdin_and_exits_1_when_unavailable(tmp_path):
    discovery = tmp_path / "d.json"
    discovery.write_text(
        json.dumps(
            {
                "routes": [
                    {
                        "account": "a",
                        "provider": "openai_compatible",
                        "model": "m",
                        "base_url": "http://127.0.0.1:9/v1",
                        "api_key_env": "NOPE_KEY",
                        "prompt_price_per_1k": 0,
                        "completion_price_per_1k": 0,
                    }
                ]
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "NOPE_KEY"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "relay_review",
            "review",
            "--diff",
            "-",
            "--discovery",
            str(discovery),
            "--deadline",
            "5",
        ],
        input=sample_diff(),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["decision"] == "unavailable"
    assert out["readiness"][0]["detail"] == "missing key NOPE_KEY"
    assert set(out) >= {
        "decision",
        "summary",
        "findings",
        "unverified",
        "files",
        "served_by",
        "attempts",
        "readiness",
        "catalog",
        "elapsed_s",
    }


def test_review_cli_bad_diff_exits_2(tmp_path):
    empty = tmp_path / "empty.diff"
    empty.write_text("not a diff\n")
    d = tmp_path / "d.json"
    d.write_text('{"routes": []}')
    # cli.main in this process (the review command as a process: the test above)
    proc = run_cli("review", "--diff", str(empty), "--discovery", str(d))
    assert proc.returncode == 2 and f"--diff {empty}: no file found" in proc.stderr


def test_drill_cli_prints_the_comment():
    # text is the default (tests/unit/render/test_terminal.py); cli.main, in this process
    proc = run_cli("drill", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert "## relay-review: 🔴 Changes requested" in proc.stdout
    assert "<summary>Routes: selection and readiness</summary>" in proc.stdout
    assert "SERVED" in proc.stdout and "app/export.py:15" in proc.stdout


async def test_response_format_sent_only_to_routes_that_declare_it():
    scenario = Scenario(
        "t",
        "test",
        {"a": {"vendor/reviewer": "healthy@0.05"}, "b": {"vendor/plain": "404"}},
        healthy=None,
    )
    async with fleet_for(scenario, reply=drill_reply) as fleet:
        discovery = discovery_for(scenario, fleet)
        for route in discovery["routes"]:
            if route["account"] == "a":
                route["response_format"] = "json_schema"
        catalog = build_catalog(parse_discovery(discovery))
        report = (await run_review(INDEX, catalog, policy(), drill_environ(scenario))).to_json()
        served = [r for r in fleet.chat_requests() if r.max_tokens != 16]
        probes = [r for r in fleet.chat_requests() if r.max_tokens == 16]
    assert report["decision"] == "request_changes"
    assert served and all(r.body["response_format"]["type"] == "json_schema" for r in served)
    assert all("response_format" not in r.body for r in probes)


async def test_a_text_file_sent_without_a_patch_makes_the_review_partial():
    """GitHub omits ``patch`` for very large diffs and for binary files (0 additions and
    deletions): hiding either behind a small change must not earn an approval; a pure rename
    (no patch, 0 changes) changes nothing and does not count."""
    liar = {"a": {"vendor/quiet": "healthy@0.05"}}
    small = {
        "filename": "README.md",
        "status": "modified",
        "additions": 1,
        "deletions": 0,
        "changes": 1,
        "patch": "@@ -1 +1,2 @@\n # Title\n+One more line.",
    }
    binary = {
        "filename": "logo.png",
        "status": "added",
        "additions": 0,
        "deletions": 0,
        "changes": 0,
    }
    hidden = {
        "filename": "app/backdoor.py",
        "status": "added",
        "additions": 4000,
        "deletions": 0,
        "changes": 4000,
    }
    renamed = {
        "filename": "docs/new.md",
        "previous_filename": "docs/old.md",
        "status": "renamed",
        "additions": 0,
        "deletions": 0,
        "changes": 0,
    }
    api = DiffIndex.from_api_files
    clean = await review_with(liar, policy(), api([small, renamed]))
    with_binary = await review_with(liar, policy(), api([small, binary]))
    hiding = await review_with(liar, policy(), api([small, renamed, hidden]))
    cut = await review_with(liar, policy(), api([small]), unlisted_files=2)
    assert clean["decision"] == "approve" and clean["partial"] == ""
    assert with_binary["decision"] == "comment"
    assert with_binary["partial"].startswith("1 of 2 files change content no model was shown")
    assert hiding["decision"] == "comment"
    assert hiding["partial"].startswith("1 of 3 files change content")
    assert cut["decision"] == "comment"
    assert cut["partial"].startswith("2 of 3 files change content")
    assert "2 beyond the 3,000 files GitHub lists" in cut["partial"]


async def test_the_wait_a_route_asked_for_last_is_the_one_reported():
    """Helper audit: a route deferred by its probe's 429 was waited out, asked again and got a
    new 429; the readiness row (and the unavailable comment's "it frees at") kept the probe's
    older reset time, which had passed before the comment was posted."""
    import time
    from datetime import datetime

    started = time.time()
    models = {"a": {"vendor/x": "stall"}, "b": {"vendor/y": "429@3"}}
    report = await review_with(models, policy())
    assert report["decision"] == "unavailable"
    (busy,) = [r for r in report["readiness"] if r["agent_id"] == "b/vendor/y"]
    again = [a for a in report["attempts"] if a["agent_id"] == "b/vendor/y"]
    assert again and again[-1]["outcome"] == "rate_limited"
    reset = datetime.fromisoformat(busy["reset_at"].replace("Z", "+00:00")).timestamp()
    assert reset >= started + again[-1]["started_s"] + 3 - 1, (busy, again)
