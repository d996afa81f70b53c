"""``relay-review run`` end to end, as the runner starts it: a subprocess with ``INPUT_*`` and
``GITHUB_*`` set, GitHub played by Prism serving GitHub's OpenAPI description (``github_mock``),
the models by a fault fleet on 127.0.0.1, events from ``@octokit/webhooks-examples``.

Prism answers from GitHub's static examples: ``GET /pulls/{n}`` always says the head is
``6dcb09b5...`` (so the event's head is set to it, or to another SHA to simulate a push during the
run), and the issue-comments listing is chosen with ``Prefer`` (``relay-forged``,
``relay-sticky``). The PR's files and the policy files are stubbed with realistic bodies (Prism's
examples carry no usable patch, and its policy example is not a policy of this project's format).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from github_mock import MockGitHub, webhook_examples
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"  # the head of every Prism pull request
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"
REPO = "Codertocat/Hello-World"  # the webhook examples' repository
NUMBER = 2
POLICY_REPO = "octo-org/relay-policy"
POLICY_PATH = ".github/relay-review.toml"

TOKEN = "ghs_FAKEtokenNeverLogged0123456789abcdef"
KEY_ENV = "FAKE_FLEET_API_KEY"
FLEET_KEY = "sk-fake-fleet-key-0123456789abcdef"
UNUSED_KEY = "sk-fake-unused-key-fedcba9876543210"
SECRETS = (TOKEN, FLEET_KEY, UNUSED_KEY)

# --- the pull request: one real patch, one binary file --------------------------------------

QUERY_LINE = 'query = "SELECT * FROM users WHERE name = \'%s\'" % request.form["name"]'
PATCH = (
    "@@ -10,4 +10,6 @@ def login(request):\n"
    '     user = find_user(request.form["name"])\n'
    '-    if user.check(request.form["password"]):\n'
    f"+    {QUERY_LINE}\n"
    "+    rows = db.execute(query)\n"
    "+    if rows:\n"
    "         return ok(user)\n"
    "     return denied()"
)


def _file(name: str, status: str, patch: str | None, adds: int, dels: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "sha": "bbcd538c8e72b8c175046e27cc8f907076331401",
        "filename": name,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
        "blob_url": f"https://github.com/{REPO}/blob/{SHA}/{name}",
        "raw_url": f"https://github.com/{REPO}/raw/{SHA}/{name}",
        "contents_url": f"https://api.github.com/repos/{REPO}/contents/{name}?ref={SHA}",
    }
    if patch is not None:
        entry["patch"] = patch
    return entry


FILES = [
    _file("app/auth.py", "modified", PATCH, 3, 1),
    _file("assets/logo.png", "added", None, 0, 0),
]


def _finding(line: int, quote: str, severity: str, message: str) -> dict[str, Any]:
    return {
        "path": "app/auth.py",
        "line": line,
        "side": "RIGHT",
        "quote": quote,
        "severity": severity,
        "message": message,
    }


#: Verdict per fleet account (the fleet replies by model id).
VERDICTS: dict[str, dict[str, Any]] = {
    "acme/reviewer": {
        "summary": "Replaces the password check with a SQL query built from user input.",
        "decision": "approve",  # advisory only: the decision is computed
        "findings": [
            _finding(11, QUERY_LINE, "high", "SQL injection: the name is formatted into SQL."),
            _finding(99, "nope", "low", "A line outside the diff."),
        ],
    },
    "pair/reviewer": {
        "summary": "Two smaller issues.",
        "findings": [
            _finding(12, "rows = db.execute(query)", "medium", "Result set is never closed."),
            _finding(13, "if rows:", "low", "Truthiness of a cursor is always true."),
        ],
    },
}


def _reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"  # a preflight probe
    return json.dumps(VERDICTS[body["model"]])


@pytest.fixture(scope="module")
def fleet() -> Iterator[FaultFleet]:
    accounts = {
        "acme": {"models": {"acme/reviewer": "healthy"}, "api_key": FLEET_KEY},
        "pair": {"models": {"pair/reviewer": "healthy"}, "api_key": FLEET_KEY},
        "down": {"models": {"down/broken": "503"}, "api_key": FLEET_KEY},
        "leaky": {"models": {"leaky/oops": "500@leak"}, "api_key": FLEET_KEY},
    }
    with FaultFleet(accounts, reply=_reply) as running:
        yield running


FAST = """\
[serving]
connect = 2
first_byte = 5
idle = 5
attempt = 10
deadline = 20

