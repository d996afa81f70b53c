"""The fault fleet itself: listing, auth, recording, scripts, and the three ways to run it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cli_harness import run_cli
from relay_review.drill import Behaviour, FaultFleet, parse_script
from relay_review.drill.scenarios import PORT_ENV
from relay_review.providers.chat.call import chat_call
from relay_review.records import Deadlines, OutcomeKind, Phase

pytestmark = pytest.mark.integration  # every test here starts a server or a subprocess

D = Deadlines(connect=0.5, first_byte=0.4, idle=0.3, attempt=1.0)
MESSAGES = [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------- scheme


def test_parse_script_main_params_named_params_and_flags() -> None:
    assert parse_script("healthy@0.3") == (Behaviour("healthy", delay=0.3),)
    assert parse_script("drip@0.2,n=20") == (Behaviour("drip", gap=0.2, n=20),)
    assert parse_script("keepalive") == (Behaviour("keepalive", gap=0.2, n=3),)
    assert parse_script("429") == (Behaviour("429", retry_after=30.0),)
    assert parse_script("429@5,date")[0].retry_style == "date"
    assert parse_script("500@stall,delay=0.1") == (Behaviour("500", delay=0.1, stall_body=True),)
    assert parse_script("cut@2,rst") == (Behaviour("cut", n=2, rst=True),)
    assert parse_script("413@groq,n=5000,over=6200") == (
        Behaviour("413", n=5000, over=6200, retry_style="groq"),
    )
    assert parse_script("healthy*2>stall") == (
        Behaviour("healthy", times=2),
        Behaviour("stall"),
    )


@pytest.mark.parametrize("spec", ["sleepy", "healthy@fast", "429@x=1", "600", "healthy@0.1@2", ""])
def test_parse_script_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_script(spec)


def test_bad_model_id_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultFleet({"a": ["meta/llama-3-8b-instruct"]})


def test_explicit_behaviour_for_a_real_looking_id() -> None:
    fleet = FaultFleet({"a": {"meta/llama-3.1-8b-instruct": "stall", "x/healthy": None}})
    assert fleet.accounts == {"a": ["meta/llama-3.1-8b-instruct", "x/healthy"]}


# --------------------------------------------------------------------------- in the caller's loop


async def test_models_listing_auth_and_unknowns() -> None:
    accounts = {
        "nim": {"models": ["healthy@0.1", "a/stall", "b/stall"], "api_key": "k-nim"},
        "or": ["429@5"],
    }
    async with FaultFleet(accounts) as fleet, httpx.AsyncClient() as client:
        assert fleet.base_url("nim") == f"http://127.0.0.1:{fleet.port}/nim/v1"
        listed = await client.get(
            f"{fleet.base_url('nim')}/models", headers={"Authorization": "Bearer k-nim"}
        )
        assert listed.status_code == 200
        body = listed.json()
        assert body["object"] == "list"
        assert [m["id"] for m in body["data"]] == ["healthy@0.1", "a/stall", "b/stall"]
        assert set(body["data"][0]) == {"id", "object", "created", "owned_by"}
        assert body["data"][0]["object"] == "model"

        wrong = await client.get(f"{fleet.base_url('nim')}/models")
        assert wrong.status_code == 401
        assert (await client.get(f"{fleet.base_url('or')}/models")).status_code == 200
        assert (await client.get(f"{fleet.root_url}/nobody/v1/models")).status_code == 404
        assert (await client.get(f"{fleet.root_url}/nim/v2/models")).status_code == 404
        unknown = await client.post(
            f"{fleet.base_url('or')}/chat/completions", json={"model": "x", "messages": []}
        )
        assert unknown.status_code == 404
        assert [r.account for r in fleet.requests] == ["nim", "nim", "or", "nobody", None, "or"]


async def test_non_streaming_requests_get_plain_json() -> None:
    async with FaultFleet({"a": ["healthy", "sse-error", "429@2"]}, reply="one two") as fleet:
        async with httpx.AsyncClient() as client:
            url = f"{fleet.base_url('a')}/chat/completions"
            ok = await client.post(url, json={"model": "healthy", "messages": MESSAGES})
            assert ok.headers["content-type"] == "application/json"
            assert ok.json()["choices"][0]["message"]["content"] == "one two"
            assert ok.json()["object"] == "chat.completion"
            bad = await client.post(url, json={"model": "sse-error", "messages": MESSAGES})
            assert bad.status_code == 200 and bad.json()["error"]["message"]
            limited = await client.post(url, json={"model": "429@2", "messages": MESSAGES})
            assert (limited.status_code, limited.headers["retry-after"]) == (429, "2")
        assert [r.stream for r in fleet.chat_requests()] == [False, False, False]


async def test_stream_format_is_openai_chunks_then_done() -> None:
    fleet = FaultFleet({"a": ["healthy"]}, reply="hello world")
    async with fleet, httpx.AsyncClient() as client:
        response = await client.post(
            f"{fleet.base_url('a')}/chat/completions",
            json={"model": "healthy", "messages": MESSAGES, "stream": True},
        )
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["transfer-encoding"] == "chunked"
    events = [line[6:] for line in response.text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "hello world"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


async def test_requests_are_recorded_with_tokens_asked() -> None:
    async with FaultFleet({"a": ["healthy", "404"]}) as fleet, httpx.AsyncClient() as client:
        for model, max_tokens in (("healthy", 16), ("404", 8), ("healthy", None)):
            await chat_call(
                client,
                base_url=fleet.base_url("a"),
                api_key=None,
                model=model,
                messages=MESSAGES,
                deadlines=D,
                max_tokens=max_tokens,
            )
        asked = [(r.model, r.max_tokens, r.stream) for r in fleet.chat_requests("a")]
        assert asked == [("healthy", 16, True), ("404", 8, True), ("healthy", None, True)]
        assert len(fleet.chat_requests("a", "healthy")) == 2
        times = [r.at for r in fleet.requests]
        assert times == sorted(times)


async def test_script_probe_passes_then_serve_stalls() -> None:
    fleet = FaultFleet({"a": ["m/healthy>stall", "m/429@1*2>healthy"]})
    async with fleet, httpx.AsyncClient() as client:

        async def go(model: str) -> OutcomeKind:
            out = await chat_call(
                client,
                base_url=fleet.base_url("a"),
                api_key=None,
                model=model,
                messages=MESSAGES,
                deadlines=D,
            )
            return out.kind

        assert await go("m/healthy>stall") is OutcomeKind.OK
        assert await go("m/healthy>stall") is OutcomeKind.TIMEOUT
        assert await go("m/healthy>stall") is OutcomeKind.TIMEOUT
        kinds = [await go("m/429@1*2>healthy") for _ in range(3)]
        assert kinds == [OutcomeKind.RATE_LIMITED, OutcomeKind.RATE_LIMITED, OutcomeKind.OK]


async def test_reply_function_gets_the_request() -> None:
    def reply(request: dict) -> str:
        return f"you said {request['messages'][-1]['content']}"

    per_model = Behaviour("healthy", reply="fixed text")
    accounts = {"a": {"healthy": None, "special": per_model}}
    async with FaultFleet(accounts, reply=reply) as fleet, httpx.AsyncClient() as client:
        outs = [
            await chat_call(
                client,
                base_url=fleet.base_url("a"),
                api_key=None,
                model=m,
                messages=MESSAGES,
                deadlines=D,
            )
            for m in ("healthy", "special")
        ]
    assert [o.content for o in outs] == ["you said hi", "fixed text"]


async def test_stop_ends_stalled_connections_without_hung_tasks() -> None:
    fleet = FaultFleet({"a": ["stall", "headers-stall", "500@stall", "drip@0.5,n=100"]})
    await fleet.start()
    async with httpx.AsyncClient(timeout=10) as client:
        pending = [
            asyncio.create_task(
                client.post(
                    f"{fleet.base_url('a')}/chat/completions",
                    json={"model": m, "messages": MESSAGES, "stream": True},
                )
            )
            for m in ("stall", "headers-stall", "500@stall", "drip@0.5,n=100")
        ]
        while len(fleet.chat_requests()) < 4:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await fleet.aclose()
        assert time.monotonic() - started < 1.0
        assert not fleet._tasks
        await asyncio.gather(*pending, return_exceptions=True)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []


# --------------------------------------------------------------------------- in a thread


def test_thread_mode_serves_synchronous_callers_and_stops_promptly() -> None:
    with FaultFleet({"a": ["healthy", "stall"]}, reply="from a thread") as fleet:
        url = f"{fleet.base_url('a')}/chat/completions"
        reply = httpx.post(url, json={"model": "healthy", "messages": MESSAGES})
        assert reply.json()["choices"][0]["message"]["content"] == "from a thread"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json={"model": "stall", "messages": MESSAGES}, timeout=0.2)
        started = time.monotonic()
    assert time.monotonic() - started < 2.0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{fleet._port}/a/v1/models", timeout=1)


def test_thread_mode_reports_a_busy_port() -> None:
    with FaultFleet({"a": ["healthy"]}) as first:
        clash = FaultFleet({"a": ["healthy"]}, port=first.port)
        with pytest.raises(OSError):
            clash.start_in_thread()


# --------------------------------------------------------------------------- as a process


def test_standalone_process(tmp_path: Path) -> None:
    config = {
        "reply": "from a process",
        "accounts": {
            "nim": {"api_key": "k-nim-0000000000", "models": ["healthy@0.05", "stall"]},
            "or": {"models": {"meta/llama-3.1-8b-instruct:free": "429@9"}},
        },
    }
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_review.drill", "--serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert set(ready["accounts"]) == {"nim", "or"}

        async def exercise() -> list:
            async with httpx.AsyncClient() as client:
                return [
                    await chat_call(
                        client,
                        base_url=ready["accounts"][account],
                        api_key=key,
                        model=model,
                        messages=MESSAGES,
                        deadlines=D,
                    )
                    for account, key, model in (
                        ("nim", "k-nim-0000000000", "healthy@0.05"),
                        ("nim", "k-nim-0000000000", "stall"),
                        ("or", None, "meta/llama-3.1-8b-instruct:free"),
                    )
                ]

        ok, stalled, limited = asyncio.run(exercise())
        assert ok.content == "from a process"
        assert (stalled.kind, stalled.phase) == (OutcomeKind.TIMEOUT, Phase.FIRST_BYTE)
        assert (limited.kind, limited.retry_after) == (OutcomeKind.RATE_LIMITED, 9.0)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=5)
    assert proc.returncode == 0, stderr


def test_standalone_process_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text('[accounts.a]\nmodels = ["sleepy"]\n')
    proc = subprocess.run(
        [sys.executable, "-m", "relay_review.drill", "--serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "unknown fault kind 'sleepy'" in proc.stderr


@pytest.mark.parametrize(
    "config",
    ['"x"', "[]", '{"accounts": {"x": 5}}', '{"accounts": {"x": {"models": 5}}}',
     '{"accounts": {"x": {"models": [5]}}}', '{"accounts": {"x": {"models": {"a": 5}}}}',
     "[" * 100_000 + "]" * 100_000],
)  # fmt: skip
def test_a_fleet_config_of_the_wrong_shape_is_exit_2_naming_it(tmp_path: Path, config: str) -> None:
    """Each was an AttributeError, TypeError or RecursionError traceback (a newcomer's audit)."""
    from relay_review.drill.serve import serve_config

    path = tmp_path / "fleet.json"
    path.write_text(config)
    assert serve_config(path) == 2


def test_the_review_drill_names_the_policy_file_it_ran_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``drill --policy FILE`` applied the file but its footer said "built-in drill policy"."""
    from relay_review import cli

    policy = tmp_path / "p.toml"
    policy.write_text("[review]\nallow_approve = false\n")
    assert cli.main(["drill", "--policy", str(policy), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["provenance"] == f"drill policy {policy}"


# --------------------------------------------------------------------------- memory across drills


def drill_env() -> dict[str, str]:
    """This process's environment without a drill port or a default store."""
    return {k: v for k, v in os.environ.items() if k not in (PORT_ENV, "RELAY_REVIEW_STATE")}


def test_a_second_drill_with_one_state_file_starts_warm(tmp_path: Path) -> None:
    """Memory knows an account by its base URL, and the drill's fleet listened on a free port
    each time: a second ``drill --state FILE`` was as cold as the first unless RELAY_DRILL_PORT
    was set. Its port now comes from the state's location (the same file spelled twice)."""
    argv = ("drill", "--scenario", "mixed", "--format", "json", "--state")
    first = run_cli(*argv, "state.json", env=drill_env(), cwd=tmp_path)
    second = run_cli(*argv, f"file:{tmp_path / 'state.json'}", env=drill_env())
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert "WARNING" not in first.stderr + second.stderr  # no port was taken
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    healthy = "nim_b/meta/llama-3.3-70b-instruct"
    assert (one["probes_sent"], one["memory"]["proven"]) == (11, 0)
    assert (two["probes_sent"], two["memory"]["proven"]) == (0, 1)
    assert two["requests_per_route"] == {healthy: 1}
    rows = {r["agent_id"]: r for r in two["readiness"]}
    assert rows[healthy]["detail"].startswith("remembered: served")


def test_a_taken_state_port_leaves_the_drill_cold_with_one_warning(tmp_path: Path) -> None:
    from relay_review.drill.scenarios import stable_port
    from relay_review.pipeline.store import store_location

    state = tmp_path / "state.json"
    port = stable_port(store_location(str(state)) or "")
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # another listener holds it: taken all the same
            taken.bind(("127.0.0.1", port))
            taken.listen()
        run = run_cli("drill", "--state", str(state), "--format", "json", env=drill_env())
    assert run.returncode == 0, run.stderr  # the review drill, on a free port
    (warning,) = [line for line in run.stderr.splitlines() if line.startswith("WARNING")]
    assert f"127.0.0.1:{port}, the drill's port for this memory, is taken" in warning
    assert "starts cold" in warning and PORT_ENV in warning
    assert json.loads(run.stdout)["decision"] == "request_changes"


def test_a_taken_drill_port_is_exit_2_naming_it() -> None:
    """RELAY_DRILL_PORT is the user's choice: no other port instead (it was a traceback)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = run_cli("drill", "--scenario", "mixed", env={**drill_env(), PORT_ENV: str(port)})
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.splitlines() == [
        f"relay-review drill: error: {PORT_ENV}={port}: cannot listen on 127.0.0.1:{port} "
        "(Address already in use)"
    ]
