"""Memory scoped to the trust it was made under (issue 20): a cached verdict is reused only in
the same repository, for a route the catalog still selects (same account identity and model);
accounts are known by kind, base URL and key fingerprint, not by name (memory and ledger); no
store holds a secret or diff text. Real sockets: a fault fleet and a real ``redis-server``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from redis_server import STATE_KEY, RedisServer
from relay_review.config import Policy, PreflightPolicy, ServingPolicy
from relay_review.drill import FaultFleet
from relay_review.pipeline.memory import FINGERPRINT_KEY, account_identities, account_identity
from relay_review.pipeline.review import review
from relay_review.records import Catalog, CatalogEntry, Cost, Route
from relay_review.review.diff import DiffIndex
from relay_review.routing.budget import AccountBudgets
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.state import CommentStore
from relay_review.state.ledger import Budget, MemoryLedger
from relay_review.state.redis_store import RedisStore
from relay_review.state.seal import Seal
from relay_review.state.stores import payload_of

pytestmark = pytest.mark.integration

KEY_ENV = "SCOPE_TEST_KEY"
KEY = "sk-scope-canary-0123456789abcdef0123"
#: A changed line holding the key; the finding quotes an excerpt without it (replies are
#: scrubbed of keys before they are read, so a quote of the key itself would not verify).
EXCERPT = "SERVICE_ACCOUNT_TOKEN_FOR_THE_NIGHTLY_EXPORT_JOB ="
LINE = f'{EXCERPT} "{KEY}"'
DIFF = (
    "diff --git a/app/conf.py b/app/conf.py\n--- a/app/conf.py\n+++ b/app/conf.py\n"
    f"@@ -1,2 +1,3 @@\n import os\n+{LINE}\n DEBUG = False\n"
)
INDEX = DiffIndex.from_diff(DIFF)
ENV = {KEY_ENV: KEY}


def reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    finding = {
        "path": "app/conf.py",
        "line": 2,
        "side": "RIGHT",
        "quote": EXCERPT,
        "severity": "high",
        "message": f"A hard-coded key ({KEY}) is committed.",
    }
    return json.dumps({"summary": "One secret.", "findings": [finding]})


@pytest.fixture
async def fleet() -> AsyncIterator[FaultFleet]:
    servers = {name: {"models": {"vendor/reviewer": "healthy"}, "api_key": KEY} for name in "xy"}
    async with FaultFleet(servers, reply=reply) as running:
        yield running


def policy() -> Policy:
    return Policy(
        preflight=PreflightPolicy(probe_budget=2, probe_timeout=2.0),
        serving=ServingPolicy(first_byte=3.0, idle=3.0, attempt=6.0, deadline=15.0),
    )


def catalog(fleet: FaultFleet, accounts: dict[str, str]) -> Catalog:
    """A catalog of one route per account: ``accounts`` maps a policy name to a fleet server."""
    routes = [
        {
            "account": name,
            "provider": "openai_compatible",
            "model": "vendor/reviewer",
            "base_url": fleet.base_url(server),
            "api_key_env": KEY_ENV,
            "prompt_price_per_1k": 0.0,
            "completion_price_per_1k": 0.0,
        }
        for name, server in accounts.items()
    ]
    return build_catalog(parse_discovery({"routes": routes}))


async def run(
    fleet: FaultFleet, accounts: dict[str, str], store: Any, repo: str, **kw: Any
) -> tuple[dict[str, Any], int]:
    """One review; its report and how many review requests (not probes) reached the fleet."""
    start = len(fleet.requests)
    report = await review(
        INDEX, catalog(fleet, accounts), policy(), ENV, store=store, repo=repo, **kw
    )
    sent = [r for r in fleet.requests[start:] if r.is_chat and r.max_tokens != 16]
    return report.to_json(), len(sent)


@pytest.fixture
def shared(redis_server: RedisServer, request: pytest.FixtureRequest) -> RedisStore:
    """One org's Redis, a fresh prefix per test."""
    return RedisStore(
        redis_server.url, prefix=f"scope-{request.node.name[:40]}:", seal=Seal(STATE_KEY)
    )


