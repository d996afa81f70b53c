"""Failover and preflight ordering rules, driven by a scripted chat function (no sockets).

The same rules are exercised over real sockets against the fault fleet in
tests/e2e/test_drill.py; here the script makes each rule's precondition exact.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from catalog_entries import entries as catalog_entries
from relay_review.config import PreflightPolicy, ServingPolicy
from relay_review.records import Outcome, OutcomeKind, Phase, Readiness
from relay_review.routing.board import RouteBoard
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.routing.failover import next_route
from relay_review.routing.preflight import PROBE_MAX_TOKENS
from relay_review.routing.session import RoutingSession


def ok(text="fine"):
    return Outcome(kind=OutcomeKind.OK, http_status=200, content=text, finish_reason="stop")


def fail(kind, status=None, **kw):
    return Outcome(kind=kind, http_status=status, **kw)


class Script:
    """model -> list of (delay_s, outcome) consumed per call; records every call."""

    def __init__(self, script):
        self.script = {m: list(v) for m, v in script.items()}
        self.calls = []

    async def __call__(self, client, *, base_url, api_key, model, messages, deadlines, **kw):
        self.calls.append((model, kw.get("max_tokens"), time.monotonic()))
        delay, outcome = self.script[model].pop(0)
        bound = deadlines.attempt
        if delay >= bound:
            await asyncio.sleep(bound)
            return fail(OutcomeKind.TIMEOUT, phase=Phase.FIRST_BYTE, elapsed_s=bound)
        await asyncio.sleep(delay)
        return outcome.model_copy(update={"elapsed_s": delay})

    def served_models(self):
        return [m for m, t, _ in self.calls if t is None]

    def probes(self):
        return [m for m, t, _ in self.calls if t is not None]


def catalog(*specs):
    """specs: models in the order they should be prioritised (one account each)."""
    return catalog_entries(*specs)


async def run(entries, script, *, budget=6, probe_timeout=1.0, deadline=10.0, first_byte=1.0):
    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(probe_budget=budget, probe_timeout=probe_timeout, mode="eager"),
        serving=ServingPolicy(first_byte=first_byte, attempt=first_byte, deadline=deadline),
        environ={"K": "secret"},
        chat=script,
    )
    async with session:
        result = await session.serve([{"role": "user", "content": "hi"}])
    return session, result


async def test_serving_starts_on_first_ready_route_while_probes_are_in_flight():
    entries = catalog("stall", "healthy")
    script = Script(
        {
            "stall": [(5.0, ok())],
            "healthy": [(0.05, ok()), (0.05, ok("the reply"))],
        }
    )
    start = time.monotonic()
    session, result = await run(entries, script, probe_timeout=3.0)
    assert result.served_by.model == "healthy"
    assert result.reply == "the reply"
    assert time.monotonic() - start < 1.0  # did not wait for the stalled probe (3 s)
    rows = {r["model"]: r for r in (p.model_dump() for p in session.readiness())}
    assert rows["healthy"]["status"] == "ready"
    # issue 26: a probe still stalled when the run finished says for how long it got no byte
    assert rows["stall"]["status"] == "abandoned"
    assert rows["stall"]["detail"].startswith("stalled: no byte in ")


async def test_deferred_never_served_before_ready_or_unprobed():
    entries = catalog("limited", "bad", "beyond-budget")
    script = Script(
        {
            "limited": [(0.01, fail(OutcomeKind.RATE_LIMITED, 429, retry_after=0.0)), (0, ok("d"))],
            "bad": [(0.01, fail(OutcomeKind.NOT_FOUND, 404))],
            "beyond-budget": [(0.01, fail(OutcomeKind.SERVER_ERROR, 503))],
        }
    )
    _session, result = await run(entries, script, budget=2)
    # unprobed route served (and failed) before the deferred one; rejected never served
    assert script.served_models() == ["beyond-budget", "limited"]
    assert result.served_by.model == "limited"
    assert [a.outcome for a in result.attempts] == ["server_error", "ok"]


async def test_deferred_route_whose_retry_after_ends_past_the_deadline_is_never_tried():
    entries = catalog("limited")
    script = Script({"limited": [(0.01, fail(OutcomeKind.RATE_LIMITED, 429, retry_after=60.0))]})
    start = time.monotonic()
    _session, result = await run(entries, script, deadline=5.0)
    assert result.served_by is None and result.stopped == "exhausted"
    assert script.served_models() == []
    assert time.monotonic() - start < 1.0


async def test_failed_route_stays_out_and_timeout_routes_are_never_served():
    entries = catalog("flaky", "stall", "ok")
    script = Script(
        {
            "flaky": [(0.01, ok()), (0.01, fail(OutcomeKind.SERVER_ERROR, 502))],
            "stall": [(9.0, ok())],
            "ok": [(0.01, ok("served"))],
        }
    )
    session, result = await run(entries, script, budget=2, probe_timeout=0.5)
    assert script.served_models() == ["flaky", "ok"]
    assert result.served_by.model == "ok"
    assert session.board.status(entries[1].agent_id) is Readiness.TIMEOUT


async def test_at_most_one_probe_per_route_and_small_probes():
    entries = catalog(*[f"m{i}" for i in range(10)])
    script = Script({f"m{i}": [(0.01, fail(OutcomeKind.NOT_FOUND, 404))] for i in range(10)})
    session, _result = await run(entries, script, budget=6)
    probes = script.probes()
    assert len(probes) == 6 == len(set(probes)) == session.probes_sent
    assert all(t <= PROBE_MAX_TOKENS for m, t, _ in script.calls if t is not None)
    # the 4 unprobed routes were served (their real request is their probe), each once
    assert sorted(script.served_models()) == ["m6", "m7", "m8", "m9"]


async def test_auth_failure_takes_the_whole_account_out():
    """A direct provider's 401 condemns its account (a gateway's: see test_provider_signals)."""
    raws = [
        {
            "account": a,
            "provider": "nvidia_nim",
            "model": m,
            "base_url": "http://x/v1",
            "api_key_env": "K",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for a, m in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]
    ]
    entries = build_catalog(parse_discovery({"routes": raws})).selected
    script = Script(
        {
            "a1": [(0.01, fail(OutcomeKind.AUTH_FAILED, 401))],
            "a2": [(0.01, ok())],
            "a3": [(0.01, ok())],
            "b1": [(0.01, fail(OutcomeKind.NOT_FOUND, 404))],
        }
    )
    session, result = await run(entries, script, budget=2)  # probes a1, b1
    assert result.served_by is None
    assert script.served_models() == []
    statuses = {
        r["model"]: (r["status"], r["detail"])
        for r in (p.model_dump() for p in session.readiness())
    }
    assert statuses["a3"] == ("rejected", "account a: auth_failed")


async def test_missing_key_is_rejected_without_a_request_and_never_printed():
    entries = catalog("m")
    script = Script({"m": []})
    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(),
        serving=ServingPolicy(deadline=5),
        environ={},
        chat=script,
    )
    async with session:
        result = await session.serve([{"role": "user", "content": "x"}])
    assert script.calls == [] and result.served_by is None
    assert session.readiness()[0].detail == "missing key K"


async def test_whole_run_deadline_bounds_probes_and_serving():
    entries = catalog(*[f"s{i}" for i in range(8)])
    script = Script({f"s{i}": [(60.0, ok())] * 2 for i in range(8)})
    start = time.monotonic()
    session, result = await run(entries, script, probe_timeout=0.6, first_byte=30, deadline=1.5)
    elapsed = time.monotonic() - start
    assert result.served_by is None and result.stopped == "deadline"
    assert elapsed < 1.5 + 0.5
    assert all(
        r["status"] in ("timeout", "unprobed")
        for r in (p.model_dump() for p in session.readiness())
    )


def test_next_route_waits_while_preflight_runs_and_nothing_is_ready():
    entries = catalog("a", "b")
    board = RouteBoard(entries)
    assert next_route(board, now=0.0, deadline_at=10.0) == (None, 10.0)
    board.finish()
    entry, wait = next_route(board, now=0.0, deadline_at=10.0)
    assert entry.route.model == "a" and wait == 0.0


@pytest.mark.parametrize("retry_after, expected_wait", [(2.0, 2.0), (None, 0.0)])
def test_next_route_sleeps_until_retry_after(retry_after, expected_wait):
    entries = catalog("a")
    board = RouteBoard(entries)
    board.set(
        entries[0].agent_id, status=Readiness.DEFERRED, retry_after=retry_after, finished_at=1.0
    )
    board.finish()
    entry, wait = next_route(board, now=1.0, deadline_at=10.0)
    assert entry is entries[0] and wait == pytest.approx(expected_wait)


def test_a_deferred_route_free_now_is_not_held_up_by_a_later_retry_after():
    # found by the fault matrix: a 429 asking for 28 s (first in catalog order) made the loop
    # sleep 28 s while a 5xx route (no Retry-After) sat free behind it
    entries = catalog("later", "now", "also-now", "past-deadline")
    board = RouteBoard(entries)
    for entry, retry_after in zip(entries, (28.0, None, None, 60.0), strict=True):
        board.set(
            entry.agent_id, status=Readiness.DEFERRED, retry_after=retry_after, finished_at=1.0
        )
    board.finish()
    assert next_route(board, now=2.0, deadline_at=30.0) == (entries[1], 0.0)
    board.out.add(entries[1].agent_id)
    assert next_route(board, now=2.0, deadline_at=30.0) == (entries[2], 0.0)  # ties: order
    board.out.add(entries[2].agent_id)
    entry, wait = next_route(board, now=2.0, deadline_at=30.0)
    assert entry is entries[0] and wait == pytest.approx(27.0)
    board.out.add(entries[0].agent_id)
    assert next_route(board, now=2.0, deadline_at=30.0) == (None, 0.0)


async def test_a_route_that_served_serves_again_and_concurrent_requests_share_it():
    entries = catalog("only")
    # hedged: no probe, the first request is the route's probe
    script = Script({"only": [(0.2, ok(f"r{i}")) for i in range(3)]})
    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(probe_budget=1, probe_timeout=1.0),
        serving=ServingPolicy(first_byte=1.0, attempt=1.0, deadline=5.0),
        environ={"K": "secret"},
        chat=script,
    )
    async with session:
        results = await asyncio.gather(
            *(session.serve([{"role": "user", "content": str(i)}]) for i in range(3))
        )
    assert all(r.served_by and r.served_by.model == "only" for r in results)
    assert sorted(r.reply for r in results) == ["r0", "r1", "r2"]
    # one route, so the three requests went one after another (busy routes are waited for)
    starts = sorted(ts for _m, tokens, ts in script.calls if tokens is None)
    assert starts[1] - starts[0] >= 0.19 and starts[2] - starts[1] >= 0.19


def test_next_route_waits_for_a_busy_ready_route_before_trying_unprobed_ones():
    entries = catalog("ready", "unprobed")
    board = RouteBoard(entries)
    board.set(entries[0].agent_id, status=Readiness.READY)
    board.finish()
    board.busy.add(entries[0].agent_id)
    assert next_route(board, now=0.0, deadline_at=10.0) == (None, 10.0)
    board.busy.clear()
    assert next_route(board, now=0.0, deadline_at=10.0) == (entries[0], 0.0)
    board.out.add(entries[0].agent_id)
    assert next_route(board, now=0.0, deadline_at=10.0) == (entries[1], 0.0)


async def test_a_repair_round_asked_for_after_the_deadline_is_not_sent():
    entries = catalog("m")
    script = Script({"m": [(0.01, ok())]})
    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(probe_budget=0),
        serving=ServingPolicy(deadline=0.3),
        environ={"K": "secret-key-1234"},
        chat=script,
    )
    async with session:
        await asyncio.sleep(0.35)
        outcome, attempt = await session.call(entries[0], [{"role": "user", "content": "x"}])
    assert outcome.kind is OutcomeKind.TIMEOUT and "not sent" in outcome.detail
    assert attempt.purpose == "repair" and script.calls == []


async def test_a_pasted_key_with_a_trailing_newline_is_sent_stripped():
    entries = catalog("m")
    keys = []

    async def chat(client, *, api_key, **kw):
        keys.append(api_key)
        return ok()

    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(probe_budget=1),
        serving=ServingPolicy(deadline=5),
        environ={"K": " secret-key-1234\n"},
        chat=chat,
    )
    async with session:
        result = await session.serve([{"role": "user", "content": "x"}])
    assert result.ok and keys == ["secret-key-1234"]  # hedged: the request is its own probe
