"""A review whose account budget runs out: ``relay-review review`` of six chunks over one route
at ``rpm = 2`` (optionally a second account with budget beside it), measured as a user feels it:
attempts logged, wall time, CPU time, bytes printed. Shared by tests/e2e/test_budget_wait.py and
bench/budget_spin.py (issue 19: a refused budget waits, never spins).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay_review.drill import FaultFleet
from relay_review.drill.review import reviewer_reply

KEY_ENV = "BUDGET_WAIT_KEY"
KEY = "sk-budget-wait-0123456789abcdef"
CHUNKS = 6
#: Each file's added lines: more than half of a 256-token chunk, so each file is one chunk.
LINES_PER_FILE = 10


def six_file_diff() -> str:
    """A unified diff of :data:`CHUNKS` new files, each its own 256-token chunk."""
    parts = []
    for f in range(CHUNKS):
        body = "".join(
            f"+setting_{f}_{i} = compute_value({f}, {i}, scale=0.{i}5)  # tuned\n"
            for i in range(LINES_PER_FILE)
        )
        parts.append(
            f"diff --git a/pkg/mod_{f}.py b/pkg/mod_{f}.py\nnew file mode 100644\n"
            f"--- /dev/null\n+++ b/pkg/mod_{f}.py\n@@ -0,0 +1,{LINES_PER_FILE} @@\n{body}"
        )
    return "".join(parts)


@dataclass
class SpinResult:
    """One review run, as the user sees it."""

    code: int
    report: dict[str, Any]
    wall_s: float
    cpu_s: float
    output_bytes: int
    stderr: str
    #: chat requests the fleet received, per account
    received: dict[str, int]

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return list(self.report.get("attempts", []))

    def notes(self) -> list[dict[str, Any]]:
        """Attempts the budget held back (nothing sent)."""
        return [a for a in self.attempts if "account budget" in (a.get("detail") or "")]

    def served_by(self) -> dict[str, int]:
        """Chunks served, per account."""
        counts: dict[str, int] = {}
        for chunk in self.report.get("chunks", []):
            served = chunk.get("served_by")
            if served:
                counts[served["account"]] = counts.get(served["account"], 0) + 1
        return counts


def run_review(workdir: Path, *, deadline: float, spare: bool = False) -> SpinResult:
    """Review the six-file diff over ``solo`` (``rpm = 2``) and, with ``spare``, an account
    without a budget after it in catalog order; default preflight, ``deadline`` for the run."""
    names = ["solo", "spare"] if spare else ["solo"]
    accounts = {n: {"models": {f"{n}/reviewer": "healthy@0.2"}, "api_key": KEY} for n in names}
    with FaultFleet(accounts, reply=reviewer_reply) as fleet:
        routes = [
            {
                "account": n,
                "provider": "openai_compatible",
                "model": f"{n}/reviewer",
                "base_url": fleet.base_url(n),
                "api_key_env": KEY_ENV,
                "prompt_price_per_1k": 0.0,
                "completion_price_per_1k": 0.0,
            }
            for n in names
        ]
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "discovery.json").write_text(json.dumps({"routes": routes}))
        (workdir / "change.diff").write_text(six_file_diff())
        tables = [
            f"[serving]\nattempt = {deadline}\ndeadline = {deadline}\n",
            "[review]\nchunk_tokens = 256\n",
        ]
        for n in names:
            tables.append(
                "[[accounts]]\n"
                f'name = "{n}"\nkind = "openai_compatible"\n'
                f'base_url = "{fleet.base_url(n)}"\npricing = "declared-free"\n'
                f'api_key_env = "{KEY_ENV}"\n' + ("rpm = 2\n" if n == "solo" else "")
            )
        (workdir / "policy.toml").write_text("\n".join(tables))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
        env[KEY_ENV] = KEY
        command = [sys.executable, "-m", "relay_review", "review", "--diff", "change.diff"]
        command += ["--discovery", "discovery.json", "--policy", "policy.toml", "--state", "none"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = subprocess.run(
            command, cwd=workdir, env=env, capture_output=True, timeout=deadline + 120
        )
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        received = {n: 0 for n in names}
        for r in fleet.requests:
            if r.is_chat and r.account in received:
                received[r.account] += 1
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    return SpinResult(
        code=proc.returncode,
        report=report,
        wall_s=wall,
        cpu_s=cpu,
        output_bytes=len(proc.stdout) + len(proc.stderr),
        stderr=proc.stderr.decode(errors="replace"),
        received=received,
    )
