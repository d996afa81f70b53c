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

import json
import logging
import time
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio as aioredis
from pydantic import ValidationError

from relay_review.state.ledger import RedisLedger
from relay_review.state.memory import ChunkMemo, FindingMemo, Memory, RouteMemo

log = logging.getLogger("relay_review.state")

DEFAULT_PREFIX = "relay-review:"
#: Seconds a Redis connect or reply may take (memory is an optimisation: never wait long).
TIMEOUT_S = 1.0
#: Most memory keys one run reads (an org's routes and recent chunks fit many times over).
MAX_KEYS = 5000

#: KEYS[1]: the entry. ARGV: JSON, its time, TTL in ms. Writes unless the stored entry is newer.
_SET_NEWER = """
local current = redis.call('GET', KEYS[1])
if current then
  local ok, old = pcall(cjson.decode, current)
  local at = ok and type(old) == 'table' and tonumber(old['at'])
  if at and at > tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[3]))
return 1
"""


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
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        shared = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self.ledger = RedisLedger(shared, prefix=prefix, health=self.health)

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}m:{kind}:{name}"

    def load(self) -> Memory:
        routes: dict[str, RouteMemo] = {}
        accounts: dict[str, RouteMemo] = {}
        chunks: dict[str, ChunkMemo] = {}
        findings: dict[str, FindingMemo] = {}
        targets: dict[str, tuple[dict[str, Any], type[Any]]] = {
            "route": (routes, RouteMemo),
            "account": (accounts, RouteMemo),
            "chunk": (chunks, ChunkMemo),
            "finding": (findings, FindingMemo),
        }
        bad = 0
        try:
            keys = []
            for key in self._client.scan_iter(match=f"{self.prefix}m:*", count=500):
                keys.append(key)
                if len(keys) >= MAX_KEYS:
                    break
            values = self._client.mget(keys) if keys else []
        except redis.RedisError as exc:
            self.health.fail(exc, "reading memory")
            return Memory()
        for key, value in zip(keys, values, strict=True):
            if value is None:
                continue  # expired between the scan and the read
            name = key.decode(errors="replace")[len(self.prefix) + 2 :]
            kind, _, ident = name.partition(":")
            if kind not in targets:
                continue
            into, model = targets[kind]
            try:
                into[ident] = model.model_validate(json.loads(value))
            except (ValueError, ValidationError):
                bad += 1
        if bad:
            log.warning("state %s: %d unusable entries ignored", self.where, bad)
        memory = Memory(routes=routes, accounts=accounts, chunks=chunks, findings=findings)
        return memory.fresh(self._clock())

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
        try:
            script = self._client.register_script(_SET_NEWER)
            with self._client.pipeline(transaction=False) as pipe:
                for key, value in entries:
                    ttl_ms = int((value.until - now) * 1000)
                    if ttl_ms > 0:
                        script(
                            keys=[key],
                            args=[value.model_dump_json(), value.at, ttl_ms],
                            client=pipe,
                        )
                pipe.execute()
        except redis.RedisError as exc:
            self.health.fail(exc, "writing memory")
