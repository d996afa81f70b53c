"""``redis://`` and ``rediss://``: memory across runs and the quota ledger shared by every run
that uses the same Redis (any Redis >= 6, Valkey, or a Redis Cluster reached through any of its
nodes).

Key layout (``prefix`` defaults to ``relay-review:``; every key has a TTL):

- ``{prefix}m:route:{route key}``, ``{prefix}m:account:{identity}``: a route's or an account's
  last outcome (a :class:`~relay_review.state.memory.RouteMemo` as JSON), until its memo runs out;
- ``{prefix}m:chunk:{content hash}``: a reviewed chunk's verified findings, until its TTL;
- ``{prefix}m:latest:{hash of scope and path}``: the chunk key and time of a file's latest
  reviewed unit (JSON; newer wins), so a file whose content changed is said "changed since"
  its earlier review without a scan (its unit's key names its content);
- ``{prefix}m:finding:{scope}{fingerprint}`` with ``{prefix}m:findings:{scope}``, the set of a
  pull request's finding keys (``scope`` is ``owner/repo#N:``);
- ``{prefix}ledger:{<account>}:m`` / ``:d`` / ``:closed``: the quota ledger (:mod:`.ledger`),
  the account in a hash tag so the three keys one script touches share a cluster slot.

**Signed:** the review cache, the latest-unit pointers and the findings' states decide a review,
and anyone with the Redis password can write them, so they are kept only signed with the run's
state key (:mod:`.seal`; a ``"sig"`` member first), refused at load unless the signature is this
key's for this key name, and neither read nor written without a key (route and account memos and
the ledger are not signed: they never decide a verdict).

**Read by name, never scanned:** a run reads the keys it needs (:class:`~.stores.Wanted`: its
catalog's routes and accounts, its chunks' keys, its pull request's findings), in one pipeline
(two with findings: their set, then their keys), whatever else the database holds. Every command
touches one key, so a cluster serves it from the node holding that key's slot.

One key per entry, written only when newer than what is stored (a Lua script compares the
times), so concurrent runs never overwrite each other's fresher memory. Nothing stored is a
secret or diff text: route ids, outcome kinds, times, content hashes, verified findings.

**Eviction:** at connect the store reads ``INFO`` (``maxmemory_policy``); where the server may
evict the ledger's keys (``allkeys-*``, or ``volatile-*``: every key has a TTL), every run says
so in one warning naming the setting to change.

**Cluster:** at connect the store reads ``INFO`` (``cluster_enabled:1``) and then uses redis-py's
cluster client, which finds the other nodes from the one named; ``?cluster=true`` says so
without asking (``?cluster=false``: never a cluster client). That client runs ``CLUSTER SLOTS``
and ``COMMAND`` at start-up, so an ACL user needs :data:`CLUSTER_COMMANDS` too; a refusal is
said naming them (:func:`refusal`), not as redis-py's "Cluster mode is not enabled".

Every call is bounded by ``timeout`` (socket connect and read). Redis unreachable or failing,
at load or at save: one warning, and the run goes on without the shared memory (it never fails
a run; the action's review cache, in the sticky comment, is not here). At load only a
``WRONGTYPE`` reply is an unusable entry; any other error reply (``NOPERM``, ``BUSY``, ...) is
such a failure.
``rediss://`` verifies the server's certificate (redis-py's default, not turned off here).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio as aioredis
import redis.asyncio.cluster as aiocluster
import redis.cluster

from relay_review.state.ledger import CONSERVATIVE, RedisLedger
from relay_review.state.memory import (
    CLOCK_SKEW_S,
    SECTIONS,
    ChunkMemo,
    FindingMemo,
    Limits,
    Loaded,
    Memory,
    RouteMemo,
    Unusable,
    entry,
    parse,
)
from relay_review.state.seal import Seal
from relay_review.state.stores import Borrowed, Wanted, latest_unit
from relay_review.state.urls import url_secrets

log = logging.getLogger("relay_review.state")

DEFAULT_PREFIX = "relay-review:"
#: Seconds a Redis connect or reply may take (memory is an optimisation: never wait long).
TIMEOUT_S = 1.0
#: A whole load or save (connect, ``INFO``, one pipeline) is given up after this many times
#: the timeout (see :meth:`RedisStore._bounded`).
CALLS_BOUNDED = 3
#: The longest any policy's ``[memory]`` time may be (ten years: the policy schema's
#: ``MAX_LIFETIME_S``, which a test holds equal): what a shared store's entries are read with.
SHARED_HORIZON_S = 10 * 365 * 86_400.0

T = TypeVar("T")

#: Most memory keys one run reads (an org's routes and recent chunks fit many times over).
MAX_KEYS = 5000
#: Most finding keys read from one pull request's set (publishing keeps at most 200).
MAX_FINDINGS = 500

#: The most bytes one stored entry may take (a chunk memo is a few KB; anything bigger is not ours).
MAX_ENTRY_BYTES = 256 * 1024

#: A finding's name in memory: its pull request's scope (``owner/repo#N:``), then its fingerprint.
_SCOPE = re.compile(r"^([^#]*#[0-9]+:)")
#: A review-cache key (:mod:`relay_review.pipeline.review_cache`).
_CHUNK_KEY = re.compile(r"^[0-9a-f]{32}$")


#: The sections that decide a review (a cached verdict, a finding's state across pushes): kept
#: only signed with the state key (:mod:`.seal`), and not kept at all without one.
SEALED = frozenset({"chunks", "findings"})


def _pointed(value: Any, name: bytes, seal: Seal) -> str | None:
    """The chunk key a ``{prefix}m:latest:...`` entry (``name``) names (signed JSON ``{"key",
    "at"}``), or None when it is missing, not signed with ``seal``'s key, or not ours."""
    if not isinstance(value, bytes) or not value or len(value) > 512:
        return None
    value = seal.open(name, value)
    if value is None:
        return None
    try:
        key = json.loads(value).get("key")
    except (ValueError, AttributeError):
        return None
    return key if isinstance(key, str) and _CHUNK_KEY.match(key) else None


