"""Concurrent runs on one pull request (issue 6, item 7): one sticky comment at the end, holding
the newer head's verdict.

Two ``relay-review run`` subprocesses start at once against Prism with the stateful comments
overlay (``github_mock.comments_overlay``): GitHub's state (comments, the PR's head) lives in the
overlay, every request is still validated by Prism. Run A reviews head A with the ``acme`` fleet
account (verdict: SQL injection, changes requested); run B reviews head B with ``pair`` (two
smaller findings). Each run has its own token, which is how the overlay's hooks tell them apart
and force the worst interleavings:

* the head moves from A to B right after run A's last head check (A passes it, then is stale);
* both runs list the comments before either creates one (a barrier): both see none, both create;
* then the order of creates, re-lists and deletes is forced per scenario.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from action_harness import (
    FAST,
    NUMBER,
    OTHER_SHA,
    REPO,
    SHA,
    TOKEN,
    TOKEN_B,
    policy_toml,
    pr_payload,
    run_action,
    start_action,
)
from github_mock import BOT_LOGIN, CommentsOverlay, MockGitHub, OverlayOp, StoredComment
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER, head_line

HEAD_A, HEAD_B = SHA, OTHER_SHA
#: Longest a hook waits for the other run (a run that died must not hang the test).
HOOK_WAIT_S = 45.0
A_VERDICT = "SQL injection"  # acme's finding
B_VERDICT = "Result set is never closed"  # pair's finding

Step = tuple[str, str, int]  # (run "A"/"B", operation kind, n-th of that kind by that run)


class Choreography:
    """Overlay hooks that hold a run's n-th operation of a kind until other steps are done."""

    def __init__(
        self, overlay: CommentsOverlay, waits: dict[Step, list[Step]], *, barrier: bool = True
    ) -> None:
        self.overlay = overlay
        self.barrier = barrier
        self.waits = waits
        self.runs = {TOKEN: "A", TOKEN_B: "B"}
        self.done: dict[Step, threading.Event] = {}
        self.counts: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()
        self.first_lists = threading.Barrier(2)
        #: Steps whose wait timed out (the test fails on them: the race was not forced).
        self.missed: list[Step] = []
        overlay.before.append(self.before)
        overlay.after.append(self.after)

    def event(self, step: Step) -> threading.Event:
        with self.lock:
            return self.done.setdefault(step, threading.Event())

    def step(self, op: OverlayOp, count: bool) -> Step:
        run = self.runs.get(op.token, "?")
        with self.lock:
            if count:
                self.counts[(run, op.kind)] += 1
            return (run, op.kind, self.counts[(run, op.kind)])

    def before(self, op: OverlayOp) -> None:
        step = self.step(op, count=True)
        if self.barrier and step[1:] == ("list", 1):  # both list before either creates
            try:
                self.first_lists.wait(timeout=HOOK_WAIT_S)
            except threading.BrokenBarrierError:
                self.missed.append(step)
        if self.barrier and step[1:] == ("create", 1):
            # ... and both lists were answered: passing the barrier is not enough, a create
            # landing before the other run's list answer was built showed it the comment (seen
            # once in CI on a loaded machine: run A then found B's sticky and was stale)
            other = "B" if step[0] == "A" else "A"
            if not self.event((other, "list", 1)).wait(timeout=HOOK_WAIT_S):
                self.missed.append(step)
        for needed in self.waits.get(step, []):
            if not self.event(needed).wait(timeout=HOOK_WAIT_S):
                self.missed.append(step)

    def after(self, op: OverlayOp) -> None:
        step = self.step(op, count=False)
        if step == ("A", "head", 1):  # a push lands right after run A's head check
            self.overlay.head = HEAD_B
        self.event(step).set()


def _inputs(fleet: FaultFleet, account: str, token: str) -> dict[str, str]:
    # state: none keeps the comment calls (and the barriers set on them) exactly the
    # publisher's (the comment store's one read before the review is tested in test_memory_action)
    # the default pause between GitHub writes (1 s), under which these races were choreographed:
    # at 0 the later run's list could already see the earlier run's comment (a missed race)
    head = FAST.replace("write_interval = 0", "write_interval = 1")
    policy = policy_toml(fleet, account, head=head)
    return {"policy": policy, "github-token": token, "state": "none"}


def _ours(overlay: CommentsOverlay) -> list[StoredComment]:
    return [
        c
        for c in overlay.comments(REPO, NUMBER)
        if c.body.startswith(MARKER) and c.login == BOT_LOGIN
    ]


