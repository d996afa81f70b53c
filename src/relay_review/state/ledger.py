"""The quota ledger: requests per minute and per day for each credential account, reserved
before every request (probes included), so runs that share a store never overrun an account.

Windows are **sliding**: a request is allowed when fewer than ``rpm`` requests were reserved in
the last 60 s and fewer than ``rpd`` in the last 24 h. That is stricter than the providers' own
fixed windows (OpenRouter's day, for one, resets at 00:00 UTC), so the ledger never causes a 429;
it may hold a request back a little longer than the provider would. A window learned from the
provider (``remaining: 0`` until a reset) closes the account outright until then.

Two ledgers: :class:`MemoryLedger` (one process; what a run uses without a shared store) and
:class:`RedisLedger` (one Lua script per reservation, atomic across every run that uses the same
Redis; every key has a TTL). Nothing stored is a secret: account names, times and counts only.
"""

from __future__ import annotations

import collections
import hashlib
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

MINUTE_S = 60.0
DAY_S = 86_400.0

Window = Literal["minute", "day", "closed"]


@dataclass(frozen=True)
class Budget:
    """An account's request budget; ``None`` means no limit on that window."""

    rpm: int | None = None
    rpd: int | None = None


@dataclass(frozen=True)
class Reservation:
    """The ledger's answer: ``granted``, or the window that refused and when it frees."""

    granted: bool
    wait_s: float = 0.0
    window: Window | None = None
    #: a shared ledger's count of the account's reservations in its minute and day windows
    #: after this answer (every run's), for the in-process ledger to start from if it is lost
    in_window: tuple[int, int] | None = None
    #: refused by this run's own share of the window (the shared ledger lost: ``allowance``)
    share: bool = False

    @property
    def detail(self) -> str:
        """What the report says of a refusal (``account budget: per-minute limit, ...``)."""
        if self.granted:
            return ""
        what = {"minute": "per-minute limit", "day": "per-day limit", "closed": "window closed"}
        said = what[self.window or "minute"]
        if self.share:
            said += " (this run's offline_share: no shared ledger)"
        return f"account budget: {said}, frees in {self.wait_s:.0f} s"


GRANTED = Reservation(True)

#: The default share of each window of an account's budget one run uses on its own once the
#: shared ledger is lost (``[state] offline_share``).
OFFLINE_SHARE = 0.25

#: What the one warning of a run that lost the shared ledger says of the budgets it keeps.
CONSERVATIVE = (
    "enforces account budgets in-process, per run and conservatively: it cannot hear "
    "the other runs, so it sends at most [state] offline_share of each window of an account's "
    "budget (at least one request), counting what the shared ledger last said"
)


def allowance(limit: int | None, share: float) -> int | None:
    """The most requests one run sends in a window of ``limit`` once it has lost the shared
    ledger (or never reached it): ``share`` of the window, at least one request. It cannot
    know how many other runs do the same, so ``n`` such runs send at most ``n`` times this in
    any window (the bound the warning and the README state)."""
    if not limit:
        return None
    return max(1, min(limit, math.floor(limit * share)))


class Ledger(Protocol):
    """Reserve a request slot for an account, or say when one frees; learn closed windows."""

    async def reserve(self, account: str, budget: Budget) -> Reservation: ...

    async def close(self, account: str, seconds: float) -> None: ...


