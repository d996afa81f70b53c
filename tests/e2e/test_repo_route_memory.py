"""Route memory across a repository's pull requests without Redis (issue 25): with ``state:
comment`` a new pull request reads the route memory of the newest relay-review sticky comment
of the repository's other pull requests (marker **and** author, every rule of the payload's
integrity), through ``relay-review run`` against the GitHub mock (Prism, with the stateful
comments overlay) and the fault fleet, at the default policy with several routes. The fleet's
call log is the evidence of what the second pull request cost. The warm second pull request of
the first test runs as a subprocess, as the runner starts it; every other run goes through the
action's entrypoint in this process over the same environment (``run_in_process``)."""

from __future__ import annotations

import datetime
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FLEET_KEY,
    NUMBER,
    REPO,
    SHA,
    VERDICTS,
    Run,
    policy_toml,
    run_on_pr,
)
from github_mock import BOT_LOGIN, CommentsOverlay, MockGitHub
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER, RECENT_COMMENTS, recent_stickies
from relay_review.state.memory import (
    ChunkMemo,
    FindingMemo,
    Limits,
    Memory,
    RouteMemo,
    RouteState,
    newer_routes,
)
from relay_review.state.stores import CommentStore, Wanted, payload_line, payload_of

pytestmark = pytest.mark.integration

#: The pull request that runs first; the second is the harness's (``NUMBER``).
FIRST = 1
PROBE_TOKENS = 16
#: Several routes, ranked (accounts in name order) a 404, a stall, then the healthy one.
ACCOUNTS = ("gone", "slow", "tail")
GONE, SLOW, HEALTHY = "gone/gone/model", "slow/slow/model", "tail/tail/reviewer"


#: One finding that verifies (no follow-up request for a finding off the diff).
VERDICT = {**VERDICTS["acme/reviewer"], "findings": VERDICTS["acme/reviewer"]["findings"][:1]}


def reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"  # a preflight probe
    return json.dumps(VERDICT)


@pytest.fixture
def fleet() -> Iterator[FaultFleet]:
    accounts = {
        "gone": {"models": {"gone/model": "404"}, "api_key": FLEET_KEY},
        "slow": {"models": {"slow/model": "stall"}, "api_key": FLEET_KEY},
        "tail": {"models": {"tail/reviewer": "healthy"}, "api_key": FLEET_KEY},
    }
    with FaultFleet(accounts, reply=reply) as running:
        yield running


def inputs(fleet: FaultFleet) -> dict[str, str]:
    """The default policy (no ``[serving]``/``[preflight]`` overrides) over the fleet."""
    return {"policy": policy_toml(fleet, *ACCOUNTS, head="")}


def run_pr(
    tmp: Path,
    mock: MockGitHub,
    overlay: CommentsOverlay,
    fleet: FaultFleet,
    number: int,
    *,
    subprocess: bool = False,
) -> tuple[Run, list[Any]]:
    """One run on pull request ``number`` (the overlay, GitHub's state, kept across runs):
    the run and the chat requests it sent (``subprocess``: ``relay-review run`` as a process,
    else the action's entrypoint in this one)."""
    start = len(fleet.requests)
    run = run_on_pr(tmp, mock, overlay, inputs(fleet), number, subprocess=subprocess)
    assert run.code == 0, run.stdout + run.stderr
    return run, [r for r in fleet.requests[start:] if r.is_chat]


def route(r: Any) -> str:
    return f"{r.account}/{r.model}"


def rows(run: Run) -> dict[str, dict[str, Any]]:
    assert run.report is not None
    return {r["agent_id"]: r for r in run.report["readiness"]}


#: How the store's warnings start (relay_review.github.log.ANNOTATION_TITLE, escaped).
STORE_WARNING = "::warning title=relay-review%3A memory store::"


