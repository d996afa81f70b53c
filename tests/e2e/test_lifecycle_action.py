"""Findings across pushes through ``relay-review run`` (issue 24): REST through Prism with the
stateful comments overlay (the sticky comment and its memory payload), GraphQL through the
schema-validating mock (review threads, replies, resolutions), the models from a local fleet.

Push 1 posts two findings; push 2 changes the line of one (its thread gets the reply and is
resolved; the other is not posted again); a commenter without an allowed association tries to
dismiss the second and cannot; a maintainer dismisses it; push 3 posts neither and the sticky
comment shows 1 fixed, 1 dismissed, 0 open.

The first push of the three-push story starts ``relay-review run`` as a subprocess, as the
runner does; the other runs use the action's entrypoint in this process
(:func:`action_harness.run_in_process`: the same environment, Prism, GraphQL mock and fleet).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FAST,
    FLEET_KEY,
    NUMBER,
    QUERY_LINE,
    REPO,
    SECRETS,
    SHA,
    api_file,
    finding,
    policy_toml,
    pr_payload,
    run_action,
    run_in_process,
)
from github_mock import BOT_LOGIN, MockGitHub
from graphql_mock import BOT, GraphQLMock
from relay_review.github.comment import MARKER
from relay_review.github.threads import parse_marker
from relay_review.state.stores import payload_of

pytestmark = pytest.mark.integration

SHA2 = "2222222222222222222222222222222222222222"
SHA3 = "3333333333333333333333333333333333333333"
SAFE_LINE = 'query = "SELECT * FROM users WHERE name = %s"'
ROWS_LINE = "rows = db.execute(query)"


def patch(line11: str, line13: str = "if rows:") -> str:
    return (
        "@@ -10,4 +10,6 @@ def login(request):\n"
        '     user = find_user(request.form["name"])\n'
        '-    if user.check(request.form["password"]):\n'
        f"+    {line11}\n"
        f"+    {ROWS_LINE}\n"
        f"+    {line13}\n"
        "         return ok(user)\n"
        "     return denied()"
    )


def files(line11: str, line13: str = "if rows:") -> list[dict[str, Any]]:
    return [api_file("app/auth.py", "modified", patch(line11, line13), 3, 1)]


#: What the model says, per push (the test sets it before each run).
VERDICT: dict[str, Any] = {}

SQL = finding(11, QUERY_LINE, "high", "SQL injection: the name is formatted into SQL.")
CURSOR = finding(12, ROWS_LINE, "medium", "The cursor is never closed.")


def reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return json.dumps(VERDICT)


@pytest.fixture
def fleet() -> Iterator[Any]:
    from relay_review.drill import FaultFleet

    accounts = {"acme": {"models": {"acme/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=reply) as running:
        yield running


def sticky(overlay: Any) -> str:
    (ours,) = [c for c in overlay.comments(REPO, NUMBER) if c.login == BOT_LOGIN]
    assert ours.body.startswith(MARKER)
    return ours.body


def reviews_posted(mock: MockGitHub) -> list[dict[str, Any]]:
    return [c.body for c in mock.calls("POST", f"/pulls/{NUMBER}/reviews$")]


def github_creates_threads(gql: GraphQLMock, mock: MockGitHub) -> None:
    """What GitHub does with a posted review: a thread per line comment, by our bot."""
    for review in reviews_posted(mock):
        for c in review["comments"]:
            side = c.get("side", "RIGHT")
            gql.add_thread(REPO, NUMBER, c["path"], c["line"], c["body"], BOT, "NONE", side)


def next_push(mock: MockGitHub, overlay: Any, gql: GraphQLMock, head: str) -> None:
    mock.reset()  # the last run's stubs and log go; GitHub's state (comments, threads) stays
    mock.overlay = overlay
    mock.graphql = gql
    overlay.head = head


def test_three_pushes_fix_one_finding_and_honour_a_dismissal(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    gql = github_mock.graphql
    inputs = {"policy": policy_toml(fleet, "acme", head=FAST), "inline-comments": "true"}

    # push 1: two findings, both posted once, each with its hidden marker
    VERDICT.update(summary="Two problems.", findings=[SQL, CURSOR])
    one = run_action(tmp_path / "one", github_mock, inputs, files=files(QUERY_LINE))
    assert one.code == 0, one.stdout + one.stderr
    assert one.report is not None
    assert [f["state"] for f in one.report["findings"]] == ["new", "new"]
    (review,) = reviews_posted(github_mock)
    assert [c["line"] for c in review["comments"]] == [11, 12]
    marks = [parse_marker(c["body"]) for c in review["comments"]]
    assert [m and m[0] for m in marks] == [f["fingerprint"] for f in one.report["findings"]]
    assert all(m and m[2] == SHA[:12] for m in marks)
    first_body = sticky(overlay)
    assert "**Across pushes:**" not in first_body  # nothing to tell on a first push
    assert first_body.count(f"_(new since the last push, first seen at `{SHA[:12]}`)_") == 2
    github_creates_threads(gql, github_mock)
    sql_thread, cursor_thread = gql.all_threads()

    # push 2: the SQL line is fixed; the model reports only the cursor
    next_push(github_mock, overlay, gql, SHA2)
    VERDICT.update(summary="One problem left.", findings=[CURSOR])
    two = run_in_process(
        tmp_path / "two",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA2),
        files=files(SAFE_LINE),
    )
    assert two.code == 0, two.stdout + two.stderr
    assert reviews_posted(github_mock) == []  # the cursor finding is not posted again
    assert sql_thread.resolved and sql_thread.resolved_by == BOT
    assert sql_thread.comments[-1].body.startswith(f"relay-review: fixed in `{SHA2[:12]}`")
    assert not cursor_thread.resolved and len(cursor_thread.comments) == 1
    assert two.report is not None
    assert [(f["state"], f["first_seen"]) for f in two.report["findings"]] == [("open", SHA[:12])]
    assert two.report["lifecycle"]["counts"] == {"new": 0, "open": 1, "fixed": 1, "dismissed": 0}
    assert two.report["github"]["review"]["resolved"] == 1
    body = sticky(overlay)
    assert "0 new since the last push · 1 still open · 1 fixed · 0 dismissed" in body
    assert f"still open, first seen at `{SHA[:12]}`" in body

    # a drive-by commenter (no allowed association) cannot dismiss it
    gql.reply(cursor_thread, "/relay-review dismiss", ("User", "drive-by"), "CONTRIBUTOR")
    cursor_thread.comments[0].thumbs_down.append(("User", "drive-by"))
    next_push(github_mock, overlay, gql, SHA2)
    since = len(gql.requests)
    still = run_in_process(
        tmp_path / "still",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA2),
        files=files(SAFE_LINE),
    )
    assert still.code == 0, still.stdout + still.stderr
    assert still.report is not None
    assert [f["state"] for f in still.report["findings"]] == ["open"]
    assert reviews_posted(github_mock) == [] and not gql.mutations("resolveReviewThread", since)

    # a maintainer dismisses it; push 3 posts neither
    gql.reply(
        cursor_thread, "False positive: the context manager closes it.", ("User", "maint"), "MEMBER"
    )
    next_push(github_mock, overlay, gql, SHA3)
    since = len(gql.requests)
    three = run_in_process(
        tmp_path / "three",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA3),
        files=files(SAFE_LINE),
    )
    assert three.code == 0, three.stdout + three.stderr
    assert reviews_posted(github_mock) == []
    assert not gql.mutations(
        "addPullRequestReviewThreadReply", since
    )  # nothing to say, nothing to close
    assert three.report is not None
    assert [f["state"] for f in three.report["findings"]] == ["dismissed"]
    assert three.report["lifecycle"]["counts"] == {
        "new": 0,
        "open": 0,
        "fixed": 1,
        "dismissed": 1,
    }
    body = sticky(overlay)
    assert "0 new since the last push · 0 still open · 1 fixed · 1 dismissed" in body
    assert "(dismissed, first seen at" in body
    # memory (the sticky comment's payload) keeps both states, keyed by fingerprint
    memory = payload_of(body)
    assert memory is not None
    states = {k.rsplit(":", 1)[-1]: v.state for k, v in memory.findings.items()}
    assert sorted(states.values()) == ["dismissed", "fixed"]
    assert set(states) == {f["fingerprint"] for f in one.report["findings"]}
    assert FLEET_KEY not in body
    # every GraphQL document sent was valid for GitHub's schema (the fixture checks it too)
    assert gql.requests and not gql.problems
    # no secret in anything sent to GitHub's GraphQL API or kept in its threads
    sent = json.dumps([[r.query, r.variables] for r in gql.requests])
    kept = json.dumps([[c.body for c in t.comments] for t in gql.all_threads()])
    for secret in SECRETS:
        assert secret not in sent and secret not in kept and secret not in body


def first_push(
    tmp_path: Path,
    github_mock: MockGitHub,
    fleet: Any,
    pushed: list[dict[str, Any]] | None = None,
    **extra: str,
) -> tuple[Any, GraphQLMock, dict[str, str], Any]:
    """Push 1 with inline comments on: the SQL and cursor findings posted as one review, whose
    threads GitHub then shows. The comments overlay, the GraphQL mock, the inputs and the run."""
    overlay = github_mock.comments_overlay(SHA)
    gql = github_mock.graphql
    inputs = {"policy": policy_toml(fleet, "acme", head=FAST), "inline-comments": "true", **extra}
    VERDICT.update(summary="Two problems.", findings=[SQL, CURSOR])
    one = run_in_process(tmp_path / "one", github_mock, inputs, files=pushed or files(QUERY_LINE))
    assert one.code == 0, one.stdout + one.stderr
    assert len(reviews_posted(github_mock)) == 1
    github_creates_threads(gql, github_mock)
    return overlay, gql, inputs, one


def test_a_finding_rated_at_another_severity_is_not_posted_again(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    """Session-12 audit: the fingerprint holds the severity, and a push whose model rated the
    cursor finding ``high`` instead of ``medium`` posted it again, left the first thread open
    and lost a maintainer's dismissal. The same cited lines are the same finding."""
    overlay, gql, inputs, one = first_push(tmp_path, github_mock, fleet)
    _, cursor_thread = gql.all_threads()

    def push(name: str, head: str, severity: str, line13: str) -> Any:
        """A push that changes line 13 only (so the model is asked again; the cited lines
        stay), whose model rates the cursor finding ``severity``: nothing is posted."""
        next_push(github_mock, overlay, gql, head)
        VERDICT.update(findings=[SQL, {**CURSOR, "severity": severity}])
        run = run_in_process(
            tmp_path / name,
            github_mock,
            inputs,
            payload=pr_payload(head_sha=head),
            files=files(QUERY_LINE, line13),
        )
        assert run.code == 0, run.stdout + run.stderr
        assert reviews_posted(github_mock) == [] and run.report is not None
        return run.report

    since = len(gql.requests)
    two = push("two", SHA2, "high", "if rows is not None:")
    assert not gql.mutations("resolveReviewThread", since) and not cursor_thread.resolved
    assert [(f["state"], f["first_seen"]) for f in two["findings"]] == [
        ("open", SHA[:12]),
        ("open", SHA[:12]),
    ]
    assert two["lifecycle"]["counts"] == {"new": 0, "open": 2, "fixed": 0, "dismissed": 0}
    # named once, by its first identity (not again under "earlier pushes: still open")
    assert [f["fingerprint"] for f in two["findings"]] == [
        f["fingerprint"] for f in one.report["findings"]
    ]
    assert two["lifecycle"]["earlier"] == []

    gql.reply(cursor_thread, "Won't fix: closed by the pool.", ("User", "maint"), "MEMBER")
    three = push("three", SHA3, "low", "if rows:  # any row")
    assert [f["state"] for f in three["findings"]] == ["open", "dismissed"]


