"""``relay-review run`` end to end, as the runner starts it: ``INPUT_*`` and ``GITHUB_*`` set,
GitHub played by Prism serving GitHub's OpenAPI description (``github_mock``), the models by a
fault fleet on 127.0.0.1, events from ``@octokit/webhooks-examples``.

One test per family runs ``relay-review run`` as a subprocess (``run_action``: the console
script, its logging set-up, a real stdout and exit status): the main path, no route
(``on-unavailable: fail``), a refused input, a skipped event, and the secrets check. The others
run the action's entrypoint in this process over the same environment, Prism and fleet
(``run_in_process``).

Prism answers from GitHub's static examples: ``GET /pulls/{n}`` always says the head is
``6dcb09b5...`` (so the event's head is set to it, or to another SHA to simulate a push during the
run), and the issue-comments listing is chosen with ``Prefer`` (``relay-forged``,
``relay-sticky``). The PR's files and the policy files are stubbed with realistic bodies (Prism's
examples carry no usable patch, and its policy example is not a policy of this project's format).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from action_harness import (
    ACTION_DEFAULTS,
    DEFAULT_SHA,
    FAST,
    FILES,
    FLEET_KEY,
    NUMBER,
    OTHER_SHA,
    POLICY_PATH,
    POLICY_REPO,
    REPO,
    SECRETS,
    SHA,
    TOKEN,
    api_file,
    assert_nothing_posted,
    contents_body,
    fleet_reply,
    policy_toml,
    posted_bodies,
    pr_payload,
    run_action,
    run_in_process,
    standard_fleet,
)
from github_mock import BOT_LOGIN, MockGitHub, OverlayOp, webhook_examples
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER, head_line

pytestmark = pytest.mark.integration  # every test here starts a server or a subprocess


@pytest.fixture(scope="module")
def fleet() -> Iterator[FaultFleet]:
    with standard_fleet() as running:
        yield running


# --- the main path --------------------------------------------------------------------------


def test_review_posts_one_sticky_comment(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    run = run_action(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout + run.stderr
    # inline policy without orchestrator-repo is the whole policy: no policy file is read
    assert not github_mock.calls(path_regex=f"/contents/{POLICY_PATH}$")
    (body,) = posted_bodies(github_mock)
    assert len(github_mock.calls("POST", f"/repos/{REPO}/issues/{NUMBER}/comments$")) == 1
    assert body.startswith(MARKER + "\n")
    assert "Changes requested" in body  # computed from the verified high finding
    # issue 26: the link goes to the line in the pull request's diff (GitHub's anchor)
    anchor = hashlib.sha256(b"app/auth.py").hexdigest()
    assert f"https://github.com/{REPO}/pull/{NUMBER}/files#diff-{anchor}R11" in body
    assert "Unverified findings (1)" in body and "SQL injection" in body
    assert "assets/logo.png" in body  # not reviewed, and said so
    assert "SERVED" in body and "acme/acme/reviewer" in body  # the readiness table
    assert "inline policy" in body
    assert len(body) <= 65_536

    assert run.outputs == {
        "decision": "request_changes",
        "head-sha": SHA,
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


def test_a_slow_answer_behind_keepalives_costs_one_request_at_the_default_policy(
    tmp_path: Path, github_mock: MockGitHub
) -> None:
    """A good day on OpenRouter with a review-sized prompt: the best-ranked route sends
    ``: OPENROUTER PROCESSING`` every 0.5 s while its model reads the prompt, and answers after
    ~2 s (past the 0.5 s hedge delay). At the default policy (only discovery's timeout and the
    comment interval set), the action posts its review from that route without a probe of the
    other two routes (it cost a probe per route before ``hedge_answer_max``)."""
    accounts = {
        "acme": {"models": {"acme/reviewer": "keepalive@0.5,n=4"}, "api_key": FLEET_KEY},
        "pair": {"models": {"pair/reviewer": "healthy"}, "api_key": FLEET_KEY},
        "down": {"models": {"down/broken": "503"}, "api_key": FLEET_KEY},
    }
    head = "[discovery]\ntimeout = 3\n\n[github]\nwrite_interval = 0\n"
    with FaultFleet(accounts, reply=fleet_reply) as slow:
        policy = policy_toml(slow, "acme", "pair", "down", head=head)
        run = run_action(tmp_path, github_mock, {"policy": policy})
        chats = [r for r in slow.requests if r.is_chat]
    assert run.code == 0, run.stdout + run.stderr
    assert run.outputs["served-by"] == "acme/acme/reviewer"
    # the review, then its one repair round (this verdict cites a line outside the diff): both
    # on the slow route, no probe anywhere
    assert [(r.account, r.max_tokens != 16) for r in chats] == [("acme", True)] * 2, chats
    assert "Reply with the corrected full JSON object" in json.dumps(chats[1].body)
    (body,) = posted_bodies(github_mock)
    assert "Changes requested" in body and "served without a probe" in body


@pytest.mark.parametrize(("fail_on", "code"), [("request_changes", 1), ("high", 1)])
def test_fail_on(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, fail_on: str, code: int
) -> None:
    run = run_in_process(
        tmp_path, github_mock, {"policy": policy_toml(fleet, "acme"), "fail-on": fail_on}
    )
    assert run.code == code, run.stdout
    assert len(posted_bodies(github_mock)) == 1  # the comment is posted all the same
    assert run.outputs["decision"] == "request_changes" and run.outputs["head-sha"] == SHA


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
    run = run_in_process(tmp_path, github_mock, inputs)
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
    run = run_in_process(tmp_path, github_mock, inputs)
    assert run.code == 2
    error = next(line for line in run.stdout.splitlines() if line.startswith("::error"))
    assert f"the pinned commit {SHA} does not descend from the minimum {SHA}" in error
    assert not github_mock.calls(path_regex="/contents/")
    assert not github_mock.calls(path_regex="/files$")
    assert_nothing_posted(github_mock)
    assert run.outputs["decision"] == "error"


def test_repository_policy_read_at_the_default_branch_commit(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.stub("GET", "/contents/", 200, contents_body(REPO, policy_toml(fleet, "acme")))
    run = run_in_process(tmp_path, github_mock)
    assert run.code == 0, run.stdout
    (read,) = github_mock.calls("GET", f"/contents/{POLICY_PATH}$")
    assert (read.path, read.query) == (
        f"/repos/{REPO}/contents/{POLICY_PATH}",
        f"ref={DEFAULT_SHA}",
    )
    assert run.report is not None
    assert run.report["provenance"] == f"{REPO}@{DEFAULT_SHA[:12]} (default branch: master)"
    assert run.report["policy"]["note"] is None  # the pull request targets the default branch
    assert run.outputs["decision"] == "request_changes"


def test_missing_base_policy_means_defaults(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("GET", "/contents/", "code=404")
    run = run_in_process(tmp_path, github_mock, {"on-unavailable": "pass"})
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
    run = run_in_process(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout
    assert not github_mock.calls("PATCH")  # mallory's comment is left alone
    assert len(github_mock.calls("POST", f"/issues/{NUMBER}/comments$")) == 1


def test_own_sticky_is_edited_in_place(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("GET", f"/issues/{NUMBER}/comments$", "example=relay-sticky")
    run = run_in_process(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout
    (patch,) = github_mock.calls("PATCH")
    assert patch.path.endswith("/issues/comments/3")  # github-actions[bot]'s, not mallory's (2)
    assert not github_mock.calls("POST")
    assert run.report is not None and run.report["github"]["comment_action"] == "updated"


#: The default policy: only discovery's timeout and the comment interval set.
DEFAULT_POLICY_HEAD = "[discovery]\ntimeout = 3\n\n[github]\nwrite_interval = 0\n"
#: The head an earlier push's sticky comment was for.
EARLIER_SHA = "1111111111111111111111111111111111111111"


@pytest.mark.parametrize("earlier", [False, True], ids=["first-push", "sticky-of-an-earlier-push"])
def test_a_run_asks_github_each_thing_once(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, earlier: bool
) -> None:
    """An audit counted, per run on ``pull_request_target``, ``GET /user`` twice (403 with a
    ``GITHUB_TOKEN``): the comment store's read before the review and the publisher after it
    each asked for itself. The answer is now shared within the run, and nothing between runs
    (the second run, in this same process, asks again). The repeats left are the documented
    ones: the comments listed afresh before writing (a listing from before the review may be
    minutes old: a run writing from it would miss another run's new comment and make a second)
    and once more after a create (did a concurrent run create one too?), and the head read
    again before editing a sticky comment that names another head."""
    overlay = github_mock.comments_overlay(SHA)
    if earlier:
        overlay.seed(REPO, NUMBER, f"{MARKER}\n{head_line(EARLIER_SHA)}\nan earlier verdict")
    policy = policy_toml(fleet, "acme", head=DEFAULT_POLICY_HEAD)
    listing, pull = f"/repos/{REPO}/issues/{NUMBER}/comments", f"/repos/{REPO}/pulls/{NUMBER}"
    for n in (1, 2):  # the second run finds the first one's comment, for its own head
        github_mock.reset()  # the log and the stubs go; GitHub's state (the overlay) stays
        github_mock.overlay = overlay
        run = run_in_process(tmp_path / f"run{n}", github_mock, {"policy": policy})
        assert run.code == 0, run.stdout + run.stderr
        calls = github_mock.calls()
        seen = [str(c) for c in calls]
        before_write = calls[: next(i for i, c in enumerate(calls) if c.method != "GET")]
        gets = Counter(c.path for c in calls if c.method == "GET")
        created = len(github_mock.calls("POST", f"^{listing}$"))
        assert gets["/user"] == 1, seen
        # one page: one GET for the store's read, one afresh before writing
        assert [c.path for c in before_write].count(listing) == 2, seen
        assert gets[listing] == 2 + created, seen  # + the check after a create
        assert gets[pull] == (2 if earlier and n == 1 else 1), seen  # + the re-read
        repeated = [p for p, count in gets.items() if count > 1 and p not in (listing, pull)]
        assert repeated == [], seen
        assert run.report is not None
        action = run.report["github"]["comment_action"]
        assert action == ("created" if n == 1 and not earlier else "updated"), seen
    (ours,) = [c for c in overlay.comments(REPO, NUMBER) if c.login == BOT_LOGIN]
    assert ours.body.split("\n")[1] == head_line(SHA)


def test_a_sticky_deleted_during_the_run_is_posted_again(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    """The run lists the comments before its review; someone deletes our sticky comment while
    it reviews. The publisher lists them afresh, finds none, and posts the verdict as a new
    comment (a listing kept from before the review would have edited a deleted comment)."""
    overlay = github_mock.comments_overlay(SHA)
    gone = overlay.seed(REPO, NUMBER, f"{MARKER}\n{head_line(EARLIER_SHA)}\nan earlier verdict")

    def delete_after_the_head_check(op: OverlayOp) -> None:
        if op.kind == "head":
            overlay.remove(gone)

    overlay.after.append(delete_after_the_head_check)
    policy = policy_toml(fleet, "acme", head=DEFAULT_POLICY_HEAD)
    run = run_in_process(tmp_path, github_mock, {"policy": policy})
    assert run.code == 0, run.stdout + run.stderr
    assert overlay.kinds() == ["list", "list_repo", "head", "list", "create", "list"]
    (ours,) = overlay.comments(REPO, NUMBER)
    assert ours.id != gone and "SQL injection" in ours.body
    assert run.report is not None and run.report["github"]["comment_action"] == "created"
    assert run.outputs["comment-url"].endswith(f"#issuecomment-{ours.id}")


def test_head_moved_posts_nothing(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    """Nothing is posted for the stale head, and the ``decision`` output says ``stale``, not the
    older head's verdict: a workflow acting on ``approve`` would act on code no model saw (the
    output said the verdict until a helper's audit)."""
    payload = pr_payload(head_sha=OTHER_SHA)  # GitHub now says the head is SHA
    run = run_in_process(
        tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")}, payload=payload
    )
    assert run.code == 0, run.stdout
    assert_nothing_posted(github_mock)
    assert f"the head moved from {OTHER_SHA} to {SHA}" in run.stdout
    assert run.report is not None and run.report["github"]["not_posted"] == "head_moved"
    assert run.outputs["comment-url"] == ""
    assert "Not posted" in run.summary
    assert run.report["decision"] == "request_changes"  # the report keeps what was concluded
    assert run.outputs["decision"] == "stale" and run.outputs["head-sha"] == OTHER_SHA


def test_huge_report_comment_is_truncated(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    binaries = [
        api_file(f"assets/generated/{'deep/' * 30}image-{i:04d}.png", "added", None, 0, 0)
        for i in range(1000)
    ]
    run = run_in_process(
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
    run = run_in_process(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
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
    inputs["inline-min-severity"] = "low"  # both findings go inline (the default floor: medium)
    run = run_in_process(tmp_path, github_mock, inputs)
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
    run = (run_action if on_unavailable == "fail" else run_in_process)(
        tmp_path, github_mock, inputs
    )
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
    run = (run_action if inputs == {"github-token": ""} else run_in_process)(
        tmp_path, github_mock, inputs
    )
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
    run = run_in_process(tmp_path, github_mock, payload=payload)
    assert run.code == 0
    assert "is a draft; skipped" in run.stdout
    assert not github_mock.calls()
    assert "is a draft; skipped" in run.summary


def test_author_association_refused(tmp_path: Path, github_mock: MockGitHub) -> None:
    payload = pr_payload(author_association="FIRST_TIME_CONTRIBUTOR")
    run = run_in_process(tmp_path, github_mock, payload=payload)
    assert run.code == 0
    assert "FIRST_TIME_CONTRIBUTOR is not in author-associations" in run.stdout
    assert not github_mock.calls()
    assert run.outputs["decision"] == "skipped"


# --- secrets --------------------------------------------------------------------------------


def test_secrets_never_appear_anywhere(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # "leaky" echoes the Authorization header it received in its 500 error message.
    # eager preflight: the leaky route must get a request (a probe) for its echo to be seen
    head = FAST.replace("[preflight]\n", '[preflight]\nmode = "eager"\n')
    inputs = {"policy": policy_toml(fleet, "acme", "leaky", head=head), "inline-comments": "true"}
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
    from relay_review.config.inputs import read_action_inputs

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
    from relay_review.config.inputs import read_action_inputs
    from relay_review.errors import UsageError

    with pytest.raises(UsageError) as info:
        read_action_inputs(_env(**{name: value}, orchestrator_ref="main" if "repo" in name else ""))
    assert message in str(info.value)


def test_orchestrator_repo_needs_a_ref() -> None:
    from relay_review.config.inputs import read_action_inputs
    from relay_review.errors import UsageError

    with pytest.raises(UsageError, match="input `orchestrator-ref` is required when"):
        read_action_inputs(_env(orchestrator_repo=POLICY_REPO))


def test_inline_policy_layers_under_inputs() -> None:
    from relay_review.config.inputs import read_action_inputs
    from relay_review.github.event import parse_event
    from relay_review.pipeline.policy import resolve_policy

    event = parse_event("pull_request_target", pr_payload())
    inline = '[serving]\nattempt = 100\n\n[catalog]\npool = "auto"\nlimit = 9\n'
    inputs = read_action_inputs(_env(policy=inline, limit="5", deadline="30", exclude="*.lock"))
    policy, origin = resolve_policy(None, inputs, event)  # inline only: no GitHub call at all
    assert (policy.catalog.pool, policy.catalog.limit) == ("auto", 5)  # inputs win
    assert (policy.serving.deadline, policy.serving.attempt) == (30, 30)  # attempt capped
    assert policy.review.exclude == ["*.lock"]
    assert origin.provenance == "inline policy (workflow input `policy`)"
    assert origin.summary().input_overrides["catalog"] == {"limit": 5}


def test_redaction_covers_nested_data(capsys: pytest.CaptureFixture[str]) -> None:
    from relay_review.github.log import Secrets

    secrets = Secrets()
    secrets.add([FLEET_KEY, "", "  ", FLEET_KEY])
    assert capsys.readouterr().out == f"::add-mask::{FLEET_KEY}\n"  # once, blanks skipped
    data = {"a": [f"Bearer {FLEET_KEY}", 3, {FLEET_KEY: None}], "b": None}
    assert secrets.redact_data(data) == {"a": ["Bearer ***", 3, {"***": None}], "b": None}


# --- the JSON report keeps its documented shape ----------------------------------------------


def documented_report() -> dict:
    """The JSON example under README's "The JSON report" heading."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The JSON report", 1)[1]
    return json.loads(section.split("```json", 1)[1].split("```", 1)[0])


#: Objects whose keys are data (account names, exclusion reasons), not part of the shape.
DATA_KEYED = {
    "selected_by_account",
    "excluded",
    "input_overrides",
    "requests_by_account",
    "keys",
    "shared_day",
}


def key_shape(value: object, name: str = "") -> object:
    """Keys of every object, recursively; a list is the shape of its first item."""
    if isinstance(value, dict):
        if name in DATA_KEYED:
            return "object"
        return [(k, key_shape(v, k)) for k, v in value.items()]
    if isinstance(value, list):
        return [key_shape(value[0], name)] if value else []
    return "value"


def test_json_report_has_the_documented_shape(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    run = run_in_process(tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")})
    assert run.code == 0, run.stdout + run.stderr
    documented = key_shape(documented_report())
    actual = key_shape(run.report)
    assert [k for k, _ in actual] == [k for k, _ in documented]  # the same keys, in order
    for (key, got), (_, want) in zip(actual, documented, strict=True):
        assert got == want, key