class MemoryLedger:
    """Sliding windows kept in this process (one run: its probes and serving share them).
    Standing in for a lost shared ledger (``share`` set), it also caps this run's own requests
    in any window at :func:`allowance`, whatever the windows it was seeded with say."""

    def __init__(self, clock: Any = time.time, share: float | None = None) -> None:
        self._clock = clock
        self._minute: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque
        )
        self._day: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        #: this run's own grants (the windows above also hold what other runs were seen to hold)
        self._mine_m: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque
        )
        self._mine_d: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque
        )
        self._closed: dict[str, float] = {}
        self._held: dict[str, tuple[float, Window]] = {}
        #: set when this ledger stands in for a lost shared one: the run's own requests in any
        #: window are capped at :func:`allowance` (it cannot know what the other runs send)
        self.share = share

    def seed(
        self,
        account: str,
        granted: list[float],
        held: tuple[float, Window] | None = None,
        seen: tuple[float, int, int] | None = None,
        maybe: list[float] | None = None,
    ) -> None:
        """Start from what a shared ledger that was lost had said this run: the times it
        granted this account's requests, a refusal's window until it frees, ``seen`` (when,
        and how many reservations of every run its minute and day windows held then; the
        others' counted as made at that time) and ``maybe``: the times of reservations whose
        answer never came (a timeout, a connection cut), which the server may still have
        applied, counted as granted (in the windows, not in this run's own share). So a lost
        ledger never hands the run a whole fresh window."""
        mine = sorted(granted)
        minute, day = [*mine, *(maybe or [])], [*mine, *(maybe or [])]
        if seen is not None:
            at, in_minute, in_day = seen
            others_m = in_minute - sum(1 for t in mine if at - MINUTE_S < t <= at)
            others_d = in_day - sum(1 for t in mine if at - DAY_S < t <= at)
            minute += [at] * max(0, min(others_m, 10_000))
            day += [at] * max(0, min(others_d, 100_000))
        self._minute[account].extend(sorted(minute))
        self._day[account].extend(sorted(day))
        self._mine_m[account].extend(mine)
        self._mine_d[account].extend(mine)
        if held is not None:
            self._held[account] = held

    async def reserve(self, account: str, budget: Budget) -> Reservation:
        now = self._clock()
        closed = self._closed.get(account, 0.0)
        if closed > now:
            return Reservation(False, closed - now, "closed")
        until, window = self._held.get(account, (0.0, "minute"))
        if until > now:
            return Reservation(False, until - now, window)
        checks: list[tuple[Window, collections.deque[float], int | None, float]] = [
            ("minute", self._minute[account], budget.rpm, MINUTE_S),
            ("day", self._day[account], budget.rpd, DAY_S),
        ]
        if self.share is not None:  # standing in for a shared ledger: this run's own share
            checks += [
                ("minute", self._mine_m[account], allowance(budget.rpm, self.share), MINUTE_S),
                ("day", self._mine_d[account], allowance(budget.rpd, self.share), DAY_S),
            ]
        for i, (window, log, limit, span) in enumerate(checks):
            while log and log[0] <= now - span:
                log.popleft()
            if limit and len(log) >= limit:
                return Reservation(False, log[0] + span - now, window, share=i >= 2)
        for _, log, limit, _ in checks:
            if limit:
                log.append(now)
        return GRANTED

    async def close(self, account: str, seconds: float) -> None:
        if seconds > 0 and math.isfinite(seconds):
            until = self._clock() + seconds
            self._closed[account] = max(until, self._closed.get(account, 0.0))


#: KEYS: minute zset, day zset, closed key, epoch key. ARGV: rpm, rpd (0 = none), a unique
#: member, the epoch this run last saw ('' at its first call), a new epoch, then this run's own
#: grants (server ms, member) pairs. The epoch key is written at the run's first call; a later
#: call that finds it gone or changed (Redis restarted empty, or its keys lost) puts this run's
#: own grants back into the windows and returns changed = 1 (the run warns once).
#: Returns {granted 0/1, wait in ms, window, server ms now, epoch, changed, {minute count, day
#: count}} (the counts: every run's reservations of the account, for a lost ledger's stand-in).
#: Times come from the Redis server (TIME), so runners with skewed clocks agree. Returns
#: {granted 0/1, wait in ms, window}. Keys that are not ours are input, not truth: another type
#: is deleted, a closing that is not a number, has no TTL, or ends (or expires) more than a day
#: ahead (ours never do: :data:`relay_review.routing.budget.LONGEST_CLOSE_S`) is deleted, a
#: closing never outlasts its key's TTL, and reservation times in the future (none of ours is)
#: are dropped.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rpm = tonumber(ARGV[1])
local rpd = tonumber(ARGV[2])
for i, kind in ipairs({'zset', 'zset', 'string', 'string'}) do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= kind then redis.call('DEL', KEYS[i]) end
end
local function counts()
  return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2])}
