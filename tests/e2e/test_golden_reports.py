"""Golden reports (issue 21): the four outputs a user sees, pinned byte for byte on a handful of
runs, so that moving code around (records package, module splits, publish into pipeline/)
cannot change them unnoticed.

Each case runs ``relay-review run`` end to end through :mod:`action_harness` (GitHub played by
Prism, the models by a local fault fleet): ``served-first-try`` as a subprocess, as the runner
starts it; the others through the action's entrypoint in this process over the same environment
(``run_in_process``: the outputs pinned here are written by the pipeline, not by the process,
so the subprocess case guards that both ways give the same bytes). It compares, under
``tests/golden/<case>/``:

* ``report.json``: the JSON report file the run wrote (``relay-review-report.json``);
* ``comment.md``: every sticky comment body sent (created or edited), in order;
* ``summary.md``: the step summary (``GITHUB_STEP_SUMMARY``);
* ``line_comments.json``: the inline review comments as sent (the ``POST .../reviews`` and
  ``POST .../pulls/{n}/comments`` request bodies), ``[]`` when none.

Cases: ``served-first-try`` (findings with a suggestion, inline comments on), ``failover``
(the drill's ``mixed`` scenario: stalls, 429 and 404 before the healthy route, the drill's
honest reviewer over the bundled sample diff), ``unavailable`` (every route dead), ``partial``
(files excluded, binary, over-long line: not reviewed) and ``reused`` (a second run on the same
head reuses the first run's review from the sticky comment's memory).

Only what varies between runs is masked, by :func:`normalize` alone: the seconds measured
(``*_s`` report fields, the ``*_s`` table columns, ``0.6 s`` in the text) become ``<t>``, the
fleet's port ``<port>``, the memory payload's clock times ``<t>`` and its account identities
(hashes of the fleet's URL) ``<identity:NAME>``. The memory line's base64 payload is decoded
for that (and shown decoded); everything else is compared byte for byte.

Regenerate after an intended change of output, and review the diff of ``tests/golden/``::

    RELAY_REVIEW_UPDATE_GOLDEN=1 python -m pytest tests/e2e/test_golden_reports.py -n 0
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FILES,
    FLEET_KEY,
    NUMBER,
    REPO,
    SHA,
    VERDICTS,
    api_file,
    policy_toml,
    posted_bodies,
    run_action,
    run_in_process,
)
from github_mock import MockGitHub
from relay_review.drill import FaultFleet
from relay_review.drill.review import drill_reply, sample_diff
from relay_review.drill.scenarios import SCENARIOS
from relay_review.pipeline.memory import account_identity
from relay_review.pipeline.outputs import REPORT_NAME

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE_ENV = "RELAY_REVIEW_UPDATE_GOLDEN"
OUTPUTS = ("report.json", "comment.md", "summary.md", "line_comments.json")

#: Bounds small enough for stalls to cost about a second, wide enough for a loaded machine.
BOUNDS = """\
[serving]
connect = 2
first_byte = 1.5
idle = 2
attempt = 6
deadline = 30

[preflight]
probe_budget = 4
probe_timeout = 1.5

[discovery]
timeout = 3
"""

FIX = (
    '    rows = db.execute("SELECT * FROM users WHERE name = ?", (request.form["name"],))\n'
    "    if rows.fetchone():"
)


def is_probe(body: dict[str, Any]) -> bool:
    return "single word: ready" in body["messages"][-1]["content"]


def suggesting_reply(body: dict[str, Any]) -> str:
    """The harness's reviewers, the first finding with a suggestion replacing lines 11-12."""
    if is_probe(body):
        return "ready"
    verdict = copy.deepcopy(VERDICTS.get(body["model"], VERDICTS["acme/reviewer"]))
    verdict["findings"][0].update(suggestion=FIX, end_line=12)
    return json.dumps(verdict)


def drill_reviewer(body: dict[str, Any]) -> str:
    """The drill's reviewers (honest, liar, broken by model name); probes answer ``ready``."""
    return "ready" if is_probe(body) else drill_reply(body)


def sample_files() -> list[dict[str, Any]]:
    """The bundled sample diff as the pull request's file list (the drill's review)."""
    files = []
    for part in re.split(r"^diff --git ", sample_diff(), flags=re.M)[1:]:
        name = part.split("\n", 1)[0].split(" b/", 1)[1]
        patch = part[part.index("\n@@") + 1 :].rstrip("\n")
        adds = sum(1 for ln in patch.splitlines() if ln.startswith("+"))
        dels = sum(1 for ln in patch.splitlines() if ln.startswith("-"))
        files.append(api_file(name, "modified", patch, adds, dels))
    return files


