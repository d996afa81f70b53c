"""The provider edge replayed from cassettes of real servers' answers (vcrpy, never the network).

``tests/cassettes/litellm/`` was recorded from a real LiteLLM proxy (1.108.7) by
``tools/record_litellm.py``; ``tests/cassettes/providers/`` holds answers written by hand from
each provider's documented bodies (see ``tests/cassettes/README.md``). vcrpy replays them with
``record_mode="none"``: a request no cassette holds fails the test instead of going out. No
test here uses respx.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from pathlib import Path

import httpx
import pytest
import vcr
import yaml

from relay_review.providers import hints
from relay_review.providers.chat.call import chat_call
from relay_review.providers.discovery import discover
from relay_review.providers.discovery.chat_filter import is_chat_model
from relay_review.records import Account, Deadlines, OutcomeKind

CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"
RECORDER = Path(__file__).resolve().parents[4] / "tools" / "record_litellm.py"
KEY = "test-key-not-a-secret-000"
DEADLINES = Deadlines(connect=2, first_byte=5, idle=5, attempt=10)
MESSAGES = [{"role": "user", "content": "Say OK."}]

replay = vcr.VCR(
    cassette_library_dir=str(CASSETTES), record_mode="none", filter_headers=["authorization"]
)


class Bounds:
    timeout = 5.0
    models_dev_url = "http://127.0.0.1:9/api.json"
    zdr_url = "http://127.0.0.1:9/zdr"


def recorded_uri(cassette: str) -> str:
    """The URI the cassette's first request went to (the proxy's port changes per recording)."""
    data = yaml.safe_load((CASSETTES / cassette).read_text(encoding="utf-8"))
    return data["interactions"][0]["request"]["uri"]


def base_of(cassette: str) -> str:
    uri = recorded_uri(cassette)
    return uri.split("?", 1)[0].rsplit("/chat/completions", 1)[0].rsplit("/models", 1)[0]


class _RecordedDay(datetime):
    """``datetime`` whose ``now`` is a fixed day before every recorded reset."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> _RecordedDay:
        return cls(2026, 6, 1, 12, tzinfo=tz or UTC)


async def replay_chat(cassette: str, model: str) -> object:
    with replay.use_cassette(cassette):
        async with httpx.AsyncClient() as client:
            return await chat_call(
                client,
                base_url=base_of(cassette),
                api_key=KEY,
                model=model,
                messages=MESSAGES,
                deadlines=DEADLINES,
            )


def gateway(base_url: str, kind: str = "openai_compatible") -> Account:
    return Account(
        name="proxy", kind=kind, base_url=base_url, api_key_env="PROXY_KEY", pricing="unknown"
    )


# --------------------------------------------------------------------------------------------
# scrubbed


def _master_key() -> str:
    match = re.search(r'^MASTER_KEY = "([^"]+)"', RECORDER.read_text(encoding="utf-8"), re.M)
    assert match, "tools/record_litellm.py names its MASTER_KEY"
    return match.group(1)


def test_every_cassette_is_scrubbed_of_keys() -> None:
    files = sorted(CASSETTES.rglob("*.yaml"))
    assert len(files) >= 12
    master = _master_key()
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"Bearer\s+\S", text), path
        assert not re.search(r"\bsk-[A-Za-z0-9_-]{6,}", text), path
        assert master not in text, path
        assert "upstream-good-key" not in text and "upstream-wrong-key" not in text, path
        for interaction in yaml.safe_load(text)["interactions"]:
            assert "authorization" not in {h.lower() for h in interaction["request"]["headers"]}


# --------------------------------------------------------------------------------------------
# discovery over the recorded wildcard listing


async def test_wildcard_listing_keeps_chat_models_only() -> None:
    base = base_of("litellm/wildcard_listing.yaml")
    with replay.use_cassette("litellm/wildcard_listing.yaml"):
        result = await discover([gateway(base)], {"PROXY_KEY": KEY}, Bounds())
    [summary] = result.accounts
    assert summary.status == "ok" and summary.listed > 200
    kept = {route.model for route in result.routes}
    assert summary.kept == len(kept)
    dropped = summary.dropped
    # LiteLLM's /v1/models declares each id's ``mode`` (from its cost map): that decides first
    assert dropped["declared mode: image_generation"] >= 50  # gpt-image-* and size variants
    for mode in ("video_generation", "embedding", "audio_speech", "audio_transcription"):
        assert dropped[f"declared mode: {mode}"] >= 4, mode
    for mode in ("realtime", "moderation", "responses"):
        assert dropped[f"declared mode: {mode}"] >= 2, mode
    # the ids it lists without a mode fall to the name list
    assert dropped["legacy completion"] >= 2  # babbage-002, davinci-002
    assert summary.listed == summary.kept + sum(dropped.values())
    assert result.report(None)["dropped"] == {"proxy": dropped}
    for model in ("openai/gpt-4o", "openai/gpt-5-mini", "openai/o3-mini", "openai/chat-latest"):
        assert model in kept
    for model in kept:
        assert not re.search(r"image|embed|tts|whisper|sora|realtime|moderation|-002|-pro", model)
    assert {"good", "badkey", "limited", "silent", "cooled"} <= kept  # the named entries


async def test_wrong_master_key_is_a_listing_error() -> None:
    base = base_of("litellm/wrong_master_key.yaml")
    with replay.use_cassette("litellm/wrong_master_key.yaml"):
        result = await discover([gateway(base)], {"PROXY_KEY": KEY}, Bounds())
    assert result.routes == []
    assert [e.model_dump() for e in result.errors] == [
        {"account": "proxy", "kind": "openai_compatible", "error": "HTTP 400: No connected db."}
    ]