end
local epoch = redis.call('GET', KEYS[4])
local changed = 0
if not epoch then
  epoch = ARGV[5]
  if ARGV[4] ~= '' then changed = 1 end
elseif ARGV[4] ~= '' and epoch ~= ARGV[4] then
  changed = 1
end
redis.call('SET', KEYS[4], epoch, 'PX', 86400000)
if changed == 1 then
  for i = 6, #ARGV - 1, 2 do
    local at = tonumber(ARGV[i])
    if at and at == at and at <= now and at > now - 86400000 then
      if rpm > 0 and at > now - 60000 then redis.call('ZADD', KEYS[1], at, ARGV[i + 1]) end
      if rpd > 0 then redis.call('ZADD', KEYS[2], at, ARGV[i + 1]) end
    end
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], 86400000) end
end
local closed = tonumber(redis.call('GET', KEYS[3]) or '0')
local left = redis.call('PTTL', KEYS[3])
if closed == nil or closed ~= closed or (closed > now and left < 0)
    or closed > now + 86400000 or left > 86400000 then
  redis.call('DEL', KEYS[3])
  closed = 0
end
if closed > now + left then closed = now + left end
if closed > now then
  return {0, closed - now, 'closed', now, epoch, changed, counts()}
end
local function full(key, limit, span)
  if limit <= 0 then return nil end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - span)
  redis.call('ZREMRANGEBYSCORE', key, '(' .. (now + 1000), '+inf')
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return tonumber(oldest[2]) + span - now
  end
  return nil
end
local wait = full(KEYS[1], rpm, 60000)
if wait then return {0, wait, 'minute', now, epoch, changed, counts()} end
wait = full(KEYS[2], rpd, 86400000)
if wait then return {0, wait, 'day', now, epoch, changed, counts()} end
if rpm > 0 then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], 60000)
end
if rpd > 0 then
  redis.call('ZADD', KEYS[2], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[2], 86400000)
end
return {1, 0, '', now, epoch, changed, counts()}
"""

#: KEYS: closed key. ARGV: milliseconds from now. Keeps the later of two closings.
_CLOSE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then redis.call('DEL', KEYS[1]) end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local left = redis.call('PTTL', KEYS[1])
if current == nil or current ~= current or left < 0 or left > 86400000
    or current > now + 86400000 then current = 0 end
if until_ms > current then
  redis.call('SET', KEYS[1], until_ms, 'PX', tonumber(ARGV[1]))
end
return 1
"""


class Script:
    """A Lua script sent by SHA (``EVALSHA``, one round trip on a warm connection) once the
    server has it; the first call, and any call the server answers ``NOSCRIPT`` (a restarted
    server, another cluster node, Redis 7.4+/Valkey 8+ evicting scripts), sends the text
    (``EVAL``, which also caches it): never more than two round trips."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 (Redis's script id)
        self.loaded = False

    async def __call__(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        # only a Redis client calls a script: a run without Redis never loads redis-py
        from redis.exceptions import NoScriptError

        if self.loaded:
            try:
                return await client.evalsha(self.sha, len(keys), *keys, *args)
            except NoScriptError:
                pass
        result = await client.eval(self.text, len(keys), *keys, *args)
        self.loaded = True
        return result


#: The most of this run's own grants put back into a window found lost (a run sends a few).
MAX_REPLAY = 200


def tag(account: str) -> str:
    """``account`` as a Redis Cluster hash tag's content (braces replaced: the tag ends at the
    first ``}``), so an account's three keys always hash to one slot."""
    return account.replace("{", "(").replace("}", ")") or "-"


