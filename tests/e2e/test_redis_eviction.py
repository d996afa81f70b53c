"""Issue 23: a Redis that may evict the ledger's keys. At connect the store reads ``INFO``
(``maxmemory_policy``, answered where ``CONFIG`` is disabled); under ``allkeys-*`` or
``volatile-*`` (every ledger key has a TTL) every run says so in one warning naming the
setting to change. Real servers under ``maxmemory 8mb`` while another client fills them."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ledger_load import run_load
from redis_server import RedisServer
from relay_review.state import Wanted
from relay_review.state.redis_store import RedisStore, eviction_risk

pytestmark = pytest.mark.integration

WARNING = "maxmemory-policy"


def filling(server: RedisServer, stop: threading.Event) -> None:
    """Another tenant: 20 KB values with a TTL, as fast as the server takes them."""
    client = redis.Redis.from_url(server.url, socket_timeout=2)
    i = 0
    while not stop.is_set():
        with contextlib.suppress(redis.RedisError):
            client.set(f"tenant:{i}", b"x" * 20_000, px=600_000)
        i += 1
    client.close()


@pytest.fixture
def evicting(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    extra = ("--maxmemory", "8mb", "--maxmemory-policy", request.param)
    server = RedisServer(tmp_path / "redis", extra=extra)
    stop = threading.Event()
    filler = threading.Thread(target=filling, args=(server, stop), daemon=True)
    filler.start()
    try:
        yield server
    finally:
        stop.set()
        filler.join(timeout=10)
        server.stop()


@pytest.mark.parametrize("evicting", ["volatile-lru", "allkeys-lru"], indirect=True)
def test_every_run_on_an_evicting_server_warns_once_naming_the_setting(
    tmp_path: Path, evicting: RedisServer
) -> None:
    result = run_load(tmp_path, evicting.url, processes=6, rpm=2, prefix="ev:", forked=True)
    for code, err in zip(result.codes, result.stderr, strict=True):
        assert "Traceback" not in err, err
        assert code in (0, 1), err
        warned = [line for line in err.splitlines() if WARNING in line]
        # every run, once, whether or not it over-admitted: the budget may not hold here
        assert len(warned) == 1, err
        assert "noeviction" in warned[0] and "dedicated" in warned[0]


def test_no_warning_without_eviction(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        RedisStore(redis_server.url, prefix="ne:").load(None, Wanted.of(routes=["a/m"]))
    assert not [r for r in caplog.records if WARNING in r.getMessage()]
    assert eviction_risk({"maxmemory_policy": "allkeys-lfu", "maxmemory": 1}) == "allkeys-lfu"
    assert eviction_risk({"maxmemory_policy": "volatile-ttl", "maxmemory": 9}) == "volatile-ttl"
    assert eviction_risk({"maxmemory_policy": "allkeys-lru", "maxmemory": 0}) is None  # no limit
    assert eviction_risk({"maxmemory_policy": "noeviction", "maxmemory": 9}) is None
