"""Faults of the shared store never fail a run (issue 19): a real redis-server closed from the
start, killed mid-run, stopped (SIGSTOP) mid-run, restarted empty mid-run, or slow (a delaying
TCP proxy in front: 0.3-2 s per reply, and 0.3-0.9 s: always just within the 1 s bound).

Each fault is tried through the CLI (``relay-review drill``: the whole review over six routes,
all six probed at once at the default policy; the six faults at once, each its own process
forked from a warm fork server, and the console script itself in the password test) and
through ``relay-review run`` (the action, four routes probed at once, the default policy but
for the deadline; a process for the closed store, the action's entrypoint in this process for
the others). Every run completes within its deadline with one warning naming the store and the
cause, every route is still probed or served, and no task's exception is lost.
Scripted (no sockets): the ledger's swap under concurrent callers, and one probe's exception
(any) kept to its route.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import connection
from pathlib import Path
from typing import Any

import pytest
import redis

from action_harness import policy_toml, run_action, run_in_process, standard_fleet
from cli_harness import run_cli
from delay_proxy import DelayProxy
from forked_cli import ForkedCli
from github_mock import MockGitHub
from redis_server import RedisServer
from relay_review.config import PreflightPolicy, ServingPolicy
from relay_review.drill.scenarios import SCENARIOS, discovery_for, drill_environ, fleet_for
from relay_review.records import Outcome, OutcomeKind
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.routing.session import RoutingSession
from relay_review.state.ledger import Budget, MemoryLedger, Reservation
from session_once import once_per_session

FAULTS = ["closed", "killed", "stopped", "restarted", "slow", "sluggish"]
#: Seconds each reply of a slow store is held back: ``slow`` past the 1 s bound now and then
#: (memory's load usually gives up), ``sluggish`` always within it (memory loads, slowly, and
#: the ledger's concurrent calls are the ones that give up).
DELAYS = {"slow": (0.3, 2.0), "sluggish": (0.3, 0.9)}
#: The drill's whole-run bound here (its other bounds are the defaults).
DRILL_DEADLINE = 20.0
#: The action's deadline (its ``deadline`` input; the rest of the policy is the defaults).
ACTION_DEADLINE = 20.0
#: What a process adds to the run's own deadline on a loaded machine (start-up, comment).
SLACK_S = 8.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ledger_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    names = ("cmdstat_evalsha", "cmdstat_eval")
    return sum(int(v["calls"]) for k, v in stats.items() if k in names)


def _when_routing_starts(server: RedisServer, fault: Callable[[], None]) -> threading.Thread:
    """Run ``fault`` once the run reserved its first request in the shared ledger (mid-run:
    memory was read, probes are going out)."""
    client = redis.Redis.from_url(server.url, socket_timeout=1)
    before = _ledger_calls(client)

    def watch() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if _ledger_calls(client) > before:
                break
            time.sleep(0.005)
        fault()
        client.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@contextmanager
def faulty_store(fault: str, workdir: Path) -> Iterator[tuple[str, str]]:
    """``(state URL, the host:port the warning must name)`` with ``fault`` applied (mid-run
    faults start once the run reaches the ledger)."""
    if fault == "closed":
        port = _closed_port()
        yield f"redis://127.0.0.1:{port}/0", f"127.0.0.1:{port}"
        return
    server = RedisServer(workdir / "redis")
    watcher = None
    try:
        where = f"127.0.0.1:{server.port}"
        if fault in DELAYS:
            low, high = DELAYS[fault]
            with DelayProxy(("127.0.0.1", server.port), low=low, high=high) as proxy:
                yield proxy.url, f"127.0.0.1:{proxy.port}"
            return
        action = {"killed": server.kill, "stopped": server.pause, "restarted": server.restart}
        watcher = _when_routing_starts(server, action[fault])
        yield server.url, where
    finally:
        if watcher is not None:
            watcher.join(timeout=30)
        server.stop()


#: A restart that falls between two of the run's store calls fails none of them: the run finds
#: its ledger windows gone instead, and says that (the one warning, as true as the other).
WINDOWS_LOST = "the quota ledger's windows were lost during this run"


def assert_one_store_warning(text: str, where: str, *, restarted: bool = False) -> None:
    assert "Task exception was never retrieved" not in text, text
    assert "Traceback" not in text, text
    warnings = [line for line in text.splitlines() if "WARNING" in line or "::warning" in line]
    assert len(warnings) == 1, text
    (line,) = warnings
    assert where in line, line
    if restarted and WINDOWS_LOST in line:
        return
    assert "unavailable" in line, line
    assert any(cause in line for cause in ("ConnectionError", "TimeoutError")), line


# --------------------------------------------------------------------------- the CLI


def store_free_environ() -> dict[str, str]:
    """This process's environment without RELAY_REVIEW_* (no state from outside the test)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}


