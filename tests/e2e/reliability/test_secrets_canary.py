"""The secrets canary (issue 6, item 5): distinctive fake keys for every provider kind and the
GitHub token; everything the action and the CLI produce is scanned for them, whole and in part.

The provider kinds (``openrouter``, ``nvidia_nim`` and its ``_SUB`` account, ``opencode``,
``opencode_go``) are declared in the policy under their conventional names, so their keys come
from their conventional variables, but their ``base_url`` points at the fault fleet. A self-hosted
account reads its key from a variable whose name does not contain ``API_KEY`` (masked only
because the policy names it). Fleet routes echo the ``Authorization`` header they received back:
in an HTTP error body (OpenRouter- and NIM-style), a 200 error body, an SSE error event, an
unparsable SSE event, a 429, a context-length 400 and in the reply that serves the verdict.

"In part" means any 8 consecutive characters of a key (its first 8 included): each canary is
random enough that such a window cannot appear by chance. The Markdown-escaped form of each key
(``_`` -> ``\\_``) is scanned for too, and so are its encoded forms, which the fleet echoes as
well: percent-encoded (the self-hosted token holds ``+`` and ``/``) and base64 (standard and
URL-safe) at each of the three alignments a key can have in encoded bytes.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from action_harness import TOKEN, api_file, posted_bodies, run_action
from github_mock import MockGitHub
from relay_review.drill import FaultFleet
from relay_review.drill.review import reviewer_reply

#: Key variable -> canary. First 8 characters unique; ``_``/``-`` inside (Markdown escaping).
CANARIES: dict[str, str] = {
    "OPENROUTER_API_KEY": "Kq7RoCan-sk-or-v1-3f9d_A8x2Lm4Pz6Wc1Jh5",
    "NVIDIA_NIM_API_KEY": "Nv4mCanZ-nvapi_7Hq2-Rt9xK3w8Ly5Dd0Bf3",
    "NVIDIA_NIM_API_KEY_SUB": "Sb8nCanW_nvapi-Jm3Qe6Vr1Tz9Xc4Fg2Ak7",
    "OPENCODE_API_KEY": "Oc2zCanY-zen_Pw5Ks8Hd3Nb7Mq1Rv6Ty4",
    "OPENCODE_GO_API_KEY": "Go6gCanX-zen-go_Lt4Wy9Bj2Cs7Ep3Uk8",
    "SELFHOST_TOKEN": "Sh3hCanV_vllm+Fa6Gu1/Ri8Dk5On2Ix7Pq9",  # percent-encoding changes it
}
GITHUB_TOKEN = "Gh5tCanT_ghs_Yq2Hw7Mz4Pb9Lc3Vn6Ke1Dm8"
WINDOW = 8

#: policy account -> (kind, key variable, {model: behaviour script}).
ACCOUNTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "nvidia_nim": ("nvidia_nim", "NVIDIA_NIM_API_KEY", {"vendor/nim-500": "500@leak,nim"}),
    "nvidia_nim_sub": (
        "nvidia_nim",
        "NVIDIA_NIM_API_KEY_SUB",
        {"vendor/sub-error-body": "error-body@leak", "vendor/sub-garbage": "garbage@leak"},
    ),
    # answers its probe a little late, so the route below is served first
    "opencode": ("opencode", "OPENCODE_API_KEY", {"vendor/oc-reviewer": "healthy@0.8,leak"}),
    "opencode_go": (
        "opencode",
        "OPENCODE_GO_API_KEY",
        {"vendor/go-429": "429@leak,noheader", "vendor/go-context": "context@leak"},
    ),
    "openrouter": (
        "openrouter",
        "OPENROUTER_API_KEY",
        {
            "vendor/or-500": "500@leak",
            "vendor/or-sse": "sse-error@leak",
            # its probe passes; serving it gets the key echoed in a 500 (an attempt log line)
            "vendor/or-serve-500": "healthy>500@leak",
        },
    ),
    "selfhost": ("openai_compatible", "SELFHOST_TOKEN", {"vendor/self-401": "401@leak"}),
}
SERVER = "opencode/vendor/oc-reviewer"
LEAKY_ROUTES = sum(len(models) for _, _, models in ACCOUNTS.values()) - 1

SHELL_LINE = 'subprocess.run(f"tar -czf {target} {folder}", shell=True, check=True)'
FILES = [
    api_file(
        "app/export.py",
        "modified",
        f"@@ -1,2 +1,3 @@\n import subprocess\n+{SHELL_LINE}\n def export():",
        1,
        0,
    )
]


def canary_reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return reviewer_reply(body)


@pytest.fixture
def canary_fleet() -> Iterator[FaultFleet]:
    """One fleet account per policy account, each accepting only its own canary key."""
    accounts = {
        name: {"models": models, "api_key": CANARIES[key_env]}
        for name, (_, key_env, models) in ACCOUNTS.items()
    }
    with FaultFleet(accounts, reply=canary_reply) as fleet:
        yield fleet


def canary_policy(fleet: FaultFleet) -> str:
    parts = [
        f"""\
