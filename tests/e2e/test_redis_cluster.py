"""Issue 23: a Redis Cluster reached through any one of its nodes (a real 3-master cluster on
loopback, started by PID: tests/support/redis_cluster.py). The quota ledger holds across 12
concurrent ``relay-review chat`` runs; route memory, the review cache and findings round-trip across
nodes; a run reads only the keys it needs (no SCAN, one pipeline); every key a script touches
shares its slot; the README's ACL user for a cluster works, and without the cluster commands the
one warning names them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from ledger_load import run_load
from redis_cluster import README_CLUSTER_ACL, RedisCluster
from redis_server import STATE_KEY
from relay_review.drill import FaultFleet
from relay_review.state import Wanted, open_store
from relay_review.state.ledger import Budget
from relay_review.state.memory import ChunkMemo, FindingMemo, Memory, RouteMemo
from relay_review.state.redis_store import RedisStore
from tests.e2e.test_memory_scope import reply
from tests.e2e.test_memory_scope import run as review_run

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(redis_cluster: RedisCluster) -> Iterator[RedisCluster]:
    yield redis_cluster
    with redis.cluster.RedisCluster.from_url(redis_cluster.url) as client:
        client.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)


def node_keys(cluster: RedisCluster) -> list[int]:
    """How many keys each node holds."""
    counts = []
    for port in cluster.ports:
        with redis.Redis(port=port) as client:
            counts.append(int(client.dbsize()))
    return counts


def commands(cluster: RedisCluster) -> dict[str, int]:
    """``INFO commandstats`` summed over the nodes: command name -> calls."""
    total: dict[str, int] = {}
    for port in cluster.ports:
        with redis.Redis(port=port) as client:
            for name, stats in client.info("commandstats").items():
                total[name] = total.get(name, 0) + int(stats["calls"])
    return total


def test_twelve_runs_through_one_node_never_exceed_the_budget(
    tmp_path: Path, cluster: RedisCluster
) -> None:
    url = cluster.urls[1]  # any node: the client finds the others
    # 12 processes start at once on a shared 2-core machine: a generous bound, so a starved
    # process never falls back to its in-process ledger (latency is tests/e2e/test_redis_latency.py)
    result = run_load(
        tmp_path,
        url,
        processes=12,
        rpm=4,
        prefix="c12:",
        policy_extra="[state]\ntimeout_s = 5\n",
        forked=True,
    )
    for err in result.stderr:
        assert "unavailable" not in err, err
    for account in ("alpha", "beta"):
        assert result.most_in_any_window(account) <= 4, result.received
    assert result.served == 8, (result.codes, result.stderr)
    assert sorted(set(result.codes)) == [0, 1], result.codes
    for code, report, err in zip(result.codes, result.reports, result.stderr, strict=True):
        assert "Traceback" not in err, err
        assert "WARNING" not in err, err  # the shared ledger served every run
        assert report, err
        if code == 1:
            details = " ".join(a["detail"] for a in report["attempts"])
            assert "account budget: per-minute limit" in details, report["attempts"]
    with redis.cluster.RedisCluster.from_url(url) as client:
        keys = [k.decode() for k in client.keys("c12:ledger:*", target_nodes=client.ALL_NODES)]
    assert keys and all("ledger:{" in k for k in keys)  # the account is the hash tag


def memory_of(now: float) -> Memory:
    route = RouteMemo(state="dead", outcome="not_found", at=now, until=now + 600)
    chunk = ChunkMemo(head="abc", route="acct/m", at=now, until=now + 600)
    finding = FindingMemo(path="app.py", cited="c1", first="abc", at=now, until=now + 600)
    return Memory(
        routes={f"acct{i}/model": route for i in range(30)},
        accounts={f"acct{i}": route for i in range(5)},
        chunks={f"{i:064x}": chunk for i in range(30)},
        findings={f"o/r#7:f{i}": finding for i in range(12)},
    )


def test_memory_round_trips_across_nodes_reading_only_what_the_run_needs(
    cluster: RedisCluster,
) -> None:
    now = time.time()
    memory = memory_of(now)
    with redis.cluster.RedisCluster.from_url(cluster.url) as client:
        for i in range(300):  # other setups' keys: never read
            client.set(f"other:{i}", "x" * 100)
    first = open_store(cluster.url + "?prefix=t:", key=STATE_KEY)
    assert isinstance(first, RedisStore)
    first.save(memory)
    assert not first.health.broken and first.cluster is True  # detected from the server
    assert all(n > 100 for n in node_keys(cluster))  # entries on every node
    before = commands(cluster)
    wanted = Wanted.of(memory.routes, memory.accounts, memory.chunks, ["o/r#7:"])
    again = open_store(cluster.urls[2] + "?prefix=t:", key=STATE_KEY).load(None, wanted)
    assert again == memory
    after = commands(cluster)
    used = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert not used.get("cmdstat_scan") and not used.get("cmdstat_keys")
    assert not used.get("cmdstat_mget")  # no multi-key read across slots
    reads = used.get("cmdstat_getrange", 0)
    assert reads == 30 + 5 + 30 + 12  # exactly the named keys and the PR's findings
    # only some of them: the rest is not read
    part = open_store(cluster.url + "?prefix=t:&cluster=true", key=STATE_KEY).load(
        None, Wanted.of(routes=["acct3/model"])
    )
    assert list(part.routes) == ["acct3/model"] and not part.chunks and not part.findings


async def test_the_ledger_is_atomic_on_a_cluster_and_keeps_one_slot_per_account(
    cluster: RedisCluster,
) -> None:
    stores = [RedisStore(url, prefix="atomic:", cluster=True) for url in cluster.urls]
    budget = Budget(rpm=4, rpd=100)
    names = [f"account-{i}" for i in range(6)]  # spread over the slots of every node
    answers = await asyncio.gather(
        *(stores[i % 3].ledger.reserve(names[i % 6], budget) for i in range(120))
    )
    granted: dict[str, int] = {}
    for i, answer in enumerate(answers):
        granted[names[i % 6]] = granted.get(names[i % 6], 0) + int(answer.granted)
    assert granted == dict.fromkeys(names, 4)
    with redis.cluster.RedisCluster.from_url(cluster.url) as client:
        keys = client.keys("atomic:*", target_nodes=client.ALL_NODES)
        slots = {}
        for key in keys:
            account = key.decode().split("{")[1].split("}")[0]
            slots.setdefault(account, set()).add(client.keyslot(key))
        assert all(client.pttl(k) > 0 for k in keys)  # every key has a TTL
    assert len(slots) == 6 and all(len(s) == 1 for s in slots.values())
    assert len({next(iter(s)) for s in slots.values()}) > 1  # accounts on several slots
    for store in stores:
        await (await store.async_client()).aclose()


@pytest.fixture
async def fleet() -> AsyncIterator[FaultFleet]:
    from tests.e2e.test_memory_scope import KEY

    servers = {name: {"models": {"vendor/reviewer": "healthy"}, "api_key": KEY} for name in "xy"}
    async with FaultFleet(servers, reply=reply) as running:
        yield running


async def test_a_review_on_a_cluster_reuses_its_verdict_and_remembers_its_route(
    fleet: FaultFleet, cluster: RedisCluster
) -> None:
    store: Any = open_store(cluster.url + "?prefix=review:", key=STATE_KEY)
    first, asked = await review_run(fleet, {"acme": "x"}, store, "org/a")
    assert asked == 1 and first["decision"] == "request_changes"
    again_store: Any = open_store(cluster.urls[2] + "?prefix=review:", key=STATE_KEY)
    again, asked = await review_run(fleet, {"acme": "x"}, again_store, "org/a")
    assert asked == 0 and again["memory"]["reused_chunks"] == 1
    # asked again on purpose: the route remembered as proven is not probed
    third, asked = await review_run(fleet, {"acme": "x"}, again_store, "org/a", reuse_reviews=False)
    assert asked == 1 and third["memory"]["proven"] == 1 and third["probes_sent"] == 0
    assert not store.health.broken and not again_store.health.broken
    for used in (store, again_store):  # unclosed, a later test's log hears them (at GC)
        await (await used.async_client()).aclose()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("query", ["?prefix=relay:", "?prefix=relay:&cluster=true"])
async def test_the_readmes_acl_user_for_a_cluster_keeps_memory_and_the_ledger(
    cluster: RedisCluster, caplog: pytest.LogCaptureFixture, query: str
) -> None:
    """Audit: the README's ACL user (``... +info +ping +time``) lost memory and the ledger on
    a cluster (redis-py's cluster client runs CLUSTER SLOTS and COMMAND at start-up). With
    the README's cluster ACL, on every node: no warning, memory round-trips, reserves work."""
    now = time.time()
    memo = RouteMemo(state="proven", outcome="ok", at=now, until=now + 600)
    routes = {f"{c}/m": memo for c in "abcdef"}  # on several nodes
    with cluster.acl_user("relay", README_CLUSTER_ACL) as url, caplog.at_level(logging.WARNING):
        store: Any = open_store(url + query)
        store.save(Memory(routes=routes))
        again: Any = open_store(url + query)
        loaded = again.load(None, Wanted.of(routes=routes))
        assert (await again.ledger.reserve("acct", Budget(rpm=1))).granted
        await (await again.async_client()).aclose()
    assert loaded.routes == routes
    assert warnings_of(caplog) == []
    assert not store.health.broken and not again.health.broken


@pytest.mark.parametrize("missing", ["+cluster|slots", "+command"])
@pytest.mark.parametrize("first", ["memory", "ledger"])
async def test_a_cluster_acl_user_without_a_cluster_command_is_told_which_to_allow(
    cluster: RedisCluster, caplog: pytest.LogCaptureFixture, missing: str, first: str
) -> None:
    """Audit: without ``+cluster|slots`` the warning quoted redis-py's "Cluster mode is not
    enabled on this node" (not so, and naming nothing). Now the run's one warning (memory's
    blocking client or the ledger's asyncio one, whichever connects first) names the refused
    command and the two to allow."""
    rules = README_CLUSTER_ACL.replace(f" {missing}", "")
    with cluster.acl_user("relay", rules) as url:
        store: Any = open_store(url + "?prefix=relay:")
        with caplog.at_level(logging.WARNING):
            if first == "memory":
                assert store.load(None, Wanted.of(routes=["a/m"])) == Memory()
            try:
                await store.ledger.reserve("acct", Budget(rpm=1))
            except Exception as exc:  # the caller gives up on the shared ledger: said once
                store.ledger.report_failure(exc)
            now = time.time()
            memo = RouteMemo(state="proven", outcome="ok", at=now, until=now + 600)
            store.save(Memory(routes={"a/m": memo}))
        await (await store.async_client()).aclose()  # unclosed, a later test's log hears it
    (warning,) = warnings_of(caplog)
    refused = missing.lstrip("+").upper().replace("|", " ")
    assert f"may not run {refused}, which redis-py's cluster client runs" in warning, warning
    assert "allow +cluster|slots +command" in warning, warning
    assert "Cluster mode is not enabled" not in warning and "relay-pass-0123" not in warning