def drill_every_fault(workdir: Path) -> dict[str, dict[str, Any]]:
    """``relay-review drill`` against each faulty store, all at once: one process each, forked
    from a warm fork server (tests/support/forked_cli.py), each with its own store and fault.
    fault -> its exit code, stdout, stderr, wall time and the host:port its warning must name."""
    command = ["drill", "--deadline", str(DRILL_DEADLINE), "--format", "json"]
    runs: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        procs = {}
        for fault in FAULTS:
            folder = workdir / fault
            folder.mkdir()
            url, where = stack.enter_context(faulty_store(fault, folder))
            runs[fault] = {"where": where}
            argv = [*command, "--state", url]
            procs[fault] = ForkedCli(argv, store_free_environ(), folder, "drill")
        pending = {p.sentinel: fault for fault, p in procs.items()}
        end = time.monotonic() + DRILL_DEADLINE + 60
        while pending and time.monotonic() < end:
            for sentinel in connection.wait(list(pending), timeout=end - time.monotonic()):
                fault = pending.pop(sentinel)  # type: ignore[call-overload]
                runs[fault]["wall"] = time.monotonic() - procs[fault].started
        for fault, proc in procs.items():
            out, err = proc.communicate(timeout=1)
            runs[fault].update(code=proc.returncode, stdout=out, stderr=err)
            runs[fault].setdefault("wall", float("inf"))
    return runs