[catalog]
limit = 20
require_zdr = false

[serving]
connect = 2
first_byte = 4
idle = 4
attempt = 8
deadline = 25

[preflight]
mode = "eager"  # every route gets a request (a probe): every leak path is exercised
probe_budget = 20
probe_timeout = 4

[discovery]
timeout = 4
zdr_url = "{fleet.root_url}/no-zdr-here/v1/models"
models_dev_url = "{fleet.root_url}/no-models-dev/v1/models"
"""
    ]
    for name, (kind, key_env, _) in ACCOUNTS.items():
        parts.append(
            "[[accounts]]\n"
            f'name = "{name}"\n'
            f'kind = "{kind}"\n'
            f'base_url = "{fleet.base_url(name)}"\n'
            'pricing = "declared-free"\n'
            + (f'api_key_env = "{key_env}"\n' if kind == "openai_compatible" else "")
        )
    return "\n".join(parts)


def windows(text: str) -> set[str]:
    return {text[i : i + WINDOW] for i in range(len(text) - WINDOW + 1)}


def fragments(secret: str) -> set[str]:
    """Every window of :data:`WINDOW` characters of ``secret`` and of its encoded forms (the
    base64 ones without the 4 characters at each end, which what comes before and after the key
    also decides), and their escaped forms."""
    found = windows(secret) | windows(quote(secret, safe=""))
    for lead in (b"", b"x", b"xy"):  # the key's bytes start at each offset of a 3-byte group
        encoded = base64.b64encode(lead + secret.encode()).decode()[4:-4]
        found |= windows(encoded) | windows(encoded.replace("+", "-").replace("/", "_"))
    return found | {w.replace("_", "\\_") for w in found}


def assert_no_canary(texts: Mapping[str, str], secrets: list[str]) -> None:
    for where, text in texts.items():
        for secret in secrets:
            found = sorted(f for f in fragments(secret) if f in text)
            assert not found, f"{where} holds part of a key: {found}"


def without_masks(stdout: str) -> str:
    """The log as GitHub shows it, minus the ``::add-mask::`` commands (which carry the keys)."""
    return "\n".join(line for line in stdout.splitlines() if not line.startswith("::add-mask::"))


def test_canary_keys_never_leave_the_action(
    tmp_path: Path, github_mock: MockGitHub, canary_fleet: FaultFleet
) -> None:
    env = {**CANARIES, "GITHUB_TOKEN": GITHUB_TOKEN}
    inputs = {
        "policy": canary_policy(canary_fleet),
        "github-token": GITHUB_TOKEN,
        "inline-comments": "true",
    }
    run = run_action(tmp_path, github_mock, inputs, files=FILES, env_extra=env)
    assert run.code == 0, run.stdout

    # the run did what the scan needs: every leaky route was asked and echoed its key
    report = run.report
    assert report is not None
    assert report["served_by"]["agent_id"] == SERVER
    assert report["decision"] == "request_changes" and report["findings"]
    probed = {r["agent_id"] for r in report["readiness"] if r["status"] != "unprobed"}
    assert len(probed) == LEAKY_ROUTES + 1
    chats = canary_fleet.chat_requests()
    assert {f"{r.account}/{r.model}" for r in chats} >= probed
    # every key went to its own account only (each fleet account accepts only its own key)
    assert canary_fleet.requests and all(r.authorized for r in canary_fleet.requests)
    assert github_mock.calls("POST", "/reviews$")  # the inline review was posted too
    failed = [a for a in report["attempts"] if a["outcome"] != "ok"]
    assert [a["agent_id"] for a in failed] == ["openrouter/vendor/or-serve-500"]
    assert "Bearer ***" in failed[0]["detail"]
    assert "route=openrouter/vendor/or-serve-500" in run.stdout  # its detail was logged
    # the leaks were seen and scrubbed, not avoided: the report's details show the echo's place
    details = " ".join(r["detail"] for r in report["readiness"])
    assert details.count("Bearer ***") >= 6, details

    masked = {line.removeprefix("::add-mask::") for line in run.stdout.splitlines()}
    assert {*CANARIES.values(), GITHUB_TOKEN} <= masked  # every value masked in the log
    first_other = next(
        i for i, line in enumerate(run.stdout.splitlines()) if not line.startswith("::add-mask::")
    )
    assert first_other >= len(CANARIES)  # ... before anything else was written

    provider_keys = list(CANARIES.values())
    github_headers = json.dumps([c.headers for c in github_mock.calls()])
    assert_no_canary({"GitHub request headers": github_headers}, provider_keys)
    github_sent = [{"path": c.path, "query": c.query, "body": c.body} for c in github_mock.calls()]
    texts = {
        "stdout": without_masks(run.stdout),
        "stderr": run.stderr,
        "comment bodies": json.dumps(posted_bodies(github_mock)),
        "every GitHub request (paths, queries, bodies)": json.dumps(github_sent),
        "step summary": run.summary,
        "outputs": json.dumps(run.outputs),
        "JSON report": json.dumps(report),
        "files left (report, summary, outputs, discovery, temp)": run.files_text(),
        "prompts sent to the models": json.dumps([r.body for r in canary_fleet.requests]),
    }
    assert texts["comment bodies"] != "[]" and texts["step summary"]
    assert_no_canary(texts, [*CANARIES.values(), GITHUB_TOKEN, TOKEN])


def cli(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay_review", *args],
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def start_cli(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    """:func:`cli` started, not waited for (``communicate`` it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "relay_review", *args],
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def test_canary_keys_never_leave_the_cli(tmp_path: Path, canary_fleet: FaultFleet) -> None:
    """``discover``, ``preflight`` and ``chat`` against the echoing fleet, and ``drill`` (text
    and JSON; each in its own folder under ``tmp_path``, its home, started first: the drills
    need nothing of the other commands, so the three run at once)."""
    env = {**CANARIES, "GITHUB_TOKEN": GITHUB_TOKEN}
    drills = {}
    for fmt in ("text", "json"):
        home = tmp_path / f"drill-{fmt}"
        home.mkdir()
        drills[fmt] = start_cli(["drill", "--format", fmt, "--deadline", "30"], env, home)
    policy = tmp_path / "policy.toml"
    policy.write_text(canary_policy(canary_fleet))
    discovery = tmp_path / "discovery.json"
    outputs: dict[str, str] = {}

    done = cli(["discover", "--policy", str(policy), "--out", str(discovery)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(discovery.read_text())["routes"]) == LEAKY_ROUTES + 1
    outputs["discover"] = done.stdout + done.stderr

    catalog = ["--discovery", str(discovery), "--policy", str(policy)]
    done = cli(["preflight", *catalog, "--format", "json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    readiness = json.loads(done.stdout)["readiness"]
    assert sum("Bearer ***" in r["detail"] for r in readiness) >= 6  # echoed, and scrubbed
    outputs["preflight"] = done.stdout + done.stderr

    done = cli(["chat", *catalog, "--message", "Say hello.", "--format", "json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["served_by"]["agent_id"] == SERVER
    outputs["chat"] = done.stdout + done.stderr

    for fmt, proc in drills.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        outputs[f"drill ({fmt})"] = stdout + stderr
    outputs["files written"] = "\n".join(
        p.read_text(errors="replace") for p in sorted(tmp_path.rglob("*")) if p.is_file()
    )
    assert all(r.authorized for r in canary_fleet.requests)
    assert_no_canary(outputs, [*CANARIES.values(), GITHUB_TOKEN])


STATE_KEY_CANARY = "Sk9sCanU_state-Wd3Pe8Nq5Hx2Lr7Gv4Zb1"


def test_the_state_key_never_leaves_the_cli(tmp_path: Path, redis_server: Any) -> None:
    """``RELAY_REVIEW_STATE_KEY`` with a Redis state (the command line's signed review cache):
    in no output, report or Redis value (which hold its signatures, not it), on a first run
    and on the second that reuses the signed review."""
    import redis

    env = {**CANARIES, "RELAY_REVIEW_STATE_KEY": STATE_KEY_CANARY, "RELAY_DRILL_PORT": "0"}
    texts: dict[str, str] = {}
    for run in ("first", "second"):
        done = cli(["drill", "--format", "json", "--state", redis_server.url], env, tmp_path)
        assert done.returncode == 0, done.stderr
        texts[f"{run} stdout"], texts[f"{run} stderr"] = done.stdout, done.stderr
    with redis.Redis.from_url(redis_server.url) as client:
        stored = {k: client.get(k) for k in client.scan_iter("*") if client.type(k) == b"string"}
    signed = [v for k, v in stored.items() if b":m:chunk:" in k]
    assert signed and all(v.startswith(b'{"sig":"') for v in signed)  # the review was kept
    texts["Redis values"] = b"\n".join(stored.values()).decode("utf-8", "replace")
    texts["files left"] = "\n".join(
        f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file()
    )
    assert_no_canary(texts, [STATE_KEY_CANARY])