async def test_two_repositories_sharing_one_redis_never_share_a_verdict(
    fleet: FaultFleet, shared: RedisStore
) -> None:
    one, asked = await run(fleet, {"acme": "x"}, shared, "org/a")
    assert asked == 1 and one["decision"] == "request_changes"
    other, asked = await run(fleet, {"acme": "x"}, shared, "org/b")
    assert asked == 1, "repository B asks its own models"
    assert other["memory"]["reused_chunks"] == 0
    again, asked = await run(fleet, {"acme": "x"}, shared, "org/a")
    assert asked == 0 and again["memory"]["reused_chunks"] == 1  # A's own verdict: reused
    # the quote is read again from the diff (the store keeps its span and hash, never its text)
    assert again["findings"][0]["quote"] == one["findings"][0]["quote"] == EXCERPT
    assert EXCERPT in LINE
    assert again["decision"] == "request_changes"


async def test_a_verdict_follows_the_account_identity_not_its_name(
    fleet: FaultFleet, shared: RedisStore
) -> None:
    await run(fleet, {"acme": "x"}, shared, "org/a")
    # the account removed from the policy (another one serves): asked again
    _, asked = await run(fleet, {"beta": "y"}, shared, "org/a")
    assert asked == 1
    # a server named like the first one but elsewhere: not the same account, asked again
    store = RedisStore(shared.url, prefix=shared.prefix + "renamed:", seal=Seal(STATE_KEY))
    await run(fleet, {"local": "x"}, store, "org/a")
    report, asked = await run(fleet, {"local": "y"}, store, "org/a")
    assert asked == 1 and report["memory"]["reused_chunks"] == 0
    # the same server and key under another name: the same account, its verdict reused
    report, asked = await run(fleet, {"renamed": "y"}, store, "org/a")
    assert asked == 0 and report["memory"]["reused_chunks"] == 1
    assert report["chunks"][0]["served_by"]["account"] == "renamed"


async def test_the_comment_store_drops_a_removed_accounts_verdict(fleet: FaultFleet) -> None:
    first = CommentStore(lambda: None)
    await run(fleet, {"acme": "x"}, first, "org/a")
    assert first.line is not None
    kept = first.line

    def comment() -> str:
        return f"<!-- relay-review:sticky -->\n{kept}\n"

    report, asked = await run(fleet, {"acme": "x"}, CommentStore(comment), "org/a")
    assert asked == 0 and report["memory"]["reused_chunks"] == 1
    report, asked = await run(fleet, {"beta": "y"}, CommentStore(comment), "org/a")
    assert asked == 1 and report["memory"]["reused_chunks"] == 0
    # asked again on purpose (/relay-review): the models review every chunk once more
    report, asked = await run(
        fleet, {"acme": "x"}, CommentStore(comment), "org/a", reuse_reviews=False
    )
    assert asked == 1 and report["memory"]["reused_chunks"] == 0
    assert report["memory"]["proven"] == 1  # route memory still applies: no probe
    assert report["probes_sent"] == 0


async def test_no_store_holds_the_key_or_the_diff_line(
    fleet: FaultFleet, shared: RedisStore, redis_server: RedisServer
) -> None:
    """A diff line holding a policy account's key: the key is in neither the comment payload
    (decoded) nor any value of the real Redis (every key of the server, of every type)."""
    comment = CommentStore(lambda: None)
    for store in (comment, shared):
        report, _ = await run(fleet, {"acme": "x"}, store, "org/a")
        assert report["findings"] and report["findings"][0]["quote"] == EXCERPT
    assert comment.line is not None
    decoded = payload_of(comment.line)
    assert decoded is not None and decoded.chunks
    payload = decoded.model_dump_json()
    client = redis.Redis.from_url(redis_server.url)
    values = []
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        if kind == "string":
            values.append(client.get(key) or b"")
        elif kind == "zset":
            values += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        else:
            values.append(repr(client.dump(key)).encode())
        values.append(key)
    stored = payload + "\n".join(v.decode(errors="replace") for v in values)
    assert "m:chunk:" in "\n".join(v.decode(errors="replace") for v in values)
    for i in range(len(KEY) - 11):
        assert KEY[i : i + 12] not in stored  # not whole, not cut, not in a key name
    assert EXCERPT not in stored  # no diff text: the finding keeps a hash of its line
    assert "hard-coded key (***)" in payload  # the message kept, without the key


