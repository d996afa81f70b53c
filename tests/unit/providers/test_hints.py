"""Provider waits are input, not truth (issue 19): a hostile ``Retry-After`` (``1e999``,
``99999999999``, NaN, negative) never raises out of the chat call, a route's wait is capped at
the time left in the run, a remembered cooldown at the policy's longest ``[memory]`` TTL, and an
account window a provider closes at a day. A property test feeds random headers and bodies to
the rate-limit hint parser.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay_review.config import MemoryPolicy, PreflightPolicy, ServingPolicy
from relay_review.pipeline.route_memory import classify, longest_ttl
from relay_review.providers.chat.call import chat_call
from relay_review.providers.chat.status import classify_http_error
from relay_review.providers.hints import MAX_WAIT_S, read_rate_hint, reset_at
from relay_review.records import Deadlines, Outcome, OutcomeKind, Readiness
from relay_review.routing.board import RouteBoard
from relay_review.routing.budget import LONGEST_CLOSE_S, AccountBudgets
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.routing.failover import next_route
from relay_review.routing.session import RoutingSession
from relay_review.state.ledger import Budget, MemoryLedger

HOSTILE = ["1e999", "-1e999", "inf", "nan", "99999999999", "1e308", "-5", "0x10", "9" * 400]
D = Deadlines(connect=1.0, first_byte=1.0, idle=1.0, attempt=2.0)


def finite_wait(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and 0.0 <= value <= MAX_WAIT_S)


# --------------------------------------------------------------------------- the parser


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(
    "header",
    ["retry-after", "retry-after-ms", "llm_provider-retry-after", "x-ratelimit-reset"],
)
def test_a_hostile_number_in_any_header_is_a_finite_wait(header: str, value: str) -> None:
    outcome = classify_http_error(429, {header: value}, b"")
    assert outcome.kind is OutcomeKind.RATE_LIMITED
    assert finite_wait(outcome.retry_after), outcome
    if outcome.retry_after is not None:
        assert outcome.reset_at is not None  # a date a report can print


def test_retry_after_1e999_is_the_cap_and_99999999999_is_not_three_thousand_years() -> None:
    for value in ("1e999", "99999999999"):
        hint = read_rate_hint({"Retry-After": value}, None)
        assert hint.retry_after == MAX_WAIT_S
    body = {"error": {"metadata": {"retry_after": 1e308, "headers": {"Retry-After": "1e999"}}}}
    assert read_rate_hint({}, body).retry_after == MAX_WAIT_S
    huge = json.loads('{"error": {"metadata": {"retry_after": 1' + "0" * 400 + "}}}")
    assert read_rate_hint({}, huge).retry_after == MAX_WAIT_S  # an int no float can hold


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
HEADER_NAMES = st.sampled_from(
    [
        "retry-after",
        "Retry-After",
        "retry-after-ms",
        "llm_provider-retry-after",
        "x-ratelimit-reset",
        "x-ratelimit-remaining",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
    ]
) | st.text(max_size=20)
NUMBERISH = st.one_of(
    st.sampled_from([*HOSTILE, "2s", "1m30s", "350ms", "Wed, 21 Oct 2015 07:28:00 GMT", "0"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
    st.text(max_size=30),
)
#: Error bodies shaped like the providers' (so the random values land where the parser looks).
SHAPED = st.fixed_dictionaries(
    {
        "error": st.fixed_dictionaries(
            {
                "message": st.one_of(
                    st.text(max_size=60),
                    NUMBERISH.map(lambda n: f"Please try again in {n}s"),
                    st.just("free-models-per-day"),
                ),
                "metadata": st.fixed_dictionaries(
                    {
                        "retry_after": JSON,
                        "headers": st.dictionaries(HEADER_NAMES, NUMBERISH, max_size=4),
                    }
                ),
                "details": st.lists(
                    st.fixed_dictionaries(
                        {
                            "retryDelay": NUMBERISH,
                            "violations": st.lists(
                                st.fixed_dictionaries({"quotaId": st.text(max_size=30)}),
                                max_size=2,
                            ),
                        }
                    ),
                    max_size=2,
                ),
            }
        ),
        "errors": st.lists(st.fixed_dictionaries({"code": JSON, "message": JSON}), max_size=2),
    }
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    headers=st.dictionaries(HEADER_NAMES, NUMBERISH, max_size=6),
    body=st.one_of(JSON, SHAPED, st.lists(SHAPED, min_size=1, max_size=1)),
    now=st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
    ),
)
def test_no_exception_escapes_the_hint_parser_and_waits_are_finite(
    headers: dict[str, str], body: Any, now: datetime
) -> None:
    hint = read_rate_hint(headers, body, now=now)
    assert finite_wait(hint.retry_after), hint
    reset_at(hint.retry_after, now)  # a date for the report, never an OverflowError
    raw = json.dumps(body, allow_nan=True).encode()
    outcome = classify_http_error(429, headers, raw)
    assert finite_wait(outcome.retry_after), outcome


# --------------------------------------------------------------------------- the chat call


def _entries(*models: str) -> list[Any]:
    raws = [
        {
            "account": f"acct{i}",
            "provider": "openai_compatible",
            "model": m,
            "base_url": "http://provider.test/v1",
            "api_key_env": "K",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for i, m in enumerate(models)
    ]
    return build_catalog(parse_discovery({"routes": raws}), limit=10).selected


def _provider(request: httpx.Request) -> httpx.Response:
    """``hostile`` answers 429 with ``Retry-After: 1e999``; any other model a plain reply."""
    body = json.loads(request.content)
    if body["model"] == "hostile":
        return httpx.Response(429, headers={"Retry-After": "1e999"}, json={"error": {}})
    reply = {"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}
    return httpx.Response(200, json=reply)


async def test_retry_after_1e999_does_not_raise_out_of_the_chat_call() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(_provider)) as client:
        outcome = await chat_call(
            client,
            base_url="http://provider.test/v1",
            api_key="k",
            model="hostile",
            messages=[{"role": "user", "content": "hi"}],
            deadlines=D,
        )
    assert outcome.kind is OutcomeKind.RATE_LIMITED and outcome.retry_after == MAX_WAIT_S
    assert outcome.reset_at is not None


async def test_a_healthy_route_serves_when_another_says_retry_after_1e999() -> None:
    transport = httpx.MockTransport(_provider)

    async def chat(_client: httpx.AsyncClient, **request: Any) -> Outcome:
        async with httpx.AsyncClient(transport=transport) as client:
            return await chat_call(client, **request)

    session = RoutingSession(
        _entries("hostile", "healthy"),
        preflight=PreflightPolicy(probe_budget=0),
        serving=ServingPolicy(connect=1, first_byte=1, idle=1, attempt=2, deadline=5),
        environ={"K": "secret"},
        chat=chat,
    )
    async with session:
        result = await session.serve([{"role": "user", "content": "hi"}])
    assert result.served_by is not None and result.served_by.model == "healthy"
    assert [a.outcome for a in result.attempts] == ["rate_limited", "ok"]


# --------------------------------------------------------------------------- the caps


def test_a_route_wait_is_capped_at_the_time_left_in_the_run() -> None:
    (entry,) = _entries("limited")
    board = RouteBoard([entry])
    board.finished = True
    board.set(entry.agent_id, status=Readiness.DEFERRED, retry_after=MAX_WAIT_S, finished_at=0)
    assert next_route(board, 0.0, 60.0) == (None, 0.0)  # never waited for: ends now
    board.set(entry.agent_id, retry_after=30.0)
    picked, wait = next_route(board, 0.0, 60.0)
    assert picked is entry and wait == 30.0


def test_a_budget_held_proven_route_is_not_picked_before_its_window_frees() -> None:
    held, spare = _entries("held", "spare")
    board = RouteBoard([held, spare])
    board.finished = True
    board.proven.add(held.agent_id)
    board.set(spare.agent_id, status=Readiness.READY)
    assert board.hold(held.agent_id, 30.0)
    assert not board.hold(held.agent_id, 30.5)  # the same window: no second note
    assert next_route(board, 0.0, 60.0) == (spare, 0.0)  # another account serves meanwhile
    board.out.add(spare.agent_id)
    assert next_route(board, 0.0, 60.0) == (held, 30.5)  # waits for the window, no spin
    assert next_route(board, 0.0, 20.0) == (None, 0.0)  # frees after the deadline: ends
    assert next_route(board, 30.5, 60.0) == (held, 0.0)  # freed: proven again


def test_a_remembered_cooldown_is_capped_at_the_longest_memory_ttl() -> None:
    policy = MemoryPolicy()
    outcome = Outcome(kind=OutcomeKind.RATE_LIMITED, http_status=429, retry_after=99999999999)
    memo = classify(outcome, served=False, now=1000.0, policy=policy)
    assert memo is not None and memo.until - 1000.0 == longest_ttl(policy) == policy.review
    short = MemoryPolicy(review=600, dead=600, timeout_max=600, proven=600)
    memo = classify(outcome, served=False, now=0.0, policy=short)
    assert memo is not None and memo.until == 600


async def test_a_provider_closes_an_account_window_for_at_most_a_day() -> None:
    clock = [1_000_000.0]
    ledger = MemoryLedger(clock=lambda: clock[0])
    budgets = AccountBudgets(ledger, {"acct0": Budget(rpm=5)})
    (entry,) = _entries("spent")
    spent = Outcome(
        kind=OutcomeKind.RATE_LIMITED, http_status=429, retry_after=1e12, quota_exhausted=True
    )
    await budgets.learn(entry, spent)
    refused = await ledger.reserve("acct0", Budget(rpm=5))
    assert not refused.granted and refused.wait_s == pytest.approx(LONGEST_CLOSE_S)
    clock[0] += LONGEST_CLOSE_S + 1
    assert (await ledger.reserve("acct0", Budget(rpm=5))).granted


def test_reset_at_never_overflows() -> None:
    assert reset_at(float("inf")) is not None
    assert reset_at(float("nan")) is None
    assert reset_at(20.0, datetime.max.replace(tzinfo=UTC) - timedelta(seconds=10)) is None


async def test_a_remembered_route_out_of_budget_lets_the_others_be_probed_and_serve() -> None:
    remembered, other = _entries("remembered", "other")
    ledger = MemoryLedger()
    await ledger.reserve("acct0", Budget(rpm=1))  # another run used the account's one slot
    calls: list[tuple[str, int | None]] = []

    async def chat(_client: Any, *, model: str, max_tokens: int | None = None, **_: Any) -> Outcome:
        calls.append((model, max_tokens))
        return Outcome(kind=OutcomeKind.OK, http_status=200, content="fine", finish_reason="stop")

    session = RoutingSession(
        [remembered, other],
        preflight=PreflightPolicy(probe_budget=6, probe_timeout=1),
        serving=ServingPolicy(connect=1, first_byte=1, idle=1, attempt=2, deadline=5),
        environ={"K": "secret"},
        chat=chat,
        budgets=AccountBudgets(ledger, {"acct0": Budget(rpm=1)}),
    )
    session.board.recall(
        remembered.agent_id, usable=True, status=Readiness.UNPROBED, detail="remembered: served"
    )
    async with session:
        result = await session.serve([{"role": "user", "content": "hi"}])
    assert result.served_by is not None and result.served_by.model == "other"
    assert session.elapsed() < 2.0  # not at the deadline
    assert [a.outcome for a in result.attempts] == ["rate_limited", "ok"]  # one note, one try
    assert ("remembered", None) not in calls  # nothing sent past its budget
    assert ("other", 16) in calls  # probed once the remembered route was held back