def test_unreadable_threads_warn_and_never_repost_what_memory_saw(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    # the third finding below is low
    overlay, gql, inputs, _one = first_push(
        tmp_path, github_mock, fleet, **{"inline-min-severity": "low"}
    )

    # the next push: GitHub's GraphQL answers 502; a third finding appears
    next_push(github_mock, overlay, gql, SHA2)
    github_mock.stub("POST", "^/graphql$", 502, {"message": "Server Error"}, times=None)
    extra = finding(13, "if rows.count():", "low", "count() runs a second query.")
    VERDICT.update(findings=[SQL, CURSOR, extra])
    two = run_in_process(
        tmp_path / "two",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA2),
        files=files(QUERY_LINE, "if rows.count():"),
    )
    assert two.code == 0, two.stdout + two.stderr
    assert "review threads could not be read" in two.stdout
    (review,) = reviews_posted(github_mock)
    assert [c["line"] for c in review["comments"]] == [13]  # only the new one
    assert two.report is not None
    assert [f["state"] for f in two.report["findings"]] == ["open", "open", "new"]
    assert two.report["lifecycle"]["threads"] == "unreadable"
    assert not any(t.resolved for t in gql.all_threads())


def test_no_verdict_leaves_threads_and_memory_alone(
    tmp_path: Path, github_mock: MockGitHub
) -> None:
    from relay_review.drill import FaultFleet

    overlay = github_mock.comments_overlay(SHA2)
    gql = github_mock.graphql
    # our thread from an earlier push, whose cited lines are not in this push's diff
    gql.add_thread(
        REPO,
        NUMBER,
        "app/auth.py",
        11,
        "x\n\n<!-- relay-review:finding f1-"
        + "a" * 20
        + " "
        + "b" * 20
        + ":1 "
        + SHA[:12]
        + " -->",
    )
    accounts = {"down": {"models": {"down/broken": "503"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=reply) as broken:
        inputs = {
            "policy": policy_toml(broken, "down", head=FAST),
            "inline-comments": "true",
            "on-unavailable": "pass",
        }
        run = run_in_process(
            tmp_path, github_mock, inputs, payload=pr_payload(head_sha=SHA2), files=files(SAFE_LINE)
        )
    assert run.code == 0, run.stdout + run.stderr
    assert run.report is not None and run.report["decision"] == "unavailable"
    assert gql.requests == []  # no verdict: nothing is known of the findings
    assert not gql.all_threads()[0].resolved
    assert "lifecycle" not in run.report or run.report["lifecycle"] is None
    assert overlay.comments(REPO, NUMBER)  # the sticky comment (with the routes) is posted


def shifted(extra: int) -> list[dict[str, Any]]:
    """The push-1 file with ``extra`` lines added above the findings' lines."""
    added = "".join(f"+    log.debug('step {i}')\n" for i in range(extra))
    text = (
        f"@@ -10,4 +10,{6 + extra} @@ def login(request):\n"
        '     user = find_user(request.form["name"])\n'
        '-    if user.check(request.form["password"]):\n'
        f"{added}+    {QUERY_LINE}\n+    {ROWS_LINE}\n+    if rows:\n"
        "         return ok(user)\n"
        "     return denied()"
    )
    return [api_file("app/auth.py", "modified", text, 3 + extra, 1)]


def test_threads_past_the_read_cap_are_not_posted_again(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    """Audit: only 10 pages of 50 threads are read. A pull request with 500 threads before
    our review (anyone who can comment can open them) put ours past the cap, and every later
    push posted the same findings again. Read in part, GitHub is not sure: a finding memory
    knows as posted is not posted again, as when the threads cannot be read at all."""
    drive_by = ("User", "drive-by")
    for n in range(500):
        github_mock.graphql.add_thread(
            REPO, NUMBER, "app/auth.py", 11, f"nit {n}", drive_by, "NONE"
        )
    overlay, gql, inputs, _one = first_push(tmp_path, github_mock, fleet, shifted(0))

    next_push(github_mock, overlay, gql, SHA2)  # one line added above both findings
    VERDICT.update(findings=[{**SQL, "line": 12}, {**CURSOR, "line": 13}])
    two = run_in_process(
        tmp_path / "two", github_mock, inputs, payload=pr_payload(head_sha=SHA2), files=shifted(1)
    )
    assert two.code == 0, two.stdout + two.stderr
    assert reviews_posted(github_mock) == []  # not posted twice
    assert "the rest are not read" in two.stdout + two.stderr
    assert two.report is not None
    assert [f["state"] for f in two.report["findings"]] == ["open", "open"]


def test_a_retargeted_base_does_not_mark_a_finding_fixed(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    """Audit: the base was changed to a branch that already holds the cursor line, so the diff
    no longer shows it while the head is the same commit. The thread was answered "fixed in
    `<the same commit>`: the cited lines changed" and resolved, and the story counted 1 fixed:
    nothing changed. At the commit a finding was first seen at, it is still open."""
    overlay, gql, inputs, _one = first_push(tmp_path, github_mock, fleet)
    _, cursor_thread = gql.all_threads()

    retargeted = (
        "@@ -10,3 +10,3 @@ def login(request):\n"
        '     user = find_user(request.form["name"])\n'
        '-    if user.check(request.form["password"]):\n'
        f"+    {QUERY_LINE}\n"
        "     log.debug('checked')\n"
    )
    next_push(github_mock, overlay, gql, SHA)  # the same head: only the base moved
    VERDICT.update(findings=[SQL])
    since = len(gql.requests)
    two = run_in_process(
        tmp_path / "two",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA),
        files=[api_file("app/auth.py", "modified", retargeted, 1, 1)],
    )
    assert two.code == 0, two.stdout + two.stderr
    assert not gql.mutations("resolveReviewThread", since) and not cursor_thread.resolved
    assert two.report is not None
    assert two.report["lifecycle"]["counts"] == {"new": 0, "open": 2, "fixed": 0, "dismissed": 0}
    assert "0 new since the last push · 2 still open · 0 fixed · 0 dismissed" in sticky(overlay)


def test_threads_on_a_file_github_did_not_list_stay_open(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    """Push 2 adds 3,000 files whose names sort before app/auth.py (unchanged: its findings'
    lines are still there). GitHub lists 3,000 files at most, so app/auth.py is not listed:
    nothing is known of it, and its threads stay open. Before, both were replied "fixed in"
    and resolved (a helper's audit: an author could close any finding so)."""
    overlay, gql, inputs, _ = first_push(tmp_path, github_mock, fleet)
    threads = gql.all_threads()
    filler = [api_file(f"aaa/f{i:04d}.png", "added", None, 0, 0) for i in range(2999)]
    filler.append(api_file("aab/notes.txt", "added", "@@ -0,0 +1 @@\n+x", 1, 0))
    next_push(github_mock, overlay, gql, SHA2)
    VERDICT.update(summary="Nothing.", findings=[])
    since = len(gql.requests)
    two = run_in_process(
        tmp_path / "two",
        github_mock,
        inputs,
        payload=pr_payload(head_sha=SHA2, changed_files=3001),
        files=[*filler, *files(QUERY_LINE)][:3000],  # the 3,001st, app/auth.py, unlisted
    )
    assert two.code == 0, two.stdout + two.stderr
    assert not gql.mutations("resolveReviewThread", since)
    assert not any(t.resolved for t in threads)
    assert not re.search(r"[1-9]\d* fixed", sticky(overlay)), sticky(overlay)


@pytest.mark.parametrize("case", ["resolve-refused", "maintainer-reopens"])
def test_our_fixed_reply_is_said_once_per_thread(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any, case: str
) -> None:
    """The SQL finding is fixed on push 2. Its thread gets one "fixed in" reply, whatever comes
    after: our resolve refused (a GraphQL error) or a maintainer reopening the thread to say it
    is not fixed. Before, every later push replied "fixed in" again (and resolved the thread a
    maintainer had reopened, again; a helper's audit)."""
    overlay, gql, inputs, _ = first_push(tmp_path, github_mock, fleet)
    sql_thread, _ = gql.all_threads()
    if case == "resolve-refused":
        real_root = gql._root

        def refusing_root(token: str) -> dict[str, Any]:
            root = real_root(token)

            def resolve(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
                raise ValueError("Resource not accessible by integration")

            root["resolveReviewThread"] = resolve
            return root

        gql._root = refusing_root  # type: ignore[method-assign]
    for n, head in enumerate(["2" * 40, "4" * 40, "5" * 40]):
        next_push(github_mock, overlay, gql, head)
        VERDICT.update(summary="One left.", findings=[CURSOR])
        run = run_in_process(
            tmp_path / f"p{n}",
            github_mock,
            inputs,
            payload=pr_payload(head_sha=head),
            files=files(SAFE_LINE),
        )
        assert run.code == 0, run.stdout + run.stderr
        if case == "maintainer-reopens":
            sql_thread.resolved_by = None
            gql.reply(sql_thread, "Not fixed: still built by hand.", ("User", "maint"), "MEMBER")
    gql.problems.clear()
    ours = [c for c in sql_thread.comments[1:] if c.author[0] == "Bot"]
    assert len(ours) == 1, [c.body[:40] for c in ours]


def test_a_renamed_file_keeps_its_findings_open_and_unposted(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any
) -> None:
    """Push 2 renames app/auth.py to app/login.py, its code unchanged, and the model reports
    the same two findings at the new path: they are the same findings (not posted again) and
    their threads stay open. Before, both threads were resolved as "fixed" and both findings
    posted again as new (a helper's audit; a dismissal was lost the same way)."""
    _, gql, inputs, _ = first_push(tmp_path, github_mock, fleet)
    overlay = github_mock.overlay
    threads = gql.all_threads()
    renamed = api_file("app/login.py", "renamed", patch(QUERY_LINE), 3, 1)
    renamed["previous_filename"] = "app/auth.py"
    next_push(github_mock, overlay, gql, SHA2)
    VERDICT.update(
        summary="Same problems.",
        findings=[{**SQL, "path": "app/login.py"}, {**CURSOR, "path": "app/login.py"}],
    )
    since = len(gql.requests)
    two = run_in_process(
        tmp_path / "two", github_mock, inputs, payload=pr_payload(head_sha=SHA2), files=[renamed]
    )
    assert two.code == 0, two.stdout + two.stderr
    assert not gql.mutations("resolveReviewThread", since)
    assert not any(t.resolved for t in threads)
    assert reviews_posted(github_mock) == []
    assert two.report is not None
    assert [f["state"] for f in two.report["findings"]] == ["open", "open"]


#: Push 1 moves the query line below the lookup (removed at old line 10, added at new line
#: 11); the SQL finding is on the added copy (RIGHT 11).
MOVED = (
    "@@ -10,4 +10,4 @@ def login(request):\n"
    f"-    {QUERY_LINE}\n"
    '     user = find_user(request.form["name"])\n'
    f"+    {QUERY_LINE}\n"
    f"     {ROWS_LINE}\n"
    "     return ok(user)"
)
#: Push 2 drops the added copy: the pull request now only removes the query line, so its text
#: is in the diff on the base side alone.
REMOVED = (
    "@@ -10,4 +10,3 @@ def login(request):\n"
    f"-    {QUERY_LINE}\n"
    '     user = find_user(request.form["name"])\n'
    f"     {ROWS_LINE}\n"
    "     return ok(user)"
)


@pytest.mark.parametrize("inline", ["true", "false"])
def test_a_moved_line_removed_again_is_fixed_though_the_base_shows_it(
    tmp_path: Path, github_mock: MockGitHub, fleet: Any, inline: str
) -> None:
    """Audit: the lifecycle kept no side and looked for a finding's cited lines on both. Push 1
    moves the query line and the SQL finding is posted on the added copy; push 2 removes that
    copy, so only the base's removed copy has the text, and that kept the finding open for
    ever (its thread never replied to nor resolved; without inline comments, memory's entry
    never fixed). Looked for on the side it was posted on, it is fixed in push 2, said once.
    ``inline`` true: our thread decides (GitHub's ``diffSide``); false: memory does."""
    overlay = github_mock.comments_overlay(SHA)
    gql = github_mock.graphql
    inputs = {"policy": policy_toml(fleet, "acme", head=FAST), "inline-comments": inline}
    VERDICT.update(summary="One problem.", findings=[SQL])
    moved = [api_file("app/auth.py", "modified", MOVED, 1, 1)]
    one = run_in_process(tmp_path / "one", github_mock, inputs, files=moved)
    assert one.code == 0, one.stdout + one.stderr
    assert one.report is not None
    assert [(f["state"], f["side"]) for f in one.report["findings"]] == [("new", "RIGHT")]
    memory = payload_of(sticky(overlay))
    assert memory is not None
    assert [v.model_dump().get("side") for v in memory.findings.values()] == ["RIGHT"]
    if inline == "true":
        (review,) = reviews_posted(github_mock)
        assert [(c["line"], c["side"]) for c in review["comments"]] == [(11, "RIGHT")]
        github_creates_threads(gql, github_mock)
        (sql_thread,) = gql.all_threads()
        assert sql_thread.side == "RIGHT"

    removed = [api_file("app/auth.py", "modified", REMOVED, 0, 1)]
    for name, head in (("two", SHA2), ("three", SHA3)):
        next_push(github_mock, overlay, gql, head)
        VERDICT.update(summary="Nothing left.", findings=[])
        since = len(gql.requests)
        run = run_in_process(
            tmp_path / name, github_mock, inputs, payload=pr_payload(head_sha=head), files=removed
        )
        assert run.code == 0, run.stdout + run.stderr
        assert run.report is not None
        assert run.report["lifecycle"]["counts"] == {
            "new": 0,
            "open": 0,
            "fixed": 1,
            "dismissed": 0,
        }, run.report["lifecycle"]
        assert "0 new since the last push · 0 still open · 1 fixed · 0 dismissed" in sticky(overlay)
        assert reviews_posted(github_mock) == []
        if inline == "true" and name == "two":
            assert len(gql.mutations("resolveReviewThread", since)) == 1
            assert run.report["github"]["review"]["resolved"] == 1
        elif inline == "true":  # fixed already: nothing said or resolved again
            assert not gql.mutations("addPullRequestReviewThreadReply", since)
            assert not gql.mutations("resolveReviewThread", since)
    if inline == "true":
        assert sql_thread.resolved and sql_thread.resolved_by == BOT
        ours = [c.body for c in sql_thread.comments[1:]]
        assert len(ours) == 1 and ours[0].startswith(f"relay-review: fixed in `{SHA2[:12]}`")
