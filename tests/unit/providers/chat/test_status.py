"""Real provider signals at the edge and routing's reaction (issue 12, part A).

Pure tables: every rate-limit hint form (:mod:`relay_review.providers.hints`), durations, the
``first_token`` policy rules. End to end with the fault fleet: keep-alive-only routes cut at
``first_token``, reasoning deltas as tokens, mid-stream 429/5xx, the LiteLLM header, gateway
auth confirmed by ``GET /models``, a spent daily quota, usage per attempt, BrokenPipe.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from relay_review._http import parse_duration
from relay_review.commands.common import add_serving_args, policy_from_args
from relay_review.config import Layer, PreflightPolicy, ServingPolicy, merge_layers
from relay_review.drill import FaultFleet
from relay_review.errors import UsageError
from relay_review.providers.chat.call import chat_call
from relay_review.providers.chat.keycheck import key_check
from relay_review.providers.chat.status import classify_http_error
from relay_review.providers.hints import read_rate_hint
from relay_review.records import Deadlines, Outcome, OutcomeKind, Phase, Usage
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.routing.session import RoutingSession

NOW = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
MESSAGES = [{"role": "user", "content": "hi"}]
SLACK = 0.5

# --------------------------------------------------------------------------- hint forms (pure)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2s", 2.0),
        ("1m30s", 90.0),
        ("6m0s", 360.0),
        ("0.5s", 0.5),
        ("350ms", 0.35),
        ("1h2m", 3720.0),
        ("7", 7.0),
        ("1.25", 1.25),
        ("-3", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("2x", None),
    ],
)
def test_parse_duration(text: str | None, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


GEMINI_PER_DAY = [
    {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. Please retry in 45.578569677s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            "generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaDimensions": {"model": "gemini-2.5-flash"},
                            "quotaValue": "250",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "45s"},
            ],
        }
    }
]
GEMINI_PER_MINUTE = [
    {
        "error": {
            "code": 429,
            "message": "Resource exhausted. Please retry in 12.5s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}],
                }
            ],
        }
    }
]
OPENROUTER_PER_DAY = {
    "error": {
        "message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free "
        "model requests per day",
        "code": 429,
        "metadata": {
            "headers": {
                "X-RateLimit-Limit": "50",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(NOW_MS + 7_200_000),
            },
            "provider_name": None,
        },
    },
    "user_id": "user_x",
}
GROQ_429 = {
    "error": {
        "message": "Rate limit reached for model `llama-3.3-70b-versatile` in organization "
        "`org_x` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Used 11800, "
        "Requested 400. Please try again in 5.289s. Visit https://console.groq.com/docs/rate-limits",
        "type": "tokens",
        "code": "rate_limit_exceeded",
    }
}
CLOUDFLARE_4006 = {
    "success": False,
    "errors": [
        {
            "code": 4006,
            "message": "you have used up your daily free allocation of 10,000 neurons, please "
            "upgrade to Cloudflare's Workers Paid plan if you would like to continue usage.",
        }
    ],
    "messages": [],
    "result": None,
}


#: (case, headers, body) -> (retry_after, daily, exhausted)
HINT_CASES: list[tuple[str, dict[str, str], Any, float | None, bool, bool]] = [
    ("retry-after seconds", {"Retry-After": "7"}, {}, 7.0, False, False),
    ("retry-after date", {"Retry-After": "Tue, 01 Sep 2026 12:00:30 GMT"}, {}, 30.0, False, False),
    ("retry-after-ms", {"retry-after-ms": "1500"}, {}, 1.5, False, False),
    ("litellm passthrough", {"llm_provider-retry-after": "7"}, {}, 7.0, False, False),
    (
        "retry-after wins over metadata",
        {"Retry-After": "3"},
        {"error": {"metadata": {"headers": {"Retry-After": "60"}}}},
        3.0,
        False,
        False,
    ),
    (
        "groq reset durations: the exhausted one",
        {
            "x-ratelimit-remaining-requests": "14000",
            "x-ratelimit-reset-requests": "2m59.56s",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "7.66s",
        },
        {},
        7.66,
        False,
        False,
    ),
    (
        "reset durations without remaining: the later",
        {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "350ms"},
        {},
        360.0,
        False,
        False,
    ),
    ("groq message", {}, GROQ_429, 5.289, False, False),
    (
        "openrouter epoch-ms header",
        {"X-RateLimit-Reset": str(NOW_MS + 42_000), "X-RateLimit-Remaining": "0"},
        {},
        42.0,
        False,
        True,
    ),
    ("openrouter free-models-per-day body", {}, OPENROUTER_PER_DAY, 7200.0, True, True),
    ("gemini per-minute", {}, GEMINI_PER_MINUTE, 12.5, False, False),
    # daily: the later of "retry in 45.5s" and midnight Pacific (PDT: 07:00 UTC on 2026-09-02)
    ("gemini PerDay quota id", {}, GEMINI_PER_DAY, 19 * 3600.0, True, False),
    ("cloudflare 4006: 00:00 UTC", {}, CLOUDFLARE_4006, 12 * 3600.0, True, False),
    ("no hint", {}, {"error": {"message": "Too Many Requests"}}, None, False, False),
    ("nim shape", {}, {"status": 429, "title": "Too Many Requests"}, None, False, False),
]


@pytest.mark.parametrize(
    ("headers", "body", "retry_after", "daily", "exhausted"),
    [case[1:] for case in HINT_CASES],
    ids=[case[0] for case in HINT_CASES],
)
def test_rate_hint_forms(
    headers: dict[str, str], body: Any, retry_after: float | None, daily: bool, exhausted: bool
) -> None:
    hint = read_rate_hint(headers, body, now=NOW)
    if retry_after is None:
        assert hint.retry_after is None
    else:
        assert hint.retry_after == pytest.approx(retry_after, abs=0.01), hint
    assert (hint.daily, hint.exhausted) == (daily, exhausted), hint


@pytest.mark.parametrize(
    ("body", "reset"),
    [
        (OPENROUTER_PER_DAY, "2026-09-01T14:00:00Z"),
        (CLOUDFLARE_4006, "2026-09-02T00:00:00Z"),
        (GEMINI_PER_DAY, "2026-09-02T07:00:00Z"),
    ],
    ids=["openrouter", "cloudflare", "gemini"],
)
def test_daily_quota_429_carries_its_reset(body: Any, reset: str) -> None:
    out = classify_http_error(429, {}, json.dumps(body).encode(), now=NOW)
    assert out.kind is OutcomeKind.RATE_LIMITED
    assert out.daily_quota and out.reset_at == reset
    assert out.detail.startswith("daily quota used up: HTTP 429")


def test_cloudflare_message_is_the_detail() -> None:
    out = classify_http_error(429, {}, json.dumps(CLOUDFLARE_4006).encode(), now=NOW)
    assert "daily free allocation" in out.detail


# --------------------------------------------------------------------------- first_token policy


def test_first_token_default_is_60s_capped_by_attempt() -> None:
    assert ServingPolicy().deadlines().first_token == 60.0
    assert ServingPolicy(attempt=30).deadlines().first_token == 30.0
    assert ServingPolicy(first_token=5).deadlines().first_token == 5.0


def test_first_token_longer_than_attempt_is_refused() -> None:
    with pytest.raises(UsageError, match=r"serving.first_token = 90 .* at most serving.attempt"):
        merge_layers([Layer("p.toml", {"serving": {"first_token": 90, "attempt": 60}})])


def test_first_token_flag_goes_through_the_policy_path() -> None:
    parser = argparse.ArgumentParser()
    add_serving_args(parser)
    args = parser.parse_args(["--first-token-timeout", "15"])
    assert policy_from_args(args).serving.first_token == 15.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--first-token-timeout", "0"])
    # --deadline alone lowers an inherited first_token with the attempt
    lowered = merge_layers(
        [
            Layer("p.toml", {"serving": {"first_token": 50}}),
            Layer("flags", {"serving": {"deadline": 20}}, caps_attempt=True),
        ]
    )
    assert (lowered.serving.attempt, lowered.serving.first_token) == (20, 20)


# --------------------------------------------------------------------------- the call, over sockets

KEY = "sk-gateway-master-key-0123456789"
FLEET_MODELS = [
    "pings@0.1",
    "keepalive@0.3,n=3,reasoning",
    "keepalive@0.3,n=3",
    "sse-error",
    "sse-error@code=429,retry_after=5",
    "sse-error@code=400",
    "429@7,litellm",
    "429@groq,retry_after=3",
    "healthy",
]


@pytest.fixture(scope="module")
def fleet() -> Any:
    with FaultFleet({"gw": {"models": FLEET_MODELS, "api_key": KEY}}, reply="one two") as f:
        yield f


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


async def _call(client: httpx.AsyncClient, fleet: FaultFleet, model: str, d: Deadlines) -> Any:
    return await chat_call(
        client,
        base_url=fleet.base_url("gw"),
        api_key=KEY,
        model=model,
        messages=MESSAGES,
        deadlines=d,
    )


async def test_keepalive_only_route_is_cut_at_first_token(client, fleet) -> None:
    d = Deadlines(connect=1, first_byte=0.5, idle=0.5, first_token=1.0, attempt=5)
    out = await _call(client, fleet, "pings@0.1", d)
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.TIMEOUT, Phase.FIRST_TOKEN, 200)
    assert "first_token: keep-alive only" in out.detail
    assert out.first_byte_s is not None and out.first_byte_s < 0.5  # pings satisfied first_byte
    assert 1.0 <= out.elapsed_s < 1.0 + SLACK


async def test_pings_satisfy_first_byte_and_idle_until_the_first_token(client, fleet) -> None:
    # comments 0.3 s apart for ~0.9 s: longer than first_byte and idle (0.5), under first_token
    d = Deadlines(connect=1, first_byte=0.5, idle=0.5, first_token=2.0, attempt=5)
    assert (await _call(client, fleet, "keepalive@0.3,n=3", d)).kind is OutcomeKind.OK
    # the same pings with first_token shorter than the pings: cut
    d = Deadlines(connect=1, first_byte=0.5, idle=0.5, first_token=0.6, attempt=5)
    out = await _call(client, fleet, "keepalive@0.3,n=3", d)
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.FIRST_TOKEN)


async def test_reasoning_deltas_count_as_tokens(client, fleet) -> None:
    d = Deadlines(connect=1, first_byte=0.5, idle=0.5, first_token=0.2, attempt=5)
    out = await _call(client, fleet, "keepalive@0.3,n=3,reasoning", d)
    assert out.kind is OutcomeKind.OK, out
    assert out.content == "one two"  # reasoning is not part of the reply


@pytest.mark.parametrize(
    ("model", "kind", "retry_after"),
    [
        ("sse-error", OutcomeKind.SERVER_ERROR, None),
        ("sse-error@code=429,retry_after=5", OutcomeKind.RATE_LIMITED, 5.0),
        ("sse-error@code=400", OutcomeKind.BAD_REPLY, None),
    ],
)
async def test_mid_stream_errors_by_code(client, fleet, model, kind, retry_after) -> None:
    out = await _call(client, fleet, model, Deadlines(attempt=5))
    assert (out.kind, out.http_status, out.retry_after) == (kind, 200, retry_after), out
    assert "error event" in out.detail


@pytest.mark.parametrize(
    ("model", "retry_after"), [("429@7,litellm", 7.0), ("429@groq,retry_after=3", 3.0)]
)
async def test_rate_limit_hints_over_sockets(client, fleet, model, retry_after) -> None:
    out = await _call(client, fleet, model, Deadlines(attempt=5))
    assert (out.kind, out.retry_after) == (OutcomeKind.RATE_LIMITED, retry_after)


async def test_key_check_tells_a_bad_key_from_a_good_one(client, fleet) -> None:
    d = Deadlines(connect=1, first_byte=1, idle=1, attempt=1)
    base = fleet.base_url("gw")
    assert await key_check(client, base_url=base, api_key=KEY, deadlines=d) is False
    assert await key_check(client, base_url=base, api_key="wrong", deadlines=d) is True
    dead = "http://127.0.0.1:9/v1"
    assert await key_check(client, base_url=dead, api_key=KEY, deadlines=d) is None


# --------------------------------------------------------------------------- routing's reaction


def _entries(fleet: FaultFleet, routes: list[tuple[str, str, str]]) -> list:
    raws = [
        {
            "account": account,
            "provider": provider,
            "model": model,
            "base_url": fleet.base_url(account),
            "api_key_env": f"K_{account.upper()}",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for account, provider, model in routes
    ]
    return build_catalog(parse_discovery({"routes": raws}), limit=50, account_cap=50).selected


async def _serve(entries, environ, *, budget=0, deadline=10.0, **serving) -> Any:
    session = RoutingSession(
        entries,
        preflight=PreflightPolicy(probe_budget=budget, probe_timeout=1.0, mode="eager"),
        serving=ServingPolicy(deadline=deadline, **serving),
        environ=environ,
    )
    async with session:
        result = await session.serve(MESSAGES)
    return session, result


@pytest.mark.integration
async def test_gateway_upstream_401_rules_out_only_that_route() -> None:
    models = {"up/401": "401", "up/402": "402", "up/ok": "healthy"}
    async with FaultFleet({"gw": {"models": models, "api_key": KEY}}) as fleet:
        entries = _entries(fleet, [("gw", "openai_compatible", m) for m in models])
        _, result = await _serve(entries, {"K_GW": KEY})
        models_calls = [r for r in fleet.requests if r.path.endswith("/models")]
    assert result.served_by is not None and result.served_by.model == "up/ok"
    assert [a.outcome for a in result.attempts] == ["auth_failed", "payment_required", "ok"]
    assert len(models_calls) == 1  # one key check per account per run, and it passed


@pytest.mark.integration
async def test_wrong_gateway_master_key_still_removes_the_whole_account() -> None:
    accounts = {
        "gw": {"models": {"m/a": "healthy", "m/b": "healthy"}, "api_key": KEY},
        "other": {"models": {"o/ok": "healthy@0.05"}},
    }
    async with FaultFleet(accounts) as fleet:
        entries = _entries(
            fleet,
            [
                ("gw", "openai_compatible", "m/a"),
                ("gw", "openai_compatible", "m/b"),
                ("other", "openai_compatible", "o/ok"),
            ],
        )
        session, result = await _serve(entries, {"K_GW": "wrong-key", "K_OTHER": "x"})
        tried_gw = fleet.chat_requests("gw")
    assert result.served_by is not None and result.served_by.account == "other"
    assert len(tried_gw) == 1  # m/b never tried: the key check confirmed the account is out
    rows = {r["model"]: r for r in (p.model_dump() for p in session.readiness())}
    assert rows["m/b"]["status"] == "rejected"
    assert "key refused by GET /models" in rows["m/b"]["detail"]


@pytest.mark.integration
async def test_direct_provider_401_removes_the_account_without_a_key_check() -> None:
    models = {"x/401": "401", "x/ok": "healthy"}
    async with FaultFleet({"nim": {"models": models}}) as fleet:
        entries = _entries(fleet, [("nim", "nvidia_nim", m) for m in models])
        _, result = await _serve(entries, {"K_NIM": "k"})
        assert not [r for r in fleet.requests if r.path.endswith("/models")]
    assert result.served_by is None
    assert [a.model for a in result.attempts] == ["x/401"]


@pytest.mark.integration
async def test_daily_quota_takes_the_accounts_free_routes_out_after_one_request() -> None:
    accounts = {
        "or": {"models": {"f/a": "429@7200,daily", "f/b": "healthy", "f/c": "healthy"}},
        "other": {"models": {"o/ok": "healthy@0.05"}},
    }
    async with FaultFleet(accounts) as fleet:
        entries = _entries(
            fleet,
            [
                ("or", "openrouter", "f/a"),
                ("or", "openrouter", "f/b"),
                ("or", "openrouter", "f/c"),
                ("other", "openai_compatible", "o/ok"),
            ],
        )
        session, result = await _serve(entries, {"K_OR": "k", "K_OTHER": "k"}, budget=1)
        assert len(fleet.chat_requests("or")) == 1
    assert result.served_by is not None and result.served_by.account == "other"
    rows = {r["model"]: r for r in (p.model_dump() for p in session.readiness())}
    for model in ("f/a", "f/b", "f/c"):
        row = rows[model]
        assert row["status"] == "deferred", row
        assert isinstance(row["retry_after"], float) and row["retry_after"] > 7000
        assert row["reset_at"] and row["reset_at"].endswith("Z")
    assert "daily quota" in rows["f/b"]["detail"] and "resets" in rows["f/b"]["detail"]


@pytest.mark.integration
async def test_usage_is_requested_and_recorded_per_attempt() -> None:
    async with FaultFleet({"gw": {"models": ["u/healthy"]}}, reply="one two three") as fleet:
        entries = _entries(fleet, [("gw", "openai_compatible", "u/healthy")])
        _, result = await _serve(entries, {"K_GW": "k"})
        body = fleet.chat_requests("gw")[-1].body
    assert body is not None and body["stream_options"] == {"include_usage": True}
    (attempt,) = result.attempts
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (1, 3)
    assert attempt.model_dump()["completion_tokens"] == 3


@pytest.mark.integration
async def test_keepalive_only_route_fails_over_at_first_token() -> None:
    accounts = {"a": {"models": ["p/pings@0.2"]}, "b": {"models": ["h/healthy"]}}
    async with FaultFleet(accounts) as fleet:
        entries = _entries(
            fleet, [("a", "openai_compatible", "p/pings@0.2"), ("b", "nvidia_nim", "h/healthy")]
        )
        _, result = await _serve(entries, {"K_A": "k", "K_B": "k"}, first_token=1.0)
    first, _ = result.attempts
    assert (first.phase, first.outcome) == ("first_token", "timeout")
    assert "first_token: keep-alive only" in first.detail
    assert first.elapsed_s < 1.0 + SLACK
    assert result.served_by is not None and result.served_by.model == "h/healthy"


# --------------------------------------------------------------------------- the command line


@pytest.mark.integration
def test_broken_pipe_on_stdout_exits_quietly(tmp_path) -> None:
    routes = [
        {
            "account": "a",
            "provider": "openai_compatible",
            "model": f"m{i}",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "K",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for i in range(3)
    ]
    path = tmp_path / "discovery.json"
    path.write_text(json.dumps({"routes": routes}))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes (``| head -0``)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "relay_review", "catalog", "--discovery", str(path)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_usage_keeps_whole_counts_only() -> None:
    """A provider's ``usage`` JSON becomes counts at the edge: a negative, boolean, fractional or
    text count is no count, and nothing else of the object (where a key could echo) is kept."""
    usage = Usage.of({"prompt_tokens": 12, "completion_tokens": True, "echo": "sk-or-v1-key"})
    assert usage == Usage(prompt_tokens=12, completion_tokens=None)
    assert Usage.of({"prompt_tokens": -1, "completion_tokens": 2.5}) == Usage()
    assert Usage.of(None) is None
    ok = Outcome(kind=OutcomeKind.OK, usage=Usage.of({"prompt_tokens": 3, "completion_tokens": 4}))
    assert (ok.prompt_tokens, ok.completion_tokens) == (3, 4)
    assert Outcome(kind=OutcomeKind.OK).prompt_tokens is None
