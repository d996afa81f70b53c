"""Memory across runs (issue 13): the stores, route memory, the review cache, and the figures
through the CLI with the fault fleet's call log as evidence."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
from pathlib import Path

import pytest

from catalog_entries import route_entry as entry
from cli_harness import CliRun, run_cli
from relay_review.config import MemoryPolicy
from relay_review.drill import FaultFleet
from relay_review.drill.review import drill_reply
from relay_review.pipeline.route_memory import classify, recall, remember
from relay_review.records import Outcome, OutcomeKind, Readiness
from relay_review.routing.board import RouteBoard
from relay_review.state import FileStore, Memory, check_state_url, open_store
from relay_review.state.memory import (
    MAX_BYTES,
    MAX_FIRST_BYTE_S,
    ChunkMemo,
    RouteMemo,
    Unusable,
    decode,
    depth,
    encode,
)
from relay_review.state.stores import CommentStore, payload_line, payload_of

NOW = 1_800_000_000.0


# --- the stores -------------------------------------------------------------------------------


def test_file_store_round_trip_and_lock_beside(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = FileStore(path)
    assert store.load() == Memory()  # missing: empty, no warning needed
    memo = RouteMemo(state="dead", outcome="not_found", at=NOW, until=NOW + 60)
    store.save(Memory(routes={"a/m": memo}))
    assert store.load().routes["a/m"] == memo
    assert (tmp_path / "state.json.lock").exists()
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"version": 99}', "version"),
        (b"[]", "JSON of another kind"),
        (b'{"version": 2, "routes": {"a": {"state": "zombie"}}}', "malformed"),
        (b'{"version": 1, "routes": {}}', "version"),  # an older release's record: ignored
        (b'{"version": 1, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', "bytes"),
    ],
)
def test_unusable_file_is_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert FileStore(path).load() == Memory()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and why in warnings[0].getMessage()


def test_encode_drops_oldest_entries_to_fit_the_bound() -> None:
    chunks = {
        f"{i:032x}": ChunkMemo(at=NOW + i, until=NOW + 10**6, paths=["p" * 900]) for i in range(40)
    }
    data = encode(Memory(chunks=chunks))
    assert len(data) <= MAX_BYTES
    kept = decode(data).memory.chunks
    assert kept and f"{39:032x}" in kept and f"{0:032x}" not in kept


def test_comment_payload_round_trip_bound_and_forgery() -> None:
    memory = Memory(routes={"a/m": RouteMemo(state="proven", outcome="ok", at=NOW, until=NOW + 1)})
    line = payload_line(memory)
    assert line.startswith("<!-- relay-review:state v2 ") and len(line) <= MAX_BYTES
    body = f"<!-- relay-review:sticky -->\nverdict\n{line}\n"
    assert payload_of(body) == memory
    assert payload_of("no payload here") is None
    with pytest.raises(Unusable):
        payload_of("<!-- relay-review:state v1 !!!notbase64 -->")
    store = CommentStore(lambda: body)
    assert store.load() == memory
    assert CommentStore(lambda: None).load() == Memory()  # no sticky comment of ours yet


def test_state_urls() -> None:
    assert check_state_url("none") == "none"
    assert check_state_url("file:/tmp/x.json") == "file:/tmp/x.json"
    assert check_state_url("comment", action=True) == "comment"
    with pytest.raises(ValueError, match="only for the action"):
        check_state_url("comment")
    with pytest.raises(ValueError):
        check_state_url("file:")
    assert open_store("none").kind == "none"
    assert open_store("x.json").kind == "file"


# --- route memory -----------------------------------------------------------------------------


POLICY = MemoryPolicy()


@pytest.mark.parametrize(
    ("outcome", "state", "ttl"),
    [
        (Outcome(kind=OutcomeKind.NOT_FOUND, http_status=404), "dead", POLICY.dead),
        (Outcome(kind=OutcomeKind.BAD_REQUEST, http_status=400), "dead", POLICY.dead),
        (Outcome(kind=OutcomeKind.AUTH_FAILED, http_status=401), "dead", POLICY.dead),
        (Outcome(kind=OutcomeKind.RATE_LIMITED, retry_after=42), "cooling", 42),
        (Outcome(kind=OutcomeKind.RATE_LIMITED), "cooling", POLICY.rate_limited),
        (Outcome(kind=OutcomeKind.TIMEOUT), "cooling", POLICY.timeout),
        (Outcome(kind=OutcomeKind.SERVER_ERROR, http_status=503), "cooling", POLICY.server_error),
    ],
)
def test_classify(outcome: Outcome, state: str, ttl: float) -> None:
    memo = classify(outcome, served=False, now=NOW, policy=POLICY)
    assert memo is not None and memo.state == state and memo.until == NOW + ttl


def test_timeout_cooldown_doubles_on_repeat_up_to_the_cap() -> None:
    before = None
    cooldowns = []
    for _ in range(6):
        before = classify(
            Outcome(kind=OutcomeKind.TIMEOUT), served=False, now=NOW, policy=POLICY, before=before
        )
        assert before is not None
        cooldowns.append(before.until - NOW)
    assert cooldowns == [300, 600, 1200, 2400, 3600, 3600]


def test_recall_takes_dead_and_cooling_out_and_proven_first() -> None:
    entries = [entry("a", "dead"), entry("a", "hot"), entry("b", "good"), entry("c", "new")]
    memory = Memory(
        routes={
            "a/dead": RouteMemo(state="dead", outcome="not_found", at=NOW - 180, until=NOW + 60),
            "a/hot": RouteMemo(state="cooling", outcome="rate_limited", at=NOW, until=NOW + 30),
            "b/good": RouteMemo(state="proven", outcome="ok", at=NOW - 60, until=NOW + 60),
            "c/new": RouteMemo(state="dead", outcome="not_found", at=NOW - 99, until=NOW - 1),
        }
    )
    board = RouteBoard(entries)
    counts = recall(board, memory, NOW)
    assert (counts.dead, counts.cooling, counts.proven) == (1, 1, 1)
    assert board.probes["a/dead"].detail == "remembered: not_found, 3 min ago"
    assert board.status("a/dead") is Readiness.REJECTED
    assert board.status("a/hot") is Readiness.DEFERRED
    assert board.out == {"a/dead", "a/hot"} and board.good("b/good")
    assert [e.agent_id for e in board.unsettled()] == ["c/new"]  # expired memory: probed


def test_remember_folds_outcomes_and_condemns_an_account() -> None:
    entries = [entry("a", "x"), entry("a", "y"), entry("b", "z"), entry("b", "w")]
    board = RouteBoard(entries)
    board.note("a/x", Outcome(kind=OutcomeKind.AUTH_FAILED, http_status=401))
    board.condemned.add("a")  # the run took the account out (routing.accounts.account_consequences)
    board.note("b/z", Outcome(kind=OutcomeKind.OK))
    board.proven.add("b/z")
    memory = remember(Memory(), board, NOW, POLICY)
    assert memory.accounts["a"].state == "dead"
    assert memory.routes["b/z"].state == "proven"
    assert "b/w" not in memory.routes
    fresh = RouteBoard(entries)
    recall(fresh, memory, NOW + 1)
    assert fresh.out == {"a/x", "a/y"}  # the whole account


# --- through the CLI, with the fleet's call log as evidence -----------------------------------


def cli(*args: str, env: dict | None = None, stdin: str | None = None) -> CliRun:
    """``relay-review *args`` through ``cli.main`` in this process (tests/support/cli_harness.py;
    the commands' process faces are tested in tests/e2e)."""
    return run_cli(*args, env={**os.environ, **(env or {})}, stdin=stdin or "")


@pytest.mark.integration
def test_mixed_drill_twice_with_one_state_file(tmp_path: Path) -> None:
    """Two drills against one fleet address (memory knows an account by its base URL)."""
    state = str(tmp_path / "state.json")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = {"RELAY_DRILL_PORT": str(s.getsockname()[1])}
    first = cli("drill", "--scenario", "mixed", "--state", state, "--format", "json", env=port)
    assert first.returncode == 0, first.stderr
    one = json.loads(first.stdout)
    healthy = "nim_b/meta/llama-3.3-70b-instruct"
    assert one["probes_sent"] == 11  # hedged: every route but the first (stalled), unprobed
    second = cli(
        "drill",
        "--scenario",
        "mixed",
        "--format",
        "json",
        env={"RELAY_REVIEW_STATE": state, **port},
    )
    assert second.returncode == 0, second.stderr
    two = json.loads(second.stdout)
    assert two["probes_sent"] == 0
    assert two["requests_per_route"] == {healthy: 1}  # nothing to the routes that failed or stalled
    assert two["served_by"]["agent_id"] == healthy
    rows = {r["agent_id"]: r for r in two["readiness"]}
    # the routes ranked above the healthy one: a cold run sends each of them a request (run 1
    # sent 13); hedging's own saving is not memory's (before: the probe budget, 6)
    above = list(rows).index(healthy)
    assert above == 4 and two["memory"]["requests_avoided"] == above
    assert two["memory"]["proven"] == 1
    assert rows[healthy]["detail"].startswith("remembered: served")
    assert rows["nim_a/meta/llama-3.3-70b-instruct"]["detail"].startswith(
        "remembered: rate_limited"
    )


def file_diff(name: str, line: str) -> str:
    return (
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
        f"@@ -1,2 +1,3 @@\n context_{name.replace('/', '_')} = 1\n+{line}\n tail = 2\n"
    )


DIFF_FILES = [f"pkg/mod_{i}.py" for i in range(10)]
UNIQUE = "unique_marker_line_never_stored"


def ten_file_diff(changed: str | None = None) -> str:
    parts = []
    for i, name in enumerate(DIFF_FILES):
        line = "DEBUG = True" if i % 3 == 0 else f"value_{i} = {UNIQUE}_{i}"
        if name == changed:
            line = "DEBUG = True  # changed"
        parts.append(file_diff(name, line))
    return "".join(parts)


KEY = "sk-memory-canary-0123456789abcdef"


@pytest.fixture
def reviewer(tmp_path: Path):
    accounts = {
        "acme": {"models": {"vendor/reviewer": "healthy"}, "api_key": KEY},
        "gone": {"models": {"vendor/missing": "404"}, "api_key": KEY},
    }
    with FaultFleet(accounts, reply=drill_reply) as fleet:
        routes = [
            {
                "account": account,
                "provider": "openai_compatible",
                "model": model,
                "base_url": fleet.base_url(account),
                "api_key_env": "MEMORY_TEST_KEY",
                "prompt_price_per_1k": 0.0,
                "completion_price_per_1k": 0.0,
            }
            for account, model in (("gone", "vendor/missing"), ("acme", "vendor/reviewer"))
        ]
        discovery = tmp_path / "discovery.json"
        discovery.write_text(json.dumps({"routes": routes}))
        policy = tmp_path / "policy.toml"
        policy.write_text("[review]\nchunk_tokens = 256\n[serving]\nattempt = 30\ndeadline = 30\n")
        yield fleet, discovery, policy


@pytest.mark.integration
def test_review_twice_then_one_file_changed(tmp_path: Path, reviewer) -> None:
    fleet, discovery, policy = reviewer
    state = tmp_path / "state.json"
    args = ["review", "--diff", "-", "--discovery", str(discovery), "--policy", str(policy)]
    args += ["--state", f"file:{state}"]
    env = {"MEMORY_TEST_KEY": KEY}

    def run(diff: str) -> tuple[dict, list]:
        start = len(fleet.requests)
        proc = cli(*args, env=env, stdin=diff)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), [r for r in fleet.requests[start:] if r.is_chat]

    one, calls1 = run(ten_file_diff())
    assert len(one["chunks"]) > 1 and calls1
    assert one["findings"] and one["decision"] == "comment"  # medium findings

    two, calls2 = run(ten_file_diff())
    assert calls2 == []  # zero model requests, zero probes
    assert two["findings"] == one["findings"] and two["decision"] == one["decision"]
    assert two["partial"] == one["partial"] == ""
    assert all(f["reused_from"] == "" for f in two["files"])
    assert two["memory"]["reused_chunks"] == len(one["chunks"])
    assert two["memory"]["requests_avoided"] >= len(one["chunks"])

    changed = DIFF_FILES[3]
    three, calls3 = run(ten_file_diff(changed))
    # the proven route is hedged after 4 x its remembered first byte (at least 0.4 s, issue
    # 25): on a loaded machine it can answer later than that, and the 404 route gets one probe
    probes = [r for r in calls3 if r.max_tokens == 16]
    assert all(r.model == "vendor/missing" for r in probes) and len(probes) <= 1
    calls3 = [r for r in calls3 if r not in probes]
    assert calls3, "the changed file's chunk goes to a model"
    for r in calls3:  # every request carries the changed file's chunk, to the proven route
        assert changed in json.dumps(r.body) and r.model == "vendor/reviewer"
    its = [c for c in three["chunks"] if changed in c["paths"]]
    assert len(calls3) == len(its)  # one request per chunk holding it: no other chunk
    reused = {f["path"] for f in three["files"] if f["reused_from"] is not None}
    assert reused == set(DIFF_FILES) - {p for c in its for p in c["paths"]}
    assert [c["reused"] for c in three["chunks"]] == [c not in its for c in three["chunks"]]
    assert any(f["path"] == changed for f in three["findings"])

    # the store never holds a key or the diff's text (only verified findings quote a line)
    text = state.read_text()
    for i in range(len(KEY) - 7):
        assert KEY[i : i + 8] not in text
    assert UNIQUE not in text and "context_pkg" not in text


def test_a_served_route_is_remembered_with_its_first_byte_clamped_to_the_bound() -> None:
    policy = MemoryPolicy()
    ok = Outcome(kind=OutcomeKind.OK, first_byte_s=0.05)
    assert classify(ok, served=True, now=100.0, policy=policy).first_byte_s == 0.05
    slow = Outcome(kind=OutcomeKind.OK, first_byte_s=1e9)
    assert classify(slow, served=True, now=100.0, policy=policy).first_byte_s == MAX_FIRST_BYTE_S
    for odd, kept in ((None, None), (math.nan, None), (-1.0, 0.0)):
        memo = classify(
            Outcome(kind=OutcomeKind.OK, first_byte_s=odd), served=True, now=1.0, policy=policy
        )
        assert memo is not None and memo.first_byte_s == kept, odd


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert depth('{"a": "[[[{", "b": [[1]]}') == 3
    assert depth('{"a": "x\\"[[[", "b": [1]}') == 2  # an escaped quote does not end the string
    assert depth('{"a": "x\\\\", "b": [[1]]}') == 3  # an escaped backslash does
    assert depth("[" * 50 + "]" * 50) == 50