[preflight]
probe_budget = 4
probe_timeout = 3

[discovery]
timeout = 3
"""


def policy_toml(fleet: FaultFleet, *accounts: str, head: str = FAST) -> str:
    """A policy declaring fleet accounts as self-hosted, declared-free endpoints."""
    parts = [head]
    for name in accounts:
        parts.append(
            "[[accounts]]\n"
            f'name = "{name}"\n'
            'kind = "openai_compatible"\n'
            f'base_url = "{fleet.base_url(name)}"\n'
            'pricing = "declared-free"\n'
            f'api_key_env = "{KEY_ENV}"\n'
        )
    return "\n".join(parts)


def contents_body(repo: str, text: str) -> dict[str, Any]:
    """A contents-API answer for the policy file (``type: file``, base64 content)."""
    raw = text.encode()
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(raw),
        "name": "relay-review.toml",
        "path": POLICY_PATH,
        "content": base64.encodebytes(raw).decode(),
        "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
        "url": f"https://api.github.com/repos/{repo}/contents/{POLICY_PATH}",
        "git_url": None,
        "html_url": None,
        "download_url": None,
        "_links": {"self": "", "git": None, "html": None},
    }


# --- running the action --------------------------------------------------------------------

#: What the runner passes for every input of action.yml when the workflow sets nothing.
ACTION_DEFAULTS = {
    "github-token": TOKEN,
    "policy": "",
    "orchestrator-repo": "",
    "orchestrator-ref": "",
    "orchestrator-path": POLICY_PATH,
    "orchestrator-min-ref": "",
    "pool": "",
    "limit": "",
    "account-cap": "",
    "require-zdr": "",
    "deadline": "",
    "first-byte-timeout": "",
    "probe-budget": "",
    "exclude": "",
    "review-drafts": "false",
    "author-associations": "OWNER, MEMBER, COLLABORATOR",
    "fail-on": "never",
    "on-unavailable": "fail",
    "inline-comments": "false",
    "comment-author": "",
}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    report: dict[str, Any] | None
    root: Path

    def files_text(self) -> str:
        """Every file the run left under its root (workspace, outputs, summary, temp)."""
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.root.rglob("*")) if p.is_file()
        )


def parse_outputs(text: str) -> dict[str, str]:
    """``GITHUB_OUTPUT`` as the runner reads it (``name<<DELIM`` blocks)."""
    result: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if "<<" in lines[i]:
            name, delimiter = lines[i].split("<<", 1)
            end = lines.index(delimiter, i + 1)
            result[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return result


def pr_payload(index: int = 0, **changes: Any) -> dict[str, Any]:
    """A ``pull_request`` example with its head set to Prism's SHA (and ``changes`` applied)."""
    payload = copy.deepcopy(webhook_examples("pull_request")[index])
    pr = payload["pull_request"]
    pr["head"]["sha"] = changes.pop("head_sha", SHA)
    pr.update(changes)
    return payload


