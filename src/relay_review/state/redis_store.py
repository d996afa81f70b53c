"""``redis://`` and ``rediss://``: memory across runs and the quota ledger shared by every run
that uses the same Redis (any Redis >= 6, or Valkey).

Key layout (``prefix`` defaults to ``relay-review:``; every key has a TTL):

- ``{prefix}m:route:{agent_id}``, ``{prefix}m:account:{name}``: a route's or an account's last
  outcome (a :class:`~relay_review.state.memory.RouteMemo` as JSON), until its memo runs out;
- ``{prefix}m:chunk:{content hash}``: a reviewed chunk's verified findings, until its TTL;
- ``{prefix}ledger:{account}:m`` / ``:d`` / ``:closed``: the quota ledger (:mod:`.ledger`).

One key per entry, written only when newer than what is stored (a Lua script compares the
times), so concurrent runs never overwrite each other's fresher memory. Nothing stored is a
secret or diff text: route ids, outcome kinds, times, content hashes, verified findings.

Every call is bounded by ``timeout`` (socket connect and read). Redis unreachable or failing,
at load or at save: one warning, and the run goes on without memory (it never fails a run).
``rediss://`` verifies the server's certificate (redis-py's default, not turned off here).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio as aioredis

from relay_review.state.ledger import RedisLedger
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
    assemble,
    entry,
    parse,
)

log = logging.getLogger("relay_review.state")

DEFAULT_PREFIX = "relay-review:"
#: Seconds a Redis connect or reply may take (memory is an optimisation: never wait long).
TIMEOUT_S = 1.0
#: Most memory keys one run reads (an org's routes and recent chunks fit many times over).
MAX_KEYS = 5000

#: The most bytes one stored entry may take (a chunk memo is a few KB; anything bigger is not ours).
MAX_ENTRY_BYTES = 256 * 1024
#: Keys read per MGET (bounds one reply: at most this many entries of at most MAX_ENTRY_BYTES).
BATCH = 100

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

_GLOB = re.compile(r"([*?\[\]\\])")


def glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN ``MATCH`` pattern (``*``, ``?``, ``[``, ``]`` and
    backslash escaped), so a prefix holding them never reads another setup's keys."""
    return _GLOB.sub(r"\\\1", text)


def split_prefix(url: str) -> tuple[str, str]:
    """``(the URL without ?prefix=..., the key prefix)``; the default prefix when none is given."""
    parts = urlsplit(url)
    query = [p for p in parts.query.split("&") if p]
    prefix = DEFAULT_PREFIX
    kept = []
    for item in query:
        name, _, value = item.partition("=")
        if name == "prefix" and value:
            prefix = unquote(value)
        else:
            kept.append(item)
    return parts._replace(query="&".join(kept)).geturl(), prefix


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for the one warning a failure prints)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}:" if parts.username else ":"
    return parts._replace(netloc=f"{user}***@{host}{port}").geturl()


def url_password(url: str) -> str | None:
    """The password in a ``redis://`` URL (to mask it like a key), or None."""
    try:
        return urlsplit(url).password
    except ValueError:
        return None


