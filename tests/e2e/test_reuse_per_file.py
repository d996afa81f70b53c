"""Reuse per file at the default settings (issue 24): a typical pull request is one chunk, yet a
one-line change sends only the changed file; the same diff again is the whole review again, with
no request. Evidence: the fault fleet's recorded request bodies (a real local server)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis

from relay_review.config import Policy
from relay_review.drill import FaultFleet
from relay_review.pipeline.review import review
from relay_review.records import RunReport
from relay_review.render import comment_markdown, review_text
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.state import CommentStore, FileStore, Memory
from relay_review.state.memory import ChunkMemo, ReusedFinding, decode

pytestmark = pytest.mark.integration

KEY_ENV = "REUSE_TEST_KEY"
KEY = "sk-reuse-canary-0123456789abcdef0123"
FILES = [f"pkg/mod_{i}.py" for i in range(10)]
UNIQUE = "unique_reuse_marker_never_stored"
SHA1, SHA2 = "a" * 40, "b" * 40
_FILE = re.compile(r"^### FILE (\S+)")
_ADDED = re.compile(r"^R (\d+) \+ (.*)$")


def file_diff(i: int, extra: bool = False) -> str:
    name = FILES[i]
    line = "DEBUG = True" if i % 3 == 0 else f"value_{i} = '{UNIQUE}_{i}'"
    added = f"+{line}\n" + ("+more = 1\n" if extra else "")
    count = 4 if extra else 3
    return (
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
        f"@@ -1,2 +1,{count} @@\n import os\n{added} tail = 2\n"
    )


def ten_files(extra_in: int | None = None) -> str:
    return "".join(file_diff(i, i == extra_in) for i in range(10))


def reply(body: dict[str, Any]) -> str:
    """A reviewer: a medium finding with a suggestion on each ``DEBUG = True`` line it was shown
    (quoted with the diff's marker, as models do), and a summary naming the files it saw."""
    text = body["messages"][-1]["content"]
    if "single word: ready" in text:
        return "ready"
    path, seen, findings = None, [], []
    for line in text.splitlines():
        if m := _FILE.match(line):
            path = m.group(1)
            seen.append(path)
        elif (m := _ADDED.match(line)) and path and "DEBUG = True" in m.group(2):
            findings.append(
                {
                    "path": path,
                    "line": int(m.group(1)),
                    "side": "RIGHT",
                    "quote": f"+ {m.group(2)}",
                    "severity": "medium",
                    "message": f"DEBUG is on in {path} (key {KEY} must never show).",
                    "suggestion": m.group(2).replace("True", "False"),
                }
            )
    summary = f"Looked at {len(seen)} files; DEBUG is switched on in some."
    # last file first: a reused review keeps the reply's order, not the diff's
    return json.dumps({"summary": summary, "findings": findings[::-1]})


@pytest.fixture
async def fleet() -> AsyncIterator[FaultFleet]:
    models = {"vendor/reviewer": "healthy", "vendor/other": "healthy"}
    servers = {"acme": {"models": models, "api_key": KEY}}
    async with FaultFleet(servers, reply=reply) as running:
        yield running


def catalog(fleet: FaultFleet, model: str = "vendor/reviewer") -> Any:
    route = {
        "account": "acme",
        "provider": "openai_compatible",
        "model": model,
        "base_url": fleet.base_url("acme"),
        "api_key_env": KEY_ENV,
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
    }
    return build_catalog(parse_discovery({"routes": [route]}))


async def run(
    fleet: FaultFleet, diff: str, store: FileStore | CommentStore, head: str, **kw: Any
) -> tuple[dict[str, Any], list[Any]]:
    """One review at the default policy; its report and the fleet's chat requests."""
    start = len(fleet.requests)
    model = kw.pop("model", "vendor/reviewer")
    report = await review(
        DiffIndex.from_diff(diff),
        catalog(fleet, model),
        Policy(),
        {KEY_ENV: KEY},
        title="Ten small files",
        store=store,
        head_sha=head,
        repo="org/a",
        **kw,
    )
    sent = [r for r in fleet.requests[start:] if r.is_chat]
    return report.to_json(), sent


def files_in(request: Any) -> set[str]:
    text = json.dumps(request.body)
    return {p for p in FILES if p in text}


SAME = ("decision", "summary", "findings", "partial", "unverified")


async def test_default_policy_reuses_per_file(fleet: FaultFleet, tmp_path: Path) -> None:
    store = FileStore(tmp_path / "state.json")
    one, sent1 = await run(fleet, ten_files(), store, SHA1)
    assert len(one["chunks"]) == 1, "at the default chunk size ten small files are one chunk"
    reviews = [r for r in sent1 if files_in(r)]
    assert len(reviews) == 1 and files_in(reviews[0]) == set(FILES)
    assert one["decision"] == "comment" and len(one["findings"]) == 4
    assert [f["path"] for f in one["findings"]] == [FILES[9], FILES[6], FILES[3], FILES[0]]
    assert all(f["suggestion"] == "DEBUG = False" for f in one["findings"])
    assert all(f["end_line"] == f["line"] and f["replaces"] for f in one["findings"])
    assert one["summary"] and one["memory"]["reused_files"] == 0
    assert one["memory"]["not_reused"] == "no earlier review"

    # the same diff again: no request at all, the whole review again
    two, sent2 = await run(fleet, ten_files(), store, SHA1)
    assert sent2 == []
    for key in SAME:
        assert two[key] == one[key], key
    assert [f["quote"] for f in two["findings"]] == ["+ DEBUG = True"] * 4  # as the model said
    assert two["memory"]["reused_files"] == 10 and two["memory"]["not_reused"] == ""
    assert two["memory"]["requests_avoided"] >= 1
    assert all(f["reused_from"] == SHA1[:12] for f in two["files"])
    assert two["served_by"] is None and all(c["reused"] for c in two["chunks"])
    assert [c["paths"] for c in two["chunks"]] == [FILES]

    # one line added to one file: only that file's text goes to the model
    changed = FILES[3]
    three, sent3 = await run(fleet, ten_files(extra_in=3), store, SHA2)
    reviews = [r for r in sent3 if files_in(r)]
    assert reviews and all(files_in(r) == {changed} for r in reviews)
    assert all(UNIQUE not in json.dumps(r.body) for r in reviews)  # no other file's text
    assert len(sent3) == len(reviews), "no probe: the route is remembered"
    reused = {f["path"] for f in three["files"] if f["reused_from"] == SHA1[:12]}
    assert reused == set(FILES) - {changed}
    assert three["memory"]["reused_files"] == 9
    assert three["memory"]["not_reused"] == f"changed since {SHA1[:12]}: {changed}"
    assert {f["path"] for f in three["findings"]} == {f["path"] for f in one["findings"]}
    assert three["decision"] == one["decision"]
    assert sum(f["suggestion"] is not None for f in three["findings"]) == 4
    assert f"Reused from {SHA1[:12]}: " in three["summary"]

    # the store holds no key and no diff text; a finding keeps the hash of its quote
    text = (tmp_path / "state.json").read_text()
    assert KEY[:12] not in text and UNIQUE not in text and "import os" not in text
    assert "DEBUG = True" not in text and "DEBUG = False" in text  # the suggestion is kept
    memory = decode(text.encode(), 1024 * 1024).memory
    units = [m for m in memory.chunks.values() if m.group]
    assert all(len(m.paths) == 1 for m in units)  # one unit per file (mod_3 at both commits)
    assert sorted(m.paths[0] for m in units) == sorted([*FILES, changed])


async def test_a_fully_reused_run_says_no_model_was_needed(
    fleet: FaultFleet, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "state.json")
    await run(fleet, ten_files(), store, SHA1)
    two, sent = await run(fleet, ten_files(), store, SHA1)
    assert sent == []
    held = len(store.load().routes)
    assert held >= 1 and two["memory"]["proven"] == held
    comment = comment_markdown(RunReport.from_json(two))
    assert "No route served." not in comment
    assert f"No model was needed: every file was reused from `{SHA1[:12]}`" in comment
    assert f"{held} route remembered" in comment or f"{held} routes remembered" in comment
    assert "remembered: served" in comment  # the readiness row says what memory holds
    text = review_text(RunReport.from_json(two))
    assert f"No model was needed: every file was reused from {SHA1[:12]}" in text


async def test_nothing_reused_says_why_in_the_comment(fleet: FaultFleet, tmp_path: Path) -> None:
    store = FileStore(tmp_path / "state.json")
    await run(fleet, ten_files(), store, SHA1)
    diff = "".join(file_diff(i, True) for i in range(10))  # every file changed
    report, _ = await run(fleet, diff, store, SHA2)
    assert report["memory"]["reused_files"] == 0
    why = report["memory"]["not_reused"]
    assert why == f"changed since {SHA1[:12]}: every file"
    comment = comment_markdown(RunReport.from_json(report))
    assert "0 files reused (changed since" in comment


async def test_the_default_store_carries_a_whole_review(fleet: FaultFleet) -> None:
    """The action's default store: the sticky comment's payload (16 KB) between two pushes."""
    first = CommentStore(lambda: None)
    one, _ = await run(fleet, ten_files(), first, SHA1)
    assert first.line is not None and len(first.line) < 8 * 1024

    def sticky() -> str:
        return f"<!-- relay-review:sticky -->\nverdict\n{first.line}\n"

    two, sent = await run(fleet, ten_files(), CommentStore(sticky), SHA1)
    assert sent == [] and two["memory"]["reused_files"] == 10
    for key in SAME:
        assert two[key] == one[key], key


async def test_why_nothing_was_reused(fleet: FaultFleet, tmp_path: Path) -> None:
    """The route that reviewed the files left the catalog; a review asked again on purpose;
    a secret of the run in the diff reaches neither the prompt nor the stored memo."""
    store = FileStore(tmp_path / "state.json")
    await run(fleet, ten_files(), store, SHA1)
    other, sent = await run(fleet, ten_files(), store, SHA1, model="vendor/other")
    assert sent and other["memory"]["reused_files"] == 0
    assert other["memory"]["not_reused"] == (
        "the route that reviewed it is no longer selected: every file"
    )
    again, sent = await run(fleet, ten_files(), store, SHA1, reuse_reviews=False)
    assert sent and again["memory"]["not_reused"] == "asked again: every file goes to a model"
    secret = "ghp_reuse_canary_0123456789abcdefABCD"
    diff = ten_files().replace("DEBUG = True", f"DEBUG = True  # {secret}")
    _, sent = await run(fleet, diff, store, SHA2, secrets=[secret])
    assert sent
    text = (tmp_path / "state.json").read_text()
    # the prompt carries *** in its place (the run's secrets never go out), so the reply's
    # echo of it is *** too, and the memo is kept with it
    assert not [r for r in sent if secret[:12] in json.dumps(r.body)]
    assert secret[:12] not in text and "key *** must never show" in text


def test_old_and_hostile_memos_are_ignored() -> None:
    """A version-2 chunk memo (no ``group``) is never a file unit; a quote span that does not
    hash as stored falls back to the line; a marker holding letters is refused by the record."""
    from relay_review.pipeline.review_cache import line_sha, reuse

    index = DiffIndex.from_diff(file_diff(0))
    line = "DEBUG = True"
    finding = ReusedFinding(
        path=FILES[0], line=2, quote_sha=line_sha(line), severity="low", message="m"
    )
    old = ChunkMemo(at=1, until=9e9, paths=[FILES[0]], findings=[finding])
    with pytest.raises(KeyError):
        reuse(Memory(chunks={"k": old}), "k", index, 2)
    forged = finding.model_copy(update={"quote_span": (0, 5), "quote_hash": "0" * 64})
    unit = old.model_copy(update={"group": "g", "findings": [forged]})
    (got,) = reuse(Memory(chunks={"k": unit}), "k", index, 2).findings
    assert got.quote == line
    with pytest.raises(ValueError):
        ReusedFinding.model_validate({**finding.model_dump(), "quote_pre": "secret text"})


async def test_a_redis_store_says_changed_since_like_the_comment_store(
    fleet: FaultFleet, redis_server: Any
) -> None:
    """Redis reads by name: a changed file's earlier unit has another key, so the store keeps a
    pointer to each file's latest unit (by scope and path) and the reason is the same as with
    the comment store ("changed since <sha>", not "no earlier review")."""
    from redis_server import STATE_KEY
    from relay_review.state.redis_store import RedisStore
    from relay_review.state.seal import Seal

    store = RedisStore(redis_server.url, prefix="reuse:", seal=Seal(STATE_KEY))
    one, _ = await run(fleet, ten_files(), store, SHA1)  # type: ignore[arg-type]
    assert one["memory"]["not_reused"] == "no earlier review"
    changed = FILES[3]
    store = RedisStore(redis_server.url, prefix="reuse:", seal=Seal(STATE_KEY))  # another run
    two, _ = await run(fleet, ten_files(extra_in=3), store, SHA2)  # type: ignore[arg-type]
    assert two["memory"]["reused_files"] == 9
    assert two["memory"]["not_reused"] == f"changed since {SHA1[:12]}: {changed}"
    comment = comment_markdown(RunReport.from_json(two))
    assert f"changed since {SHA1[:12]}" in comment
    # the pointers hold a chunk key and a time only (no path, no diff text)
    with redis.Redis.from_url(redis_server.url) as check:
        pointers = [check.get(k) for k in check.scan_iter("reuse:m:latest:*")]
    assert len(pointers) == 10
    assert all(set(json.loads(p or b"{}")) == {"sig", "key", "at"} for p in pointers)
    # the file changed back: its first unit is found by its key again, every file reused
    store = RedisStore(redis_server.url, prefix="reuse:", seal=Seal(STATE_KEY))
    three, _ = await run(fleet, ten_files(), store, "c" * 40)  # type: ignore[arg-type]
    assert three["memory"]["reused_files"] == 10 and three["memory"]["not_reused"] == ""
