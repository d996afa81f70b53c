"""GitHub faults (issue 6, item 2), end to end through ``relay-review run``.

GitHub is Prism serving GitHub's OpenAPI description, with the stateful comments overlay
(``github_mock.comments_overlay``) wherever "no duplicate" must be seen in GitHub's state rather
than guessed from the requests: the overlay keeps the comments, each request still passes
Prism's validation, and its faults can let a write land and still answer 502 (or answer late).
The policy bounds GitHub calls tightly (``[github] timeout = 2``, ``max_wait = 5``).

One run per fault family (comment create, comment edit, rate limit, the check after posting,
read-only token, inline 422) starts ``relay-review run`` as a subprocess, as the runner does; the
others run the action's entrypoint in this process (:func:`action_harness.run_in_process`: the
same environment, the same Prism and overlay, a real fleet).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from action_harness import (
    FAST,
    FILES,
    NUMBER,
    REPO,
    SHA,
    api_file,
    policy_toml,
    posted_bodies,
    run_action,
    run_in_process,
)
from github_mock import BOT_LOGIN, CommentsOverlay, MockGitHub, StoredComment
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER, head_line

GITHUB_BOUNDS = "timeout = 2\nmax_wait = 5\n"  # appended to FAST, whose last table is [github]
SECONDARY = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you "
    "try again. If you reach out to GitHub Support for help, please include the request ID "
    "0000:0000:0000000:0000000:00000000.",
    "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
    "status": "403",
}
READ_ONLY = {
    "message": "Resource not accessible by integration",
    "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
    "status": "403",
}


def _inputs(fleet: FaultFleet, account: str = "acme", **more: str) -> dict[str, str]:
    # state: none keeps the comment calls these faults are scheduled against exactly the
    # publisher's (the comment store's one read before the review is tested in test_memory_action)
    policy = policy_toml(fleet, account, head=FAST + GITHUB_BOUNDS)
    return {"policy": policy, "state": "none", **more}


def _ours(overlay: CommentsOverlay) -> list[StoredComment]:
    return [
        c
        for c in overlay.comments(REPO, NUMBER)
        if c.body.startswith(MARKER) and c.login == BOT_LOGIN
    ]


# --- 502 / timeout on the comment write: retried, never duplicated -----------------------------


@pytest.mark.parametrize(
    ("landed", "posts"),
    [(True, 1), (False, 2)],
    ids=["502-after-the-comment-landed", "502-before-it-landed"],
)
def test_comment_create_502_is_not_duplicated(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, landed: bool, posts: int
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    overlay.fault("create", 502, {"message": "Server Error"}, apply=landed)
    run = (run_in_process if landed else run_action)(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 0, run.stdout + run.stderr
    assert "creating the sticky comment failed (HTTP 502); listing comments" in run.stdout
    (comment,) = _ours(overlay)  # exactly one sticky on the PR
    assert head_line(SHA) in comment.body and "SQL injection" in comment.body
    # re-listed after the failure; a second POST only when the first did not land
    assert overlay.kinds().count("create") == posts
    assert overlay.kinds()[:3] == ["head", "list", "create"]
    assert overlay.kinds()[3] == "list"
    assert "edit" not in overlay.kinds()  # the landed comment already holds this body
    assert run.report is not None and run.report["github"]["comment_action"] == "created"
    assert run.outputs["comment-url"] == comment_url(comment)


def comment_url(comment: StoredComment) -> str:
    return f"https://github.com/{comment.repo}/pull/{comment.number}#issuecomment-{comment.id}"


def test_comment_create_timeout_is_not_duplicated(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # The POST lands, but its answer comes after github.timeout (2 s): the client gives up.
    overlay = github_mock.comments_overlay(SHA)
    overlay.fault("create", delay=4.5, apply=True)
    run = run_in_process(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 0, run.stdout + run.stderr
    assert "creating the sticky comment failed (" in run.stdout  # a read timeout
    (comment,) = _ours(overlay)
    assert "SQL injection" in comment.body
    assert overlay.kinds().count("create") == 1  # found on the re-list: not posted twice
    assert run.report is not None and run.report["github"]["comment_action"] == "created"


@pytest.mark.parametrize(
    ("status", "delay", "landed"),
    [(502, 0.0, False), (None, 4.5, True)],
    ids=["edit-502", "edit-timeout-after-it-landed"],
)
def test_comment_edit_failure_is_retried_once(
    tmp_path: Path,
    github_mock: MockGitHub,
    fleet: FaultFleet,
    status: int | None,
    delay: float,
    landed: bool,
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    old = overlay.seed(REPO, NUMBER, f"{MARKER}\nThe previous review.")
    answer = {"message": "Bad Gateway"} if status else None
    overlay.fault("edit", status, answer, delay=delay, apply=landed)
    run = run_in_process(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 0, run.stdout + run.stderr
    assert overlay.kinds().count("edit") == 2  # PATCH is idempotent: tried once more
    assert "create" not in overlay.kinds()
    (comment,) = _ours(overlay)
    assert comment.id == old and "SQL injection" in comment.body
    assert run.report is not None and run.report["github"]["comment_action"] == "updated"


def test_comment_edit_failing_twice_is_reported(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    overlay.seed(REPO, NUMBER, f"{MARKER}\nThe previous review.")
    overlay.fault("edit", 502, {"message": "Bad Gateway"}, times=None)
    run = run_action(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 1, run.stdout  # the comment was not posted
    assert overlay.kinds().count("edit") == 2  # bounded: two tries, no more
    error = next(line for line in run.stdout.splitlines() if line.startswith("::error"))
    assert "the comment was not posted" in error and "HTTP 502" in error
    assert run.report is not None and run.report["github"]["not_posted"] == "failed"
    assert "Not posted" in run.summary and "Changes requested" in run.summary


# --- secondary rate limit: waited out within the bound, or reported ----------------------------


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (403, SECONDARY, {"retry-after": "2"}),
        (429, {"message": "Too Many Requests"}, {"x-ratelimit-remaining": "0"}),
    ],  # the 429's x-ratelimit-reset (epoch seconds) is set when the mock answers
    ids=["403-secondary-retry-after", "429-ratelimit-reset"],
)
def test_rate_limit_within_the_bound_is_waited_out(
    tmp_path: Path,
    github_mock: MockGitHub,
    fleet: FaultFleet,
    status: int,
    body: dict[str, str],
    headers: dict[str, str],
) -> None:
    overlay = github_mock.comments_overlay(SHA)

    def answer_headers() -> dict[str, str]:
        if "x-ratelimit-remaining" not in headers:
            return headers
        return {**headers, "x-ratelimit-reset": str(int(time.time()) + 2)}  # in 1 to 2 s

    overlay.fault("create", status, body, answer_headers)
    # a roomy run deadline: the wait must fit it even when a loaded machine slows the review
    run = run_in_process(tmp_path, github_mock, _inputs(fleet, deadline="60"))
    assert run.code == 0, run.stdout + run.stderr
    waits = [line for line in run.stdout.splitlines() if "GitHub rate limit" in line]
    assert len(waits) == 1 and f"(HTTP {status}) on comment on {REPO}#{NUMBER}" in waits[0]
    assert "then trying once more" in waits[0]
    creates = [op for op in overlay.ops if op.kind == "create"]
    assert [op.status for op in creates] == [status, 201]
    assert creates[1].at - creates[0].at >= 0.9  # it did wait (a floor, not a speed goal)
    (comment,) = _ours(overlay)
    assert "SQL injection" in comment.body
    assert "read_only" not in run.stdout and "::warning::relay-review: the token" not in run.stdout
    assert run.report is not None and run.report["github"]["not_posted"] is None


def test_rate_limit_beyond_the_bound_is_reported(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    overlay.fault("create", 403, SECONDARY, {"retry-after": "120"})
    run = run_action(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 1, run.stdout  # documented: the comment was not posted
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1
    assert "GitHub asked to wait 120 s" in errors[0]
    assert "more than github.max_wait (5 s)" in errors[0]
    assert "the verdict is in the step summary" in errors[0].lower()
    assert "the token cannot comment" not in run.stdout  # not mistaken for a read-only token
    assert overlay.kinds().count("create") == 1 and not _ours(overlay)
    assert run.report is not None
    assert run.report["github"]["not_posted"] == "rate_limited"
    assert "120" in run.report["github"]["detail"]
    assert run.report["run_elapsed_s"] < 60  # it did not sit out the 120 s
    assert "Not posted" in run.summary and "rate limit" in run.summary
    assert "Changes requested" in run.summary and "SQL injection" in run.summary
    assert run.outputs["comment-url"] == "" and run.outputs["decision"] == "request_changes"


@pytest.mark.parametrize("status", [403, 502], ids=["rate-limited", "bad-gateway"])
def test_a_failed_check_after_posting_still_reports_the_comment(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, status: int
) -> None:
    """The comment landed; the re-list that looks for a concurrent run's comment fails (a
    rate limit GitHub often sends right after a write, or a 502): the run reports the posted
    comment, warns that convergence was not checked, and exits 0."""
    overlay = github_mock.comments_overlay(SHA)
    headers = {"retry-after": "120"} if status == 403 else {}
    body = SECONDARY if status == 403 else {"message": "Bad gateway"}
    overlay.fault("list", status, body, headers, after=1, times=None)
    run = (run_action if status == 403 else run_in_process)(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 0, run.stdout
    (comment,) = _ours(overlay)
    assert overlay.kinds().count("create") == 1
    assert run.report is not None and run.report["github"]["not_posted"] is None
    assert run.report["github"]["comment_action"] == "created"
    assert run.outputs["comment-url"].endswith(str(comment.id))
    assert "checking for a concurrent run's comment failed" in run.stdout
    assert "Not posted" not in run.summary


def test_rate_limit_past_the_run_deadline_is_reported(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # Under github.max_wait (5 s), but the run's deadline (20 s) has no room left for it.
    overlay = github_mock.comments_overlay(SHA)
    overlay.fault("create", 403, SECONDARY, {"retry-after": "4"})
    inputs = {"policy": policy_toml(fleet, "acme", head=FAST + GITHUB_BOUNDS), "deadline": "6"}
    run = run_in_process(tmp_path, github_mock, inputs)
    assert run.code == 1, run.stdout
    error = next(line for line in run.stdout.splitlines() if line.startswith("::error"))
    assert "GitHub asked to wait 4 s" in error and "the run's deadline leaves" in error
    assert overlay.kinds().count("create") == 1 and not _ours(overlay)
    assert run.report is not None and run.report["github"]["not_posted"] == "rate_limited"


# --- read-only token: the step summary holds the verdict ---------------------------------------


@pytest.mark.parametrize("source", ["prism-example", "github-headers"])
def test_read_only_token_falls_back_to_the_step_summary(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, source: str
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    if source == "prism-example":  # GitHub's own 403 example, answered by Prism
        github_mock.prefer("POST", f"/issues/{NUMBER}/comments$", "code=403")
    else:  # as GitHub sends it: rate-limit headers on every answer, with quota left
        reset = str(int(time.time()) + 3600)
        quota = {"x-ratelimit-limit": "1000", "x-ratelimit-remaining": "998"}
        overlay.fault("create", 403, READ_ONLY, {**quota, "x-ratelimit-reset": reset})
    run_ = run_action if source == "prism-example" else run_in_process
    run = run_(tmp_path, github_mock, _inputs(fleet))
    assert run.code == 0, run.stdout
    assert "::warning::relay-review: the token cannot comment" in run.stdout
    assert "GitHub rate limit" not in run.stdout  # no wait: a 403 without a hint is permissions
    assert len(github_mock.calls("POST", f"/issues/{NUMBER}/comments$")) == 1
    assert not _ours(overlay)
    assert "Not posted" in run.summary and "Changes requested" in run.summary
    assert "SQL injection" in run.summary
    assert run.report is not None and run.report["github"]["not_posted"] == "read_only"
    assert run.outputs["comment-url"] == "" and run.outputs["decision"] == "request_changes"


# --- 422 on inline comments: the sticky comment is still complete ------------------------------


def test_inline_422_leaves_the_sticky_comment_complete(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    github_mock.prefer("POST", f"/pulls/{NUMBER}/reviews$", "code=422")  # the batch refused
    github_mock.prefer("POST", f"/pulls/{NUMBER}/comments$", "code=422", times=None)
    # both findings inline (one is low: below the default floor, medium)
    inputs = _inputs(fleet, "pair", **{"inline-comments": "true", "inline-min-severity": "low"})
    run = run_action(tmp_path, github_mock, inputs)
    assert run.code == 0, run.stdout
    assert run.report is not None
    review = run.report["github"]["review"]
    assert (review["mode"], review["posted"], len(review["refused"])) == ("single", 0, 2)
    warnings = [line for line in run.stdout.splitlines() if "it stays in the sticky" in line]
    assert len(warnings) == 2
    (body,) = [b for b in posted_bodies(github_mock) if b.startswith(MARKER)]
    # every verified finding is in the sticky comment, with its location
    for finding in run.report["findings"]:
        assert finding["message"] in body
        assert f"R{finding['line']})" in body  # the link to its line in the diff
    assert len(run.report["findings"]) == 2 and run.outputs["findings"] == "2"


# --- a file the API sent without a patch -------------------------------------------------------


def test_file_without_patch_is_listed_as_not_reviewed(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # A large text file: modified, thousands of changes, and GitHub omits its patch.
    huge = api_file("app/huge_module.py", "modified", None, 4000, 1200)
    run = run_in_process(tmp_path, github_mock, _inputs(fleet), files=[FILES[0], huge])
    assert run.code == 0, run.stdout
    assert run.report is not None
    by_path = {f["path"]: f for f in run.report["files"]}
    assert by_path["app/auth.py"]["status"] == "reviewed"
    assert by_path["app/huge_module.py"]["status"] == "skipped"
    assert by_path["app/huge_module.py"]["reason"] == "no patch from the API (binary or too large)"
    (body,) = posted_bodies(github_mock)
    assert "Files not reviewed (1 of 2)" in body
    line = next(ln for ln in body.splitlines() if "app/huge_module.py" in ln)
    assert "no patch from the API \\(binary or too large\\)" in line  # Markdown-escaped
    assert "SQL injection" in body  # the file with a patch was reviewed all the same
    assert run.report["partial"].startswith("1 of 2 files change content no model was shown")
    assert "> **Partial review:** 1 of 2 files change content no model was shown" in body