@pytest.fixture(scope="session")
def drilled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every fault's drill, run once per test session (the first worker to need them runs them
    while the others wait, then read them back)."""
    return dict(once_per_session(tmp_path_factory, "store-fault-drills", drill_every_fault))


@pytest.mark.integration
@pytest.mark.parametrize("fault", FAULTS)
def test_drill_completes_with_one_warning(fault: str, drilled: dict[str, dict[str, Any]]) -> None:
    """Each its own process (forked; the console script itself, with the same store warning,
    is run by test_the_store_warning_masks_the_password), the six at once."""
    run = drilled[fault]
    assert run["code"] == 0, run["stderr"]
    report = json.loads(run["stdout"])
    assert report["decision"] == "request_changes", report["why"]
    assert report["elapsed_s"] <= DRILL_DEADLINE and run["wall"] <= DRILL_DEADLINE + SLACK_S
    assert_one_store_warning(run["stderr"], run["where"], restarted=fault == "restarted")
    # hedged preflight: the first route (stalled) got the request unprobed; the five others
    # were probed at once when it gave no first byte; every route's fate is stated
    assert report["probes_sent"] == 5
    assert all(r["status"] != "unprobed" or r["detail"] for r in report["readiness"])
    assert report["chunks"] and all(c["served_by"] for c in report["chunks"]), report["chunks"]


@pytest.mark.integration
@pytest.mark.parametrize("command", ["preflight", "chat"])
def test_preflight_and_chat_go_on_when_the_store_is_closed(command: str, tmp_path: Path) -> None:
    """The issue's other commands: ``preflight`` died with a traceback, ``chat`` exited 1.
    Through ``cli.main`` in this process (tests/support/cli_harness.py)."""
    scenario = SCENARIOS["mixed"]  # twelve routes, six probed at once (the default budget)
    with fleet_for(scenario) as fleet:
        discovery = tmp_path / "discovery.json"
        discovery.write_text(json.dumps(discovery_for(scenario, fleet)))
        env = store_free_environ()
        env.update(drill_environ(scenario))
        port = _closed_port()
        args = ["--probe-timeout", "1"] if command == "preflight" else ["--message", "hi"]
        state = f"redis://127.0.0.1:{port}/0"
        proc = run_cli(
            command, "--discovery", str(discovery), *args, "--deadline", "20", "--state", state,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert_one_store_warning(proc.stderr, f"127.0.0.1:{port}")
    report = json.loads(proc.stdout)
    # preflight probes six (the budget); chat is hedged: the first route (stalled) got the
    # request unprobed, then the eleven others were probed at once
    assert report["probes_sent"] == (6 if command == "preflight" else 11)
    if command == "chat":
        assert report["served_by"]["agent_id"] == "nim_b/meta/llama-3.3-70b-instruct"


# --------------------------------------------------------------------------- the action


@pytest.mark.integration
@pytest.mark.parametrize("fault", FAULTS)
def test_action_run_completes_with_one_warning(
    fault: str, tmp_path: Path, github_mock: MockGitHub
) -> None:
    """The closed store as the runner starts the action (a process); the other faults through
    the action's entrypoint in this process (``run_in_process``: the same environment)."""
    with standard_fleet() as fleet, faulty_store(fault, tmp_path) as (url, where):
        policy = policy_toml(fleet, "acme", "pair", "down", "leaky", head="")  # the defaults
        inputs = {"policy": policy, "state": url, "deadline": str(int(ACTION_DEADLINE))}
        if fault == "closed":
            run = run_action(tmp_path / "run", github_mock, inputs, timeout=ACTION_DEADLINE + 60)
            lost = ""
        else:
            run = run_in_process(tmp_path / "run", github_mock, inputs)
            lost = lost_task_exceptions()
        probes = [r for r in fleet.requests if r.is_chat and r.max_tokens == 16]
    assert run.code == 0, run.stdout + run.stderr
    assert run.report is not None and run.report["served_by"] is not None
    assert run.report["elapsed_s"] <= ACTION_DEADLINE
    assert run.wall_s <= ACTION_DEADLINE + SLACK_S
    assert_one_store_warning(run.stdout + run.stderr + lost, where, restarted=fault == "restarted")
    # hedged preflight: the first route served without a probe; the others were not needed
    assert run.report["probes_sent"] == 0 and not probes
    assert all(r["status"] != "unprobed" or r["detail"] for r in run.report["readiness"])


