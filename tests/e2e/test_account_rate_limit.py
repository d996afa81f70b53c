"""An account-wide 429 holds the whole account, not one route at a time, through the CLI at the
default policy (the run deadline shortened).

OpenRouter counts free requests per account across every free model: its 429 says
``free-models-per-min`` with ``X-RateLimit-Remaining: 0`` and the reset. Before, the failover
took the account's routes one by one after each reset: every route but one was refused by the
run's own ledger and logged an attempt of its own (27 attempt rows in 30 s for six routes), the
table the user reads full of "not sent". Now the first closed window holds every route sharing
the budget; each window costs one request, and at most one note.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_harness import run_cli
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for

pytestmark = pytest.mark.integration

WINDOW_S = 2
DEADLINE_S = 9.0
ROUTES = 6


def test_an_account_wide_429_holds_every_route_of_the_account(tmp_path: Path) -> None:
    scenario = Scenario(
        "account-429",
        "one OpenRouter account rate-limited per minute, the other account's route gone",
        {
            "or": {f"v{i}/model-{i}:free": f"429@{WINDOW_S},meta" for i in range(ROUTES)},
            "nim": {"gone/model": "404"},
        },
        healthy=None,
    )
    with fleet_for(scenario) as fleet:
        discovery = discovery_for(scenario, fleet)
        for row in discovery["routes"]:
            if row["account"] == "or":
                row["provider"] = "openrouter"  # its free tier is counted per account
        (tmp_path / "discovery.json").write_text(json.dumps(discovery))
        (tmp_path / "policy.toml").write_text(
            f"[serving]\ndeadline = {DEADLINE_S}\nattempt = {DEADLINE_S}\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
        env.update(drill_environ(scenario))
        proc = run_cli(
            "chat", "--discovery", str(tmp_path / "discovery.json"), "--message", "hi",
            "--format", "json", "--policy", str(tmp_path / "policy.toml"), env=env, cwd=tmp_path,
        )  # fmt: skip
        sent = [r for r in fleet.requests if r.is_chat and r.account == "or"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    attempts = [a for a in report["attempts"] if a["account"] == "or"]
    served = [a for a in attempts if a["http_status"] == 429]
    notes = [a for a in attempts if a["http_status"] is None]
    windows = int(DEADLINE_S // WINDOW_S) + 1
    # the probes go out together (one each), then serving asks once per window, never more
    assert len(sent) <= ROUTES + windows, [(r.model, r.at) for r in sent]
    assert len(served) <= windows, attempts
    assert len(notes) <= windows, attempts  # was one per route and window (5 x 5)
    assert len(attempts) <= 2 * windows, attempts
    # each window's one request went to a different route, in catalog order: none is skipped
    models = [a["model"] for a in served]
    assert len(set(models)) == len(models), models
