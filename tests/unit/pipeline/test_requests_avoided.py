"""The memory line's "N requests saved" counts only requests memory saved: a lower bound of what
a run without memory would have sent beyond this run's requests. Before, hedged preflight's own
saving (no probe on a good day) was credited to memory: a run with no memory at all said "2
requests saved", a warm good-day run "6 requests saved" when a cold one sends the same one
request."""

from __future__ import annotations

from catalog_entries import route_entry as entry
from relay_review.pipeline.route_memory import Recalled, recall, routes_avoided
from relay_review.records import Outcome, OutcomeKind
from relay_review.routing.board import RouteBoard
from relay_review.state.memory import Memory, RouteMemo

NOW = 1_800_000_000.0
ENV = {"A_KEY": "sk-a-0123456789", "B_KEY": "sk-b-0123456789"}


def memo(state: str, outcome: str = "timeout") -> RouteMemo:
    return RouteMemo(state=state, outcome=outcome, at=NOW - 60, until=NOW + 600)


ENTRIES = [entry("a", "m1"), entry("b", "m2"), entry("a", "m3"), entry("b", "m4")]


def served_run(memory: Memory, served: str) -> tuple[RouteBoard, Recalled]:
    """A board after memory was laid on it and ``served`` answered the one real request."""
    board = RouteBoard(ENTRIES)
    recalled = recall(board, memory, NOW)
    board.sent_unprobed(served, 0.0)
    board.note(served, Outcome(kind=OutcomeKind.OK))
    board.proven.add(served)
    return board, recalled


def avoided(board: RouteBoard, recalled: Recalled, served: list[str] | None, **kw: object) -> int:
    opts = {"probe_budget": 6, "eager": False, **kw}
    return routes_avoided(board, recalled, ENV, served, **opts)  # type: ignore[arg-type]


def test_a_run_without_memory_saved_nothing() -> None:
    board, recalled = served_run(Memory(), "a/m1")
    assert recalled.total == 0
    assert avoided(board, recalled, ["a/m1"]) == 0  # the old count: 4 (the probe budget's plan)
    assert avoided(board, recalled, ["a/m1"], eager=True) == 0


def test_a_warm_good_day_saves_nothing_a_cold_one_would_send() -> None:
    """The route memory proved is also the best-ranked: a cold hedged run sends the same one
    request, and the routes below it are not needed either way."""
    board, recalled = served_run(Memory(routes={"a/m1": memo("proven", "ok")}), "a/m1")
    assert recalled.proven == 1
    assert avoided(board, recalled, ["a/m1"]) == 0  # the old count: 4


def test_the_routes_above_the_served_one_that_got_nothing_are_saved() -> None:
    """A cold run sends each route above the one that serves a request (the lead's, a failover
    or a probe at the hedge); those memory kept out, or made unneeded by serving its proven
    route first, got none this run."""
    memory = Memory(routes={"a/m1": memo("cooling"), "a/m3": memo("proven", "ok")})
    board, recalled = served_run(memory, "a/m3")
    assert avoided(board, recalled, ["a/m3"]) == 2  # a/m1 (cooling) and b/m2 (not needed)
    board.note("b/m2", Outcome(kind=OutcomeKind.TIMEOUT))  # it was asked after all
    assert avoided(board, recalled, ["a/m3"]) == 1


def test_an_account_memory_settled_counts_once() -> None:
    """A blind run loses a dead account on its first route, not on each of them."""
    memory = Memory(accounts={"a": memo("dead", "auth_failed")})
    board, recalled = served_run(memory, "b/m4")
    assert recalled.by_account == {"a/m1", "a/m3"}
    assert avoided(board, recalled, ["b/m4"]) == 2  # account a once, and b/m2


def test_routes_held_or_out_for_this_runs_own_reasons_are_not_credited() -> None:
    memory = Memory(routes={"a/m3": memo("proven", "ok")})
    board, recalled = served_run(memory, "a/m3")
    board.held["a/m1"] = 60.0  # its account's budget refused: a cold run would not ask it
    board.out.add("b/m2")  # out this run (a used-up daily quota seen on another route)
    assert avoided(board, recalled, ["a/m3"]) == 0


def test_no_request_needed_or_none_served() -> None:
    memory = Memory(routes={"a/m1": memo("dead", "not_found"), "b/m2": memo("cooling")})
    board = RouteBoard(ENTRIES)
    recalled = recall(board, memory, NOW)
    assert avoided(board, recalled, None) == 0  # every file reused: the chunks count instead
    # nothing served: a cold run probes every route at the hedge; this one asked b/m4 and
    # never a/m3 (the deadline came first: not memory's saving), and none of the two memory
    # settled
    board.note("b/m4", Outcome(kind=OutcomeKind.TIMEOUT))
    assert avoided(board, recalled, []) == 2
    assert avoided(board, recalled, [], probe_budget=0) == 0  # no probe at the hedge


def test_eager_preflight_counts_the_probes_its_plan_did_not_send() -> None:
    board, recalled = served_run(Memory(routes={"a/m3": memo("proven", "ok")}), "a/m3")
    assert avoided(board, recalled, ["a/m3"], eager=True, probe_budget=3) == 3
    board.set("b/m2", sent=True)
    assert avoided(board, recalled, ["a/m3"], eager=True, probe_budget=3) == 2