def test_an_account_identity_is_kind_url_and_key_fingerprint() -> None:
    a = account_identity("openai_compatible", "http://10.0.0.5:8000/v1/", KEY)
    assert a == account_identity("openai_compatible", "HTTP://10.0.0.5:8000/v1", KEY)
    assert a != account_identity("openai_compatible", "http://10.0.0.6:8000/v1", KEY)
    assert a != account_identity("openai_compatible", "http://10.0.0.5:8000/v1", KEY + "x")
    assert a != account_identity("openrouter", "http://10.0.0.5:8000/v1", KEY)
    kind, url, fingerprint = a.split(":")
    assert kind == "openai_compatible" and len(url) == 12 and len(fingerprint) == 16
    assert "10.0.0.5" not in a and KEY[:12] not in a
    import hashlib
    import hmac

    assert fingerprint == hmac.new(FINGERPRINT_KEY, KEY.encode(), hashlib.sha256).hexdigest()[:16]


def entry(account: str, base_url: str, key_env: str = KEY_ENV) -> CatalogEntry:
    route = Route(
        index=0,
        account=account,
        provider="openai_compatible",
        model="m",
        agent_id=f"{account}/m",
        base_url=base_url,
        api_key_env=key_env,
    )
    return CatalogEntry(route=route, cost=Cost.FREE, zdr=False, priority=1)


async def test_the_ledger_keys_an_account_by_identity_not_name() -> None:
    """Two repositories (two runs) on one ledger: the same key at the same server shares one
    budget whatever its name; two servers both named ``local`` never share one."""
    ledger = MemoryLedger()
    budget = {"local": Budget(rpm=1), "shared": Budget(rpm=1)}
    repo_a = [entry("local", "http://a.internal/v1")]
    repo_b = [entry("local", "http://b.internal/v1"), entry("shared", "http://a.internal/v1")]
    runs = [
        AccountBudgets(ledger, budget, account_identities(entries, ENV))
        for entries in (repo_a, repo_b)
    ]
    assert await runs[0].admit(repo_a[0], 10) is None
    assert await runs[1].admit(repo_b[0], 10) is None  # another server named alike: its own
    refused = await runs[1].admit(repo_b[1], 10)  # the same key and server: A's budget
    assert refused is not None and "per-minute" in (refused.detail or "")
    key, _ = runs[1].budget_of(repo_b[1])
    assert key == runs[0].budget_of(repo_a[0])[0] and KEY[:12] not in key


def test_save_scrubs_every_string_of_the_record(tmp_path: Any) -> None:
    """The save step itself: a key in a message, a path or a key name never reaches the store."""
    from relay_review.pipeline.memory import RunMemory
    from relay_review.state import FileStore
    from relay_review.state.memory import ChunkMemo, Memory, ReusedFinding

    finding = ReusedFinding(
        path=f"keys/{KEY}.txt", line=1, quote_sha="0" * 64, severity="high", message=f"see {KEY}"
    )
    memo = ChunkMemo(at=1, until=9e9, paths=[f"keys/{KEY}.txt"], findings=[finding])
    store = FileStore(tmp_path / "state.json")
    memory = RunMemory.load(store, entries=[entry("acme", "http://a/v1")], environ=ENV)
    memory.memory = Memory(chunks={f"x{KEY}": memo})
    memory.save(None, policy())
    text = (tmp_path / "state.json").read_text()
    assert KEY[:12] not in text and "see ***" in text