async def test_cloudflare_catalog_reads_task_and_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    account = Account(
        name="cloudflare",
        kind="cloudflare",
        base_url="https://api.cloudflare.com/client/v4/accounts/0123456789abcdef0123456789abcdef/ai/v1",
        api_key_env="CLOUDFLARE_API_TOKEN",
        pricing="listing",
    )
    with replay.use_cassette("providers/cloudflare_models_search.yaml"):
        result = await discover([account], {"CLOUDFLARE_API_TOKEN": KEY}, Bounds())
    routes = {route.model: route for route in result.routes}
    assert set(routes) == {
        "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
        "@cf/openai/gpt-oss-120b",
        "@cf/example/free-chat",
        "@cf/qwen/qwen2.5-coder-32b-instruct",
    }
    llama = routes["@cf/meta/llama-3.3-70b-instruct-fp8-fast"]
    assert llama.prompt_price_per_1k == pytest.approx(0.000293)
    assert llama.completion_price_per_1k == pytest.approx(0.002253)
    assert llama.context_length == 24000
    free = routes["@cf/example/free-chat"]
    assert (free.prompt_price_per_1k, free.completion_price_per_1k) == (0.0, 0.0)
    unpriced = routes["@cf/qwen/qwen2.5-coder-32b-instruct"]
    assert unpriced.prompt_price_per_1k is None and unpriced.price_note
    [summary] = result.accounts
    assert summary.dropped == {
        "declared task: automatic speech recognition": 1,
        "declared task: text embeddings": 1,
        "declared task: text-to-image": 1,
        "moderation": 1,  # Llama Guard: listed as Text Generation, still a classifier
    }


def test_declared_type_decides_before_the_name() -> None:
    assert is_chat_model({"id": "codestral-latest", "capabilities": {"completion_chat": True}})
    assert not is_chat_model({"id": "mistral-small", "capabilities": {"completion_chat": False}})
    assert not is_chat_model({"id": "m", "type": "embedding"})
    assert is_chat_model({"id": "m", "type": "chat"})
    assert not is_chat_model({"id": "llama-guard-4-12b", "type": "chat"})


# --------------------------------------------------------------------------------------------
# chat calls replayed


async def test_upstream_401_behind_the_gateway_is_an_auth_outcome() -> None:
    outcome = await replay_chat("litellm/upstream_401.yaml", "badkey")
    assert outcome.kind is OutcomeKind.AUTH_FAILED
    assert outcome.http_status == 401
    assert "invalid api key" in outcome.detail


async def test_upstream_retry_after_arrives_rate_limited() -> None:
    outcome = await replay_chat("litellm/upstream_retry_after.yaml", "limited")
    assert outcome.kind is OutcomeKind.RATE_LIMITED
    assert outcome.http_status == 429
    assert outcome.retry_after == 7  # only in the proxy's ``llm_provider-retry-after: 7``


async def test_an_upstream_401_behind_keepalive_pings_is_an_error_event_not_a_200() -> None:
    """With pings on, LiteLLM answers 200 at once and the upstream's 401 arrives as an SSE error
    event after the pings: that route fails (a bad reply: only this route, never the gateway's
    whole account), and it is never taken for a reply."""
    outcome = await replay_chat("litellm/keepalive_upstream_401.yaml", "late401")
    assert outcome.kind is OutcomeKind.BAD_REPLY and outcome.content is None
    assert outcome.http_status == 200
    assert outcome.detail.startswith("error event: Error processing stream start")


async def test_router_cooldown_is_rate_limited_with_its_retry_after() -> None:
    outcome = await replay_chat("litellm/router_cooldown.yaml", "cooled")
    assert outcome.kind is OutcomeKind.RATE_LIMITED
    assert outcome.retry_after == 5
    assert "cooldown" in outcome.detail


async def test_keepalive_pings_then_the_reply() -> None:
    outcome = await replay_chat("litellm/keepalive_pings.yaml", "silent")
    assert outcome.kind is OutcomeKind.OK
    assert outcome.content == "OK"


async def test_healthy_stream_through_the_gateway() -> None:
    outcome = await replay_chat("litellm/healthy_stream.yaml", "good")
    assert outcome.kind is OutcomeKind.OK
    assert outcome.content == "OK"


@pytest.mark.parametrize(
    ("cassette", "model"),
    [
        ("providers/openrouter_free_models_per_day.yaml", "meta-llama/llama-3.3-70b-instruct:free"),
        ("providers/groq_tokens_per_minute.yaml", "llama-3.3-70b-versatile"),
        ("providers/gemini_resource_exhausted.yaml", "gemini-2.5-flash"),
        (
            "providers/cloudflare_daily_allocation_4006.yaml",
            "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
        ),
    ],
)
async def test_documented_429_bodies_are_rate_limited(
    cassette: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the recorded resets are absolute times (OpenRouter's is 2026-12-02 00:00 UTC): read them
    # at a clock before them, as the run that met the 429 did
    monkeypatch.setattr(hints, "datetime", _RecordedDay)
    outcome = await replay_chat(cassette, model)
    assert outcome.kind is OutcomeKind.RATE_LIMITED
    assert outcome.http_status == 429
    assert outcome.retry_after is not None and outcome.retry_after > 0  # every form read


async def test_groq_retry_after_header_is_read() -> None:
    outcome = await replay_chat("providers/groq_tokens_per_minute.yaml", "llama-3.3-70b-versatile")
    assert outcome.retry_after == 6