def warnings(run: Run) -> list[str]:
    """The store's warnings: annotations in the action."""
    lines = run.stdout.splitlines()
    assert not [line for line in lines if "WARNING relay_review.state" in line]
    return [line for line in lines if line.startswith(STORE_WARNING)]


def listing_calls(mock: MockGitHub) -> list[Any]:
    return mock.calls("GET", rf"^/repos/{re.escape(REPO)}/issues/comments$")


def test_a_new_pull_request_starts_warm_from_another_ones_comment(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    first, sent_first = run_pr(tmp_path, github_mock, overlay, fleet, FIRST)
    assert first.report is not None and first.report["served_by"]["agent_id"] == HEALTHY
    assert GONE in {route(r) for r in sent_first}  # the cold run paid for the 404
    (sticky,) = overlay.comments(REPO, FIRST)
    remembered = payload_of(sticky.body)
    assert remembered is not None
    states = {k.rsplit("/", 1)[-1]: v.state for k, v in remembered.routes.items()}
    assert states["model"] == "dead" and states["reviewer"] == "proven"

    second, sent = run_pr(tmp_path, github_mock, overlay, fleet, NUMBER, subprocess=True)
    report = second.report
    assert report is not None and report["served_by"]["agent_id"] == HEALTHY
    # the proven route served first, unprobed, and alone; nothing to the route #1 found dead
    assert [route(r) for r in sent] == [HEALTHY]
    assert sent[0].max_tokens != PROBE_TOKENS and report["probes_sent"] == 0
    readiness = rows(second)
    assert readiness[GONE]["status"] == "rejected"
    assert readiness[GONE]["detail"].startswith(f"remembered from #{FIRST}: not_found")
    assert readiness[HEALTHY]["detail"].startswith(f"remembered from #{FIRST}: served")
    assert report["memory"]["dead"] >= 1 and report["memory"]["proven"] == 1
    assert f"route memory from #{FIRST}" in second.stdout
    assert not warnings(second), warnings(second)
    # one listing, one page, newest updated first, bounded by the route horizon
    (listing,) = listing_calls(github_mock)
    query = dict(p.split("=", 1) for p in listing.query.split("&"))
    assert (query["sort"], query["direction"], query["per_page"]) == (
        "updated",
        "desc",
        str(RECENT_COMMENTS),
    )
    assert "since" in query and "page" not in query
    # the second pull request's own comment carries the route memory on; #1's is untouched
    (own,) = overlay.comments(REPO, NUMBER)
    carried = payload_of(own.body)
    assert carried is not None and set(remembered.routes) <= set(carried.routes)
    assert overlay.comments(REPO, FIRST)[0].body == sticky.body


def test_another_login_a_corrupt_payload_and_the_review_cache_are_not_taken(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    run_pr(tmp_path, github_mock, overlay, fleet, FIRST)
    (sticky,) = overlay.comments(REPO, FIRST)
    honest = payload_of(sticky.body)
    assert honest is not None and honest.chunks  # #1's review cache is in its comment
    keys = {k.rsplit("/", 1)[-1]: k for k in honest.routes}
    # newer than #1's: mallory's comment (marker, a valid payload that would condemn the
    # healthy route) and the bot's own comment on #5 whose payload is corrupt
    now = time.time()  # a payload valid in every way but its author
    forged = Memory(
        routes={
            keys["reviewer"]: RouteMemo(state="dead", outcome="not_found", at=now, until=now + 60)
        }
    )
    at = "2999-01-01T00:00:00Z"  # listed first (newest), whatever the clock says
    mallory = f"{MARKER}\nlooks official\n{payload_line(forged)}\n"
    overlay.seed(REPO, 3, mallory, "mallory", updated_at=at)
    corrupt = f"{MARKER}\n<!-- relay-review:state v2 !!!not-base64!!! -->\n"
    overlay.seed(REPO, 5, corrupt, BOT_LOGIN, updated_at=at)

    second, sent = run_pr(tmp_path, github_mock, overlay, fleet, NUMBER)
    report = second.report
    assert report is not None and report["served_by"]["agent_id"] == HEALTHY
    assert [route(r) for r in sent] == [HEALTHY]  # #1's memory, not mallory's
    assert rows(second)[HEALTHY]["detail"].startswith(f"remembered from #{FIRST}: served")
    (warning,) = warnings(second)  # the corrupt payload: one warning, and no more
    assert "#5" in warning and "not base64" in warning
    # only route memory crossed: #1's review cache and findings did not
    assert report["memory"]["reused_chunks"] == 0 and report["memory"]["reused_files"] == 0
    assert not any(f.get("reused_from") for f in report["files"])
    (own,) = overlay.comments(REPO, NUMBER)
    carried = payload_of(own.body)
    assert carried is not None and carried.chunks  # the same content: its own review, anew
    assert all(memo.at > honest.chunks[k].at for k, memo in carried.chunks.items())


@pytest.mark.parametrize("status", [500, 403])
def test_a_failed_listing_costs_one_warning_and_the_run_is_served(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet, status: int
) -> None:
    overlay = github_mock.comments_overlay(SHA)
    run_pr(tmp_path, github_mock, overlay, fleet, FIRST)
    github_mock.reset()
    overlay.fault("list_repo", status, {"message": "Server Error"}, times=None)
    second, sent = run_pr(tmp_path, github_mock, overlay, fleet, NUMBER)
    report = second.report
    assert report is not None and report["served_by"]["agent_id"] == HEALTHY
    (warning,) = warnings(second)
    assert "route memory not read" in warning and f"HTTP {status}" in warning
    assert GONE in {route(r) for r in sent}  # cold: it paid for the 404 again
    assert "remembered from" not in json.dumps(report["readiness"])
    assert listing_calls(github_mock)  # it was asked (500: the transport's retries too)


def test_recent_stickies_reads_one_page_of_ours_newest_first(github_mock: MockGitHub) -> None:
    overlay = github_mock.comments_overlay(SHA)
    overlay.seed(REPO, 4, f"{MARKER}\nolder", updated_at="2026-01-01T00:00:00Z")
    overlay.seed(REPO, 6, f"{MARKER}\nnewer", updated_at="2026-01-03T00:00:00Z")
    overlay.seed(REPO, 8, f"{MARKER}\nmine", updated_at="2026-01-04T00:00:00Z")
    overlay.seed(REPO, 9, f"{MARKER}\nnot ours", "mallory", updated_at="2026-01-05T00:00:00Z")
    overlay.seed(REPO, 9, f"no marker\n{MARKER}", updated_at="2026-01-05T00:00:00Z")
    overlay.seed(REPO, 10, f"{MARKER}\ntoo old", updated_at="2025-12-01T00:00:00Z")
    overlay.seed("octo-org/other", 11, f"{MARKER}\nanother repo", updated_at="2026-01-05T00:00:00Z")
    gh = github_mock.client()
    since = datetime.datetime(2025, 12, 31, tzinfo=datetime.UTC)
    found = recent_stickies(gh.get_repo(REPO), BOT_LOGIN, since=since, exclude=8)
    assert found == [(6, f"{MARKER}\nnewer"), (4, f"{MARKER}\nolder")]
    assert len(listing_calls(github_mock)) == 1


# --- the store's rules, without I/O ------------------------------------------------------------

NOW = 1_800_000_000.0
LIMITS = Limits(now=NOW, horizon=86400.0)


def memo(state: RouteState, at: float, until: float | None = None) -> RouteMemo:
    outcome = {"proven": "ok", "dead": "not_found", "cooling": "timeout"}[state]
    return RouteMemo(state=state, outcome=outcome, at=at, until=until or at + 3600)


def test_per_route_the_newer_memo_wins_and_own_wins_a_tie() -> None:
    own = Memory(
        routes={
            "a": memo("proven", NOW - 100),
            "b": memo("dead", NOW - 10),
            "c": memo("proven", NOW),
        },
        chunks={"k": ChunkMemo(at=NOW, until=NOW + 1)},
    )
    other = Memory(
        routes={"a": memo("dead", NOW - 50), "b": memo("proven", NOW - 20), "c": memo("dead", NOW)},
        accounts={"x": memo("dead", NOW)},
    )
    merged, routes, accounts = newer_routes(own, other)
    assert {k: v.state for k, v in merged.routes.items()} == {
        "a": "dead",
        "b": "dead",
        "c": "proven",
    }
    assert (routes, accounts) == ({"a"}, {"x"}) and set(merged.chunks) == {"k"}


def store_with(
    own: Memory | None, *others: tuple[str, str | None]
) -> tuple[CommentStore, list[int]]:
    calls: list[int] = []

    def read_others() -> list[tuple[str, str | None]]:
        calls.append(1)
        return list(others)

    body = None if own is None else f"{MARKER}\n{payload_line(own)}\n"
    return CommentStore(lambda: body, read_others), calls


def test_only_route_memory_of_this_runs_routes_is_taken_and_times_are_checked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = Memory(
        routes={
            "r1": memo("dead", NOW - 60),
            "r2": memo("proven", NOW + 3600),  # a time in the future: dropped
            "r3": memo("dead", NOW - 60, NOW + 10 * 86400),  # beyond the horizon: dropped
            "elsewhere": memo("dead", NOW - 60),  # not this run's route
        },
        accounts={"acct": memo("dead", NOW - 60)},
        chunks={"k": ChunkMemo(at=NOW - 60, until=NOW + 60)},
        findings={"f": FindingMemo(at=NOW - 60, until=NOW + 60, path="a.py")},
    )
    store, _ = store_with(None, ("#12", f"{MARKER}\n{payload_line(other)}\n"))
    wanted = Wanted.of(routes=["r1", "r2", "r3"], accounts=["acct"], chunks=["k"])
    with caplog.at_level(logging.INFO, "relay_review.state"):
        got = store.load(LIMITS, wanted)
    assert set(got.routes) == {"r1"} and set(got.accounts) == {"acct"}
    assert not got.chunks and not got.findings
    assert store.borrowed is not None and store.borrowed.where == "#12"
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "#12" in warning.getMessage()  # the dropped entries: one warning
    assert "route memory from #12" in caplog.text


def test_the_newest_usable_payload_wins_and_a_chunk_reread_lists_nothing() -> None:
    newer = Memory(routes={"r1": memo("proven", NOW - 10)})
    older = Memory(routes={"r1": memo("dead", NOW - 20)})
    store, calls = store_with(
        None,
        ("#9", f"{MARKER}\nno payload here"),
        ("#8", f"{MARKER}\n{payload_line(newer)}"),
        ("#7", f"{MARKER}\n{payload_line(older)}"),
    )
    got = store.load(LIMITS, Wanted.of(routes=["r1"]))
    assert got.routes["r1"].state == "proven" and store.borrowed and store.borrowed.where == "#8"
    store.load(LIMITS, Wanted.of(chunks=["k"]))  # the review cache's second read
    assert len(calls) == 1


def test_a_listing_that_raises_is_one_warning_and_own_memory_stays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = Memory(routes={"r1": memo("proven", NOW - 10)})

    def broken() -> list[tuple[str, str | None]]:
        raise RuntimeError("no answer")

    store = CommentStore(lambda: f"{MARKER}\n{payload_line(own)}", broken)
    with caplog.at_level(logging.WARNING, "relay_review.state"):
        got = store.load(LIMITS, Wanted.of(routes=["r1"]))
    assert set(got.routes) == {"r1"} and store.borrowed is None
    assert len(caplog.records) == 1 and "RuntimeError" in caplog.text
