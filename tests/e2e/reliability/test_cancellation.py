"""Stopping cleanly (issue 10): a cancelled workflow or ``docker stop`` sends SIGTERM, Ctrl-C
sends SIGINT. The run stops within 2 s, says so in one line, shows no traceback and posts
nothing. The report file is written without following a planted symlink."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from action_harness import FLEET_KEY, policy_toml, run_action, start_action
from github_mock import MockGitHub
from relay_review._files import atomic_write
from relay_review.drill import FaultFleet

#: The bound the issue sets, and what this machine may add to deliver the signal and reap.
STOP_S = 2.0


@pytest.fixture(scope="module")
def silent() -> Iterator[FaultFleet]:
    accounts = {"mute": {"models": {"mute/a": "stall", "mute/b": "stall"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts) as running:
        yield running


def wait_for_chat(fleet: FaultFleet, since: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(r.is_chat for r in fleet.requests[since:]):
            return
        time.sleep(0.05)
    raise AssertionError("the run never reached a model")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_within_2_s_and_posts_nothing(
    signum: signal.Signals, tmp_path: Path, github_mock: MockGitHub, silent: FaultFleet
) -> None:
    since = len(silent.requests)
    process = start_action(tmp_path, github_mock, {"policy": policy_toml(silent, "mute")})
    wait_for_chat(silent, since)  # discovery and policy done; a probe or review is in flight
    sent = time.monotonic()
    process.proc.send_signal(signum)
    run = process.wait(timeout=30)
    stopped = time.monotonic() - sent
    assert stopped < STOP_S, f"stopped {stopped:.2f} s after {signum.name}"
    assert run.code == 128 + signum
    lines = [line for line in run.stderr.splitlines() if "cancelled" in line]
    assert lines == [
        f"relay-review run: cancelled by {signum.name}; stopping without sending anything more"
    ]
    assert "Traceback" not in run.stdout + run.stderr
    writes = [c for c in github_mock.calls() if c.method in ("POST", "PATCH", "DELETE")]
    assert writes == []
    assert run.report is None  # no report pretends the run finished


def quick_reply(body: dict) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return json.dumps({"summary": "Fine.", "findings": []})


def test_the_report_is_written_without_following_symlinks(
    tmp_path: Path, github_mock: MockGitHub
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    workspace = tmp_path / "planted"
    workspace.mkdir()
    report = workspace / "relay-review-report.json"
    for name in (report.name, f".{report.name}.tmp", f".{report.name}.tmp.1"):
        (workspace / name).symlink_to(victim)
    accounts = {"ok": {"models": {"ok/reviewer": "healthy"}, "api_key": FLEET_KEY}}
    with FaultFleet(accounts, reply=quick_reply) as fleet:
        run = run_action(
            tmp_path / "run",
            github_mock,
            {"policy": policy_toml(fleet, "ok")},
            env_extra={"GITHUB_WORKSPACE": str(workspace)},
        )
    assert run.code == 0, run.stdout + run.stderr
    assert "report: " in run.stdout
    assert victim.read_text() == "keep me\n"
    assert report.is_file() and not report.is_symlink()
    assert '"decision"' in report.read_text()


def test_atomic_write_replaces_a_symlink_and_never_writes_through_one(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"secret")
    target = tmp_path / "out.json"
    target.symlink_to(victim)
    atomic_write(target, b"{}")
    assert victim.read_bytes() == b"secret"
    assert not target.is_symlink() and target.read_bytes() == b"{}"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    os.chmod(tmp_path, 0o500)  # a failed write leaves nothing behind and raises
    try:
        if os.geteuid() != 0:
            with pytest.raises(PermissionError):
                atomic_write(tmp_path / "other.json", b"{}")
    finally:
        os.chmod(tmp_path, 0o700)