#: scenario -> (forced order, deletes as (run, status), run whose created comment survives)
SCENARIOS: dict[str, tuple[dict[Step, list[Step]], list[tuple[str, int]], str]] = {
    # A creates first (its comment is the oldest) and re-lists after B created: A sees both and is
    # stale, so it leaves its comment for B; B writes its verdict into it and deletes its own.
    "older-run-creates-first": (
        {
            ("B", "head", 1): [("A", "head", 1)],
            ("B", "create", 1): [("A", "create", 1)],
            ("A", "list", 2): [("B", "create", 1)],
        },
        [("B", 204)],
        "A",
    ),
    # B creates first; both see both comments; the stale A deletes its own, and B's delete of
    # the same comment then answers 404 (tolerated).
    "newer-run-creates-first": (
        {
            ("B", "head", 1): [("A", "head", 1)],
            ("A", "create", 1): [("B", "create", 1)],
            ("B", "list", 2): [("A", "create", 1)],
            ("B", "delete", 1): [("A", "delete", 1)],
        },
        [("A", 204), ("B", 404)],
        "B",
    ),
    # B creates first and converges (deletes A's comment) before A re-lists: A finds its own
    # comment gone, reads the head, and is stale.
    "newer-run-converges-first": (
        {
            ("B", "head", 1): [("A", "head", 1)],
            ("A", "create", 1): [("B", "create", 1)],
            ("B", "list", 2): [("A", "create", 1)],
            ("A", "list", 2): [("B", "delete", 1)],
        },
        [("B", 204)],
        "B",
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_two_runs_converge_on_the_newer_head(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, scenario: str
) -> None:
    waits, deletes, survivor = SCENARIOS[scenario]
    overlay = github_mock.comments_overlay(HEAD_A)
    choreography = Choreography(overlay, waits)
    run_a = start_action(
        tmp_path / "a",
        github_mock,
        _inputs(fleet, "acme", TOKEN),
        payload=pr_payload(head_sha=HEAD_A),
    )
    run_b = start_action(
        tmp_path / "b",
        github_mock,
        _inputs(fleet, "pair", TOKEN_B),
        payload=pr_payload(head_sha=HEAD_B),
    )
    a, b = run_a.wait(timeout=150), run_b.wait(timeout=150)
    assert a.code == 0, a.stdout + a.stderr
    assert b.code == 0, b.stdout + b.stderr
    assert not choreography.missed, (choreography.missed, a.stdout, b.stdout)
    # both created a comment: the race really happened
    assert overlay.kinds(TOKEN).count("create") == 1
    assert overlay.kinds(TOKEN_B).count("create") == 1
    runs = {TOKEN: "A", TOKEN_B: "B"}
    created = {runs[op.token]: op.comment_id for op in overlay.ops if op.kind == "create"}
    assert [(runs[op.token], op.status) for op in overlay.ops if op.kind == "delete"] == deletes
    assert "edit" not in overlay.kinds(TOKEN)  # the stale run never writes a verdict

    (final,) = _ours(overlay)  # one sticky comment at the end ...
    assert final.id == created[survivor]
    lines = final.body.split("\n")
    assert lines[0] == MARKER and lines[1] == head_line(HEAD_B)  # ... for the newer head ...
    assert B_VERDICT in final.body and A_VERDICT not in final.body  # ... with its verdict

    assert a.report is not None and b.report is not None
    assert a.report["github"]["not_posted"] == "head_moved"
    assert a.report["github"]["current_head_sha"] == HEAD_B
    assert a.outputs["comment-url"] == ""
    assert "a run for the newer head" in a.stdout
    assert b.report["github"]["not_posted"] is None
    assert b.outputs["comment-url"].endswith(f"#issuecomment-{final.id}")
    assert b.outputs["decision"] == "comment"


def test_stale_run_never_overwrites_a_newer_sticky(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # Run B (head B) already posted; run A (head A) passes its head check just before the push
    # is visible, then finds the sticky for head B: it re-reads the head and writes nothing.
    overlay = github_mock.comments_overlay(HEAD_A)
    newer = f"{MARKER}\n{head_line(HEAD_B)}\n## relay-review: the newer verdict"
    kept = overlay.seed(REPO, NUMBER, newer)
    Choreography(overlay, {}, barrier=False)  # moves the head to B after A's head check
    reads = {"head", "list"}
    run = run_action(tmp_path, github_mock, _inputs(fleet, "acme", TOKEN))
    assert run.code == 0, run.stdout + run.stderr
    assert set(overlay.kinds()) <= reads  # no create, edit or delete
    assert overlay.kinds().count("head") == 2  # the check, and the re-read before editing
    (comment,) = _ours(overlay)
    assert (comment.id, comment.body) == (kept, newer)
    assert run.report is not None
    assert run.report["github"]["not_posted"] == "head_moved"
    assert run.report["github"]["current_head_sha"] == HEAD_B
    assert "Not posted" in run.summary and A_VERDICT in run.summary


def test_sticky_for_an_older_head_is_edited(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    # The sticky is for an older head; the head re-read says ours is current: edit in place.
    overlay = github_mock.comments_overlay(HEAD_A)
    older = "1111111111111111111111111111111111111111"
    kept = overlay.seed(REPO, NUMBER, f"{MARKER}\n{head_line(older)}\nthe old verdict")
    run = run_action(tmp_path, github_mock, _inputs(fleet, "acme", TOKEN))
    assert run.code == 0, run.stdout + run.stderr
    assert overlay.kinds() == ["head", "list", "head", "edit"]
    (comment,) = _ours(overlay)
    assert comment.id == kept
    assert comment.body.split("\n")[1] == head_line(HEAD_A) and A_VERDICT in comment.body
    assert run.report is not None and run.report["github"]["comment_action"] == "updated"
