"""Discovery against a real local HTTP server: listings, price evidence, failures, ZDR feed."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from relay_review import cli
from relay_review.commands import discover as discover_cmd
from relay_review.config import env_accounts, parse_policy, resolve_accounts
from relay_review.errors import UsageError
from relay_review.kinds import ENV_FAMILIES
from relay_review.providers.discovery import discover, write_report, zdr_feed_path
from relay_review.providers.discovery.chat_filter import chat_by_name
from relay_review.providers.discovery.prices import listing_prices, models_dev_prices
from relay_review.routing.catalog import parse_discovery

KEYS = {
    "OPENROUTER_API_KEY": "sk-or-v1-SECRET-openrouter-0001",
    "NVIDIA_NIM_API_KEY": "nvapi-SECRET-nim-0002",
    "NVIDIA_NIM_API_KEY_SUB": "nvapi-SECRET-nim-sub-0003",
    "OPENCODE_GO_API_KEY": "oc-SECRET-go-0004",
    "STALL_KEY": "SECRET-stall-0005",
    "BROKEN_KEY": "SECRET-broken-0006",
    "SHAPE_KEY": "SECRET-shape-0007",
    "LOCAL_KEY": "SECRET-local-0008",
    "REFUSED_KEY": "SECRET-refused-0009",
}

#: every key but the stalling account's, for tests that need not wait for a timeout
QUICK_KEYS = {k: v for k, v in KEYS.items() if k != "STALL_KEY"}

OPENROUTER_MODELS = {
    "data": [
        {
            "id": "meta/llama-free:free",
            "context_length": 131072,
            "architecture": {
                "modality": "text->text",
                "input_modalities": ["text"],
                "output_modalities": ["text"],
            },
            "pricing": {"prompt": "0", "completion": "0", "request": "0", "image": "0"},
        },
        {
            "id": "acme/priced-anyway:free",
            "context_length": 32768,
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "0.0000005", "completion": "0.0000015", "request": "0"},
        },
        {
            "id": "acme/request-fee",
            "context_length": 8192,
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "0", "completion": "0", "request": "0.002", "image": "0"},
        },
        {
            "id": "acme/vision-chat",
            "top_provider": {"context_length": 65536},
            "architecture": {"input_modalities": ["text", "image"], "output_modalities": ["text"]},
            "pricing": {"prompt": "0.000001", "completion": "0.000002", "discount": 0.25},
        },
        {
            "id": "acme/embedder-chat",  # the name says embed, the declaration says chat: trusted
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "0", "completion": "0"},
        },
        {
            "id": "openai/text-embedding-3-small",
            "architecture": {"input_modalities": ["text"], "output_modalities": ["embeddings"]},
            "pricing": {"prompt": "0.00000002", "completion": "0"},
        },
        {
            "id": "acme/painter",
            "architecture": {"modality": "text->image"},
            "pricing": {"prompt": "0", "completion": "0"},
        },
        {
            "id": "openrouter/auto",
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "-1", "completion": "-1"},
        },
        {
            "id": "meta/llama-free:free",  # a repeat: one route only
            "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
            "pricing": {"prompt": "1", "completion": "1"},
        },
        {"name": "no id at all"},
        {"id": "bad id\nwith newline"},
        "not an object",
    ]
}

NVIDIA_MODELS = {
    "object": "list",
    "data": [
        {"id": mid, "object": "model", "created": 735790403, "owned_by": mid.split("/")[0]}
        for mid in [
            "deepseek-ai/deepseek-v4-flash",
            "meta/llama-3.3-70b-instruct",
            "qwen/qwen3-coder-480b",
            "moonshotai/kimi-k2",
            "z-ai/glm-4.7",
            "acme/omni-painter",
            "nvidia/nv-embedqa-e5-v5",
            "nvidia/llama-3.2-nemoretriever-300m-embed-v1",
            "nvidia/llama-3.2-nv-rerankqa-1b-v2",
            "nvidia/nemoguard-jailbreak-detect",
            "nvidia/nemotron-content-safety-reasoning-4b",
            "openai/whisper-large-v3",
            "nvidia/parakeet-ctc-1.1b-asr",
            "nvidia/magpie-tts-multilingual",
            "stabilityai/stable-diffusion-3-medium",
            "stabilityai/sdxl-turbo",
            "black-forest-labs/flux.1-dev",
            "nvidia/nvclip",
            "openai/clip-vit",
        ]
    ],
}

MODELS_DEV = {
    "nvidia": {
        "id": "nvidia",
        "models": {
            "deepseek-ai/deepseek-v4-flash": {
                "id": "deepseek-ai/deepseek-v4-flash",
                "cost": {"input": 0, "output": 0, "cache_read": 0},
                "limit": {"context": 131072, "output": 8192},
            },
            "meta/llama-3.3-70b-instruct": {
                "id": "meta/llama-3.3-70b-instruct",
                "cost": {"input": 0.6, "output": 0.9},
                "limit": {"context": 128000},
            },
            "moonshotai/kimi-k2": {"id": "moonshotai/kimi-k2", "limit": {"context": 262144}},
            "z-ai/glm-4.7": {
                "id": "z-ai/glm-4.7",
                "cost": {"input": 0, "output": 0, "cache_read": 0.1},
            },
            "acme/omni-painter": {
                "id": "acme/omni-painter",
                "modalities": {"input": ["text"], "output": ["image"]},
                "cost": {"input": 0, "output": 0},
            },
        },
    },
    "opencode-go": {
        "id": "opencode-go",
        "models": {"kimi-k2.6": {"id": "kimi-k2.6", "cost": {"input": 0, "output": 0}}},
    },
    "opencode": {
        "id": "opencode",
        "models": {"kimi-k2.6": {"id": "kimi-k2.6", "cost": {"input": 1, "output": 4}}},
    },
}

OPENCODE_MODELS = {"object": "list", "data": [{"id": "kimi-k2.6"}, {"id": "gpt-5-nano"}]}
LOCAL_MODELS = {"object": "list", "data": [{"id": "qwen2.5-coder:7b", "max_model_len": 32768}]}

# Deliberately odd formatting: the feed must be saved byte for byte.
ZDR_FEED = b'{"data":[{"model_id":"meta/llama-free:free","provider_name":"X"},\n {"name":"n"}]}'


@dataclass
class Fleet:
    """The local server: what it answers and what it was asked."""

    url: str
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    overrides: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


class _Server(ThreadingHTTPServer):
    """A threaded server whose listen backlog takes every concurrent discovery request at once
    (the default of 5 drops SYNs, and the client's retry then looks like a stall)."""

    daemon_threads = True
    request_queue_size = 128


@contextlib.contextmanager
def serve_fleet() -> Iterator[Fleet]:
    """Run the local provider fleet on an ephemeral 127.0.0.1 port."""
    state = Fleet(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            state.requests.append((self.path, auth))
            if self.path in state.overrides:
                status, body = state.overrides[self.path]
            elif self.path == "/or/models":
                status, body = 200, _json(OPENROUTER_MODELS)
            elif self.path == "/or/zdr":
                status, body = 200, ZDR_FEED
            elif self.path == "/nim/models":
                status, body = 200, _json(NVIDIA_MODELS)
            elif self.path == "/nim-sub/models":
                # A provider that echoes the credential back: the report must not carry it.
                status, body = 401, _json({"error": {"message": f"invalid credential {auth}"}})
            elif self.path == "/md/api.json":
                status, body = 200, _json(MODELS_DEV)
            elif self.path == "/oc-go/models":
                status, body = 200, _json(OPENCODE_MODELS)
            elif self.path == "/local/models":
                status, body = 200, _json(LOCAL_MODELS)
            elif self.path == "/stall/models":
                state.release.wait(10)
                status, body = 200, _json({"data": []})
            elif self.path == "/broken/models":
                status, body = 200, b'{"data": [ {"id": "x"'
            elif self.path == "/shape/models":
                status, body = 200, _json({"data": {"id": "x"}})
            else:
                status, body = 404, b"{}"
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up (the stall case)
                pass

    server = _Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with serve_fleet() as state:
        yield state


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def policy_text(url: str, timeout: float = 1.0) -> str:
    """Every account points at the local server (or a closed port): no real provider is called."""
    return f"""
        [discovery]
        timeout = {timeout}
        models_dev_url = "{url}/md/api.json"
        zdr_url = "{url}/or/zdr"

        [[accounts]]
        name = "openrouter"
        kind = "openrouter"
        base_url = "{url}/or"

        [[accounts]]
        name = "nvidia_nim"
        kind = "nvidia_nim"
        base_url = "{url}/nim"

        [[accounts]]
        name = "nvidia_nim_sub"
        kind = "nvidia_nim"
        base_url = "{url}/nim-sub/"

        [[accounts]]
        name = "opencode_go"
        kind = "opencode"
        base_url = "{url}/oc-go"

        [[accounts]]
        name = "local"
        kind = "openai_compatible"
        base_url = "{url}/local"
        api_key_env = "LOCAL_KEY"
        pricing = "declared-free"

        [[accounts]]
        name = "stall"
        kind = "openai_compatible"
        base_url = "{url}/stall"
        api_key_env = "STALL_KEY"

        [[accounts]]
        name = "broken"
        kind = "openai_compatible"
        base_url = "{url}/broken"
        api_key_env = "BROKEN_KEY"

        [[accounts]]
        name = "shape"
        kind = "openai_compatible"
        base_url = "{url}/shape"
        api_key_env = "SHAPE_KEY"

        [[accounts]]
        name = "refused"
        kind = "openai_compatible"
        base_url = "http://127.0.0.1:{closed_port()}/v1"
        api_key_env = "REFUSED_KEY"

        [[accounts]]
        name = "nokey"
        kind = "openai_compatible"
        base_url = "{url}/nokey"
        api_key_env = "NOKEY_KEY"
    """


def route(
    account: str, provider: str, model: str, base_url: str, api_key_env: str, **rest: Any
) -> dict:
    out = {
        "account": account,
        "provider": provider,
        "model": model,
        "agent_id": f"{account}/{model}",
        "base_url": base_url,
        "api_key_env": api_key_env,
        "prompt_price_per_1k": None,
        "completion_price_per_1k": None,
        "context_length": None,
    }
    out.update(rest)
    return out


def expected_routes(url: str) -> list[dict]:
    orr = {"base_url": f"{url}/or", "api_key_env": "OPENROUTER_API_KEY"}
    nim = {"base_url": f"{url}/nim", "api_key_env": "NVIDIA_NIM_API_KEY"}
    go = {"base_url": f"{url}/oc-go", "api_key_env": "OPENCODE_GO_API_KEY"}
    p, c = "prompt_price_per_1k", "completion_price_per_1k"
    return [
        route(
            "local",
            "openai_compatible",
            "qwen2.5-coder:7b",
            f"{url}/local",
            "LOCAL_KEY",
            **{p: 0.0, c: 0.0, "context_length": 32768},
        ),
        route(
            "nvidia_nim",
            "nvidia_nim",
            "deepseek-ai/deepseek-v4-flash",
            **nim,
            **{p: 0.0, c: 0.0, "context_length": 131072},
        ),
        route(
            "nvidia_nim",
            "nvidia_nim",
            "meta/llama-3.3-70b-instruct",
            **nim,
            **{p: 0.0006, c: 0.0009, "context_length": 128000},
        ),
        route(
            "nvidia_nim",
            "nvidia_nim",
            "moonshotai/kimi-k2",
            **nim,
            context_length=262144,
            price_note="models.dev gives no cost for this model",
        ),
        route(
            "nvidia_nim",
            "nvidia_nim",
            "qwen/qwen3-coder-480b",
            **nim,
            price_note="not listed in models.dev under provider 'nvidia'",
        ),
        route(
            "nvidia_nim",
            "nvidia_nim",
            "z-ai/glm-4.7",
            **nim,
            price_note="models.dev input and output are 0 but another cost field is not",
        ),
        route(
            "opencode_go",
            "opencode",
            "gpt-5-nano",
            **go,
            price_note="not listed in models.dev under provider 'opencode-go'",
        ),
        route("opencode_go", "opencode", "kimi-k2.6", **go, **{p: 0.0, c: 0.0}),
        route("openrouter", "openrouter", "acme/embedder-chat", **orr, **{p: 0.0, c: 0.0}),
        route(
            "openrouter",
            "openrouter",
            "acme/priced-anyway:free",
            **orr,
            **{p: 0.0005, c: 0.0015, "context_length": 32768},
        ),
        route(
            "openrouter",
            "openrouter",
            "acme/request-fee",
            **orr,
            context_length=8192,
            price_note="prompt and completion are 0 but pricing.request is 0.002: "
            "not free, per-token price unknown",
        ),
        route(
            "openrouter",
            "openrouter",
            "acme/vision-chat",
            **orr,
            **{p: 0.001, c: 0.002, "context_length": 65536},
        ),
        route(
            "openrouter",
            "openrouter",
            "meta/llama-free:free",
            **orr,
            **{p: 0.0, c: 0.0, "context_length": 131072},
        ),
        route(
            "openrouter",
            "openrouter",
            "openrouter/auto",
            **orr,
            price_note="the listing gives a negative (variable) price",
        ),
    ]


def assert_no_key(*texts: str) -> None:
    for text in texts:
        for value in KEYS.values():
            assert value not in text


# -------------------------------------------------------------------------------------------


async def test_discovery_report_in_full(
    fleet: Fleet, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    policy = parse_policy(policy_text(fleet.url))
    accounts = resolve_accounts(policy, KEYS)
    result = await discover(accounts, KEYS, policy.discovery)
    out = tmp_path / "discovery.json"
    report = write_report(result, out)

    assert json.loads(out.read_text()) == report
    assert report["routes"] == expected_routes(fleet.url)
    [sub_error] = [e for e in report["errors"] if e["account"] == "nvidia_nim_sub"]
    assert sub_error == {
        "account": "nvidia_nim_sub",
        "kind": "nvidia_nim",
        "error": "HTTP 401: invalid credential Bearer [redacted]",
    }
    errors = {e["account"]: e for e in report["errors"]}
    assert sorted(errors) == ["broken", "nvidia_nim_sub", "refused", "shape", "stall"]
    assert errors["stall"] == {
        "account": "stall",
        "kind": "openai_compatible",
        "error": "timed out after 1 s",
    }
    assert errors["broken"]["error"] == "the reply is not valid JSON"
    assert errors["shape"]["error"] == 'unexpected reply: expected {"data": [...]}'
    assert errors["refused"]["error"].startswith("connection failed")
    assert report["zdr_feed"] == "discovery.zdr.json"
    assert (tmp_path / "discovery.zdr.json").read_bytes() == ZDR_FEED

    summaries = {s.account: s for s in result.accounts}
    assert summaries["nokey"].status == "skipped"
    assert summaries["nokey"].error == "NOKEY_KEY is not set"
    assert (summaries["openrouter"].listed, summaries["openrouter"].kept) == (12, 6)
    assert summaries["stall"].status == "error"

    # Keys go to the account's own endpoint only; never to models.dev or the ZDR feed.
    sent = dict(fleet.requests)
    assert sent["/or/models"] == f"Bearer {KEYS['OPENROUTER_API_KEY']}"
    assert sent["/nim/models"] == f"Bearer {KEYS['NVIDIA_NIM_API_KEY']}"
    assert sent["/md/api.json"] is None
    assert sent["/or/zdr"] is None
    assert "/nokey/models" not in sent
    assert [path for path, _ in fleet.requests].count("/md/api.json") == 1

    assert_no_key(out.read_text(), caplog.text, repr(result.accounts))


async def test_routes_are_sorted_and_deterministic(fleet: Fleet) -> None:
    policy = parse_policy(policy_text(fleet.url))
    accounts = resolve_accounts(policy, QUICK_KEYS)
    first = await discover(accounts, QUICK_KEYS, policy.discovery)
    second = await discover(list(reversed(accounts)), QUICK_KEYS, policy.discovery)
    assert first.routes == second.routes
    assert first.errors == second.errors
    keys = [(r.account, r.model) for r in first.routes]
    assert keys == sorted(keys)
    assert [r.index for r in first.routes] == list(range(len(first.routes)))
    assert len({r.agent_id for r in first.routes}) == len(first.routes)
    # the report file holds the same records: read back, they are the routes handed on
    assert parse_discovery(first.report(None)) == first.routes


async def test_zdr_failure_is_reported_and_no_feed_written(fleet: Fleet, tmp_path: Path) -> None:
    fleet.overrides["/or/zdr"] = (500, b'{"error": {"message": "upstream down"}}')
    out = tmp_path / "d.json"
    stale = zdr_feed_path(out)
    stale.write_text('{"data": [{"model_id": "stale"}]}')
    policy = parse_policy(policy_text(fleet.url))
    result = await discover(resolve_accounts(policy, QUICK_KEYS), QUICK_KEYS, policy.discovery)
    report = write_report(result, out)
    assert report["zdr_feed"] is None
    assert {
        "account": "openrouter-zdr",
        "kind": "openrouter",
        "error": "HTTP 500: upstream down",
    } in (report["errors"])
    assert not stale.exists()


async def test_zdr_feed_with_wrong_shape_is_an_error(fleet: Fleet, tmp_path: Path) -> None:
    fleet.overrides["/or/zdr"] = (200, b'{"items": []}')
    policy = parse_policy(policy_text(fleet.url))
    result = await discover(resolve_accounts(policy, QUICK_KEYS), QUICK_KEYS, policy.discovery)
    assert result.zdr_feed is None
    assert write_report(result, tmp_path / "d.json")["zdr_feed"] is None


async def test_no_openrouter_account_means_no_zdr_fetch(fleet: Fleet, tmp_path: Path) -> None:
    env = {"NVIDIA_NIM_API_KEY": KEYS["NVIDIA_NIM_API_KEY"]}
    policy = parse_policy(policy_text(fleet.url))
    result = await discover(resolve_accounts(policy, env), env, policy.discovery)
    report = write_report(result, tmp_path / "d.json")
    assert report["zdr_feed"] is None
    assert report["errors"] == []
    assert "/or/zdr" not in dict(fleet.requests)
    assert {r["account"] for r in report["routes"]} == {"nvidia_nim"}


async def test_models_dev_down_leaves_prices_unknown(fleet: Fleet) -> None:
    fleet.overrides["/md/api.json"] = (503, b"")
    env = {"NVIDIA_NIM_API_KEY": KEYS["NVIDIA_NIM_API_KEY"]}
    policy = parse_policy(policy_text(fleet.url))
    result = await discover(resolve_accounts(policy, env), env, policy.discovery)
    assert [e.model_dump() for e in result.errors] == [
        {"account": "models.dev", "kind": "models.dev", "error": "HTTP 503"}
    ]
    assert result.routes
    for r in result.routes:
        assert r.prompt_price_per_1k is None
        assert r.completion_price_per_1k is None
        assert r.price_note == "models.dev unavailable (HTTP 503)"


async def test_models_dev_not_fetched_when_no_account_needs_it(fleet: Fleet) -> None:
    env = {"OPENROUTER_API_KEY": KEYS["OPENROUTER_API_KEY"]}
    policy = parse_policy(policy_text(fleet.url))
    await discover(resolve_accounts(policy, env), env, policy.discovery)
    assert "/md/api.json" not in dict(fleet.requests)


# -------------------------------------------------------------------------------------------
# the command


def run_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    discover_cmd.add_parser(sub)
    return discover_cmd.run(parser.parse_args(["discover", *argv]))


KEY_PREFIXES = (*(family.key_env for family in ENV_FAMILIES), "OPENCODE_")


def set_keys(monkeypatch: pytest.MonkeyPatch, keys: dict[str, str]) -> None:
    for name in list(os.environ):
        if name.startswith(KEY_PREFIXES):
            monkeypatch.delenv(name)
    for name, value in keys.items():
        monkeypatch.setenv(name, value)


def test_command_writes_report_and_prints_progress(
    fleet: Fleet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    set_keys(monkeypatch, KEYS)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(fleet.url), encoding="utf-8")
    out = tmp_path / "report.json"
    assert run_command(["--out", str(out), "--policy", str(policy)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert (
        "discover: openrouter (openrouter): 6 of 12 models kept "
        "(dropped: invalid id 3, declared modalities 2, duplicate id 1)"
    ) in lines
    assert (
        "discover: nvidia_nim (nvidia_nim): 5 of 19 models kept (dropped: embedding 4, audio 3, "
        "image 3, moderation 2, declared modalities (models.dev) 1, rerank 1)"
    ) in lines
    assert "discover: stall (openai_compatible): error: timed out after 1 s" in lines
    assert "discover: nokey (openai_compatible): skipped (NOKEY_KEY is not set)" in lines
    assert lines[-1] == f"discover: wrote {out} (14 routes, 5 errors, ZDR feed report.zdr.json)"
    assert captured.out == ""
    report = json.loads(out.read_text())
    assert len(report["routes"]) == 14
    assert_no_key(out.read_text(), captured.err, captured.out, caplog.text)


def test_command_uses_the_actions_policy_path_in_cwd(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI reads .github/relay-review.toml, the file the action reads (one name)."""
    set_keys(monkeypatch, {"LOCAL_KEY": KEYS["LOCAL_KEY"]})
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "relay-review.toml").write_text(
        policy_text(fleet.url), encoding="utf-8"
    )
    (tmp_path / "relay-review.toml").write_text("[catalog]\npool = 'cheap'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert run_command(["--out", "r.json"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["agent_id"] for r in report["routes"]] == ["local/qwen2.5-coder:7b"]
    assert report["zdr_feed"] is None


def test_command_without_any_key_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_keys(monkeypatch, {})
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[[accounts]]\nname = "mine"\nkind = "openai_compatible"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "MINE_KEY"\n',
        encoding="utf-8",
    )
    assert run_command(["--out", str(tmp_path / "r.json"), "--policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        "relay-review discover: no account has a key; set one of: "
        "OPENROUTER_API_KEY[_<SUFFIX>], NVIDIA_NIM_API_KEY[_<SUFFIX>], "
        "OPENCODE_API_KEY[_<SUFFIX>], OPENCODE_GO_API_KEY[_<SUFFIX>], GROQ_API_KEY[_<SUFFIX>], "
        "CEREBRAS_API_KEY[_<SUFFIX>], GEMINI_API_KEY[_<SUFFIX>], MISTRAL_API_KEY[_<SUFFIX>], "
        "CLOUDFLARE_API_TOKEN[_<SUFFIX>], SAMBANOVA_API_KEY[_<SUFFIX>], HF_TOKEN[_<SUFFIX>], "
        "MINE_KEY"
    )
    assert not (tmp_path / "r.json").exists()


def test_command_bad_policy_exits_2_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    discover = cli.Command("relay_review.commands.discover", cli.COMMANDS["discover"].summary)
    monkeypatch.setitem(cli.COMMANDS, "discover", discover)
    policy = tmp_path / "relay-review.toml"
    policy.write_text('[catalog]\npool = "cheap"\n', encoding="utf-8")
    code = cli.main(["discover", "--out", str(tmp_path / "r.json"), "--policy", str(policy)])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"relay-review discover: error: {policy}: catalog.pool = 'cheap' is not allowed; "
        "use free or auto"
    )


def test_command_missing_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="policy file not found"):
        run_command(["--out", str(tmp_path / "r.json"), "--policy", str(tmp_path / "nope.toml")])


def test_command_missing_out_directory_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_keys(monkeypatch, {"LOCAL_KEY": "k"})
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[[accounts]]\nname = "local"\nkind = "openai_compatible"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "LOCAL_KEY"\n',
        encoding="utf-8",
    )
    with pytest.raises(UsageError, match="does not exist"):
        run_command(["--out", str(tmp_path / "no" / "r.json"), "--policy", str(policy)])


# -------------------------------------------------------------------------------------------
# pure rules


@pytest.mark.parametrize(
    ("pricing", "expected"),
    [
        ({"prompt": "0", "completion": "0"}, (0.0, 0.0, None)),
        ({"prompt": "0", "completion": "0", "request": "0", "image": 0}, (0.0, 0.0, None)),
        ({"prompt": "0", "completion": "0", "discount": 0.5}, (0.0, 0.0, None)),
        ({"prompt": "0.000003", "completion": "0.000015"}, (0.003, 0.015, None)),
        ({"prompt": "0.000003", "completion": "0.000015", "request": "0.01"}, (0.003, 0.015, None)),
        ({"prompt": 0.000001, "completion": 0}, (0.001, 0.0, None)),
        ({"prompt": "0"}, (None, None, "the listing has no numeric prompt and completion price")),
        (
            {"prompt": "free", "completion": "0"},
            (None, None, "the listing has no numeric prompt and completion price"),
        ),
        (
            {"prompt": True, "completion": "0"},
            (None, None, "the listing has no numeric prompt and completion price"),
        ),
        (
            {"prompt": "NaN", "completion": "0"},
            (None, None, "the listing has no numeric prompt and completion price"),
        ),
        (None, (None, None, "the listing has no pricing")),
        # finite as a decimal, too large for a float: a route priced at infinity is no price
        (
            {"prompt": "1e400", "completion": "0"},
            (None, None, "the listing gives a price out of range"),
        ),
    ],
)
def test_listing_prices(pricing: Any, expected: tuple) -> None:
    assert tuple(listing_prices(pricing)) == expected


def test_listing_prices_other_field_blocks_free() -> None:
    evidence = listing_prices({"prompt": "0", "completion": "0", "image": "0.001"})
    assert (evidence.prompt, evidence.completion) == (None, None)
    assert "pricing.image" in (evidence.note or "")
    weird = listing_prices({"prompt": "0", "completion": "0", "web_search": "ask"})
    assert (weird.prompt, weird.completion) == (None, None)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"cost": {"input": 0, "output": 0}}, (0.0, 0.0)),
        ({"cost": {"input": 0, "output": 0, "context_over_200k": {"input": 0}}}, (0.0, 0.0)),
        ({"cost": {"input": 3, "output": 15, "cache_read": 0.3}}, (0.003, 0.015)),
        ({"cost": {"input": 0, "output": 0, "reasoning": 1}}, (None, None)),
        ({"cost": {"input": 0}}, (None, None)),
        ({"cost": {}}, (None, None)),
        ({"cost": {"input": -1, "output": 0}}, (None, None)),
        ({"cost": {"input": "x", "output": 0}}, (None, None)),
        ({"cost": {"input": "1e400", "output": 0}}, (None, None)),
        ({}, (None, None)),
        (None, (None, None)),
    ],
)
def test_models_dev_prices(record: Any, expected: tuple) -> None:
    evidence = models_dev_prices(record, "nvidia")
    assert (evidence.prompt, evidence.completion) == expected
    assert (evidence.note is None) == (expected[0] is not None)


@pytest.mark.parametrize(
    "model",
    [
        "nvidia/nv-embedqa-e5-v5",
        "baai/bge-m3",
        "nvidia/llama-3.2-nv-rerankqa-1b-v2",
        "nvidia/llama-3.2-nemoretriever-1b-vlm-embed-v1",
        "openai/whisper-large-v3",
        "nvidia/parakeet-tdt-0.6b-v2",
        "nvidia/canary-1b-asr",
        "nvidia/magpie-tts-flow",
        "stabilityai/stable-diffusion-xl",
        "stabilityai/sdxl-turbo",
        "black-forest-labs/flux.1-schnell",
        "meta/llama-guard-4-12b",
        "nvidia/llama-3.1-nemoguard-8b-content-safety",
        "omni-moderation-latest",
        "openai/clip-vit-large",
        "nvidia/nvclip",
        "google/deplot",
        "nvidia/nemoretriever-ocr-v1",
    ],
)
def test_name_filter_drops_non_chat_models(model: str) -> None:
    assert not chat_by_name(model)


@pytest.mark.parametrize(
    "model",
    [
        "deepseek-ai/deepseek-v4-flash",
        "meta/llama-3.3-70b-instruct",
        "qwen/qwen3-coder-480b-a35b-instruct",
        "moonshotai/kimi-k2-instruct",
        "nvidia/llama-3.1-nemotron-ultra-253b-v1",
        "mistralai/mixtral-8x22b-instruct-v0.1",
        "z-ai/glm-4.7",
        "google/gemma-3-27b-it",
        "microsoft/phi-4-mini-instruct",
        "kimi-k2.6",
    ],
)
def test_name_filter_keeps_chat_models(model: str) -> None:
    assert chat_by_name(model)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (["temperature", "response_format", "structured_outputs"], "json_schema"),
        (["response_format"], "json_object"),
        (["temperature"], None),
        (None, None),
        ("structured_outputs", None),
    ],
)
def test_response_format_support_from_supported_parameters(params, expected):
    from relay_review.providers.discovery.routes import response_format_support

    entry = {"id": "x/y"} if params is None else {"id": "x/y", "supported_parameters": params}
    assert response_format_support(entry) == expected


async def test_unfilled_cloudflare_account_id_is_reported_not_called() -> None:
    env = {"CLOUDFLARE_API_TOKEN": "cf-token-value-123"}
    result = await discover(env_accounts(env), env, parse_policy("").discovery)
    assert [e.model_dump() for e in result.errors] == [
        {
            "account": "cloudflare",
            "kind": "cloudflare",
            "error": "CLOUDFLARE_ACCOUNT_ID is not set (it fills the base URL's {account_id})",
        }
    ]


async def test_a_listing_bomb_is_refused_at_its_decoded_size() -> None:
    """A listing (models, key, endpoints, Models.dev, ZDR) sent as a gzip bomb: a FetchError
    once its decoded bytes pass LISTING_BODY_MAX, and memory stays near that bound."""
    import tracemalloc
    import zlib

    import httpx

    from relay_review.providers.discovery.listings import LISTING_BODY_MAX, FetchError, get_json

    async def bomb() -> AsyncIterator[bytes]:
        pack = zlib.compressobj(9, zlib.DEFLATED, 31)
        yield pack.compress(b'{"data": "')
        block = b"0" * (1 << 20)
        for _ in range(LISTING_BODY_MAX // len(block) * 3):
            yield pack.compress(block)
        yield pack.flush()

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=bomb())

    tracemalloc.start()
    try:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            with pytest.raises(FetchError, match="larger than"):
                await get_json(client, "http://listing.test/v1/key", 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * LISTING_BODY_MAX, peak