def lost_task_exceptions() -> str:
    """What the asyncio logger says when the garbage of a finished in-process run is collected
    (a process prints it as it exits): ``Task exception was never retrieved`` for each lost one."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(handler)
    try:
        gc.collect()
    finally:
        asyncio_log.removeHandler(handler)
    return stream.getvalue()


# --------------------------------------------------------------------------- scripted


class FailingLedger:
    """A shared ledger whose every call fails after ``delay`` (all concurrent callers see it)."""

    def __init__(self, exc: Exception, delay: float = 0.05) -> None:
        self.exc, self.delay = exc, delay
        self.calls = 0
        self.reports: list[BaseException] = []

    async def reserve(self, account: str, budget: Budget) -> Reservation:
        self.calls += 1
        await asyncio.sleep(self.delay)
        raise self.exc

    async def close(self, account: str, seconds: float) -> None:
        await self.reserve(account, Budget())

    def report_failure(self, exc: BaseException) -> None:
        self.reports.append(exc)


def entries(*models: str) -> list[Any]:
    raws = [
        {
            "account": f"acct{i}",
            "provider": "openai_compatible",
            "model": m,
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "K",
            "prompt_price_per_1k": 0,
            "completion_price_per_1k": 0,
        }
        for i, m in enumerate(models)
    ]
    return build_catalog(parse_discovery({"routes": raws}), limit=10).selected


@pytest.mark.parametrize("exc", [ConnectionError("gone"), KeyError("x"), RuntimeError("bug")])
async def test_every_concurrent_caller_goes_on_when_the_shared_ledger_fails(exc: Exception) -> None:
    ledger = FailingLedger(exc)
    # offline_share 1: the whole window for this run (the default caps it: test_ledger_degraded)
    budgets = AccountBudgets(ledger, {"acct0": Budget(rpm=3)}, share=1.0)
    (entry,) = entries("m")
    answers = await asyncio.gather(*(budgets.admit(entry, 10.0) for _ in range(8)))
    # the in-process ledger took over once, for all eight: three granted, five refused
    assert isinstance(budgets.ledger, MemoryLedger) and ledger.calls == 8
    assert len(ledger.reports) == 1 and ledger.reports[0] is exc
    assert sum(a is None for a in answers) == 3
    assert all(a is None or a.kind is OutcomeKind.RATE_LIMITED for a in answers)


def ok() -> Outcome:
    return Outcome(kind=OutcomeKind.OK, http_status=200, content="ready", finish_reason="stop")


class OneBadLedger(MemoryLedger):
    """The in-process ledger with a bug for one account (an exception outside the chat call)."""

    async def reserve(self, account: str, budget: Budget) -> Reservation:
        if account == "acct0":
            raise ZeroDivisionError("a bug")
        return await super().reserve(account, budget)


@pytest.mark.parametrize("where", ["chat", "ledger", "key_check"])
async def test_one_probe_exception_never_ends_preflight_for_the_others(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    sent: list[str] = []

    async def chat(_client: Any, *, model: str, **_: Any) -> Outcome:
        sent.append(model)
        if model == "boom" and where == "chat":
            raise ZeroDivisionError("a bug")
        if model == "boom" and where == "key_check":
            return Outcome(kind=OutcomeKind.AUTH_FAILED, http_status=401)
        await asyncio.sleep(0.05)
        return ok()

    async def key_check(_client: Any, **_: Any) -> bool | None:
        raise ZeroDivisionError("a bug")  # after boom's 401: confirming its gateway key

    budgets = AccountBudgets(OneBadLedger()) if where == "ledger" else None
    session = RoutingSession(
        entries("boom", "one", "two", "three"),
        preflight=PreflightPolicy(probe_budget=6, probe_timeout=1, mode="eager"),
        serving=ServingPolicy(connect=1, first_byte=1, idle=1, attempt=2, deadline=5),
        environ={"K": "secret"},
        chat=chat,
        key_check=key_check,
        budgets=budgets,
    )
    async with session:
        await session.wait_preflight()
        result = await session.serve([{"role": "user", "content": "hi"}])
    rows = {r["model"]: r for r in (p.model_dump() for p in session.readiness())}
    assert {rows[m]["status"] for m in ("one", "two", "three")} == {"ready"}
    assert rows["boom"]["status"] == "rejected"
    if where != "key_check":  # there the probe's own 401 says more
        assert "ZeroDivisionError" in rows["boom"]["detail"]
    assert result.served_by is not None and result.served_by.model == "one"
    assert sorted(set(sent) - {"boom"}) == ["one", "three", "two"]
    assert "never retrieved" not in caplog.text
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ZeroDivisionError" in warnings[0].getMessage()


@pytest.mark.integration
def test_the_store_warning_masks_the_password(tmp_path: Path) -> None:
    port = _closed_port()
    secret = "s3cret-Pa55word-of-the-store"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "relay_review",
            "drill",
            "--format",
            "json",
            "--state",
            f"redis://:{secret}@127.0.0.1:{port}/0",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=DRILL_DEADLINE + 60,
    )
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    assert_one_store_warning(proc.stderr, f"redis://:***@127.0.0.1:{port}/0")
