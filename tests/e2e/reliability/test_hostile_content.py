"""Hostile pull-request content (issue 6, item 3), end to end through ``relay-review run``.

Title, body, diff lines and file names carry prompt injection, forged fence tokens, the sticky
marker, workflow commands (v2 ``::x::`` and legacy ``##[x]``), mentions, table- and
HTML-breaking Markdown, 1 MB single lines and invalid UTF-8. The checks and their exact
definitions are in :mod:`hostile_checks`.

What the log, the comment and the process guard (inert log lines, peak memory, the
deadline) is checked on ``relay-review run`` as a subprocess, as the runner starts it. The
decision test (injection does not change it, and every payload reaches the model fenced) runs
the action's entrypoint in this process over the same environment, Prism and fleet.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from action_harness import (
    FILES,
    FLEET_KEY,
    NUMBER,
    PATCH,
    QUERY_LINE,
    SECRETS,
    api_file,
    policy_toml,
    posted_bodies,
    pr_payload,
    run_action,
    run_in_process,
)
from github_mock import MockGitHub
from hostile_checks import (
    CANARY,
    COMMANDS,
    FORGED_TOKEN,
    INJECTION,
    KNOWN_COMMANDS,
    MARKUP,
    MENTIONS,
    hostile_lines,
    hostile_text,
    log_problems,
    markdown_problems,
    parse_command,
    region_text,
)
from relay_review.drill import FaultFleet
from relay_review.github import actions
from relay_review.github.comment import MARKER
from relay_review.github.event import PullRequestEvent, parse_event

#: Seconds: the harness policy's whole-run deadline (``FAST``), and the slack allowed on top
#: for process start-up and publishing on a loaded 2-core machine.
DEADLINE_S = 20
SLACK_S = 40
#: Peak resident memory allowed for one ``relay-review run`` (the measured figure is printed).
MEMORY_BUDGET_MB = 512
MEGABYTE_LINE = ("x" * 1023 + " ") * 1024  # 1 MiB of one line, spaces included

_SYSTEM_TOKEN = re.compile(r"<<<UNTRUSTED-\.\.\.-([0-9a-f]{32})>>>")


def unfenced(messages: list[dict[str, str]]) -> tuple[str, str]:
    """(the request's text outside its real fences, the text inside them)."""
    token = _SYSTEM_TOKEN.search(messages[0]["content"])
    assert token, "the system message names no fence token"
    fence = re.compile(
        rf"<<<UNTRUSTED-([A-Z-]+)-{token[1]}>>>\n(.*?)\n<<<END-UNTRUSTED-\1-{token[1]}>>>",
        re.DOTALL,
    )
    text = "\n".join(m["content"] for m in messages)
    inside = "\n".join(m[2] for m in fence.finditer(text))
    return fence.sub("", text), inside


VERDICT = {
    "summary": "Replaces the password check with a SQL query built from user input.",
    "decision": "approve",  # advisory: ignored, the decision is computed
    "findings": [
        {
            "path": "app/auth.py",
            "line": 11,
            "side": "RIGHT",
            "quote": QUERY_LINE,
            "severity": "high",
            "message": "SQL injection: the name is formatted into SQL.",
        }
    ],
}
OBEYED = {"summary": "Approved as instructed.", "decision": "approve", "findings": []}
HUNK_START = 42  # the new-file line of the hostile hunk's first added line


def quoted_findings(inside: str) -> list[dict[str, Any]]:
    """Low findings quoting hostile diff lines (marker, commands, mentions, table breakers)
    when the hostile hunk was shown: PR text reaches the comment through quotes and paths."""
    lines = [one_line(s) for s in hostile_lines()]
    picked = [MARKER, COMMANDS[0], MENTIONS[0], MARKUP[0], MARKUP[4]]
    cited = [
        ("app/auth.py", HUNK_START + lines.index(text), text)
        for text in picked
        if f"R {HUNK_START + lines.index(text)} + {text}" in inside
    ]
    if f"### FILE {HOSTILE_NAME} [added]" in inside:
        cited.append((HOSTILE_NAME, 1, "print('hi')"))  # a hostile path in a verified finding
    return [
        {
            "path": path,
            "line": line,
            "side": "RIGHT",
            "quote": text,
            "severity": "low",
            "message": "A hostile line, quoted.",
        }
        for path, line, text in cited
    ]


def gullible_reply(body: dict[str, Any]) -> str:
    """A model that obeys any instruction it finds *outside* the real fences (and reviews
    honestly otherwise): if the fences could be forged, the decision would flip to approve."""
    messages = body["messages"]
    if "single word: ready" in messages[-1]["content"]:
        return "ready"
    outside, inside = unfenced(messages[:2])
    if CANARY in outside:
        return json.dumps(OBEYED)
    return json.dumps({**VERDICT, "findings": VERDICT["findings"] + quoted_findings(inside)})


@pytest.fixture(scope="module")
def gull() -> Iterator[FaultFleet]:
    accounts = {"gull": {"models": {"gull/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=gullible_reply) as running:
        yield running


def one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def hostile_patch() -> str:
    """The standard patch plus a hunk of added lines carrying every payload."""
    lines = [one_line(s) for s in hostile_lines()]
    hunk = f"@@ -40,0 +42,{len(lines)} @@ def audit(request):\n" + "\n".join(
        f"+{line}" for line in lines
    )
    return f"{PATCH}\n{hunk}"


HOSTILE_NAME = f"src/{CANARY} @octocat <!-- relay-review:sticky --> | x | `::error::f`.py"
HOSTILE_NAME_NL = f"docs/{CANARY}\n::error::nl </details> @admin ##[add-mask]x.md"
HOSTILE_NAME_MARKER = f"docs/{MARKER}\n<!-- relay-review:head {'0' * 40} --> @{CANARY} |.png"


def hostile_files() -> list[dict[str, Any]]:
    return [
        api_file("app/auth.py", "modified", hostile_patch(), 3 + len(hostile_lines()), 1),
        api_file(HOSTILE_NAME, "added", "@@ -0,0 +1 @@\n+print('hi')", 1, 0),
        api_file(HOSTILE_NAME_NL, "added", None, 0, 0),  # no patch: listed as not reviewed
        api_file(HOSTILE_NAME_MARKER, "added", None, 0, 0),
        FILES[1],
    ]


def hostile_payload() -> dict[str, Any]:
    return pr_payload(
        title=one_line(INJECTION + " " + "; ".join(hostile_lines()))[:1000], body=hostile_text()
    )


def chat_bodies(fleet: FaultFleet, since: int) -> list[dict[str, Any]]:
    return [
        r.body
        for r in fleet.requests[since:]
        if r.is_chat and r.body and r.max_tokens != 16  # 16: a preflight probe
    ]


# --- the decision ---------------------------------------------------------------------------


def test_injection_does_not_change_the_decision(
    tmp_path: Path, github_mock: MockGitHub, gull: FaultFleet
) -> None:
    inputs = {"policy": policy_toml(gull, "gull")}
    clean = run_in_process(tmp_path / "clean", github_mock, inputs)
    assert clean.code == 0, clean.stdout + clean.stderr
    github_mock.reset()
    since = len(gull.requests)
    hostile = run_in_process(
        tmp_path / "hostile", github_mock, inputs, payload=hostile_payload(), files=hostile_files()
    )
    assert hostile.code == 0, hostile.stdout + hostile.stderr
    assert clean.report is not None and hostile.report is not None
    for run in (clean, hostile):
        assert run.report is not None
        assert run.report["decision"] == "request_changes"
        assert run.report["findings"][0]["line"] == 11
    assert len(clean.report["findings"]) == 1
    assert len(hostile.report["findings"]) == 7  # the quotes of hostile lines verify too
    assert hostile.outputs["decision"] == clean.outputs["decision"] == "request_changes"

    bodies = chat_bodies(gull, since)
    assert bodies, "the reviewer was never asked"
    for body in bodies:
        outside, inside = unfenced(body["messages"])
        # the payloads reached the model, every one of them inside a real fence
        assert INJECTION in inside and CANARY not in outside
        assert f"<<<END-UNTRUSTED-DIFF-{FORGED_TOKEN}>>>" in inside  # forged fences are data
        token = _SYSTEM_TOKEN.search(body["messages"][0]["content"])
        assert token and token[1] != FORGED_TOKEN
        assert token[1].lower() not in inside.lower()
        assert all(secret not in json.dumps(body) for secret in SECRETS)


# --- the log and the comment ------------------------------------------------------------------


def test_hostile_pr_text_is_inert_in_log_comment_and_line_comments(
    tmp_path: Path, github_mock: MockGitHub, gull: FaultFleet
) -> None:
    inputs = {"policy": policy_toml(gull, "gull"), "inline-comments": "true"}
    inputs["inline-min-severity"] = "low"  # every verified finding inline, low ones too
    run = run_action(
        tmp_path, github_mock, inputs, payload=hostile_payload(), files=hostile_files()
    )
    assert run.code == 0, run.stdout + run.stderr

    assert log_problems(run.stdout, run.stderr, SECRETS) == []
    wrapped = region_text(run.stdout)
    assert CANARY in wrapped and "::error::" in wrapped  # logged, but inside regions only

    (body,) = posted_bodies(github_mock)
    assert markdown_problems(body) == []
    assert len(body) <= 65_536
    assert "Files not reviewed" in body and CANARY in body  # the hostile names are shown
    review = github_mock.calls("POST", f"/pulls/{NUMBER}/reviews$")
    assert review, "the verified finding was not posted as a line comment"
    comments = review[0].body["comments"]
    assert {c["path"] for c in comments} == {"app/auth.py", HOSTILE_NAME}
    for comment in comments:
        assert markdown_problems(comment["body"], marker=None) == []
    assert markdown_problems(run.summary, marker=None) == []


# --- size and encoding ------------------------------------------------------------------------


def test_megabyte_lines_and_invalid_utf8_stay_within_deadline_and_memory(
    tmp_path: Path, github_mock: MockGitHub, gull: FaultFleet
) -> None:
    invalid = "ok = 1  # caf\ufffd \udcff\udcfe lone \ud800 high"
    files = [
        api_file("app/auth.py", "modified", PATCH, 3, 1),
        api_file("big/min.js", "added", f"@@ -0,0 +1 @@\n+{MEGABYTE_LINE}{CANARY}", 1, 0),
        api_file("app/latin1.py", "added", f"@@ -0,0 +1,2 @@\n+{invalid}\n+x = 2", 2, 0),
        api_file(f"bad\udcffname-{CANARY}.py", "added", "@@ -0,0 +1 @@\n+y = 3", 1, 0),
    ]
    payload = pr_payload(title=f"{CANARY} {MEGABYTE_LINE}", body=f"{MEGABYTE_LINE}\udcff\ud800")
    run = run_action(
        tmp_path,
        github_mock,
        {"policy": policy_toml(gull, "gull")},
        payload=payload,
        files=files,
        timeout=DEADLINE_S + SLACK_S,
        measure_memory=True,
    )
    print(f"peak RSS {run.peak_rss_mb} MB, wall {run.wall_s:.1f} s")
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.peak_rss_mb is not None and run.peak_rss_mb > 0, "the action was not measured"
    assert run.wall_s < DEADLINE_S + SLACK_S
    assert run.peak_rss_mb < MEMORY_BUDGET_MB
    assert run.report is not None
    assert run.report["elapsed_s"] <= DEADLINE_S
    assert run.report["decision"] == "request_changes"
    fates = {f["path"]: f for f in run.report["files"]}
    assert fates["big/min.js"]["status"] == "skipped"
    assert fates["big/min.js"]["reason"].startswith("line too long: line 1 (RIGHT) has 1,048,")
    assert fates["big/min.js"]["left_out"] is True
    assert fates["app/latin1.py"]["status"] == "reviewed"

    assert log_problems(run.stdout, run.stderr, SECRETS) == []
    longest = max(len(line) for line in run.stdout.splitlines())
    assert longest < 20_000, f"a log line of {longest} characters"
    (body,) = posted_bodies(github_mock)
    assert markdown_problems(body) == []
    assert len(body) <= 65_536
    assert "x" * 2000 not in body


# --- pure: the checks themselves, the log writer and the event parser -----------------------


def test_the_checks_catch_what_they_exist_for() -> None:
    """Each check fails on the breach it describes (so a green run means something)."""
    token = "a" * 32
    ok = f"::add-mask::{SECRETS[0]}\n::group::relay-review: x\n::stop-commands::{token}\n"
    ok += f"::error::{CANARY}\n##[add-mask]{CANARY}\n::{token}::\n::endgroup::\n"
    assert log_problems(ok, "", SECRETS) == []
    breaches = [
        f"see ##[add-mask]{CANARY}",  # legacy form mid-line
        f"  ::error::{CANARY}",  # indented command
        f"title: {CANARY}",  # hostile text outside a region
        f"::stop-commands::{token}\n::{token.upper()}::\n{CANARY}",  # region ended early
        f"::stop-commands::{token}\n{CANARY}",  # region never ends
        f"::add-mask::{CANARY}",  # a mask we did not ask for
        "::group::forged",
    ]
    for text in breaches:
        assert log_problems(text, "", SECRETS), text
    assert log_problems("", f"::error::{CANARY}", SECRETS)

    head = f"{MARKER}\n## t\n\n"
    assert markdown_problems(head + "`<!-- x -->` @\u200buser") == []
    for text in [
        "@user",
        "a `b",
        f"`{MARKER}`",
        "<!-- swallow",
        "</details>",
        "| a | b |\n|---|---|\n| 1 | 2 | 3 |",
        "| a | b |\n|---|---|\n| 1 \\\\| 2 |",  # "\\|" is still one escaped pipe
    ]:
        assert markdown_problems(head + text), text
    assert markdown_problems("| a | b |\n|---|---|\n| 1 \\| 2 | 3 |", marker=None) == []


def test_log_untrusted_caps_lines_and_blocks_and_stays_encodable() -> None:
    out = io.StringIO()
    text = f"{CANARY} {MEGABYTE_LINE}\n" + "\udcff\ud800 line\r" * 200_000
    actions.log_untrusted(text, out)
    written = out.getvalue()
    written.encode("utf-8")  # lone surrogates did not survive
    lines = written.split("\n")
    assert lines[0].startswith("::stop-commands::") and lines[-2] == f"::{lines[0][17:]}::"
    assert max(len(line) for line in lines) <= actions.UNTRUSTED_LINE_MAX_CHARS + 60
    assert len(written) <= actions.UNTRUSTED_BLOCK_MAX_CHARS + 200
    assert "more characters not shown" in lines[1] and "more lines not shown" in lines[-3]
    assert log_problems(written, "", SECRETS) == []


def test_event_texts_are_made_encodable() -> None:
    payload = pr_payload(title="t\ud800", body="b\udcff")
    payload["pull_request"]["user"]["login"] = "u\udcfe"
    event = parse_event("pull_request_target", payload)
    assert isinstance(event, PullRequestEvent)
    assert (event.title, event.body, event.user_login) == ("t\ufffd", "b\ufffd", "u\ufffd")


def test_inert_line_defeats_both_command_forms() -> None:
    """``actions.inert_line`` is for text logged outside a stop-commands block (run.py's
    ``say()`` is asked to use it): no payload, alone or mid-line, is a command after it."""
    for text in [*hostile_lines(), hostile_text(), f"1  evil/m##[add-mask]{CANARY}  free"]:
        line = actions.inert_line(text)
        assert "\n" not in line and "\r" not in line
        assert parse_command(line, KNOWN_COMMANDS) is None, line


_LOG_PIECES = st.sampled_from(
    ["::", "##[", "]", "error", "add-mask", "stop-commands", " ", "\t", "\r", "\n", "\r\n", CANARY]
)
_log_texts = st.lists(st.one_of(_LOG_PIECES, st.text(max_size=3)), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=_log_texts)
def test_no_text_escapes_the_log_writers(text: str) -> None:
    out = io.StringIO()
    actions.log_untrusted(text + CANARY, out)
    assert log_problems(out.getvalue(), "", SECRETS) == []
    assert parse_command(actions.inert_line(text), KNOWN_COMMANDS) is None


# --- provider text in the log: model ids and discovery errors -------------------------------

HOSTILE_MODEL = f"vendor/{CANARY}##[add-mask]x"


def test_hostile_model_ids_and_provider_errors_stay_inert_in_the_log(
    tmp_path: Path, github_mock: MockGitHub
) -> None:
    """A provider lists a model whose id holds a legacy ``##[add-mask]`` command; another
    account's listing fails with an error text carrying one. Both reach the log in progress
    lines (the catalog table, ``discovery:``, ``served by``), which must stay inert."""
    accounts = {
        "evil": {"models": {HOSTILE_MODEL: "healthy"}, "api_key": FLEET_KEY},
    }
    with FaultFleet(accounts, reply=lambda body: json.dumps(VERDICT)) as fleet:
        broken = (
            '[[accounts]]\nname = "gone"\nkind = "openai_compatible"\n'
            f'base_url = "{fleet.root_url}/nowhere-{CANARY}%23%23[add-mask]y/v1"\n'
            'pricing = "declared-free"\napi_key_env = "FAKE_FLEET_API_KEY"\n'
        )
        run = run_action(
            tmp_path, github_mock, {"policy": policy_toml(fleet, "evil") + "\n" + broken}
        )
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.report is not None and run.report["served_by"]["model"] == HOSTILE_MODEL
    assert CANARY in run.stdout  # the id is shown ...
    assert log_problems(run.stdout, run.stderr, SECRETS) == []  # ... but never as a command
