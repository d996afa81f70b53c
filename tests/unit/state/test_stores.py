"""Issue 19: every store record is input, not truth.

Each class of bad record (nested deep, not finite, negative, impossible now, oversized, of the
wrong type, not UTF-8) goes into each store's loader (file, comment payload, a real Redis):
nothing escapes, one warning, the good entries are kept and this run's save overwrites the bad
ones. Hypothesis feeds random JSON and random bytes to every loader. One case runs through the
CLI (``relay-review drill --state FILE`` with a corrupt file).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_harness import CliRun, run_cli
from redis_server import KINDS, STATE_KEY, RedisServer, serve
from relay_review.config import MemoryPolicy
from relay_review.pipeline.memory import limits
from relay_review.pipeline.route_memory import ago, horizon
from relay_review.state import FileStore, Memory, Wanted
from relay_review.state.memory import (
    MAX_DEPTH,
    VERSION,
    ChunkMemo,
    RouteMemo,
    Unusable,
    decode,
    encode,
)
from relay_review.state.redis_store import MAX_ENTRY_BYTES, RedisStore
from relay_review.state.seal import Seal
from relay_review.state.stores import CommentStore, read_payload


@pytest.fixture(scope="module", params=KINDS)
def redis_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """Every Redis test of this module on redis-server and on Valkey (issue 23)."""
    yield from serve(request.param, tmp_path_factory)


NOW = 1_800_000_000.0
LIMITS = limits(MemoryPolicy(), NOW)
GOOD = {"state": "dead", "outcome": "not_found", "at": NOW - 60, "until": NOW + 3600}
GOOD_MEMO = RouteMemo.model_validate(GOOD)
LONGEST = horizon(MemoryPolicy())  # 14 days: the review cache's TTL


def deep(n: int) -> str:
    return "[" * n + "]" * n


#: (name, a bad route entry as JSON text): each must be dropped, its neighbour kept.
BAD_ENTRIES: list[tuple[str, str]] = [
    ("nested 1,000 deep", deep(1000)),
    ("nested past the cap", deep(MAX_DEPTH + 1)),
    ("at 1e999", json.dumps({**GOOD, "at": "X"}).replace('"X"', "1e999")),
    ("until NaN", json.dumps({**GOOD, "until": "X"}).replace('"X"', "NaN")),
    ("until -Infinity", json.dumps({**GOOD, "until": "X"}).replace('"X"', "-Infinity")),
    ("negative at", json.dumps({**GOOD, "at": -5.0})),
    ("negative strikes", json.dumps({**GOOD, "strikes": -1})),
    ("at in the future", json.dumps({**GOOD, "at": NOW + 3600})),
    ("until past the longest TTL", json.dumps({**GOOD, "until": NOW + LONGEST + 3600})),
    ("a 3,000-year cooldown", json.dumps({**GOOD, "until": NOW + 99999999999})),
    ("until before at", json.dumps({**GOOD, "at": NOW - 10, "until": NOW - 20})),
    ("at as a string", json.dumps({**GOOD, "at": str(NOW)})),
    ("strikes as a bool", json.dumps({**GOOD, "strikes": True})),
    ("a huge integer", json.dumps({**GOOD, "at": 10**400})),
    ("a list", json.dumps([GOOD])),
    ("unknown state", json.dumps({**GOOD, "state": "zombie"})),
    ("an extra field", json.dumps({**GOOD, "evil": 1})),
    ("oversized outcome", json.dumps({**GOOD, "outcome": "x" * 5000})),
    # the first byte the hedge delay derives from (issue 25): finite, 0 to MAX_FIRST_BYTE_S
    ("first byte 1e9 s", json.dumps({**GOOD, "first_byte_s": 1e9})),
    ("negative first byte", json.dumps({**GOOD, "first_byte_s": -1.0})),
    ("first byte NaN", json.dumps({**GOOD, "first_byte_s": "X"}).replace('"X"', "NaN")),
    ("first byte as a string", json.dumps({**GOOD, "first_byte_s": "0.05"})),
]


def record(bad_entry: str) -> bytes:
    """A record of this version with one good route and the bad one next to it."""
    good = json.dumps(GOOD)
    return f'{{"version":{VERSION},"routes":{{"good/m":{good},"bad/m":{bad_entry}}}}}'.encode()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# --- the loaders, class by class -------------------------------------------------------------


@pytest.mark.parametrize(("name", "bad"), BAD_ENTRIES, ids=[n for n, _ in BAD_ENTRIES])
def test_a_bad_entry_in_a_file_is_dropped_with_one_warning_and_overwritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, bad: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(record(bad))
    store = FileStore(path)
    with caplog.at_level(logging.WARNING):
        memory = store.load(LIMITS)
    (warning,) = warnings_of(caplog)
    assert str(path) in warning
    if name.startswith("nested"):  # too deep to parse: not known to be memory, left alone
        assert memory == Memory() and "not written over" in warning
        store.save(memory)
        assert path.read_bytes() == record(bad) and len(warnings_of(caplog)) == 1
        return
    assert memory.routes == {"good/m": GOOD_MEMO}
    store.save(memory)  # this run's save overwrites the bad entry
    caplog.clear()
    assert store.load(LIMITS) == memory and not warnings_of(caplog)
    assert json.loads(path.read_text())["version"] == VERSION


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe" + "{}".encode("utf-16-le"), "not UTF-8"),
        (b'{"version": 1, "routes": {"a": "\xc3\x28"}}', "not UTF-8"),
        (deep(1000).encode(), "nested deeper"),
        (b'{"version": 1, "x": ' + deep(100).encode() + b"}", "nested deeper"),
        (b'{"version": true}', "JSON of another kind"),
        (b'{"version": 1}', "this release reads"),
        (b'{"version": 1, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', "more than"),
        (b"", "not valid JSON"),
        (b"1e999", "JSON of another kind"),
        # unterminated escaped quotes: linear to check (a backtracking scan took 15 s on 64 KB)
        (b'{"version": 1, "x": "' + b'\\"' * (256 * 1024), "not valid JSON"),
    ],
)
def test_a_record_unusable_as_a_whole_is_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert FileStore(path).load(LIMITS) == Memory()
    (warning,) = warnings_of(caplog)
    assert why in warning


@pytest.mark.parametrize(
    ("content", "replaced"),
    [
        (b'{"routes": [{"account": "a", "model": "m"}]}', False),  # a discovery report
        (b"# my notes\n", False),
        (b"\xff\xfe\x00", False),
        (b'{"version": 1, "x": ' + deep(100).encode() + b"}", False),
        (b"", True),  # an empty file (mktemp's)
        (b'{"version": 1, "routes": {}}', True),  # memory of another version: ours to replace
        (b'{"version": 2, "routes": {"a/m": 5}}', True),  # ours, with a bad entry
    ],
)
def test_a_save_never_replaces_a_file_that_is_not_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, replaced: bool
) -> None:
    """``--state routes.json`` typed for ``--discovery routes.json`` replaced the discovery
    report with memory (a newcomer's audit): a file holding anything but relay-review memory
    (of any version) is left as it is, with a warning naming it."""
    path = tmp_path / "state.json"
    path.write_bytes(content)
    store = FileStore(path)
    memory = Memory(routes={"good/m": GOOD_MEMO})
    with caplog.at_level(logging.WARNING):
        store.load(LIMITS)
        store.save(memory)
    said = [w for w in warnings_of(caplog) if "not written" in w]
    if replaced:
        assert json.loads(path.read_text())["version"] == VERSION and not said
    else:
        assert path.read_bytes() == content
        (warning,) = said  # said once, when it was loaded
        assert str(path) in warning
    with caplog.at_level(logging.WARNING):  # a save with no load first says it too
        caplog.clear()
        FileStore(path).save(memory)
    assert bool([w for w in warnings_of(caplog) if "not written" in w]) is not replaced


def test_a_write_never_replaces_a_device_a_fifo_or_a_directory(tmp_path: Path) -> None:
    """``discover --out /dev/stdout`` (a symlink to a device) run as root replaced the device
    node with a regular file, and a FIFO was replaced instead of written to."""
    from relay_review._files import NotAFile, atomic_write, not_a_file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "out.json"
    link.symlink_to(fifo)
    for path in (fifo, link, tmp_path, Path("/dev/null")):
        with pytest.raises(NotAFile, match=r"not a regular file|a directory"):
            atomic_write(path, b"{}")
    assert fifo.exists() and not fifo.is_file() and link.is_symlink()
    assert not_a_file(Path("")) and not_a_file(Path("x/.."))
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    atomic_write(dangling, b"{}")  # a symlink there is replaced, never written through
    assert not dangling.is_symlink() and dangling.read_bytes() == b"{}"
    assert not (tmp_path / "nowhere").exists()
    FileStore(fifo).save(Memory())  # a warning, no exception, the FIFO left alone
    assert not fifo.is_file()


def test_a_file_is_never_read_past_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with path.open("wb") as f:  # a sparse 4 GiB file: reading it whole would take 4 GiB
        f.seek(4 * 1024**3)
        f.write(b"}")
    assert FileStore(path, limit=1024).load(LIMITS) == Memory()


def test_the_comment_payload_drops_bad_entries_too(caplog: pytest.LogCaptureFixture) -> None:
    bad = dict(BAD_ENTRIES)["at 1e999"]
    line = f"<!-- relay-review:state v1 {base64.b64encode(record(bad)).decode()} -->"
    with caplog.at_level(logging.WARNING):
        memory = CommentStore(lambda: f"verdict\n{line}\n").load(LIMITS)
    assert memory.routes == {"good/m": GOOD_MEMO}
    (warning,) = warnings_of(caplog)
    assert "comment" in warning and "1 unusable entry" in warning
    caplog.clear()
    deep_line = f"<!-- relay-review:state v1 {base64.b64encode(deep(5000).encode()).decode()} -->"
    with caplog.at_level(logging.WARNING):
        assert CommentStore(lambda: deep_line).load(LIMITS) == Memory()
    assert len(warnings_of(caplog)) == 1
    assert CommentStore(lambda: 42).load(LIMITS) == Memory()  # type: ignore[arg-type, return-value]


def test_limits_follow_the_policy() -> None:
    """A longer ``[memory]`` time makes a longer ``until`` possible; the default refuses it."""
    until = NOW + 30 * 86400
    data = json.dumps({"version": VERSION, "chunks": {"c" * 32: {"at": NOW, "until": until}}})
    assert not decode(data, limits=LIMITS).memory.chunks
    longer = limits(MemoryPolicy(review=40 * 86400), NOW)
    assert decode(data, limits=longer).memory.chunks


def test_ago_never_raises() -> None:
    assert ago(float("inf")) == "0 s" and ago(float("nan")) == "0 s" and ago(1e300) != ""


# --- property tests: random JSON and random bytes into every loader --------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
_FIELDS = st.sampled_from(["state", "outcome", "at", "until", "strikes", "head", "paths", "x"])
_ENTRY = st.dictionaries(_FIELDS, _JSON | st.sampled_from(["proven", "dead", NOW, NOW + 60]))
#: Records shaped like ours (so the entry validation is reached), with random contents.
_RECORD = st.fixed_dictionaries(
    {"version": st.sampled_from([VERSION, VERSION, VERSION, VERSION + 1, True, str(VERSION)])},
    optional={
        "routes": st.dictionaries(st.text(max_size=10), _ENTRY | _JSON, max_size=4),
        "accounts": st.dictionaries(st.text(max_size=10), _ENTRY, max_size=3),
        "chunks": st.dictionaries(st.text(max_size=40), _ENTRY | _JSON, max_size=3),
        "other": _JSON,
    },
)
_DATA = st.one_of(
    st.binary(max_size=400),
    _JSON.map(lambda v: json.dumps(v).encode()),
    _RECORD.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3000).map(lambda n: deep(n).encode()),
)


def assert_valid(memory: Memory) -> None:
    """What a loader returns is a memory every entry of which validates strictly now."""
    assert isinstance(memory, Memory)
    for section, model in (("routes", RouteMemo), ("accounts", RouteMemo), ("chunks", ChunkMemo)):
        for key, memo in getattr(memory, section).items():
            assert isinstance(key, str) and key.isprintable()
            model.model_validate(memo.model_dump(), strict=True, context={"limits": LIMITS})


@settings(max_examples=400, deadline=None)
@given(_DATA)
def test_random_bytes_and_json_never_escape_the_record_decoder(data: bytes) -> None:
    try:
        loaded = decode(data, limits=LIMITS)
    except Unusable:
        return
    assert_valid(loaded.memory)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_DATA)
def test_random_bytes_into_the_file_and_comment_stores(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(data)
    assert_valid(FileStore(path).load(LIMITS))
    body = f"x\n<!-- relay-review:state v1 {base64.b64encode(data).decode()} -->\n"
    assert_valid(CommentStore(lambda: body).load(LIMITS))
    try:
        loaded = read_payload(body, limits=LIMITS)
    except Unusable:
        return
    assert loaded is not None
    assert_valid(loaded.memory)


# --- Redis: one key per entry, each its own input --------------------------------------------


def redis_store(url: str, prefix: str = "t:") -> RedisStore:
    return RedisStore(url, prefix=prefix, clock=lambda: NOW, seal=Seal(STATE_KEY))


def test_bad_redis_keys_are_dropped_with_one_warning_then_deleted_or_overwritten(
    redis_server: Any, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    good = json.dumps(GOOD)
    r = redis_client
    r.set("t:m:route:good/m", good, px=3_600_000)
    for i, (_, bad) in enumerate(BAD_ENTRIES):
        r.set(f"t:m:route:bad{i}", bad, px=3_600_000)
    r.set("t:m:route:bytes", b"\xff\xfe\x00garbage", px=3_600_000)
    r.set("t:m:route:big", "x" * (MAX_ENTRY_BYTES + 1), px=3_600_000)
    r.hset("t:m:route:hash", "a", "b")  # another Redis type
    r.rpush("t:m:chunk:list", "a")
    # a stored "newer" entry with an impossible time would block every later write
    r.set("t:m:route:future/m", json.dumps({**GOOD, "at": 1e300}), px=3_600_000)
    r.set("t:m:route:inf/m", json.dumps({**GOOD, "at": "X"}).replace('"X"', "1e999"))
    r.set("t:m:route:unnamed/m", "not json", px=3_600_000)  # no run names it: never read
    named = ["good/m", *(f"bad{i}" for i in range(len(BAD_ENTRIES)))]
    named += ["bytes", "big", "hash", "future/m", "inf/m"]
    wanted = Wanted.of(routes=named, chunks=["list"])
    store = redis_store(redis_server.url)
    with caplog.at_level(logging.WARNING):
        memory = store.load(LIMITS, wanted)
    # an end past this run's longest [memory] time may be another repository's policy (the
    # store is shared): kept, counting no longer than this run's; past ten years: refused
    longer = f"bad{[n for n, _ in BAD_ENTRIES].index('until past the longest TTL')}"
    end = LIMITS.now + LIMITS.horizon + LIMITS.skew
    assert memory.routes == {
        "good/m": GOOD_MEMO,
        longer: GOOD_MEMO.model_copy(update={"until": end}),
    }
    (warning,) = warnings_of(caplog)
    assert "unusable entries ignored" in warning
    fresh = RouteMemo(state="proven", outcome="ok", at=NOW, until=NOW + 600)
    routes = {**memory.routes, "future/m": fresh, "inf/m": fresh}
    store.save(Memory(routes=routes))
    assert not store.health.broken
    left = sorted(k.decode(errors="replace") for k in r.scan_iter(match="t:*"))
    assert left == sorted(
        [
            f"t:m:route:{longer}",  # not deleted: another policy's memo, rewritten capped
            "t:m:route:future/m",
            "t:m:route:good/m",
            "t:m:route:inf/m",
            "t:m:route:unnamed/m",
        ]
    )
    assert json.loads(r.get("t:m:route:future/m"))["at"] == NOW  # overwritten, not kept
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = redis_store(redis_server.url).load(LIMITS, wanted)
    assert again.routes == routes and not warnings_of(caplog)


def test_a_bad_key_replaced_by_another_run_meanwhile_is_not_deleted(
    redis_server: Any, redis_client: Any
) -> None:
    redis_client.set("t:m:route:a/m", "not json", px=60_000)
    store = redis_store(redis_server.url)
    assert store.load(LIMITS, Wanted.of(routes=["a/m"])) == Memory()
    redis_client.set("t:m:route:a/m", json.dumps(GOOD), px=60_000)  # another run, in between
    store.save(Memory())
    assert json.loads(redis_client.get("t:m:route:a/m")) == GOOD


def test_a_prefix_with_glob_characters_reads_only_its_own_keys(
    redis_server: Any, redis_client: Any
) -> None:
    good = json.dumps(GOOD)
    prefixes = ("org*:", "orgX:", "org?:", "org[a]:", "orga:", "or\\g:")
    for prefix in prefixes:
        redis_client.set(f"{prefix}m:route:{prefix}/m", good, px=60_000)
    wanted = Wanted.of(routes=[f"{p}/m" for p in prefixes])
    for prefix in ("org*:", "org?:", "org[a]:", "or\\g:"):
        routes = redis_store(redis_server.url, prefix).load(LIMITS, wanted).routes
        assert list(routes) == [f"{prefix}/m"], prefix


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_DATA, min_size=1, max_size=4), st.binary(min_size=1, max_size=12))
def test_random_values_and_keys_in_redis_never_escape(
    redis_server: Any, redis_client: Any, values: list[bytes], name: bytes
) -> None:
    redis_client.flushdb()
    names: dict[str, list[str]] = {"route": [], "account": [], "chunk": []}
    for i, value in enumerate(values):
        section = ("route", "account", "chunk")[i % 3]
        ident = name.decode("utf-8", "replace") + str(i)
        names[section].append(ident)
        redis_client.set(f"t:m:{section}:{ident}".encode(), value, px=60_000)
    store = redis_store(redis_server.url)
    memory = store.load(LIMITS, Wanted.of(names["route"], names["account"], names["chunk"]))
    assert_valid(memory)
    store.save(memory)
    assert not store.health.broken


# --- through the CLI --------------------------------------------------------------------------


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relay_review", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def in_process(*args: str) -> CliRun:
    return run_cli(*args)


@pytest.mark.integration
@pytest.mark.parametrize(
    "content",
    [
        deep(1000).encode(),
        b'{"version":%d,"routes":{"x/m":{"state":"dead","outcome":"not_found","at":1e999,'
        b'"until":1e999}}}' % VERSION,
        b"\xff\xfe\xfd not UTF-8",
    ],
    ids=["nested-1000", "at-1e999", "not-utf8"],
)
def test_drill_with_a_corrupt_state_file_exits_0_warns_once_and_rewrites_only_memory(
    tmp_path: Path, content: bytes
) -> None:
    """A record of ours with a bad entry is rewritten; a file that cannot be known to be memory
    (too deep to parse, not UTF-8) is left as it is: it may be anything the flag named."""
    state = tmp_path / "state.json"
    state.write_bytes(content)
    # the deepest file as a process (interpreter's own stack); the others through cli.main
    run = (cli if content.startswith(b"[[[") else in_process)(
        "drill", "--scenario", "mixed", "--state", str(state), "--format", "json"
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    warnings = [line for line in run.stderr.splitlines() if f"state {state}" in line]
    assert len(warnings) == 1, run.stderr
    if not content.startswith(b"{"):
        assert state.read_bytes() == content and "not written over" in warnings[0]
        return
    rewritten = json.loads(state.read_text(encoding="utf-8"))
    assert rewritten["version"] == VERSION and rewritten["routes"]  # this run's memory, valid
    assert FileStore(state).load().routes  # and it loads back without a warning


# --- the quota ledger's keys are input too ----------------------------------------------------


@pytest.mark.parametrize(
    "plant",
    [
        lambda r: r.set("t:ledger:{acme}:closed", "garbage", px=60_000),
        lambda r: r.set("t:ledger:{acme}:closed", "nan", px=60_000),
        lambda r: r.set("t:ledger:{acme}:closed", "1e300"),  # no TTL: not ours, closed forever
        # a year ahead, with a year's TTL: ours close for a day at most (a tenant's forgery)
        lambda r: r.set(
            "t:ledger:{acme}:closed", str((time.time() + 365 * 86400) * 1000), px=365 * 86400_000
        ),
        lambda r: r.hset("t:ledger:{acme}:m", "a", "b"),  # another type
        lambda r: r.set("t:ledger:{acme}:d", "x"),
        lambda r: r.zadd("t:ledger:{acme}:m", {f"f{i}": 1e15 for i in range(5)}),  # in the future
    ],
    ids=[
        "closed-garbage",
        "closed-nan",
        "closed-forever",
        "closed-a-year",
        "minute-hash",
        "day-string",
        "future",
    ],
)
async def test_a_bad_ledger_key_never_fails_or_closes_the_account(
    redis_server: Any, redis_client: Any, plant: Any
) -> None:
    import redis.asyncio as aioredis

    from relay_review.state.ledger import Budget, RedisLedger

    plant(redis_client)
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        ledger = RedisLedger(client, prefix="t:")
        granted = [(await ledger.reserve("acme", Budget(rpm=2, rpd=10))).granted for _ in range(3)]
        assert granted == [True, True, False]  # the budget still counts, from our own entries
        await ledger.close("acme", 5)
        refused = await ledger.reserve("acme", Budget())
        assert refused.window == "closed" and 0 < refused.wait_s <= 5
    finally:
        await client.aclose()


def test_a_wait_of_ages_is_remembered_capped_and_never_raises() -> None:
    """A provider's wait of ages (``Retry-After: 99999999999``) never makes a memo past every
    bound: it is capped at the longest ``[memory]`` time, and the run's save goes on."""
    from relay_review.pipeline.route_memory import remember
    from relay_review.records import CatalogEntry, Cost, Outcome, OutcomeKind, Route
    from relay_review.routing.board import RouteBoard

    route = Route(
        index=0,
        account="acme",
        provider="openai_compatible",
        model="m",
        agent_id="acme/m",
        api_key_env="ACME_KEY",
    )
    board = RouteBoard([CatalogEntry(route=route, cost=Cost.FREE, zdr=False, priority=1)])
    board.outcomes["acme/m"] = Outcome(kind=OutcomeKind.RATE_LIMITED, retry_after=1e12)
    memory = remember(Memory(), board, NOW, MemoryPolicy())
    # the routing caps the provider's number at the longest [memory] time (issue 19): the
    # cooldown is remembered within what a record may hold, and reads back as one
    memo = memory.routes["acme/m"]
    assert memo.state == "cooling" and memo.until <= NOW + LONGEST
    assert decode(encode(memory), limits=LIMITS).memory.routes["acme/m"] == memo


@contextlib.contextmanager
def acl_user(
    server: Any, client: Any, name: str, *commands: str, keys: str = "t:*"
) -> Iterator[str]:
    """A URL of the test server for ACL user ``name`` (password ``{name}-pass-0123``, the key
    pattern ``keys``, the read, write and scripting categories and ``commands``), removed
    afterwards."""
    from urllib.parse import urlsplit

    client.acl_setuser(
        name,
        enabled=True,
        passwords=[f"+{name}-pass-0123"],
        keys=[keys],
        commands=["+@read", "+@write", "+@scripting", *commands],
    )
    try:
        yield f"redis://{name}:{name}-pass-0123@127.0.0.1:{urlsplit(server.url).port}/0"
    finally:
        client.acl_deluser(name)


def test_an_acl_user_without_info_keeps_the_store_with_one_warning_naming_the_command(
    redis_server: Any, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Session-12 audit: an ACL user that may not run ``INFO`` lost the whole store, and the
    warning named the key pattern. Now INFO's answer is unknown (one server, eviction not
    known), said once with the command to allow, and memory and the ledger still work."""
    import asyncio

    from relay_review.state.ledger import Budget

    with acl_user(redis_server, redis_client, "noinfo", "+ping", "+time", "-info") as url:
        memo = ChunkMemo(head="abc", route="a/m", at=NOW - 5, until=NOW + 600)
        with caplog.at_level(logging.WARNING):
            redis_store(url).save(Memory(routes={"a/m": GOOD_MEMO}, chunks={"c" * 32: memo}))
        (warning,) = warnings_of(caplog)
        assert "may not use INFO" in warning and "+info" in warning
        assert "noinfo-pass-0123" not in warning and "~t:*" not in warning
        store = redis_store(url)
        loaded = store.load(LIMITS, Wanted.of(routes=["a/m"], chunks=["c" * 32]))
        assert loaded.routes == {"a/m": GOOD_MEMO} and loaded.chunks == {"c" * 32: memo}
        assert asyncio.run(store.ledger.reserve("acct", Budget(rpm=1))).granted
        assert not store.health.broken


def test_a_server_with_info_renamed_away_keeps_the_store_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis with ``rename-command INFO ""`` (as managed services rename ``CONFIG``) answered
    "unknown command", and every run dropped the shared memory and ledger (a helper's audit).
    It is now the ACL refusal's case: one warning, memory and the ledger still work."""
    import asyncio

    from relay_review.state.ledger import Budget

    server = RedisServer(tmp_path / "noinfo", ("--rename-command", "INFO", ""))
    try:
        with caplog.at_level(logging.WARNING):
            redis_store(server.url).save(Memory(routes={"a/m": GOOD_MEMO}))
        (warning,) = warnings_of(caplog)
        assert "may not use INFO" in warning and "unknown command" in warning.lower()
        store = redis_store(server.url)
        assert store.load(LIMITS, Wanted.of(routes=["a/m"])).routes == {"a/m": GOOD_MEMO}
        assert asyncio.run(store.ledger.reserve("acct", Budget(rpm=1))).granted
        assert not store.health.broken
    finally:
        server.stop()


def test_the_warning_for_an_acl_refusal_inside_a_script_names_time(
    redis_server: Any, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Helper audit: the README's ACL lacked ``+time``, which the ledger's script calls; the
    run lost the shared ledger with a warning that named nothing to allow."""
    import asyncio

    from relay_review.state.ledger import Budget

    with acl_user(redis_server, redis_client, "notime", "+ping", "+info") as url:
        store = redis_store(url)
        with caplog.at_level(logging.WARNING):
            try:
                asyncio.run(store.ledger.reserve("acct", Budget(rpm=1)))
            except Exception as exc:  # the caller gives up on the shared ledger: said once
                store.ledger.report_failure(exc)
        (warning,) = warnings_of(caplog)
        assert "+time" in warning and "notime-pass-0123" not in warning


@pytest.mark.parametrize(
    ("keys", "prefix", "needs"),
    [
        ("t:*", "relay-review:", "~relay-review:*"),  # the URL forgot its ?prefix=t:
        ("t:m:route:*", "t:", "~t:*"),  # routes allowed, a pull request's findings not
    ],
    ids=["another-prefix", "part-of-the-prefix"],
)
def test_an_acl_refusal_at_load_is_one_warning_naming_the_key_pattern(
    redis_server: Any,
    redis_client: Any,
    caplog: pytest.LogCaptureFixture,
    keys: str,
    prefix: str,
    needs: str,
) -> None:
    """Audit: a refused read (``NOPERM``) counted as an entry "of another Redis type" (a first,
    misleading warning, then the ledger's naming the key pattern), or was skipped unsaid (a
    findings set). Only ``WRONGTYPE`` is an unusable entry; any other error reply is the
    store's fault: one warning for the run (load, ledger, save), naming the key pattern."""
    import asyncio

    from relay_review.state.ledger import Budget

    with acl_user(redis_server, redis_client, "other", "+ping", "+info", "+time", keys=keys) as url:
        store = redis_store(url, prefix=prefix)
        wanted = Wanted.of(routes=["a/m"], accounts=["acct"], findings=["o/r#1:"])
        with caplog.at_level(logging.WARNING):
            assert store.load(LIMITS, wanted) == Memory()
            try:
                asyncio.run(store.ledger.reserve("acct", Budget(rpm=1)))
            except Exception as exc:  # the caller gives up on the shared ledger: said once
                store.ledger.report_failure(exc)
            store.save(Memory(routes={"a/m": GOOD_MEMO}))
    (warning,) = warnings_of(caplog)
    assert "unavailable while reading memory" in warning and needs in warning, warning
    assert "another Redis type" not in warning and "other-pass-0123" not in warning


def test_a_shared_store_reads_entries_with_the_longest_time_any_policy_may_set() -> None:
    from relay_review.config.schema import MAX_LIFETIME_S
    from relay_review.state.redis_store import SHARED_HORIZON_S

    assert SHARED_HORIZON_S == MAX_LIFETIME_S
