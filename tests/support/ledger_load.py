"""Many ``relay-review chat`` processes at once over accounts with a request budget, sharing one
Redis: the load test of the quota ledger (tests/e2e/reliability/test_ledger_load.py) and its
benchmark (bench/ledger_load.py) run this.

Each process has the same catalog (one route per account, probes off, so each run sends exactly
one request when its budget allows). The fleet records every request it receives, with its time.

``forked=True`` starts the processes from a fork server that imported relay-review once
(tests/support/forked_cli.py): each is still its own process with its own Redis client and
in-process ledger, running ``cli.main`` with its own stdout and stderr, but without paying
interpreter start-up and imports twelve times. The console script and ``python -m`` are not
exercised then; the default (``forked=False``) starts ``python -m relay_review`` as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forked_cli import ForkedCli
from relay_review.drill import FaultFleet

KEY_ENV = "LEDGER_LOAD_KEY"
KEY = "sk-ledger-load-0123456789abcdef"


@dataclass
class LoadResult:
    """What the fleet received and how each process ended."""

    budget: dict[str, int]
    #: account -> times (monotonic, this process's clock) of the chat requests it received
    received: dict[str, list[float]]
    codes: list[int]
    reports: list[dict[str, Any]]
    stderr: list[str]
    wall_s: float
    statuses: list[int] = field(default_factory=list)

    def most_in_any_window(self, account: str, window: float = 60.0) -> int:
        """The most requests the account received in any ``window`` seconds."""
        times = sorted(self.received.get(account, []))
        best = 0
        start = 0
        for end, at in enumerate(times):
            while at - times[start] >= window:
                start += 1
            best = max(best, end - start + 1)
        return best

    @property
    def served(self) -> int:
        return sum(1 for c in self.codes if c == 0)


def run_load(
    workdir: Path,
    redis_url: str,
    *,
    processes: int = 12,
    rpm: int = 4,
    accounts: tuple[str, ...] = ("alpha", "beta"),
    deadline: float = 8.0,
    prefix: str = "load:",
    behaviour: str = "healthy@0.05",
    while_running: Any = None,
    policy_extra: str = "",
    forked: bool = False,
) -> LoadResult:
    """Start ``processes`` chat runs at once and wait for all of them (``while_running``, if
    given, is called with the fleet once they have started: e.g. to stop Redis mid-run);
    ``forked``: from the fork server (see the module's docstring)."""
    fleet_accounts = {
        name: {"models": {f"{name}/model": behaviour}, "api_key": KEY} for name in accounts
    }
    with FaultFleet(fleet_accounts, reply="ok") as fleet:
        routes = [
            {
                "account": name,
                "provider": "openai_compatible",
                "model": f"{name}/model",
                "base_url": fleet.base_url(name),
                "api_key_env": KEY_ENV,
                "prompt_price_per_1k": 0.0,
                "completion_price_per_1k": 0.0,
            }
            for name in accounts
        ]
        discovery = workdir / "discovery.json"
        discovery.write_text(json.dumps({"routes": routes}))
        policy = workdir / "policy.toml"
        tables = [
            "[preflight]\nprobe_budget = 0\n",
            f"[serving]\nattempt = {deadline}\ndeadline = {deadline}\n",
        ]
        tables += [
            "[[accounts]]\n"
            f'name = "{name}"\nkind = "openai_compatible"\n'
            f'base_url = "{fleet.base_url(name)}"\npricing = "declared-free"\n'
            f'api_key_env = "{KEY_ENV}"\nrpm = {rpm}\n'
            for name in accounts
        ]
        policy.write_text("\n".join([*tables, policy_extra]))
        env = {**os.environ, KEY_ENV: KEY}
        argv = ["chat", "--discovery", str(discovery)]
        argv += ["--policy", str(policy), "--message", "hello", "--format", "json"]
        argv += ["--state", f"{redis_url}?prefix={prefix}"]
        started = time.monotonic()
        procs: list[Any] = [
            ForkedCli(argv, env, workdir, f"run-{n}")
            if forked
            else subprocess.Popen(
                [sys.executable, "-m", "relay_review", *argv],
                env=env,
                cwd=workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            for n in range(processes)
        ]
        if while_running is not None:
            while_running(fleet)
        outputs = [p.communicate(timeout=deadline + 60) for p in procs]
        wall = time.monotonic() - started
        received: dict[str, list[float]] = {name: [] for name in accounts}
        for r in fleet.requests:
            if r.is_chat and r.account in received:
                received[r.account].append(r.at)
    reports = []
    for out, _ in outputs:
        try:
            reports.append(json.loads(out))
        except ValueError:
            reports.append({})
    return LoadResult(
        budget={name: rpm for name in accounts},
        received=received,
        codes=[p.returncode for p in procs],
        reports=reports,
        stderr=[err for _, err in outputs],
        wall_s=wall,
    )
