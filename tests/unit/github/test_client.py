"""The GitHub edge: pure tests (event payloads, runner files and commands) and tests against
Prism serving GitHub's OpenAPI description (see ``github_mock``).

Prism answers from GitHub's static examples: every ref resolves to the same commit
(``6dcb09b5...``), every pull request is #1347 of ``octocat/Hello-World``, and nothing is
stored (a created comment does not appear in the next listing). What those examples cannot
show, the tests select with ``Prefer`` (``code=404``, ``example=relay-*``; the ``relay-*``
examples are added by ``tools/test/derive_spec.py``) and check through the recorded requests.
"""

from __future__ import annotations

import copy
import email.utils
import io
import json
import re
from pathlib import Path

import pytest
import requests
from github import GithubException

from github_mock import TOOLS, MockGitHub, derive_module, webhook_examples
from relay_review.github import actions
from relay_review.github.client import (
    DEFAULT_RATE_LIMIT_WAIT,
    WaitBudget,
    make_retry,
    rate_limit_wait,
)
from relay_review.github.comment import (
    DEFAULT_AUTHOR,
    MARKER,
    MAX_BODY_CHARS,
    StickyReader,
    find_sticky,
    head_line,
    head_of,
    resolve_author,
    upsert_sticky,
    with_marker,
)
from relay_review.github.errors import (
    EventError,
    GitHubConnectionError,
    GitHubEdgeError,
    PolicyRefError,
    github_errors,
)
from relay_review.github.event import (
    CommentCommand,
    NotPullRequestEvent,
    PullRequestEvent,
    event_for_comment,
    load_event,
    parse_event,
)
from relay_review.github.policy_ref import (
    PolicySource,
    check_descends,
    load_pinned_policy,
    read_base_policy,
    resolve_ref,
)
from relay_review.github.pr import PullFile, head_moved, head_sha, list_files
from relay_review.github.review import LineComment, post_review

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"  # the commit of every GitHub example
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"
POLICY_REPO = "octo-org/relay-policy"
POLICY_PATH = ".github/relay-review.toml"
REPO = "octo-org/app"


# --- events: GitHub's example payloads -----------------------------------------------------------


@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_every_pull_request_example_parses(event_name: str) -> None:
    examples = webhook_examples("pull_request")
    assert len(examples) >= 29
    for payload in examples:
        event = parse_event(event_name, payload)
        assert isinstance(event, PullRequestEvent)
        pr = payload["pull_request"]
        assert event.event_name == event_name
        assert event.action == payload["action"]
        assert event.number == pr["number"]
        assert event.repo_full_name == payload["repository"]["full_name"]
        assert event.private is payload["repository"]["private"]
        assert (event.base_sha, event.base_ref) == (pr["base"]["sha"], pr["base"]["ref"])
        assert event.head_sha == pr["head"]["sha"]
        assert event.draft is pr["draft"]
        assert event.author_association == pr["author_association"]
        assert event.user_login == pr["user"]["login"]
        assert event.title == pr["title"]
        assert event.body == (pr["body"] or "")
    drafts = [parse_event(event_name, p) for p in examples if p["pull_request"]["draft"]]
    assert drafts and all(e.draft for e in drafts)


def test_other_events_are_not_pull_requests() -> None:
    for name in ("push", "issues"):
        result = parse_event(name, webhook_examples(name)[0])
        assert isinstance(result, NotPullRequestEvent)
        assert result.event_name == name
        assert "not a pull request event" in result.reason


def test_issue_comment_parses_to_a_comment_command() -> None:
    for payload in webhook_examples("issue_comment"):
        command = parse_event("issue_comment", payload)
        assert isinstance(command, CommentCommand)
        assert command.number == payload["issue"]["number"]
        assert command.association == payload["comment"]["author_association"]
        assert command.commenter == payload["comment"]["user"]["login"]
        assert command.on_pull_request is ("pull_request" in payload["issue"])
        assert not command.asks("/relay-review")  # "You are totally right! ..."


@pytest.mark.parametrize(
    ("body", "asks"),
    [
        ("/relay-review", True),
        ("  /Relay-Review please\nthanks", True),
        ("/relay-reviewer", False),
        ("please /relay-review", False),
        ("`/relay-review`", False),
        ("", False),
    ],
)
def test_trigger_word_starts_the_comment(body: str, asks: bool) -> None:
    payload = copy.deepcopy(webhook_examples("issue_comment")[0])
    payload["comment"]["body"] = body
    command = parse_event("issue_comment", payload)
    assert isinstance(command, CommentCommand)
    assert command.asks("/relay-review") is asks