def run_action(
    root: Path,
    mock: MockGitHub,
    inputs: dict[str, str] | None = None,
    *,
    payload: dict[str, Any] | None = None,
    event_name: str = "pull_request_target",
    files: list[dict[str, Any]] | None = None,
) -> Run:
    """Start ``relay-review run`` like the runner does and collect everything it left."""
    mock.prefer("GET", "^/user$", "code=403")  # GITHUB_TOKEN: GET /user is not allowed
    mock.stub("GET", f"/pulls/{NUMBER}/files$", 200, FILES if files is None else files, times=None)
    workspace, temp = root / "workspace", root / "runner-temp"
    workspace.mkdir(parents=True)
    temp.mkdir()
    event_path = root / "event.json"
    event_path.write_text(json.dumps(payload if payload is not None else pr_payload()))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": mock.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(root / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(root / "summary.md"),
        "RUNNER_TEMP": str(temp),
        KEY_ENV: FLEET_KEY,
        "UNUSED_VENDOR_API_KEY": UNUSED_KEY,
    }
    for name, value in {**ACTION_DEFAULTS, **(inputs or {})}.items():
        env[f"INPUT_{name.upper()}"] = value
    proc = subprocess.run(
        [sys.executable, "-m", "relay_review", "run"],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = root / "output.txt"
    summary = root / "summary.md"
    report_path = workspace / "relay-review-report.json"
    return Run(
        code=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        outputs=parse_outputs(output.read_text()) if output.exists() else {},
        summary=summary.read_text() if summary.exists() else "",
        report=json.loads(report_path.read_text()) if report_path.exists() else None,
        root=root,
    )


def posted_bodies(mock: MockGitHub) -> list[str]:
    """Comment bodies sent (created or edited)."""
    return [
        c.body["body"]
        for c in mock.calls()
        if c.method in ("POST", "PATCH") and "/comments" in c.path and isinstance(c.body, dict)
    ]


def assert_nothing_posted(mock: MockGitHub) -> None:
    assert not [c for c in mock.calls() if c.method in ("POST", "PATCH")], mock.calls()


# --- the main path --------------------------------------------------------------------------


def test_review_posts_one_sticky_comment(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout + run.stderr
    # inline policy without orchestrator-repo is the whole policy: no policy file is read
    assert not github_mock.calls(path_regex="/contents/")
    (body,) = posted_bodies(github_mock)
    assert len(github_mock.calls("POST", f"/repos/{REPO}/issues/{NUMBER}/comments$")) == 1
    assert body.startswith(MARKER + "\n")
    assert "Changes requested" in body  # computed from the verified high finding
    assert f"https://github.com/{REPO}/blob/{SHA}/app/auth.py#L11" in body
    assert "Unverified findings (1)" in body and "SQL injection" in body
    assert "assets/logo.png" in body  # not reviewed, and said so
    assert "SERVED" in body and "acme/acme/reviewer" in body  # the readiness table
    assert "inline policy" in body
    assert len(body) <= 65_536

    assert run.outputs == {
        "decision": "request_changes",
        "served-by": "acme/acme/reviewer",
        "comment-url": run.outputs["comment-url"],
        "report-path": "relay-review-report.json",  # relative to GITHUB_WORKSPACE
        "findings": "1",
    }
    assert run.outputs["comment-url"].startswith("https://github.com/")
    report = run.report
    assert report is not None
    assert report["decision"] == "request_changes"
    assert report["served_by"]["agent_id"] == "acme/acme/reviewer"
    assert report["provenance"] == "inline policy (workflow input `policy`)"
    assert report["context"] == {
        "server_url": "https://github.com",
        "repo": REPO,
        "head_sha": SHA,
        "base_sha": pr_payload()["pull_request"]["base"]["sha"],
    }
    assert report["github"]["comment_action"] == "created"
    assert report["exit_code"] == 0
    assert [f["path"] for f in report["files"]] == ["app/auth.py", "assets/logo.png"]
    # the step summary carries the same Markdown (without the marker), and says where it went
    assert "Changes requested" in run.summary and "SERVED" in run.summary
    assert MARKER not in run.summary
    # log: masks first, one group per stage, attempts at INFO
    lines = run.stdout.splitlines()
    assert lines[0].startswith("::add-mask::")
    for stage in ("inputs", "event", "policy", "discovery", "catalog", "review", "publish"):
        assert f"::group::relay-review: {stage}" in lines
    assert "route=acme/acme/reviewer account=acme phase=stream outcome=ok" in run.stdout
    # the fleet got the key and the fenced PR title; never the key in a prompt
    (chat,) = [r for r in fleet.chat_requests("acme") if r.max_tokens != 16][-1:]
    assert chat.authorized
    assert "Update the README with new information." in json.dumps(chat.body)


@pytest.mark.parametrize(("fail_on", "code"), [("request_changes", 1), ("high", 1)])
def test_fail_on(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, fail_on: str, code: int
) -> None:
    run = run_action(
        tmp_path, github_mock, {"policy": policy_toml(fleet, "acme"), "fail-on": fail_on}
    )
    assert run.code == code, run.stdout
    assert len(posted_bodies(github_mock)) == 1  # the comment is posted all the same
    assert run.outputs["decision"] == "request_changes"


# --- policy provenance ----------------------------------------------------------------------


def test_pinned_policy_ref_resolution_and_provenance(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    pinned = "[catalog]\nlimit = 3\n\n[review]\nmax_output_tokens = 2048\n"
    github_mock.prefer("GET", "/compare/", "example=relay-ahead")
    github_mock.stub("GET", "/contents/", 200, contents_body(POLICY_REPO, pinned))
    inputs = {
        "orchestrator-repo": POLICY_REPO,
        "orchestrator-ref": "v1.2.0",
        "orchestrator-min-ref": "v1.0.0",
        "policy": policy_toml(fleet, "acme"),  # overrides the pinned file's keys
    }
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 0, run.stdout
    reads = [c for c in github_mock.calls("GET") if POLICY_REPO in c.path]
    assert [c.path for c in reads] == [
        f"/repos/{POLICY_REPO}/commits/v1.2.0",
        f"/repos/{POLICY_REPO}/commits/v1.0.0",
        f"/repos/{POLICY_REPO}/compare/{SHA}...{SHA}",
        f"/repos/{POLICY_REPO}/contents/{POLICY_PATH}",
    ]
    assert reads[-1].query == f"ref={SHA}"  # read at the resolved commit, not at the ref
    provenance = f"{POLICY_REPO}@{SHA[:12]} (resolved from v1.2.0) + inline policy"
    assert run.report is not None
    assert run.report["provenance"] == provenance
    assert run.report["policy"]["source"]["sha"] == SHA
    assert run.report["policy"]["source"]["min_sha"] == SHA
    assert "catalog: pool=free limit=3 " in run.stdout  # the pinned file's key took effect
    (body,) = posted_bodies(github_mock)
    assert f"`{provenance}`" in body  # the comment's footer


def test_pinned_policy_not_descending_fails_closed(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # GitHub's own compare example says "behind": the pinned commit is older than the minimum.
    inputs = {
        "orchestrator-repo": POLICY_REPO,
        "orchestrator-ref": "main",
        "orchestrator-min-ref": "v1.0.0",
        "policy": policy_toml(fleet, "acme"),
    }
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 2
    error = next(line for line in run.stdout.splitlines() if line.startswith("::error"))
    assert f"the pinned commit {SHA} does not descend from the minimum {SHA}" in error
    assert not github_mock.calls(path_regex="/contents/")
    assert not github_mock.calls(path_regex="/files$")
    assert_nothing_posted(github_mock)
    assert run.outputs["decision"] == "error"


def test_base_branch_policy_read_at_base_sha(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    base_sha = pr_payload()["pull_request"]["base"]["sha"]
    github_mock.stub("GET", "/contents/", 200, contents_body(REPO, policy_toml(fleet, "acme")))
    run = run_action(tmp_path, github_mock)
    assert run.code == 0, run.stdout
    (read,) = github_mock.calls("GET", "/contents/")
    assert (read.path, read.query) == (f"/repos/{REPO}/contents/{POLICY_PATH}", f"ref={base_sha}")
    assert run.report is not None
    assert run.report["provenance"] == f"{REPO}@{base_sha[:12]} (base of the pull request: master)"
    assert run.outputs["decision"] == "request_changes"


def test_missing_base_policy_means_defaults(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("GET", "/contents/", "code=404")
    run = run_action(tmp_path, github_mock, {"on-unavailable": "pass"})
    assert run.code == 0, run.stdout
    assert run.report is not None
    assert run.report["provenance"].startswith(f"built-in defaults (no {POLICY_PATH} in {REPO}@")
    # defaults know no account, and FAKE_FLEET_API_KEY is no convention: no route
    assert run.report["decision"] == "unavailable"
    assert "no provider account has a key" in run.report["why"]
    (body,) = posted_bodies(github_mock)
    assert "Review unavailable" in body and "no provider account has a key" in body


# --- the sticky comment ---------------------------------------------------------------------


def test_forged_marker_by_another_author_is_ignored(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("GET", f"/issues/{NUMBER}/comments$", "example=relay-forged")
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout
    assert not github_mock.calls("PATCH")  # mallory's comment is left alone
    assert len(github_mock.calls("POST", f"/issues/{NUMBER}/comments$")) == 1


def test_own_sticky_is_edited_in_place(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("GET", f"/issues/{NUMBER}/comments$", "example=relay-sticky")
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout
    (patch,) = github_mock.calls("PATCH")
    assert patch.path.endswith("/issues/comments/3")  # github-actions[bot]'s, not mallory's (2)
    assert not github_mock.calls("POST")
    assert run.report is not None and run.report["github"]["comment_action"] == "updated"


def test_head_moved_posts_nothing(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    payload = pr_payload(head_sha=OTHER_SHA)  # GitHub now says the head is SHA
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")}, payload=payload)
    assert run.code == 0, run.stdout
    assert_nothing_posted(github_mock)
    assert f"the head moved from {OTHER_SHA} to {SHA}" in run.stdout
    assert run.report is not None and run.report["github"]["not_posted"] == "head_moved"
    assert run.outputs["comment-url"] == ""
    assert "Not posted" in run.summary


def test_huge_report_comment_is_truncated(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    binaries = [
        _file(f"assets/generated/{'deep/' * 30}image-{i:04d}.png", "added", None, 0, 0)
        for i in range(1000)
    ]
    run = run_action(
        tmp_path,
        github_mock,
        {"policy": policy_toml(fleet, "acme")},
        files=[FILES[0], *binaries],
    )
    assert run.code == 0, run.stdout
    (body,) = posted_bodies(github_mock)
    assert len(body) <= 65_536
    assert "Shortened to fit" in body
    assert "Changes requested" in body and "SQL injection" in body  # the verdict survives
    assert run.report is not None and len(run.report["files"]) == 1001  # the report keeps all
    assert len(run.summary) > 65_536  # the step summary has room for the full list


def test_read_only_token_puts_the_verdict_in_the_summary(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("POST", f"/issues/{NUMBER}/comments$", "code=403")
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout
    assert "::warning::relay-review: the token cannot comment" in run.stdout
    assert "Not posted" in run.summary and "Changes requested" in run.summary
    assert run.outputs["comment-url"] == ""
    assert run.outputs["decision"] == "request_changes"


def test_inline_comments_survive_a_422(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("POST", f"/pulls/{NUMBER}/reviews$", "code=422")
    github_mock.prefer("POST", f"/pulls/{NUMBER}/comments$", "code=201", times=1)
    github_mock.prefer("POST", f"/pulls/{NUMBER}/comments$", "code=422", times=1)
    inputs = {"policy": policy_toml(fleet, "pair"), "inline-comments": "true", "fail-on": "high"}
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 0, run.stdout  # medium + low: fail-on high does not trigger
    assert run.outputs["decision"] == "comment" and run.outputs["findings"] == "2"
    (batch,) = github_mock.calls("POST", f"/pulls/{NUMBER}/reviews$")
    assert batch.body["event"] == "COMMENT" and batch.body["commit_id"] == SHA
    assert [(c["line"], c["side"]) for c in batch.body["comments"]] == [
        (12, "RIGHT"),
        (13, "RIGHT"),
    ]
    assert len(github_mock.calls("POST", f"/pulls/{NUMBER}/comments$")) == 2
    assert run.report is not None
    review = run.report["github"]["review"]
    assert (review["mode"], review["posted"], len(review["refused"])) == ("single", 1, 1)
    (body,) = posted_bodies(github_mock)[:1]
    assert "Result set is never closed" in body and "cursor is always true" in body


# --- no route -------------------------------------------------------------------------------


@pytest.mark.parametrize(("on_unavailable", "code"), [("fail", 1), ("pass", 0)])
def test_no_route_still_comments(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, on_unavailable: str, code: int
) -> None:
    inputs = {"policy": policy_toml(fleet, "down"), "on-unavailable": on_unavailable}
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == code, run.stdout
    (body,) = posted_bodies(github_mock)
    assert "Review unavailable" in body
    assert "down/down/broken" in body  # the readiness table names every route
    assert "503" in body
    assert run.outputs["decision"] == "unavailable" and run.outputs["served-by"] == ""
    assert run.report is not None and run.report["why"]


# --- refusals before any work ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"limit": "abc"}, "input `limit`: 'abc' is not a whole number"),
        (
            {"fail-on": "sometimes"},
            "input `fail-on`: 'sometimes' is not allowed; use never, request_changes or high",
        ),
        ({"github-token": ""}, "input `github-token` is required"),
        (
            {"orchestrator-min-ref": "v1.0.0"},
            "input `orchestrator-min-ref` is set but `orchestrator-repo` is not",
        ),
        (
            {"policy": '[catalog]\npool = "cheap"\n'},
            "input `policy`: catalog.pool = 'cheap' is not allowed; use free or auto",
        ),
    ],
)
def test_bad_input_exits_2_naming_it(
    tmp_path: Path, github_mock: MockGitHub, inputs: dict[str, str], message: str
) -> None:
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 2, run.stdout
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and message in errors[0], errors
    if "policy" not in inputs:
        assert not github_mock.calls()


def test_non_pull_request_event_is_a_notice(tmp_path: Path, github_mock: MockGitHub) -> None:
    run = run_action(tmp_path, github_mock, payload=webhook_examples("push")[0], event_name="push")
    assert run.code == 0
    assert "::notice::relay-review: nothing to review: not a pull request event" in run.stdout
    assert not github_mock.calls()
    assert run.outputs["decision"] == "skipped"


def test_draft_is_skipped(tmp_path: Path, github_mock: MockGitHub) -> None:
    payload = pr_payload(5)
    assert payload["pull_request"]["draft"] is True
    run = run_action(tmp_path, github_mock, payload=payload)
    assert run.code == 0
    assert "is a draft; skipped" in run.stdout
    assert not github_mock.calls()
    assert "is a draft; skipped" in run.summary


def test_author_association_refused(tmp_path: Path, github_mock: MockGitHub) -> None:
    payload = pr_payload(author_association="FIRST_TIME_CONTRIBUTOR")
    run = run_action(tmp_path, github_mock, payload=payload)
    assert run.code == 0
    assert "FIRST_TIME_CONTRIBUTOR is not in author-associations" in run.stdout
    assert not github_mock.calls()
    assert run.outputs["decision"] == "skipped"


# --- secrets --------------------------------------------------------------------------------


def test_secrets_never_appear_anywhere(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # "leaky" echoes the Authorization header it received in its 500 error message.
    inputs = {"policy": policy_toml(fleet, "acme", "leaky"), "inline-comments": "true"}
    first_request = len(fleet.requests)
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 0, run.stdout
    assert fleet.chat_requests("leaky")  # the leaky route was probed: its error was seen
    masked = {line.removeprefix("::add-mask::") for line in run.stdout.splitlines()}
    assert set(SECRETS) <= masked
    first_other = next(
        i for i, line in enumerate(run.stdout.splitlines()) if not line.startswith("::add-mask::")
    )
    assert first_other >= len(SECRETS)  # every secret masked before anything else
    texts = {
        "stdout (outside ::add-mask::)": "\n".join(
            line for line in run.stdout.splitlines() if not line.startswith("::add-mask::")
        ),
        "stderr": run.stderr,
        "files (report, summary, outputs, temp)": run.files_text(),
        "GitHub request bodies": json.dumps([c.body for c in github_mock.calls()]),
        "fleet request bodies": json.dumps([r.body for r in fleet.requests[first_request:]]),
    }
    assert run.report is not None and run.report["findings"]
    assert github_mock.calls("POST", "/reviews$")
    for where, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, f"a secret leaked into {where}"


# --- pure: inputs and policy layering (no subprocess) ---------------------------------------


def _env(**inputs: str) -> dict[str, str]:
    return {
        f"INPUT_{k.replace('_', '-').upper()}": v for k, v in {**ACTION_DEFAULTS, **inputs}.items()
    }


def test_inputs_parse_like_the_runner_passes_them() -> None:
    from relay_review.action_inputs import read_action_inputs

    inputs = read_action_inputs(
        _env(
            exclude="*.lock, dist/**\nvendor/**\n",
            author_associations="owner contributor",
            review_drafts="True",
            limit=" 4 ",
            deadline="90.5",
            policy="\n[catalog]\nlimit = 2\n",
        )
    )
    assert inputs.exclude == ("*.lock", "dist/**", "vendor/**")
    assert inputs.author_associations == {"OWNER", "CONTRIBUTOR"}
    assert inputs.review_drafts is True and inputs.inline_comments is False
    assert (inputs.limit, inputs.deadline, inputs.pool) == (4, 90.5, None)
    assert inputs.policy == "\n[catalog]\nlimit = 2\n"  # kept as written
    assert TOKEN not in repr(inputs)  # the token is a SecretStr
    assert inputs.policy_overrides() == {
        "catalog": {"limit": 4},
        "serving": {"deadline": 90.5},
        "review": {"exclude": ["*.lock", "dist/**", "vendor/**"]},
    }


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("probe-budget", "-1", "input `probe-budget`: '-1' is not a whole number"),
        ("account-cap", "0", "input `account-cap`: '0' is not allowed; use a whole number >= 1"),
        ("deadline", "soon", "input `deadline`: 'soon' is not a number of seconds"),
        ("deadline", "inf", "input `deadline`: 'inf' is not allowed; use a number of seconds > 0"),
        ("require-zdr", "maybe", "input `require-zdr`: 'maybe' is not allowed; use auto, true"),
        ("inline-comments", "sure", "input `inline-comments`: 'sure' is not allowed; use true"),
        ("author-associations", "OWNER, ADMIN", "names unknown association(s) ADMIN"),
        ("orchestrator-repo", "not a repo", "input `orchestrator-repo`: 'not a repo' is not"),
        ("orchestrator-path", "../secrets.toml", "input `orchestrator-path`: '../secrets.toml'"),
        ("comment-author", "a b", "input `comment-author`: 'a b' is not allowed"),
    ],
)
def test_every_bad_input_is_named(name: str, value: str, message: str) -> None:
    from relay_review.action_inputs import read_action_inputs
    from relay_review.errors import UsageError

    with pytest.raises(UsageError) as info:
        read_action_inputs(_env(**{name: value}, orchestrator_ref="main" if "repo" in name else ""))
    assert message in str(info.value)


def test_orchestrator_repo_needs_a_ref() -> None:
    from relay_review.action_inputs import read_action_inputs
    from relay_review.errors import UsageError

    with pytest.raises(UsageError, match="input `orchestrator-ref` is required when"):
        read_action_inputs(_env(orchestrator_repo=POLICY_REPO))


def test_inline_policy_layers_under_inputs() -> None:
    from relay_review.action_inputs import read_action_inputs
    from relay_review.commands.run import resolve_policy
    from relay_review.github.event import parse_event

    event = parse_event("pull_request_target", pr_payload())
    inline = '[serving]\nattempt = 100\n\n[catalog]\npool = "auto"\nlimit = 9\n'
    inputs = read_action_inputs(_env(policy=inline, limit="5", deadline="30", exclude="*.lock"))
    policy, origin = resolve_policy(None, inputs, event)  # inline only: no GitHub call at all
    assert (policy.catalog.pool, policy.catalog.limit) == ("auto", 5)  # inputs win
    assert (policy.serving.deadline, policy.serving.attempt) == (30, 30)  # attempt capped
    assert policy.review.exclude == ["*.lock"]
    assert origin.provenance == "inline policy (workflow input `policy`)"
    assert origin.to_json()["input_overrides"]["catalog"] == {"limit": 5}


def test_redaction_covers_nested_data(capsys: pytest.CaptureFixture[str]) -> None:
    from relay_review.commands.run import Secrets

    secrets = Secrets()
    secrets.add([FLEET_KEY, "", "  ", FLEET_KEY])
    assert capsys.readouterr().out == f"::add-mask::{FLEET_KEY}\n"  # once, blanks skipped
    data = {"a": [f"Bearer {FLEET_KEY}", 3, {FLEET_KEY: None}], "b": None}
    assert secrets.redact_data(data) == {"a": ["Bearer ***", 3, {"***": None}], "b": None}