class Health:
    """One Redis per run, one warning: the first failure (load, ledger or save) says so, and
    memory and the shared ledger are off for the rest of the run."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.broken = False

    def fail(self, exc: BaseException, doing: str) -> None:
        if not self.broken:
            log.warning(
                "state %s unavailable while %s (Redis: %s); this run goes on without memory "
                "and with an in-process quota ledger",
                self.where,
                doing,
                type(exc).__name__,
            )
        self.broken = True


class RedisStore:
    """Memory in Redis, one key per entry (see the module doc); :attr:`ledger` shares the
    quota windows through the same server."""

    kind = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = TIMEOUT_S,
        clock: Any = None,
    ) -> None:
        self.url = url
        self.where = redact_url(url)
        self.health = Health(self.where)
        self.prefix = prefix
        self._clock = clock or time.time
        #: keys found unusable at load ({key: SHA-1 of the value read, or ''}): deleted at save
        self._bad: dict[bytes, str] = {}
        self._refused: list[str] = []
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        shared = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self.ledger = RedisLedger(shared, prefix=prefix, health=self.health)

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}m:{kind}:{name}"

    def load(self, limits: Limits | None = None) -> Memory:
        try:
            keys, values, bad = self._read()
        except Exception as exc:  # a Redis error, or anything else: memory never fails a run
            self.health.fail(exc, "reading memory")
            return Memory()
        kept: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        loaded = Loaded(Memory())
        for key, (section, ident) in keys.items():
            value = values.get(key)
            if value is None:
                continue  # expired between the scan and the read, or refused by _read
            try:
                memo, why = entry(section, ident, parse(value, MAX_ENTRY_BYTES), limits)
            except Unusable as exc:
                memo, why = None, f"{section} entry {exc}"
            if memo is None:
                loaded.drop(why)
                bad[key] = hashlib.sha1(value).hexdigest()  # noqa: S324 (compared by Redis)
            else:
                kept[section][ident] = memo
        for why in self._refused:
            loaded.drop(why)
        self._bad = bad
        loaded.memory = assemble(kept)
        if loaded.ignored:
            log.warning(
                "state %s: %d unusable entries ignored (%s); this run deletes or overwrites them",
                self.where,
                loaded.ignored,
                loaded.why,
            )
        return loaded.memory.fresh(self._clock())

    def _read(self) -> tuple[dict[bytes, tuple[str, str]], dict[bytes, bytes], dict[bytes, str]]:
        """The memory keys (``{key: (section, id)}``), their values (those that are strings of
        at most :data:`MAX_ENTRY_BYTES`) and the keys that cannot be used unread (``{key: ''}``,
        or ``'*'`` for a name that is not UTF-8; their reasons in :attr:`_refused`)."""
        sections = {
            b"route": "routes",
            b"account": "accounts",
            b"chunk": "chunks",
            b"finding": "findings",
        }
        head = f"{self.prefix}m:".encode()
        keys: dict[bytes, tuple[str, str]] = {}
        bad: dict[bytes, str] = {}
        self._refused = []
        for key in self._client.scan_iter(match=glob_escape(f"{self.prefix}m:") + "*", count=500):
            if len(keys) + len(bad) >= MAX_KEYS:
                break
            if not key.startswith(head):
                continue  # SCAN matched it literally; never another setup's key
            kind, _, ident = key[len(head) :].partition(b":")
            if kind not in sections:
                continue  # not a memory key
            try:
                keys[key] = (sections[kind], ident.decode("utf-8"))
            except UnicodeDecodeError:
                bad[key] = "*"
                self._refused.append("a key that is not UTF-8")
        names = list(keys)
        with self._client.pipeline(transaction=False) as pipe:
            for key in names:
                pipe.strlen(key)
            sizes = pipe.execute(raise_on_error=False)
        readable = []
        for key, size in zip(names, sizes, strict=True):
            if isinstance(size, int) and size <= MAX_ENTRY_BYTES:
                readable.append(key)
                continue
            bad[key] = ""
            self._refused.append(
                f"{keys[key][0]} entry of {size} bytes, more than {MAX_ENTRY_BYTES}"
                if isinstance(size, int)
                else f"{keys[key][0]} entry of another Redis type"
            )
        values: dict[bytes, bytes] = {}
        for i in range(0, len(readable), BATCH):
            part = readable[i : i + BATCH]
            for key, value in zip(part, self._client.mget(part), strict=True):
                if isinstance(value, bytes):
                    values[key] = value
        return keys, values, bad

    def save(self, memory: Memory) -> None:
        if self.health.broken:
            return  # said once already; memory is an optimisation
        now = self._clock()
        entries: list[tuple[str, RouteMemo | ChunkMemo | FindingMemo]] = [
            *((self._key("route", k), v) for k, v in memory.routes.items()),
            *((self._key("account", k), v) for k, v in memory.accounts.items()),
            *((self._key("chunk", k), v) for k, v in memory.chunks.items()),
            *((self._key("finding", k), v) for k, v in memory.findings.items()),
        ]
        written = {name.encode() for name, _ in entries}
        try:
            script = self._client.register_script(_SET_NEWER)
            drop = self._client.register_script(_DROP_BAD)
            with self._client.pipeline(transaction=False) as pipe:
                for key, value in entries:
                    ttl_ms = int((value.until - now) * 1000)  # times are bounded
                    if ttl_ms > 0:
                        latest = now + CLOCK_SKEW_S
                        args = [value.model_dump_json(), value.at, ttl_ms, latest, MAX_ENTRY_BYTES]
                        script(keys=[key], args=args, client=pipe)
                for bad, digest in self._bad.items():
                    if bad not in written:
                        drop(keys=[bad], args=[digest, MAX_ENTRY_BYTES], client=pipe)
                results = pipe.execute(raise_on_error=False)
        except Exception as exc:  # a Redis error, or anything else: memory never fails a run
            self.health.fail(exc, "writing memory")
            return
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            self.health.fail(failed[0], "writing memory")