def test_comment_event_takes_the_pull_request_from_the_api() -> None:
    payload = copy.deepcopy(webhook_examples("issue_comment")[0])
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    command = parse_event("issue_comment", payload)
    assert isinstance(command, CommentCommand) and command.on_pull_request
    pull = webhook_examples("pull_request")[0]["pull_request"]
    event = event_for_comment(command, pull)
    assert event.event_name == "issue_comment"
    assert event.head_sha == pull["head"]["sha"] and event.base_sha == pull["base"]["sha"]
    assert event.repo_full_name == payload["repository"]["full_name"]
    with pytest.raises(EventError, match="pull request 1 from the API"):
        event_for_comment(command, {"number": 1})


def test_load_event_reads_the_file(tmp_path: Path) -> None:
    payload = webhook_examples("pull_request")[0]
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    env = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_EVENT_PATH": str(path)}
    event = load_event(env)
    assert isinstance(event, PullRequestEvent)
    assert event.number == payload["number"]
    assert not event.from_fork
    assert isinstance(load_event({"GITHUB_EVENT_NAME": "schedule"}), NotPullRequestEvent)


def test_bad_events_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(EventError, match="GITHUB_EVENT_NAME"):
        load_event({})
    with pytest.raises(EventError, match="GITHUB_EVENT_PATH"):
        load_event({"GITHUB_EVENT_NAME": "pull_request"})
    broken = tmp_path / "event.json"
    broken.write_text("{not json")
    with pytest.raises(EventError, match="not JSON"):
        load_event({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(broken)})
    payload = json.loads(json.dumps(webhook_examples("pull_request")[0]))
    del payload["pull_request"]["base"]["sha"]
    with pytest.raises(EventError, match=r"pull_request\.base\.sha"):
        parse_event("pull_request", payload)


