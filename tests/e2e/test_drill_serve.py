"""``relay-review drill --serve --config FILE``: the shipped fleet configs under ``examples/``,
served by the console script as a user starts them, and used by the other commands through
``examples/fleet-policy.toml`` (discover, then chat), as the README and the example say."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from cli_harness import run_cli
from relay_review.drill.fleet import load_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: The console script installed beside this interpreter (``pip install -e .``).
CLI = shutil.which("relay-review", path=str(Path(sys.executable).parent)) or "relay-review"
POLICY_PORT = 8788  # the port examples/fleet-policy.toml names
#: the example's chat command, with bounds short enough that the stalled routes cost seconds
CHAT_FLAGS = ("--message", "Say hello.", "--probe-timeout", "2", "--first-byte-timeout", "2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(config: Path, *extra: str) -> Iterator[dict]:
    """``relay-review drill --serve --config CONFIG``; yields its ready line; stops it by PID."""
    proc = subprocess.Popen(
        [CLI, "drill", "--serve", "--config", str(config), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        yield json.loads(line)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr


def test_examples_are_valid_fleet_configs() -> None:
    """Every fleet config shipped under examples/ loads (each account with models)."""
    configs = sorted(EXAMPLES.glob("fleet.*"))
    assert {p.suffix for p in configs} == {".toml", ".json"}
    for path in configs:
        accounts = load_config(path)["accounts"]
        assert accounts and all(spec["models"] for spec in accounts.values()), path


def test_serve_json_example_lists_models_and_checks_its_key() -> None:
    """examples/fleet.json as a server: the listing, the key an account expects, a reply."""
    with serving(EXAMPLES / "fleet.json", "--format", "json") as ready:  # what it prints
        nim = ready["accounts"]["nim"]
        assert nim == f"{ready['url']}/nim/v1" and ready["url"].startswith("http://127.0.0.1:")
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{nim}/models").status_code == 401  # api_key set, none sent
            listed = client.get(f"{nim}/models", headers={"Authorization": "Bearer k-nim-local"})
            assert [m["id"] for m in listed.json()["data"]] == [
                "healthy@0.2",
                "a/stall",
                "b/headers-stall",
            ]
            router = ready["accounts"]["router"]
            limited = client.post(
                f"{router}/chat/completions",
                json={"model": "meta-llama/llama-3.3-70b-instruct:free", "messages": []},
            )
            assert (limited.status_code, limited.headers["retry-after"]) == (429, "5")
            ok = client.post(
                f"{nim}/chat/completions",
                headers={"Authorization": "Bearer k-nim-local"},
                json={"model": "healthy@0.2", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert ok.json()["choices"][0]["message"]["content"] == "OK"


def test_toml_example_through_the_policy_example(tmp_path: Path) -> None:
    """The walk examples/fleet-policy.toml describes: serve examples/fleet.toml, discover its
    two accounts, chat through preflight and failover; the stalled, rate-limited and 404 routes
    are reported and the healthy one serves."""
    port = free_port()
    policy = tmp_path / "fleet-policy.toml"
    text = (EXAMPLES / "fleet-policy.toml").read_text()
    assert f"127.0.0.1:{POLICY_PORT}/" in text
    policy.write_text(text.replace(f":{POLICY_PORT}/", f":{port}/"))
    env = {**os.environ, "LOCAL_A_API_KEY": "any", "LOCAL_B_API_KEY": "local-b-key"}
    env.pop("RELAY_REVIEW_STATE", None)
    routes = tmp_path / "fleet-routes.json"
    with serving(EXAMPLES / "fleet.toml", "--port", str(port)) as ready:
        assert ready["port"] == port
        # the fleet as a process (above); discover and chat through cli.main in this process
        discover = run_cli(
            "discover", "--policy", str(policy), "--out", str(routes), env=env, cwd=tmp_path
        )
        assert discover.returncode == 0, discover.stderr
        models = {r["agent_id"] for r in json.loads(routes.read_text())["routes"]}
        assert len(models) == 5, models
        chat = run_cli(
            "chat", "--policy", str(policy), "--discovery", str(routes), *CHAT_FLAGS,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    result = json.loads(chat.stdout)
    assert result["served_by"]["agent_id"] == "local_a/qwen/qwen3-coder-480b-a35b-instruct"
    assert result["reply"] == "Hello from the local fault fleet."
    status = {r["agent_id"]: r["status"] for r in result["readiness"]}
    detail = {r["agent_id"]: r.get("detail") or "" for r in result["readiness"]}
    # hedged preflight (the default): the stalled first route got the request unprobed and was
    # cancelled once a probe found the healthy route ready
    stalled = "local_a/deepseek-ai/deepseek-v4-flash"
    assert status[stalled] == "unprobed" and "cancelled" in detail[stalled], result["readiness"]
    assert status["local_a/meta/llama-3.3-70b-instruct"] == "deferred"
    assert status["local_b/vendor/404"] == "rejected"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["drill", "--serve"], "--serve needs --config"),
        (["drill", "--config", "examples/fleet.toml"], "add --serve"),
        (
            ["drill", "--serve", "--config", "examples/fleet.toml", "--scenario", "mixed"],
            "pick one",
        ),
        (["drill", "--port", "9"], "--port belongs to --serve"),
    ],
)
def test_serve_usage_errors_name_the_flag(argv: list[str], says: str) -> None:
    proc = run_cli(*argv, cwd=ROOT)  # cli.main, in this process
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


@pytest.mark.timeout(30)  # before the refusal, --serve served on until killed: fail, not hang
@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--format", "text"], "--format text"),
        (["--format", "markdown"], "--format markdown"),
        (["--state", "memory.json"], "--state"),
        (["--policy", "policy.toml"], "--policy"),
        (["--deadline", "5"], "--deadline"),
        (["--probe-budget", "0", "--attempt-timeout", "9"], "--probe-budget, --attempt-timeout"),
    ],
)
def test_serve_refuses_the_flags_of_a_pipeline_run(flags: list[str], named: str) -> None:
    """The fleet --serve runs has no policy, bounds, memory or report format; these flags were
    ignored without a word (a --deadline that bounded nothing). Refused before it listens, in
    one line naming them."""
    config = str(EXAMPLES / "fleet.toml")
    proc = run_cli("drill", "--serve", "--config", config, *flags, cwd=ROOT)  # cli.main
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr  # no ready line
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"relay-review drill: error: {named}: not with --serve"), line


def test_serve_bad_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text('[accounts.a]\nmodels = ["sleepy"]\n')
    proc = run_cli("drill", "--serve", "--config", str(path))  # cli.main, in this process
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "unknown fault kind 'sleepy'" in proc.stderr