# --- the one normalizer ---------------------------------------------------------------------

_SECONDS_KEYS = (
    "elapsed_s",
    "started_s",
    "run_elapsed_s",
    "time_to_reply_s",
    "first_byte_s",
    "latency_s",
)
_JSON_SECONDS = re.compile(r'"(' + "|".join(_SECONDS_KEYS) + r')": -?\d+(?:\.\d+)?')
_STATE_SECONDS = re.compile(r'"(at|until)": ?-?\d+(?:\.\d+)?')
_TEXT_SECONDS = re.compile(
    r"\b\d+\.\d+(?= ?s\b)|(?<=\bin )\d+(?= s\b)|(?<=byte after )\d+(?=s\b)|\b\d+(?= s ago\b)"
)
_CLOCK = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
_STATE_LINE = re.compile(r"(<!-- relay-review:state v\d+ )([A-Za-z0-9+/=]+)( -->)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def normalize(text: str, volatile: Mapping[str, str]) -> str:
    """``text`` with only what varies between runs masked: ``volatile`` literals (the fleet's
    port, account identities) by their placeholders, measured seconds by ``<t>``, and the
    memory line's clock times (its base64 payload decoded to JSON for that)."""

    def masked(part: str) -> str:
        for value, placeholder in volatile.items():
            part = part.replace(value, placeholder)
        return part

    def state(m: re.Match[str]) -> str:
        # keyed by identity and filled in the order routes answered: compared with sorted keys
        payload = json.loads(masked(base64.b64decode(m.group(2)).decode()))
        return m.group(1) + "decoded:" + json.dumps(payload, indent=1, sort_keys=True) + m.group(3)

    text = masked(_STATE_LINE.sub(state, text))
    text = _JSON_SECONDS.sub(r'"\1": "<t>"', text)
    text = _STATE_SECONDS.sub(r'"\1": "<t>"', text)
    text = _TEXT_SECONDS.sub("<t>", text)
    text = _CLOCK.sub("<clock>", text)
    # Markdown tables: cells under a ``*_s`` header that hold a number
    out, header = [], None
    for line in text.split("\n"):
        if not line.startswith("|"):
            header = None
        elif header is None:
            header = [c.strip() for c in line.strip("|").split("|")]
        elif set(line) - set("|-: "):
            cells = line.split("|")
            for i, name in enumerate(header, 1):
                if (
                    i < len(cells) - 1
                    and name.endswith("_s")
                    and _NUMBER.fullmatch(cells[i].strip())
                ):
                    cells[i] = " <t> "
            line = "|".join(cells)
        out.append(line)
    return "\n".join(out)


# --- running a case -------------------------------------------------------------------------


def fleet_of(accounts: Mapping[str, Mapping[str, str]], reply: Callable[[dict], str]) -> FaultFleet:
    return FaultFleet(
        {name: {"models": dict(models), "api_key": FLEET_KEY} for name, models in accounts.items()},
        reply=reply,
    )


def volatile_of(fleet: FaultFleet) -> dict[str, str]:
    """The fleet's port and the account identities memory derives from its URLs."""
    found = {
        account_identity("openai_compatible", fleet.base_url(a), FLEET_KEY): f"<identity:{a}>"
        for a in fleet.accounts
    }
    found[f"127.0.0.1:{fleet.port}"] = "127.0.0.1:<port>"
    return found


def line_comments(mock: MockGitHub) -> list[dict[str, Any]]:
    return [
        {"request": f"{c.method} {c.path}", "body": c.body}
        for c in mock.calls("POST", f"/pulls/{NUMBER}/(reviews|comments)$")
    ]


def outputs(run: Any, mock: MockGitHub, volatile: Mapping[str, str]) -> dict[str, str]:
    assert run.report is not None, run.stdout + run.stderr
    texts = {
        "report.json": (run.root / "workspace" / REPORT_NAME).read_text(),
        "comment.md": "\n<!-- golden: next comment body -->\n".join(posted_bodies(mock)),
        "summary.md": run.summary,
        "line_comments.json": json.dumps(line_comments(mock), indent=2) + "\n",
    }
    return {name: normalize(text, volatile) for name, text in texts.items()}


def check(case: str, got: Mapping[str, str]) -> None:
    folder = GOLDEN / case
    if os.environ.get(UPDATE_ENV):
        folder.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            (folder / name).write_text(got[name])
        return
    for name in OUTPUTS:
        path = folder / name
        assert path.exists(), f"{path} missing: regenerate with {UPDATE_ENV}=1"
        assert got[name] == path.read_text(), f"{case}/{name} differs from the golden file"


# --- the cases ------------------------------------------------------------------------------


def test_served_first_try_with_a_suggestion(tmp_path: Path, github_mock: MockGitHub) -> None:
    """Two honest routes and a 503 one; the first route serves; findings with a suggestion go
    inline (floor lowered so both severities post)."""
    accounts = {
        "acme": {"acme/reviewer": "healthy"},
        "down": {"down/broken": "503"},
    }
    with fleet_of(accounts, suggesting_reply) as fleet:
        inputs = {
            "policy": policy_toml(fleet, "acme", "down", head=BOUNDS),
            "inline-comments": "true",
            "fail-on": "high",
        }
        run = run_action(tmp_path, github_mock, inputs)
        assert run.code == 1, run.stdout + run.stderr  # a verified high finding, fail-on high
        check("served-first-try", outputs(run, github_mock, volatile_of(fleet)))


def test_failover_mixed_drill(tmp_path: Path, github_mock: MockGitHub) -> None:
    """The drill's ``mixed`` scenario (stalls, 429, 404, one healthy route) reviewing the
    bundled sample diff with the drill's honest reviewer."""
    with fleet_of(SCENARIOS["mixed"].accounts, drill_reviewer) as fleet:
        inputs = {
            "policy": policy_toml(fleet, *fleet.accounts, head=BOUNDS),
            "inline-comments": "true",
        }
        run = run_in_process(tmp_path, github_mock, inputs, files=sample_files())
        assert run.code == 0, run.stdout + run.stderr
        assert run.report is not None and run.report["served_by"]
        check("failover", outputs(run, github_mock, volatile_of(fleet)))


def test_unavailable(tmp_path: Path, github_mock: MockGitHub) -> None:
    """Every route dead (503, 404, 401, a 429 asking 900 s): review unavailable, said so."""
    accounts = {
        "nim": {"vendor/down": "503", "vendor/gone": "404"},
        "router": {"vendor/locked": "401", "vendor/busy:free": "429@900"},
    }
    with fleet_of(accounts, drill_reviewer) as fleet:
        inputs = {"policy": policy_toml(fleet, *fleet.accounts, head=BOUNDS)}
        run = run_in_process(tmp_path, github_mock, inputs, files=sample_files())
        assert run.code == 1, run.stdout + run.stderr  # on-unavailable: fail
        check("unavailable", outputs(run, github_mock, volatile_of(fleet)))


PARTIAL_FILES = [
    *FILES,  # app/auth.py (reviewed) and assets/logo.png (no patch: binary)
    api_file("poetry.lock", "modified", "@@ -1,1 +1,1 @@\n-a = 1\n+a = 2", 1, 1),
    api_file("app/blob.py", "added", "@@ -0,0 +1,1 @@\n+X = '" + "x" * 5000 + "'", 1, 0),
]


def test_partial(tmp_path: Path, github_mock: MockGitHub) -> None:
    """Files the model is not shown: a binary, a lock file (default excludes), a file with an
    over-long changed line."""
    accounts = {"acme": {"acme/reviewer": "healthy"}}
    with fleet_of(accounts, suggesting_reply) as fleet:
        inputs = {"policy": policy_toml(fleet, "acme", head=BOUNDS)}
        run = run_in_process(tmp_path, github_mock, inputs, files=PARTIAL_FILES)
        assert run.code == 0, run.stdout + run.stderr
        check("partial", outputs(run, github_mock, volatile_of(fleet)))


def test_reused(tmp_path: Path, github_mock: MockGitHub) -> None:
    """A second run on the same head: the review is reused from the sticky comment's memory
    (no request to any model); the second run's outputs are pinned."""
    overlay = github_mock.comments_overlay(SHA)
    accounts = {"acme": {"acme/reviewer": "healthy"}, "pair": {"pair/reviewer": "healthy"}}
    with fleet_of(accounts, drill_reviewer) as fleet:
        inputs = {
            "policy": policy_toml(fleet, *fleet.accounts, head=BOUNDS),
            "inline-comments": "true",
        }
        first = run_in_process(tmp_path / "one", github_mock, inputs, files=sample_files())
        assert first.code == 0, first.stdout + first.stderr
        github_mock.reset()
        github_mock.overlay = overlay
        chats = len([r for r in fleet.requests if r.is_chat])
        second = run_in_process(tmp_path / "two", github_mock, inputs, files=sample_files())
        assert second.code == 0, second.stdout + second.stderr
        assert len([r for r in fleet.requests if r.is_chat]) == chats  # nothing asked again
        assert len(overlay.comments(REPO, NUMBER)) == 1  # edited in place
        check("reused", outputs(second, github_mock, volatile_of(fleet)))