class RedisLedger:
    """Sliding windows in Redis, reserved atomically by a Lua script (see the module doc).

    Keys: ``{prefix}ledger:{<account>}:m`` and ``:d`` (sorted sets of reservation times, TTL one
    window) and ``:closed`` (a reset time, TTL until then): the account is a hash tag, so the
    three keys a script touches share one slot of a Redis Cluster, and every key it touches is
    passed in ``KEYS``. ``client`` is a redis-py asyncio client (or cluster client) whose socket
    timeouts bound every call, or ``connect`` makes it at the first call; the scripts go by SHA
    (:class:`Script`). A Redis error propagates to the caller, which decides
    to go on without the ledger.
    """

    def __init__(
        self,
        client: Any = None,
        prefix: str = "relay-review:",
        health: Any = None,
        connect: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self._client = client
        self._connect = connect
        self._prefix = prefix
        #: shared with the store: a Redis found broken is reported once, then not called again
        self.health = health
        self._reserve = Script(_RESERVE)
        self._close = Script(_CLOSE)
        #: per account: the epoch last seen, and this run's grants (server ms, member)
        self._epochs: dict[str, str] = {}
        self._grants: dict[str, list[tuple[int, str]]] = {}
        #: accounts whose window was found lost this run (Redis restarted empty)
        self.lost: list[str] = []
        #: per account: when each reservation sent to the server was sent, until its answer
        #: came; what is left when the caller gives up (a timeout, a connection cut) may still
        #: have been applied, and the in-process ledger counts it as granted (:meth:`pending`)
        self._sent: dict[str, dict[str, float]] = {}

    async def _ready(self) -> Any:
        if self._client is None and self._connect is not None:
            self._client = await self._connect()
        if self._client is None:
            raise ConnectionError("no Redis client")
        return self._client

    def _keys(self, account: str) -> list[str]:
        base = f"{self._prefix}ledger:{{{tag(account)}}}:"
        return [base + "m", base + "d", base + "closed", base + "epoch"]

    @property
    def broken(self) -> bool:
        return bool(self.health is not None and self.health.broken)

    def report_failure(self, exc: BaseException) -> None:
        """The caller gave up on this ledger: say so once (through the store's health)."""
        if self.health is not None:
            self.health.fail(exc, "reserving a request")

    async def reserve(self, account: str, budget: Budget) -> Reservation:
        if self.broken:
            raise ConnectionError("Redis was found unavailable earlier in this run")
        client = await self._ready()
        member = uuid.uuid4().hex
        mine = self._grants.setdefault(account, [])
        args: list[Any] = [budget.rpm or 0, budget.rpd or 0, member]
        args += [self._epochs.get(account, ""), uuid.uuid4().hex]
        for at, old in mine[-MAX_REPLAY:]:
            args += [at, old]
        sent = self._sent.setdefault(account, {})
        sent[member] = time.time()
        reply = await self._reserve(client, self._keys(account), args)
        del sent[member]
        granted, wait_ms, window, now, epoch, changed, counts = reply
        seen = (int(counts[0]), int(counts[1]))
        self._epochs[account] = epoch.decode() if isinstance(epoch, bytes) else str(epoch)
        if int(changed) and account not in self.lost:
            self.lost.append(account)
            warn = getattr(self.health, "restarted", None)
            if callable(warn):
                warn(len(mine))
        if int(granted):
            mine[:] = [g for g in mine if g[0] > int(now) - int(DAY_S * 1000)]
            mine.append((int(now), member))
            return Reservation(True, in_window=seen)
        name = window.decode() if isinstance(window, bytes) else str(window)
        return Reservation(False, int(wait_ms) / 1000, name, seen)  # type: ignore[arg-type]

    def pending(self) -> dict[str, list[float]]:
        """Per account, the times of reservations sent without an answer (see ``_sent``)."""
        return {a: sorted(times.values()) for a, times in self._sent.items() if times}

    async def close(self, account: str, seconds: float) -> None:
        if seconds > 0 and math.isfinite(seconds):
            client = await self._ready()
            await self._close(client, [self._keys(account)[2]], [max(1, int(seconds * 1000))])