def test_fork_with_deleted_head_repo() -> None:
    payload = json.loads(json.dumps(webhook_examples("pull_request")[0]))
    payload["pull_request"]["head"]["repo"] = None
    event = parse_event("pull_request_target", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.head_repo_full_name is None and event.from_fork


# --- actions.py: the runner's commands and files -------------------------------------------------


def test_escaping() -> None:
    assert actions.escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert actions.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_annotations_and_groups() -> None:
    out = io.StringIO()
    actions.error("bad\nthing", file="src/a,b.py", line=3, title="t:1", stream=out)
    actions.warning("careful", stream=out)
    actions.notice("fyi", file="x.py", line=1, end_line=2, stream=out)
    with actions.group("stage: discovery", stream=out):
        out.write("inside\n")
    assert out.getvalue().splitlines() == [
        "::error title=t%3A1,file=src/a%2Cb.py,line=3::bad%0Athing",
        "::warning::careful",
        "::notice file=x.py,line=1,endLine=2::fyi",
        "::group::stage: discovery",
        "inside",
        "::endgroup::",
    ]


def test_add_mask_masks_each_line() -> None:
    out = io.StringIO()
    actions.add_mask("line-one\nline-two\n", stream=out)
    actions.add_mask("", stream=out)
    assert out.getvalue().splitlines() == ["::add-mask::line-one", "::add-mask::line-two"]


def test_untrusted_text_cannot_forge_commands() -> None:
    out = io.StringIO()
    forged = "ignore me\n::add-mask::nothing\n::error::forged\n::endgroup::"
    actions.log_untrusted(forged, stream=out)
    lines = out.getvalue().splitlines()
    start = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", lines[0])
    assert start, lines[0]
    assert lines[-1] == f"::{start.group(1)}::"
    assert lines[1:-1] == forged.splitlines()
    with actions.stop_commands(stream=io.StringIO()) as other:
        assert other != start.group(1)


def _parse_output_file(text: str) -> dict[str, str]:
    """Parse GITHUB_OUTPUT the way the runner does (``name<<DELIM`` blocks and ``name=value``)."""
    result: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            result[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            result[name] = value
            i += 1
        else:
            i += 1
    return result


def test_outputs_file(tmp_path: Path) -> None:
    target = tmp_path / "output"
    env = {"GITHUB_OUTPUT": str(target)}
    assert actions.set_output("decision", "approve", env)
    hostile = "line one\nEOF\ndecision=request_changes\nghadelimiter_0000\n"
    assert actions.set_output("findings", hostile, env)
    assert actions.set_output("served-by", "openrouter/qwen", env)
    parsed = _parse_output_file(target.read_text())
    assert parsed == {"decision": "approve", "findings": hostile, "served-by": "openrouter/qwen"}
    assert not actions.set_output("decision", "x", {})
    with pytest.raises(ValueError, match="bad output name"):
        actions.set_output("a\nb", "x", env)


def test_step_summary_is_capped(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert actions.append_summary("# relay-review\n", env)
    assert actions.append_summary("é" * actions.SUMMARY_LIMIT_BYTES, env)  # 2 MiB of UTF-8
    data = target.read_bytes()
    assert len(data) <= actions.SUMMARY_LIMIT_BYTES
    text = data.decode("utf-8")  # cut on a character boundary
    assert text.startswith("# relay-review\n")
    assert text.endswith(actions.SUMMARY_TRUNCATED_NOTE)
    assert actions.append_summary("more", env)  # a full file takes nothing more
    assert len(target.read_bytes()) <= actions.SUMMARY_LIMIT_BYTES
    assert not actions.append_summary("x", {})


def test_inputs_keep_hyphens() -> None:
    env = {
        "INPUT_ORCHESTRATOR-REF": "  v1.2.0 \n",
        "INPUT_POOL": "",
        "INPUT_REVIEW-DRAFTS": "true",
        "HOME": "/",
    }
    assert actions.input_env_name("orchestrator-ref") == "INPUT_ORCHESTRATOR-REF"
    assert actions.get_input("orchestrator-ref", env) == "v1.2.0"
    assert actions.get_input("pool", env) is None
    assert actions.get_input("limit", env) is None
    assert actions.read_inputs(env) == {
        "orchestrator-ref": "  v1.2.0 \n",
        "pool": "",
        "review-drafts": "true",
    }


# --- client: the transport's retry policy --------------------------------------------------------


def test_retry_never_repeats_writes() -> None:
    retry = make_retry(2)
    for method in ("POST", "PATCH", "PUT", "DELETE"):
        assert not retry.is_retry(method, 502)
    assert retry.is_retry("GET", 502)
    assert not retry.is_retry("GET", 404)
    assert not retry.respect_retry_after_header


SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes and try again."
NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("status", "message", "headers", "wait"),
    [
        (403, "Resource not accessible by integration", {}, None),  # a read-only token
        # GitHub sends x-ratelimit-* on every answer: quota left means permissions, not a limit
        (403, "Resource not accessible by integration", {"X-RateLimit-Remaining": "42"}, None),
        (403, SECONDARY, {"Retry-After": "30"}, 30.0),
        (403, SECONDARY, {}, DEFAULT_RATE_LIMIT_WAIT),  # no hint: GitHub says wait a minute
        (403, "API rate limit exceeded for installation ID 1.", {}, DEFAULT_RATE_LIMIT_WAIT),
        (403, "x", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}, 42.0),
        (429, "Too Many Requests", {}, DEFAULT_RATE_LIMIT_WAIT),
        (429, "", {"retry-after": email.utils.formatdate(NOW + 7, usegmt=True)}, 7.0),
        (502, "Server Error", {"retry-after": "5"}, None),
        (404, "Not Found", {}, None),
    ],
)
def test_rate_limit_wait(
    status: int, message: str, headers: dict[str, str], wait: float | None
) -> None:
    from github.Requester import Requester

    exc = Requester.createException(status, headers, {"message": message})  # as PyGithub raises
    assert rate_limit_wait(exc, now=NOW) == wait


def test_wait_budget_respects_cap_and_deadline() -> None:
    import time

    assert WaitBudget(max_wait=5).allows(5) and not WaitBudget(max_wait=5).allows(5.1)
    # max_wait bounds all waits together, not each one
    assert WaitBudget(max_wait=60).allows(10, already=50)
    assert not WaitBudget(max_wait=60).allows(11, already=50)
    assert "with 50 s waited already" in WaitBudget(max_wait=60).describe(11, already=50)
    soon = WaitBudget(max_wait=60, deadline=time.monotonic() + 10, reserve=2)
    assert soon.allows(7) and not soon.allows(9)  # 9 s + a 2 s request would pass the deadline
    assert "the run's deadline leaves" in soon.describe(9)
    assert "more than github.max_wait (60 s)" in soon.describe(61)


def test_head_line_sits_under_the_marker() -> None:
    sha = "A" * 40
    body = with_marker("## relay-review\nverdict", head_sha=sha)
    assert body.split("\n")[:3] == [MARKER, head_line(sha), "## relay-review"]
    assert head_line(sha) == f"<!-- relay-review:head {'a' * 40} -->"
    assert head_of(body) == "a" * 40
    assert with_marker(body, head_sha=sha) == body  # idempotent
    assert with_marker("x", head_sha="not a sha") == f"{MARKER}\nx"
    # only the second line counts: a head line quoted further down (e.g. from the PR) is ignored
    assert head_of(f"{MARKER}\ntext\n{head_line(sha)}") is None


def test_marker_matches_the_derived_spec() -> None:
    assert derive_module().STICKY_MARKER == MARKER


def test_provenance_renders() -> None:
    pinned = PolicySource(kind="pinned", repo=POLICY_REPO, sha=SHA, path=POLICY_PATH, ref="v1.2.0")
    assert pinned.render() == f"{POLICY_REPO}@6dcb09b5b578 (resolved from v1.2.0)"
    assert str(pinned) == pinned.render()
    base = PolicySource(kind="base", repo=REPO, sha=SHA, path=POLICY_PATH, ref="main")
    assert base.render() == f"{REPO}@6dcb09b5b578 (base of the pull request: main)"


# --- against Prism -------------------------------------------------------------------------------


def test_prism_started_quickly(github_mock: MockGitHub) -> None:
    # Not a timing assertion on the code under test: a guard that the spec stays trimmed.
    assert github_mock.startup_seconds < 15


@pytest.mark.parametrize("ref", ["main", "v1.2.0", SHA, SHA.upper()])
def test_resolve_ref_branch_tag_sha(github_mock: MockGitHub, ref: str) -> None:
    repo = github_mock.client().get_repo(POLICY_REPO)
    assert resolve_ref(repo, ref) == SHA
    (call,) = github_mock.calls()
    assert call.method == "GET" and call.path == f"/repos/{POLICY_REPO}/commits/{ref}"


def test_resolve_ref_refuses_a_different_sha(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(POLICY_REPO)
    with pytest.raises(
        PolicyRefError, match=f"asked for commit {OTHER_SHA}, GitHub answered {SHA}"
    ):
        resolve_ref(repo, OTHER_SHA)


def test_resolve_ref_not_found(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/commits/", "code=404")
    repo = github_mock.client().get_repo(POLICY_REPO)
    with pytest.raises(
        PolicyRefError, match=r"cannot resolve ref 'nope' in octo-org/relay-policy: HTTP 404"
    ) as info:
        resolve_ref(repo, "nope")
    assert info.value.status == 404


def test_pinned_policy_with_min_ref(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/compare/", "example=relay-ahead")
    github_mock.prefer("GET", "/contents/", "example=relay-policy")
    policy = load_pinned_policy(
        github_mock.client(), POLICY_REPO, "v1.2.0", POLICY_PATH, min_ref="v1.0.0"
    )
    assert policy.text == derive_module().TEST_POLICY
    assert policy.source.render() == f"{POLICY_REPO}@6dcb09b5b578 (resolved from v1.2.0)"
    assert (policy.source.min_ref, policy.source.min_sha) == ("v1.0.0", SHA)
    calls = [(c.method, c.path, c.query) for c in github_mock.calls()]
    assert [(m, p) for m, p, _ in calls] == [
        ("GET", f"/repos/{POLICY_REPO}/commits/v1.2.0"),
        ("GET", f"/repos/{POLICY_REPO}/commits/v1.0.0"),
        ("GET", f"/repos/{POLICY_REPO}/compare/{SHA}...{SHA}"),
        ("GET", f"/repos/{POLICY_REPO}/contents/{POLICY_PATH}"),
    ]
    assert calls[-1][2] == f"ref={SHA}"  # read at the exact commit, not at the ref


@pytest.mark.parametrize("example", ["relay-identical", "relay-ahead"])
def test_descent_accepted(github_mock: MockGitHub, example: str) -> None:
    github_mock.prefer("GET", "/compare/", f"example={example}")
    repo = github_mock.client().get_repo(POLICY_REPO)
    assert check_descends(repo, OTHER_SHA, SHA) == example.removeprefix("relay-")
    (call,) = github_mock.calls()
    assert call.path == f"/repos/{POLICY_REPO}/compare/{OTHER_SHA}...{SHA}"


@pytest.mark.parametrize("example", [None, "relay-diverged"])
def test_ancestry_refused_names_both_shas(github_mock: MockGitHub, example: str | None) -> None:
    # GitHub's own (only) compare example has status "behind"; "diverged" is a relay-* copy.
    if example:
        github_mock.prefer("GET", "/compare/", f"example={example}")
    repo = github_mock.client().get_repo(POLICY_REPO)
    status = "diverged" if example else "behind"
    with pytest.raises(
        PolicyRefError, match=f"pinned commit {SHA} does not descend from the minimum {OTHER_SHA}"
    ):
        check_descends(repo, OTHER_SHA, SHA)
    with pytest.raises(PolicyRefError, match=f"compare status '{status}'"):
        check_descends(repo, OTHER_SHA, SHA)


def test_pinned_policy_refused_reads_nothing(github_mock: MockGitHub) -> None:
    with pytest.raises(PolicyRefError, match="does not descend"):
        load_pinned_policy(github_mock.client(), POLICY_REPO, "main", POLICY_PATH, min_ref="v1.0.0")
    assert not github_mock.calls(path_regex="/contents/")


def test_pinned_policy_missing_file_fails_closed(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/contents/", "code=404")
    with pytest.raises(
        PolicyRefError, match=r"no policy file '.github/relay-review.toml' at 6dcb09b5"
    ):
        load_pinned_policy(github_mock.client(), POLICY_REPO, "main", POLICY_PATH)


def test_githubs_own_file_example_is_refused(github_mock: MockGitHub) -> None:
    # GitHub's contents example carries base64 with literal "\n" escapes: it does not decode.
    with pytest.raises(PolicyRefError, match="undecodable content"):
        load_pinned_policy(github_mock.client(), POLICY_REPO, "main", POLICY_PATH)


def test_base_policy_read_at_base_sha(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/contents/", "example=relay-policy")
    policy = read_base_policy(github_mock.client(), REPO, POLICY_PATH, OTHER_SHA, "main")
    assert policy is not None
    assert policy.text == derive_module().TEST_POLICY
    assert policy.source.render() == f"{REPO}@{OTHER_SHA[:12]} (base of the pull request: main)"
    (call,) = github_mock.calls()
    assert (call.path, call.query) == (f"/repos/{REPO}/contents/{POLICY_PATH}", f"ref={OTHER_SHA}")


def test_base_policy_missing_means_defaults(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/contents/", "code=404")
    assert read_base_policy(github_mock.client(), REPO, POLICY_PATH, OTHER_SHA) is None


def test_base_policy_other_failures_fail_closed(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/contents/", "code=403")
    with pytest.raises(PolicyRefError, match="HTTP 403") as info:
        read_base_policy(github_mock.client(), REPO, POLICY_PATH, OTHER_SHA)
    assert info.value.status == 403
    with pytest.raises(PolicyRefError, match="not a full commit SHA"):
        read_base_policy(github_mock.client(), REPO, POLICY_PATH, "main")


def test_reads_are_retried_on_5xx_writes_are_not(github_mock: MockGitHub) -> None:
    gh = github_mock.client(retries=2)
    github_mock.stub("GET", "/contents/", 502, {"message": "Bad gateway"}, times=1)
    github_mock.prefer("GET", "/contents/", "example=relay-policy")
    assert read_base_policy(gh, REPO, POLICY_PATH, OTHER_SHA) is not None
    assert [c.status for c in github_mock.calls("GET", "/contents/")] == [502, 200]
    github_mock.stub("POST", "/issues/1/comments$", 502, {"message": "Bad gateway"}, times=None)
    with pytest.raises(GithubException) as info:
        gh.get_repo(REPO).get_issue(1).create_comment("x")
    assert info.value.status == 502
    assert len(github_mock.calls("POST")) == 1


def test_pull_request_files(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(REPO)
    files = list_files(repo, 7)
    assert files == [
        PullFile(
            filename="file1.txt",
            status="added",
            previous_filename=None,
            patch="@@ -132,7 +132,7 @@ module Test @@ -1000,7 +1000,7 @@ module Test",
            additions=103,
            deletions=21,
            changes=124,
        )
    ]
    (call,) = github_mock.calls()
    assert (call.path, call.query) == (f"/repos/{REPO}/pulls/7/files", "per_page=100")
    assert list_files(repo, 7, limit=0) == []


def test_pull_request_files_paginate_up_to_the_limit(github_mock: MockGitHub) -> None:
    # Prism's examples carry no Link header (derive_spec drops them): pages are stubbed here.
    def page(n: int) -> list[dict[str, object]]:
        return [
            {"filename": f"f{n}-{i}.py", "status": "modified", "additions": 1, "deletions": 0}
            | {"changes": 1, "sha": SHA, "blob_url": "", "raw_url": "", "contents_url": ""}
            for i in range(100)
        ]

    url = f"{github_mock.url}/repos/{REPO}/pulls/7/files?per_page=100"
    link = {"Link": f'<{url}&page=2>; rel="next", <{url}&page=30>; rel="last"'}
    github_mock.stub("GET", "/pulls/7/files$", 200, page(1), headers=link)
    link = {"Link": f'<{url}&page=3>; rel="next", <{url}&page=30>; rel="last"'}
    github_mock.stub("GET", "/pulls/7/files$", 200, page(2), headers=link)
    files = list_files(github_mock.client().get_repo(REPO), 7, limit=150)
    assert len(files) == 150
    assert files[0].patch is None and files[149].filename == "f2-49.py"
    assert [c.query for c in github_mock.calls()] == ["per_page=100", "page=2&per_page=100"]


def test_head_moved(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(REPO)
    assert head_sha(repo, 7) == SHA
    assert not head_moved(repo, 7, SHA)
    assert head_moved(repo, 7, OTHER_SHA)
    assert [c.path for c in github_mock.calls()] == [
        f"/repos/{REPO}/pulls/7"
    ] * 3  # re-read each time


def test_author_resolution(github_mock: MockGitHub) -> None:
    gh = github_mock.client()
    assert resolve_author(gh, "my-app[bot]") == "my-app[bot]"
    assert not github_mock.calls()
    assert resolve_author(gh) == "octocat"  # a user token: GET /user names it
    github_mock.prefer("GET", "^/user$", "code=403")  # GITHUB_TOKEN: "Resource not accessible"
    assert resolve_author(gh) == DEFAULT_AUTHOR


def test_sticky_created_when_absent(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(REPO)
    result = upsert_sticky(repo, 7, "## relay-review\nverdict")
    assert result.action == "created"
    assert [(c.method, c.path) for c in github_mock.calls()] == [
        ("GET", f"/repos/{REPO}/issues/7/comments"),
        ("POST", f"/repos/{REPO}/issues/7/comments"),
        ("GET", f"/repos/{REPO}/issues/7/comments"),  # one re-list: did another run race us?
    ]
    assert github_mock.calls("POST")[0].body == {"body": f"{MARKER}\n## relay-review\nverdict"}


def test_forged_marker_by_another_author_is_ignored(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/issues/7/comments$", "example=relay-forged")
    repo = github_mock.client().get_repo(REPO)
    assert find_sticky(repo, 7, DEFAULT_AUTHOR) == (None, 0)
    result = upsert_sticky(repo, 7, "verdict")
    assert result.action == "created"
    assert not github_mock.calls("PATCH")
    assert len(github_mock.calls("POST")) == 1


def test_own_sticky_is_edited_in_place(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/issues/7/comments$", "example=relay-sticky")
    repo = github_mock.client().get_repo(REPO)
    result = upsert_sticky(repo, 7, "new verdict")
    assert (result.action, result.comment_id, result.author) == ("updated", 3, DEFAULT_AUTHOR)
    (patch,) = github_mock.calls("PATCH")
    # the comment's own url, from the listing (GitHub's example lives in octocat/Hello-World)
    assert patch.path == "/repos/octocat/Hello-World/issues/comments/3"
    assert patch.body == {"body": f"{MARKER}\nnew verdict"}
    assert not github_mock.calls("POST")


def test_unchanged_sticky_is_not_rewritten(github_mock: MockGitHub) -> None:
    github_mock.prefer("GET", "/issues/7/comments$", "example=relay-sticky")
    repo = github_mock.client().get_repo(REPO)
    result = upsert_sticky(repo, 7, f"{MARKER}\nThe previous review.")
    assert result.action == "unchanged"
    assert [c.method for c in github_mock.calls()] == ["GET"]


def test_failed_post_relists_before_posting_again(github_mock: MockGitHub) -> None:
    # The POST answers 502 but "created" the comment: the second listing shows it.
    github_mock.prefer("GET", "/issues/7/comments$", "example=default", times=1)
    github_mock.prefer("GET", "/issues/7/comments$", "example=relay-sticky", times=1)
    github_mock.stub("POST", "/issues/7/comments$", 502, {"message": "Server Error"})
    repo = github_mock.client(retries=2).get_repo(REPO)
    result = upsert_sticky(repo, 7, "verdict")
    # Prism's listed sticky does not hold our body: it is edited, not counted as our creation
    assert (result.action, result.comment_id) == ("updated", 3)
    assert [c.method for c in github_mock.calls()] == ["GET", "POST", "GET", "PATCH"]


def test_failed_post_then_nothing_listed_posts_once_more(github_mock: MockGitHub) -> None:
    github_mock.stub("POST", "/issues/7/comments$", 502, {"message": "Server Error"})
    repo = github_mock.client().get_repo(REPO)
    assert upsert_sticky(repo, 7, "verdict").action == "created"
    assert [c.method for c in github_mock.calls()] == ["GET", "POST", "GET", "POST", "GET"]


def test_sticky_reader_asks_each_thing_once(github_mock: MockGitHub) -> None:
    """One run's reads of our comment: ``GET /user`` and the listing asked once each, however
    often the comment store and the publisher ask; a listing that failed is not kept."""
    github_mock.prefer("GET", "^/user$", "code=403")  # GITHUB_TOKEN
    # the first matching rule answers: one 502, then our sticky (Prism's relay-sticky example)
    github_mock.stub("GET", "/issues/7/comments$", 502, {"message": "Server Error"}, times=1)
    github_mock.prefer("GET", "/issues/7/comments$", "example=relay-sticky")
    gh = github_mock.client(retries=0)
    reader = StickyReader(gh, gh.get_repo(REPO), 7)
    with pytest.raises(GitHubEdgeError) as info:
        reader.body()
    assert info.value.status == 502  # not kept: asked again below
    assert reader.body() == f"{MARKER}\nThe previous review."
    assert reader.body() == f"{MARKER}\nThe previous review."
    assert reader.author() == reader.author() == DEFAULT_AUTHOR
    assert reader.find()[0] is not None and reader.find()[0].id == 3  # type: ignore[union-attr]
    assert [c.path for c in github_mock.calls()] == [
        "/user",
        *[f"/repos/{REPO}/issues/7/comments"] * 2,
    ]
    # another run's reader asks again: nothing is kept between runs
    other = StickyReader(gh, gh.get_repo(REPO), 7)
    assert other.author() == DEFAULT_AUTHOR and other.find()[0] is not None
    assert len(github_mock.calls("GET", "^/user$")) == 2


def test_read_only_token_on_comment(github_mock: MockGitHub) -> None:
    github_mock.prefer("POST", "/issues/7/comments$", "code=403")
    repo = github_mock.client().get_repo(REPO)
    with pytest.raises(GitHubEdgeError) as info:
        upsert_sticky(repo, 7, "verdict")
    assert info.value.status == 403
    assert len(github_mock.calls("POST")) == 1


def test_sticky_body_is_capped(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(REPO)
    fits = "x" * (MAX_BODY_CHARS - len(MARKER) - 1)
    assert upsert_sticky(repo, 7, fits).action == "created"
    assert len(github_mock.calls("POST")[0].body["body"]) == MAX_BODY_CHARS
    github_mock.reset()
    with pytest.raises(ValueError, match="65536"):
        upsert_sticky(repo, 7, fits + "x")
    assert not github_mock.calls()


COMMENTS = [
    LineComment(path="src/a.py", line=3, body="first"),
    LineComment(path="src/b.py", line=10, side="LEFT", body="second"),
    LineComment(path="src/c.py", line=99, body="third"),
]


def test_review_in_one_batch(github_mock: MockGitHub) -> None:
    repo = github_mock.client().get_repo(REPO)
    result = post_review(repo, 7, SHA, "relay-review found 3 issues", COMMENTS)
    assert (result.mode, result.posted, result.refused) == ("batch", COMMENTS, [])
    (call,) = github_mock.calls()
    assert (call.method, call.path) == ("POST", f"/repos/{REPO}/pulls/7/reviews")
    assert call.body == {
        "body": "relay-review found 3 issues",
        "event": "COMMENT",
        "commit_id": SHA,
        "comments": [
            {"path": "src/a.py", "line": 3, "side": "RIGHT", "body": "first"},
            {"path": "src/b.py", "line": 10, "side": "LEFT", "body": "second"},
            {"path": "src/c.py", "line": 99, "side": "RIGHT", "body": "third"},
        ],
    }


def test_review_422_falls_back_to_single_comments(github_mock: MockGitHub) -> None:
    github_mock.prefer("POST", "/pulls/7/reviews$", "code=422")
    github_mock.prefer("POST", "/pulls/7/comments$", "code=201", times=1)
    github_mock.prefer("POST", "/pulls/7/comments$", "code=422", times=1)
    repo = github_mock.client().get_repo(REPO)
    result = post_review(repo, 7, SHA, "body", COMMENTS)
    assert result.mode == "single"
    assert result.posted == [COMMENTS[0], COMMENTS[2]]
    assert [r.comment for r in result.refused] == [COMMENTS[1]]
    assert result.refused[0].reason.startswith("HTTP 422")
    singles = github_mock.calls("POST", "/pulls/7/comments$")
    assert [c.body for c in singles] == [
        {"body": c.body, "commit_id": SHA, "path": c.path, "line": c.line, "side": c.side}
        for c in COMMENTS
    ]


def test_review_forbidden_refuses_all(github_mock: MockGitHub) -> None:
    github_mock.prefer("POST", "/pulls/7/reviews$", "code=403")
    repo = github_mock.client().get_repo(REPO)
    result = post_review(repo, 7, SHA, "body", COMMENTS)
    assert (result.mode, result.posted, len(result.refused), result.uncertain) == (
        "none",
        [],
        3,
        False,
    )
    assert len(github_mock.calls()) == 1


def test_review_5xx_is_uncertain_and_not_reposted(github_mock: MockGitHub) -> None:
    github_mock.stub("POST", "/pulls/7/reviews$", 502, {"message": "Server Error"})
    repo = github_mock.client().get_repo(REPO)
    result = post_review(repo, 7, SHA, "body", COMMENTS)
    assert (result.mode, result.uncertain) == ("none", True)
    assert len(github_mock.calls()) == 1


def test_no_comments_no_review(github_mock: MockGitHub) -> None:
    result = post_review(github_mock.client().get_repo(REPO), 7, SHA, "body", [])
    assert result.mode == "none"
    assert not github_mock.calls()


def test_mock_flags_requests_that_break_the_spec(github_mock: MockGitHub) -> None:
    # A request Prism refuses must fail the test; here the check is called by hand and reset.
    gh = github_mock.client()
    with pytest.raises(GithubException):
        gh.get_repo(REPO).get_pull(7).create_review(event="SHOUT")
    problems = github_mock.problems()
    assert len(problems) == 1 and "must be equal to one of the allowed values" in problems[0]
    with pytest.raises(pytest.fail.Exception):
        github_mock.assert_clean()
    github_mock.reset()


def test_npm_lock_pins_prism() -> None:
    lock = json.loads((TOOLS / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@stoplight/prism-cli"]["version"] == "5.14.2"


def test_comments_overlay_keeps_state_and_prism_validation(github_mock: MockGitHub) -> None:
    overlay = github_mock.comments_overlay(OTHER_SHA)
    repo = github_mock.client().get_repo(REPO)
    assert head_sha(repo, 7) == OTHER_SHA  # the head comes from the overlay, not the example
    first = upsert_sticky(repo, 7, "one", head_sha=OTHER_SHA)
    assert first.action == "created"
    (stored,) = overlay.comments(REPO, 7)
    assert stored.id == first.comment_id and stored.body.endswith("\none")
    assert upsert_sticky(repo, 7, "two", head_sha=OTHER_SHA).action == "updated"
    assert [c.body.split("\n")[-1] for c in overlay.comments(REPO, 7)] == ["two"]
    assert overlay.kinds() == ["head", "list", "create", "list", "list", "edit"]
    # a request that breaks GitHub's spec is answered by Prism (422) and changes nothing
    url = f"{github_mock.url}/repos/{REPO}/issues/comments/{stored.id}"
    answer = requests.patch(url, json={"body": 5}, headers={"Authorization": "token t"}, timeout=10)
    assert answer.status_code == 422
    assert overlay.comments(REPO, 7)[0].body.endswith("\ntwo")
    problems = github_mock.problems()
    assert len(problems) == 1 and "request breaks GitHub's spec" in problems[0]
    github_mock.reset()  # the 422 was on purpose


# --------------------------------------------------------------------------- the error boundary


def test_client_errors_become_project_errors_at_one_boundary() -> None:
    """PyGithub's answers keep their status (and GitHub's message); no answer is a connection
    error whatever the block's error class, so a refused policy and an unreachable GitHub differ."""
    refused = PolicyRefError
    with pytest.raises(refused, match=r"^cannot read x: HTTP 404: Not Found$") as info:  # noqa: SIM117
        with github_errors("cannot read x", refused):
            raise GithubException(404, {"message": "Not Found"}, None)
    assert info.value.status == 404
    lost_match = r"^cannot read x: ConnectTimeout: slow$"
    with pytest.raises(GitHubConnectionError, match=lost_match) as lost:  # noqa: SIM117
        with github_errors("cannot read x", refused):
            raise requests.exceptions.ConnectTimeout("slow")
    assert lost.value.status is None and not isinstance(lost.value, PolicyRefError)
    assert isinstance(lost.value, GitHubEdgeError)
