"""The board's hedging terms (issue 25), pure: when probes hold back for a route served first,
which request a ready route goes to (the one waiting on a takeover, then the oldest)."""

from __future__ import annotations

import math

from catalog_entries import entries
from relay_review.records import Readiness
from relay_review.routing.board import HEDGE_FACTOR, HEDGE_FLOOR_S, RouteBoard, hedge_delay
from relay_review.routing.failover import next_route


def test_probes_hold_back_until_the_lead_goes_hedge_delay_without_a_first_byte() -> None:
    lead, _other = entries("lead", "other")
    board = RouteBoard([lead, _other])
    board.lead_with(lead.agent_id)
    assert board.hedge_wait(0.0, 0.5) == math.inf  # not sent yet: its request is coming
    board.sending[lead.agent_id] = 1.0
    assert math.isclose(board.hedge_wait(1.2, 0.5) or 0.0, 0.3)
    assert board.hedge_wait(1.6, 0.5) is None  # overdue: probe the others
    assert board.hedge_wait(1.6, None) == math.inf  # eager / remembered: while in play
    board.first_byte(lead.agent_id)
    assert board.hedge_wait(9.0, 0.5) == math.inf  # it answers: no probe at all
    board.out.add(lead.agent_id)
    assert board.hedge_wait(9.0, 0.5) is None  # it failed: probe at once


def test_a_lead_held_by_its_budget_does_not_hold_the_probes_back() -> None:
    (lead,) = entries("lead")
    board = RouteBoard([lead])
    board.lead_with(lead.agent_id)
    board.hold(lead.agent_id, 60.0)
    assert board.hedge_wait(1.0, 0.5) is None


def test_a_ready_route_goes_to_the_request_awaiting_a_takeover_first() -> None:
    lead, ready = entries("lead", "ready")
    board = RouteBoard([lead, ready])
    board.lead_with(lead.agent_id)
    board.busy.add(lead.agent_id)
    board.sending[lead.agent_id] = 0.0
    board.set(ready.agent_id, status=Readiness.READY)
    # a newer request waits: the lead's request (no first byte yet) takes the ready route
    entry, wait = next_route(board, now=1.0, deadline_at=10.0)
    assert entry is None and wait > 0
    board.first_byte(lead.agent_id)  # the lead answers after all: the ready route is free
    assert next_route(board, now=1.0, deadline_at=10.0) == (ready, 0.0)


def test_older_requests_pick_first_and_a_younger_one_waits_not_gives_up() -> None:
    (only,) = entries("only")
    board = RouteBoard([only])
    board.set(only.agent_id, status=Readiness.READY)
    board.finish()
    older, younger = board.enter(), board.enter()
    entry, wait = next_route(board, now=0.0, deadline_at=10.0, ticket=younger)
    assert entry is None and wait == 10.0  # left to the older request, and waits for news
    assert next_route(board, now=0.0, deadline_at=10.0, ticket=older) == (only, 0.0)
    board.leave(older)
    assert next_route(board, now=0.0, deadline_at=10.0, ticket=younger) == (only, 0.0)


def test_the_hedge_delay_derives_from_the_remembered_first_byte_within_its_bounds() -> None:
    assert math.isclose(hedge_delay(0.2, 1.0), HEDGE_FACTOR * 0.2)  # 0.8 s, not 1 s
    assert hedge_delay(0.05, 0.5) == HEDGE_FLOOR_S  # 0.4 s: not hedged on jitter
    assert hedge_delay(2.0, 0.5) == 0.5  # a slow memory never stretches past the setting
    assert hedge_delay(None, 0.5) == 0.5  # nothing remembered: the setting
    for hostile in (1e9, math.inf, -1.0, -math.inf, math.nan):
        assert hedge_delay(hostile, 0.5) == 0.5, hostile  # never longer, never broken
    assert hedge_delay(0.25, 2.0) == HEDGE_FACTOR * 0.25  # far under the bound: the memory's
    assert hedge_delay(0.05, 0.08) == 0.08  # a setting below the floor still bounds it


def test_a_route_remembered_at_200_ms_is_hedged_after_the_factor_times_that() -> None:
    lead, _other = entries("lead", "other")
    board = RouteBoard([lead, _other])
    board.recall(lead.agent_id, usable=True, status=Readiness.UNPROBED, detail="", first_byte_s=0.2)
    assert not board.confirmed(lead.agent_id)  # hedged like a lead until it answers this run
    board.sending[lead.agent_id] = 1.0
    delay = HEDGE_FACTOR * 0.2  # 0.8 s
    assert math.isclose(board.hedge_wait(1.1, 2.0) or 0.0, delay - 0.1)
    assert board.hedge_wait(1.0 + delay + 0.01, 2.0) is None  # no first byte: probe the others
    board.first_byte(lead.agent_id)
    assert board.confirmed(lead.agent_id) and board.hedge_wait(9.0, 2.0) == math.inf


def test_a_lead_whose_stream_flows_is_waited_on_up_to_the_answer_bound() -> None:
    lead, _other = entries("lead", "other")
    board = RouteBoard([lead, _other])
    board.lead_with(lead.agent_id)
    board.sending[lead.agent_id] = 1.0
    assert board.hedge_wait(1.6, 0.5, 5.0) is None  # silent past 0.5 s: probe the others
    board.alive(lead.agent_id)  # a keep-alive comment: the stream flows, no answer yet
    assert math.isclose(board.hedge_wait(1.6, 0.5, 5.0) or 0.0, 4.4)
    assert board.hedge_wait(6.1, 0.5, 5.0) is None  # no answer within 5 s: probe the others
    assert board.hedge_wait(1.6, 0.5) is None  # no answer bound (eager tests): the delay
    assert math.isclose(board.hedge_wait(1.6, 2.0, 0.3) or 0.0, 1.4)  # never under the delay


def test_a_flowing_stream_of_a_route_remembered_fast_keeps_the_factor() -> None:
    lead, _other = entries("lead", "other")
    board = RouteBoard([lead, _other])
    board.recall(lead.agent_id, usable=True, status=Readiness.UNPROBED, detail="", first_byte_s=0.5)
    board.sending[lead.agent_id] = 1.0
    board.alive(lead.agent_id)
    delay = HEDGE_FACTOR * 0.5  # 2 s: memory knows its answer starts in 0.5 s
    assert math.isclose(board.hedge_wait(1.5, 0.5, 5.0) or 0.0, delay - 0.5)
    assert board.hedge_wait(1.0 + delay + 0.01, 0.5, 5.0) is None
