"""Issue 22: a real llama-server's answers, replayed (vcrpy, ``record_mode="none"``).

``tests/cassettes/llama/`` was recorded by ``tools/record_llama.py`` from llama-server (llama.cpp
vendored in llama-cpp-python 0.3.36) serving Gemma 3 270M Q4_K_M with ``-c 4096`` and Gemma 3's
chat template, for the review request relay-review sends for the bundled sample diff. The
model's replies are what a tiny base model writes: junk JSON (``"summary": ":{"``), the fence
token echoed as the summary, findings and notes on invented paths, replies cut at
``max_tokens``, the system prompt copied until ``max_tokens``. None of them may approve.
``tests/cassettes/llama_cpp_python/`` was recorded by ``tools/record_llama_cpp_python.py`` from
llama-cpp-python[server] 0.3.36 serving the same GGUF (``--chat_format gemma``): its HTTP 500 on
OpenAI's ``json_schema`` form, and a whole review that steps down to ``json_object`` + schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import vcr

from relay_review.config import Policy, PreflightPolicy, ReviewPolicy, ServingPolicy
from relay_review.drill.review import sample_diff
from relay_review.pipeline.review import review as run_review
from relay_review.pipeline.serve import context_limit
from relay_review.providers.chat.call import chat_call
from relay_review.providers.chat.forms import refuses_response_format
from relay_review.providers.discovery import discover
from relay_review.records import Account, Deadlines, OutcomeKind
from relay_review.review.diff import DiffIndex
from relay_review.review.reply_schema import reply_schema, response_format
from relay_review.routing.catalog import build_catalog, parse_discovery

CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"
BASE = "http://127.0.0.1:8089/v1"
LLAMA_CPP_PYTHON = "http://127.0.0.1:8090/v1"  # tools/record_llama_cpp_python.py's port
MODEL = "gemma-3-270m-q4_k_m"
INDEX = DiffIndex.from_diff(sample_diff())
DEADLINES = Deadlines(connect=2, first_byte=5, idle=5, attempt=10)
REVIEWS = sorted(p.stem for p in (CASSETTES / "llama").glob("review_*.yaml"))

replay = vcr.VCR(
    cassette_library_dir=str(CASSETTES),
    record_mode="none",
    filter_headers=["authorization"],
)


class Bounds:
    timeout = 5.0
    models_dev_url = "http://127.0.0.1:9/api.json"
    zdr_url = "http://127.0.0.1:9/zdr"


def test_the_recorded_set_covers_every_class() -> None:
    assert len(REVIEWS) >= 6
    assert (CASSETTES / "llama" / "listing.yaml").is_file()
    assert (CASSETTES / "llama" / "context_too_long.yaml").is_file()


async def test_discovery_reads_llama_server_meta_n_ctx() -> None:
    account = Account(
        name="local",
        kind="openai_compatible",
        base_url=BASE,
        api_key_env="K",
        pricing="declared-free",
    )
    with replay.use_cassette("llama/listing.yaml"):
        result = await discover([account], {"K": "k" * 24}, Bounds())
    [route] = result.routes
    assert route.model == MODEL
    assert route.context_length == 4096  # meta.n_ctx (-c), not n_ctx_train (32768)


def catalog(base: str = BASE):
    route = {
        "account": "local",
        "provider": "openai_compatible",
        "model": MODEL,
        "base_url": base,
        "api_key_env": "LOCAL_KEY",
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
        "context_length": 4096,
    }
    return build_catalog(parse_discovery({"routes": [route]}))


def policy() -> Policy:
    return Policy(
        preflight=PreflightPolicy(probe_budget=0, probe_timeout=1.0),
        serving=ServingPolicy(first_byte=5.0, idle=5.0, attempt=10.0, deadline=30.0),
        review=ReviewPolicy(max_output_tokens=1024),
    )


@pytest.mark.parametrize("name", REVIEWS)
async def test_no_recorded_real_reply_approves_and_every_kept_finding_verifies(name: str) -> None:
    # the repair round gets the same recorded answer
    with replay.use_cassette(f"llama/{name}.yaml", allow_playback_repeats=True):
        report = (await run_review(INDEX, catalog(), policy(), {"LOCAL_KEY": "k" * 24})).to_json()
    assert report["decision"] != "approve", report["attempts"]
    for f in report["findings"]:
        assert INDEX.line(f["path"], f["line"], f["side"]) is not None
    serves = [a for a in report["attempts"] if a["purpose"] == "serve"]
    assert serves and all(a["outcome"] == "bad_reply" for a in serves), serves


async def test_the_recorded_cut_reply_ends_in_length() -> None:
    with replay.use_cassette("llama/review_cut_at_max_tokens.yaml"):
        async with httpx.AsyncClient() as client:
            outcome = await chat_call(
                client,
                base_url=BASE,
                api_key=None,
                model=MODEL,
                messages=[],
                deadlines=DEADLINES,
                max_tokens=90,
            )
    assert outcome.kind is OutcomeKind.OK and outcome.finish_reason == "length"
    assert outcome.content and outcome.content.lstrip().startswith("{")


async def test_the_recorded_context_too_long_names_its_limit() -> None:
    with replay.use_cassette("llama/context_too_long.yaml"):
        async with httpx.AsyncClient() as client:
            outcome = await chat_call(
                client, base_url=BASE, api_key=None, model=MODEL, messages=[], deadlines=DEADLINES
            )
    assert outcome.kind is OutcomeKind.CONTEXT_TOO_LONG and outcome.http_status == 400
    assert context_limit(outcome.detail) == 4096


async def test_llama_cpp_python_500_on_json_schema_is_a_refusal_of_the_form() -> None:
    with replay.use_cassette("llama_cpp_python/json_schema_500.yaml"):
        async with httpx.AsyncClient() as client:
            outcome = await chat_call(
                client,
                base_url=LLAMA_CPP_PYTHON,
                api_key=None,
                model=MODEL,
                messages=[],
                deadlines=DEADLINES,
            )
    assert outcome.kind is OutcomeKind.SERVER_ERROR and outcome.http_status == 500
    assert refuses_response_format(outcome.http_status, outcome.detail)
    assert "'text' or 'json_object'" in outcome.detail


def test_the_json_object_form_sends_no_max_length() -> None:
    # llama-cpp-python 0.3.36 builds nested grammar rules per maxLength, llama.cpp refuses them
    # ("exceeds sane defaults") and the server exits mid-stream: the step-down would kill it.
    schema = reply_schema(6, 2)
    assert "maxLength" in json.dumps(response_format("json_schema", schema))
    sent = response_format("json_object", schema)
    assert sent is not None and sent["schema"]["required"] == schema["required"]
    assert "maxLength" not in json.dumps(sent)


async def test_a_real_llama_cpp_python_review_steps_down_once_and_never_approves() -> None:
    # every request the recorded review sent, in order: no repeats, so a missing one fails
    with replay.use_cassette("llama_cpp_python/review_step_down.yaml") as tape:
        report = (
            await run_review(INDEX, catalog(LLAMA_CPP_PYTHON), policy(), {"LOCAL_KEY": "k" * 24})
        ).to_json()
        assert tape.all_played
    forms = [json.loads(r.body)["response_format"]["type"] for r in tape.requests]
    assert forms[:2] == ["json_schema", "json_object"]
    assert tape.responses[0]["status"]["code"] == 500
    assert report["decision"] != "approve", report["attempts"]
    for f in report["findings"]:
        assert INDEX.line(f["path"], f["line"], f["side"]) is not None
    first = report["attempts"][0]
    assert "weaker response_format" in first["detail"], first