#: KEYS[1]: the entry. ARGV: JSON, its time, TTL in ms, the latest time a stored entry may have
#: (now + skew), the most bytes an entry may take. Writes unless the stored entry is a usable
#: one that is newer; a stored value that is not ours (another type, too big, not JSON, a time
#: that is not a number or in the future) is overwritten, never trusted.
_SET_NEWER = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' and redis.call('STRLEN', KEYS[1]) <= tonumber(ARGV[5]) then
  local ok, old = pcall(cjson.decode, redis.call('GET', KEYS[1]))
  local at = ok and type(old) == 'table' and tonumber(old['at'])
  if at and at == at and at > tonumber(ARGV[2]) and at <= tonumber(ARGV[4]) then
    return 0
  end
elseif kind ~= 'none' and kind ~= 'string' then
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[3]))
return 1
"""

#: KEYS[1]: an entry found unusable at load. ARGV: the SHA-1 of the value then read ('' when it
#: was not read: another type or too big; '*' when the key's name is unusable, whatever it
#: holds), the most bytes an entry may take. Deletes it unless another run replaced it since
#: (a usable value is never deleted).
_DROP_BAD = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return 0 end
if ARGV[1] == '*' or kind ~= 'string' or redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
if ARGV[1] ~= '' and redis.sha1hex(redis.call('GET', KEYS[1])) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

#: KEYS[1]: a pull request's set of finding keys. ARGV: TTL in ms, then the keys. Replaces the
#: set (another type there is not ours: deleted) with this run's keys, or deletes it for none.
_SET_INDEX = """
redis.call('DEL', KEYS[1])
if #ARGV < 2 then return 0 end
for i = 2, #ARGV, 500 do
  redis.call('SADD', KEYS[1], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1
"""


@dataclass(frozen=True)
class Options:
    """What a state URL says beyond what redis-py reads: the key prefix, and cluster or not
    (None: ask the server at connect)."""

    url: str
    prefix: str = DEFAULT_PREFIX
    cluster: bool | None = None


def split_options(url: str) -> Options:
    """The URL without ``?prefix=`` and ``?cluster=`` (what redis-py is given), and their values."""
    parts = urlsplit(url)
    prefix, cluster = DEFAULT_PREFIX, None
    kept = []
    for item in (p for p in parts.query.split("&") if p):
        name, _, value = item.partition("=")
        if name == "prefix" and value:
            prefix = unquote(value)
        elif name == "cluster":
            cluster = unquote(value).lower() == "true"
        else:
            kept.append(item)
    return Options(parts._replace(query="&".join(kept)).geturl(), prefix, cluster)


#: ``maxmemory-policy`` values under which the server may evict the ledger's keys (every one
#: has a TTL, so ``volatile-*`` may too): an evicted window admits a whole budget again.
EVICTING = ("allkeys-", "volatile-")


def eviction_risk(info: Any) -> str | None:
    """The server's ``maxmemory_policy`` when, with a ``maxmemory`` set, it may evict our keys
    (read from ``INFO``, which managed services answer where ``CONFIG`` is disabled)."""
    if not isinstance(info, dict):
        return None
    policy = str(info.get("maxmemory_policy", ""))
    limit = str(info.get("maxmemory", "1"))
    return policy if policy.startswith(EVICTING) and limit != "0" else None


def _no_setinfo() -> dict[str, Any]:
    """Client options that skip ``CLIENT SETINFO`` at connect (two replies fewer on a cold
    connection: what a distant Redis pays most for), in whichever form this redis-py takes."""
    params = inspect.signature(redis.Redis.__init__).parameters
    if "driver_info" in params:
        return {"driver_info": None}
    if "lib_name" in params:
        return {"lib_name": None, "lib_version": None}
    return {}


NO_SETINFO = _no_setinfo()


def cluster_enabled(info: Any) -> bool:
    """Whether an ``INFO`` reply (redis-py's dict) is from a Redis Cluster node."""
    return isinstance(info, dict) and str(info.get("cluster_enabled", "0")) == "1"


def _within(memo: Any, limits: Limits | None, section: str) -> Any:
    """``memo`` counting no longer than ``limits`` allow this run (its ``until`` capped)."""
    if limits is None:
        return memo
    longest = max(limits.horizon, limits.findings) if section == "findings" else limits.horizon
    end = limits.now + longest + limits.skew
    return memo.model_copy(update={"until": end}) if memo.until > end else memo


def _no_info(exc: redis.exceptions.ResponseError) -> bool:
    """``INFO`` refused to this run: by the ACL (``NOPERM``) or renamed away (``unknown
    command``); the whole store was dropped for the second."""
    return isinstance(exc, redis.exceptions.NoPermissionError) or str(exc).lower().startswith(
        "unknown command"
    )


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for the one warning a failure prints);
    a lone ``word@`` too: it is often a password written without its colon
    (:func:`~relay_review.state.urls.url_secrets`), and was printed as it was."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    if parts.password is None:
        return parts._replace(netloc=f"***@{host}{port}").geturl() if parts.username else url
    user = f"{parts.username}:" if parts.username else ":"
    return parts._replace(netloc=f"{user}***@{host}{port}").geturl()


#: The most characters of redis-py's reason a warning quotes.
MAX_REASON = 300


def reason(exc: BaseException, secrets: list[str], prefix: str) -> str:
    """``exc`` as the warning says it: its type and redis-py's own reason (a certificate that
    failed and why, a refused connection, ...), on one line, at most :data:`MAX_REASON`
    characters, with ``secrets`` (the URL's password) masked; an ACL refusal behind it is what
    is said (:func:`refusal`), naming the command or the key pattern the ACL user needs."""
    shown = refusal(exc) or exc
    text = " ".join(str(shown).split())
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    if len(text) > MAX_REASON:
        text = text[: MAX_REASON - 3] + "..."
    said = f"{type(shown).__name__}: {text}" if text else type(shown).__name__
    command = _REFUSED_COMMAND.search(text)  # an ACL refusal naming the command (Valkey too)
    if command and command.group(1).lower() in CLUSTER_COMMANDS:
        said += (
            f"; the ACL user may not run {command.group(1).upper().replace('|', ' ')}, which "
            "redis-py's cluster client runs at start-up: allow "
            + " ".join(f"+{c}" for c in CLUSTER_COMMANDS)
        )
    elif command:
        said += f"; the ACL user needs the command: +{command.group(1).lower()}"
    elif "executing the script can't run this command" in text:  # Redis, inside a script
        said += "; the ACL user needs the commands our scripts call: +time, +@read, +@write"
    elif isinstance(shown, redis.exceptions.NoPermissionError) or "NOPERM" in text:
        said += f"; the ACL user needs the keys of the prefix: ~{prefix}* (and scripting)"
    return said


#: The command an ACL refusal names ("User relay has no permissions to run the 'info' command").
_REFUSED_COMMAND = re.compile(r"permissions to run the '([A-Za-z|]{1,40})' command")

#: What redis-py's cluster client runs at start-up, as ACL rules name them: the slot map and
#: the command table (an ACL user on a cluster needs both).
CLUSTER_COMMANDS = ("cluster|slots", "command")


def refusal(exc: BaseException) -> redis.exceptions.NoPermissionError | None:
    """The ACL refusal (``NOPERM``) ``exc`` is or was raised from: redis-py's cluster client
    wraps a refused ``CLUSTER SLOTS`` in ``RedisClusterException`` "Cluster mode is not enabled
    on this node", which is not so and names nothing to allow."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, redis.exceptions.NoPermissionError):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


def wrong_type(reply: Any) -> bool:
    """Whether a pipeline reply is the server's ``WRONGTYPE`` (the key holds another Redis
    type: an unusable entry, overwritten at save)."""
    return isinstance(reply, redis.ResponseError) and str(reply).startswith("WRONGTYPE")


def _server_fault(replies: list[Any]) -> None:
    """Raise the first error reply that is not :func:`wrong_type`: an ACL refusal (``NOPERM``),
    ``BUSY``, ``MOVED``, a lost connection ... is the server's, not an entry's, so memory is
    off for this run (one warning, through the store's health)."""
    for reply in replies:
        if isinstance(reply, Exception) and not wrong_type(reply):
            raise reply


class Health:
    """One Redis per run, one warning: the first failure (load, ledger or save) says so, with
    redis-py's reason (password masked), and memory and the shared ledger are off for the rest
    of the run."""

    def __init__(self, where: str, secrets: list[str] | None = None, prefix: str = "") -> None:
        self.where = where
        self.secrets = list(secrets or [])
        self.prefix = prefix
        self.broken = False
        self._restart_said = False

    def fail(self, exc: BaseException, doing: str) -> None:
        if not self.broken:
            log.warning(
                "state %s unavailable while %s (Redis: %s); this run goes on without the shared "
                "memory and %s",
                self.where,
                doing,
                reason(exc, self.secrets, self.prefix),
                CONSERVATIVE,
            )
        self.broken = True

    def restarted(self, replayed: int) -> None:
        """The ledger's windows were found gone mid-run (Redis restarted empty, or its keys
        lost): said once, and not after a failure was said (one warning per run); this run put
        its own grants back (others do at their next call)."""
        if not self._restart_said and not self.broken:
            log.warning(
                "state %s: the quota ledger's windows were lost during this run (Redis "
                "restarted empty or its keys were evicted); this run put back its own %d "
                "reservations, and other runs put back theirs at their next request",
                self.where,
                replayed,
            )
        self._restart_said = True


class RedisStore:
    """Memory in Redis, one key per entry, read by name (see the module doc); :attr:`ledger`
    shares the quota windows through the same server (or cluster)."""

    kind = "redis"
    keeps = True
    line: str | None = None
    borrowed: Borrowed | None = None

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = TIMEOUT_S,
        clock: Any = None,
        cluster: bool | None = None,
        seal: Seal | None = None,
    ) -> None:
        self.url = url
        self.where = redact_url(url)
        #: signs the review cache and the findings' states; None: they are not kept here
        self.seal = seal
        self.reviews_off = "" if seal else "no state key, so the shared Redis keeps no review cache"
        self.health = Health(self.where, url_secrets(url), prefix)
        self.prefix = prefix
        self.timeout = timeout
        self._clock = clock or time.time
        #: True/False once known (given, or read from the server at the first connect)
        self.cluster = cluster
        #: keys found unusable at load ({key: SHA-1 of the value read, or ''}): deleted at save
        self._bad: dict[bytes, str] = {}
        self._refused: list[str] = []
        self._client: Any = None
        self._aclient: Any = None
        self._alock: asyncio.Lock | None = None
        self._info_read = False
        self.ledger = RedisLedger(
            None, prefix=prefix, health=self.health, connect=self.async_client
        )

    def _options(self) -> dict[str, Any]:
        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            **NO_SETINFO,
        }

    def _read_info(self, info: Any) -> None:
        """What the server's ``INFO`` says, once per run: a cluster or not, and whether it may
        evict the ledger's keys (one warning naming the setting to change)."""
        self._info_read = True
        if self.cluster is None:
            self.cluster = cluster_enabled(info)
        policy = eviction_risk(info)
        if policy:
            log.warning(
                "state %s: the server's maxmemory-policy is %s, so under memory pressure it may "
                "evict the quota ledger's keys and runs would then overrun their accounts' "
                "budgets; set maxmemory-policy to noeviction, or give relay-review a dedicated "
                "Redis (its own instance or cache)",
                self.where,
                policy,
            )

    def _refused_info(self, exc: redis.exceptions.ResponseError) -> dict[str, Any]:
        """An ACL user that may not run ``INFO``, or a server that renamed it away
        (``rename-command``, as managed services do with ``CONFIG``): one warning, and the store
        goes on as a single server (unless the URL said ``?cluster=true``) whose eviction is
        unknown."""
        log.warning(
            "state %s: this run may not use INFO (%s), so whether the server is a cluster "
            "node or may evict the quota ledger's keys is not known; this run treats it as %s",
            self.where,
            reason(exc, self.health.secrets, self.prefix),
            "a cluster (?cluster=true)" if self.cluster else "one server (else: ?cluster=true)",
        )
        return {}

    def _info(self, call: Any) -> Any:
        try:
            return call()
        except redis.exceptions.ResponseError as exc:
            if not _no_info(exc):
                raise
            return self._refused_info(exc)

    async def _ainfo(self, call: Any) -> Any:
        try:
            return await call()
        except redis.exceptions.ResponseError as exc:
            if not _no_info(exc):
                raise
            return self._refused_info(exc)

    def client(self) -> Any:
        """The blocking client (memory), made at the first call: a cluster client when the
        URL says so or the server is a cluster node (``INFO``, one round trip)."""
        if self._client is None:
            plain = redis.Redis.from_url(self.url, **self._options())
            if not self._info_read:
                try:
                    self._read_info(self._info(plain.info))
                except BaseException:
                    plain.close()
                    raise
            if self.cluster:
                plain.close()
                self._client = redis.cluster.RedisCluster.from_url(self.url, **self._options())
            else:
                self._client = plain
        return self._client

    async def async_client(self) -> Any:
        """The asyncio client (the ledger), made at its first call, like :meth:`client`."""
        if self._aclient is not None:
            return self._aclient
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            if self._aclient is None:
                plain = aioredis.Redis.from_url(self.url, **self._options())
                if not self._info_read:
                    try:
                        self._read_info(await self._ainfo(plain.info))
                    except BaseException:
                        await plain.aclose()
                        raise
                if self.cluster:
                    await plain.aclose()
                    self._aclient = aiocluster.RedisCluster.from_url(self.url, **self._options())
                else:
                    self._aclient = plain
        return self._aclient

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}m:{kind}:{name}"

    def _signed(self, key: str, body: str) -> str:
        """Review memory (or its pointer) ``body`` as stored under ``key``: signed (without a
        seal :meth:`save` has none to write)."""
        return self.seal.close(key, body) if self.seal is not None else body

    def _bounded(self, call: Callable[[], T]) -> T:
        """``call()`` (blocking Redis work: connect, ``INFO``, one pipeline), given up after
        :data:`CALLS_BOUNDED` times the timeout all told: the client's timeout bounds each
        socket read, not a reply, so a server that trickles a reply (or a link that slow)
        held a run past its deadline, or forever. The abandoned call's thread is a daemon:
        it never holds the process's exit; the store is then broken for the run."""
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, call()))
            except BaseException as exc:  # handed to the caller below
                box.append((False, exc))

        worker = threading.Thread(target=run, name="relay-review-redis", daemon=True)
        worker.start()
        worker.join(self.timeout * CALLS_BOUNDED)
        if not box:
            raise TimeoutError(
                f"no whole answer within {self.timeout * CALLS_BOUNDED:g}s "
                f"({CALLS_BOUNDED} x [state] timeout_s)"
            )
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        try:
            keys, values, bad = self._bounded(lambda: self._read(wanted or Wanted()))
        except Exception as exc:  # a Redis error, or anything else: memory never fails a run
            self.health.fail(exc, "reading memory")
            return Memory.of()
        kept: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        loaded = Loaded(Memory.of())
        # Every run of every repository shares this store, each under its own [memory] times:
        # an entry is read with the longest any policy may set, then counts no longer than
        # this run's (a run with shorter times called other runs' memos unusable and deleted
        # them; a helper's audit). Impossible times (past ten years) are still refused.
        shared = limits and replace(limits, horizon=SHARED_HORIZON_S, findings=SHARED_HORIZON_S)
        for key, (section, ident) in keys.items():
            value = values.get(key)
            if value is None:
                continue  # missing, or refused by _read
            body = self.seal.open(key, value) if section in SEALED and self.seal else value
            try:
                if body is None:
                    raise Unusable("not signed with this setup's state key")
                raw = parse(body, MAX_ENTRY_BYTES)
                memo, why = entry(section, ident, raw, shared)
            except Unusable as exc:
                memo, why = None, f"{section} entry {exc}"
            if memo is None:
                loaded.drop(why)
                bad[key] = hashlib.sha1(value).hexdigest()  # noqa: S324 (compared by Redis)
            else:
                kept[section][ident] = _within(memo, limits, section)
        for why in self._refused:
            loaded.drop(why)
        self._bad = bad
        loaded.memory = Memory.of(**kept)  # each entry validated by entry()
        if loaded.ignored:
            log.warning(
                "state %s: %d unusable entries ignored (%s); this run deletes or overwrites them",
                self.where,
                loaded.ignored,
                loaded.why,
            )
        return loaded.memory.fresh(self._clock())

    def _read(
        self, wanted: Wanted
    ) -> tuple[dict[bytes, tuple[str, str]], dict[bytes, bytes], dict[bytes, str]]:
        """The keys read (``{key: (section, id)}``), their values (strings of at most
        :data:`MAX_ENTRY_BYTES`; missing ones left out) and the keys that cannot be used unread
        (``{key: ''}``; their reasons in :attr:`_refused`). One pipeline for the named keys and
        the findings' sets, one more for the findings' keys."""
        if self.seal is None:  # the review cache and findings are not kept here unsigned
            wanted = Wanted.of(routes=wanted.routes, accounts=wanted.accounts)
        names: dict[bytes, tuple[str, str]] = {}
        for section, kind, idents in (
            ("routes", "route", wanted.routes),
            ("accounts", "account", wanted.accounts),
            ("chunks", "chunk", wanted.chunks),
        ):
            for ident in sorted(idents):
                names[self._key(kind, ident).encode()] = (section, ident)
        names = dict(list(names.items())[:MAX_KEYS])
        scopes = sorted(wanted.findings)
        latest = sorted(wanted.latest)[:MAX_KEYS]
        self._refused = []
        bad: dict[bytes, str] = {}
        values: dict[bytes, bytes] = {}
        client = self.client()
        with client.pipeline(transaction=False) as pipe:
            for key in names:
                pipe.getrange(key, 0, MAX_ENTRY_BYTES)  # never more than the bound (+1 byte)
            for scope in scopes:
                pipe.srandmember(self._key("findings", scope), MAX_FINDINGS)
            for ident in latest:
                pipe.getrange(self._key("latest", ident), 0, 512)
            replies = pipe.execute(raise_on_error=False) if names or scopes or latest else []
        _server_fault(replies)
        found = dict(zip(names, replies[: len(names)], strict=True))
        more: dict[bytes, tuple[str, str]] = {}
        pointers = replies[len(names) + len(scopes) :]
        for ident, pointer in zip(latest, pointers, strict=True):
            # another run's word, signed (none are read without a seal): a chunk key, or nothing
            name = self._key("latest", ident).encode()
            pointed = self.seal and _pointed(pointer, name, self.seal)
            if pointed and self._key("chunk", pointed).encode() not in names:
                more[self._key("chunk", pointed).encode()] = ("chunks", pointed)
        sets = replies[len(names) : len(names) + len(scopes)]
        for scope, members in zip(scopes, sets, strict=True):
            if not isinstance(members, list):
                continue  # not a set: not ours, overwritten at save
            for member in members[:MAX_FINDINGS]:
                try:
                    ident = member.decode("utf-8") if isinstance(member, bytes) else ""
                except UnicodeDecodeError:
                    continue
                if ident.startswith(scope) and len(ident) <= 4096:
                    more[self._key("finding", ident).encode()] = ("findings", ident)
        if more:
            with client.pipeline(transaction=False) as pipe:
                for key in more:
                    pipe.getrange(key, 0, MAX_ENTRY_BYTES)
                replies = pipe.execute(raise_on_error=False)
            _server_fault(replies)
            found.update(zip(more, replies, strict=True))
            names.update(more)
        for key, value in found.items():
            section = names[key][0]
            if isinstance(value, Exception):  # WRONGTYPE: _server_fault raised any other
                bad[key] = ""
                self._refused.append(f"{section} entry of another Redis type")
            elif isinstance(value, bytes) and len(value) > MAX_ENTRY_BYTES:
                bad[key] = ""
                self._refused.append(f"{section} entry of more than {MAX_ENTRY_BYTES} bytes")
            elif isinstance(value, bytes) and value:
                values[key] = value
        return names, values, bad

    def save(self, memory: Memory) -> None:
        if self.health.broken:
            return  # said once already; memory is an optimisation
        now = self._clock()
        if self.seal is None:  # the review cache and findings are not kept here unsigned
            memory = memory.route_memory()
        entries: list[tuple[str, RouteMemo | ChunkMemo | FindingMemo]] = [
            *((self._key("route", k), v) for k, v in memory.routes.items()),
            *((self._key("account", k), v) for k, v in memory.accounts.items()),
            *((self._key("chunk", k), v) for k, v in memory.chunks.items()),
            *((self._key("finding", k), v) for k, v in memory.findings.items()),
        ]
        pointers = [
            (self._key("latest", latest_unit(unit.scope, unit.paths[0])), key, unit)
            for key, unit in memory.chunks.items()
            if unit.group and unit.scope and len(unit.paths) == 1 and _CHUNK_KEY.match(key)
        ]
        scopes: dict[str, tuple[list[str], float]] = {}
        for name, memo in memory.findings.items():
            match = _SCOPE.match(name)
            if match:
                members, until = scopes.get(match.group(1), ([], 0.0))
                scopes[match.group(1)] = ([*members, name], max(until, memo.until))
        try:
            results = self._bounded(lambda: self._write(now, entries, pointers, scopes))
        except Exception as exc:  # a Redis error, or anything else: memory never fails a run
            self.health.fail(exc, "writing memory")
            return
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            self.health.fail(failed[0], "writing memory")

    def _write(
        self,
        now: float,
        entries: list[tuple[str, RouteMemo | ChunkMemo | FindingMemo]],
        pointers: list[tuple[str, str, Any]],
        scopes: dict[str, tuple[list[str], float]],
    ) -> list[Any]:
        """:meth:`save`'s one pipeline: the replies (an error reply as an exception)."""
        with self.client().pipeline(transaction=False) as pipe:
            # first, what load found unusable (unless another run replaced it since): a
            # forged or broken entry whose time looks newest never blocks this run's write
            for bad, digest in self._bad.items():
                pipe.execute_command("EVAL", _DROP_BAD, 1, bad, digest, MAX_ENTRY_BYTES)
            for key, value in entries:
                ttl_ms = int((value.until - now) * 1000)  # times are bounded
                if ttl_ms > 0:
                    latest = now + CLOCK_SKEW_S
                    body = value.model_dump_json()
                    if not isinstance(value, RouteMemo):  # a route's or account's: unsigned
                        body = self._signed(key, body)
                    args = [body, value.at, ttl_ms, latest, MAX_ENTRY_BYTES]
                    pipe.execute_command("EVAL", _SET_NEWER, 1, key, *args)
            for name, key, unit in pointers:  # the file's latest unit, newer wins
                ttl_ms = int((unit.until - now) * 1000)
                if ttl_ms > 0:
                    pointer = self._signed(name, json.dumps({"key": key, "at": unit.at}))
                    args = [pointer, unit.at, ttl_ms, now + CLOCK_SKEW_S, MAX_ENTRY_BYTES]
                    pipe.execute_command("EVAL", _SET_NEWER, 1, name, *args)
            for scope, (members, until) in scopes.items():
                ttl_ms = max(1, int((until - now) * 1000))
                index = self._key("findings", scope)
                pipe.execute_command("EVAL", _SET_INDEX, 1, index, ttl_ms, *members)
            return list(pipe.execute(raise_on_error=False))
