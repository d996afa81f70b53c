"""The quota ledger at the routing edge: before every request (probes included) a slot is
reserved in the account's budget; a request the budget cannot hold is not sent.

A refusal comes back as a ``rate_limited`` outcome with the wait until the window frees and the
detail ``account budget: ...`` (``http_status`` None: nothing was sent, no provider said 429), so
failover treats the route like any deferred one: another route serves, or it is tried again when
the window frees, within the run deadline. A provider's own "nothing left until T" (a 429 with
``X-RateLimit-Remaining: 0``, a daily quota) closes the account's window until T for every run
that shares the ledger.

Which ledger key: the account's identity (its kind, a hash of its base URL and an HMAC
fingerprint of its key, given by the pipeline), so one key shares one budget across
repositories and two servers named alike never share one; the account's name without one.

Which window: the one the provider counts the request in. A kind whose free tier is counted
apart from its priced requests (OpenRouter) has two per account, free and priced; any other
kind, one. The policy never changes the window, only its limits, so two repositories sharing a
key under different policies share its windows. Which budget: the account's ``rpm``/``rpd``
from the policy when set (in each of its windows); otherwise the provider's published free-tier
limits for its free routes (OpenRouter: 20/min, 50/day); otherwise none.

A ledger that fails (Redis unreachable, slow or stopped mid-run; any exception, or no answer
within the policy's ``[state] timeout_s``, :data:`LEDGER_TIMEOUT_S` by default) is replaced for
the rest of the run by an in-process one, with one warning naming the store and the cause, and
saying the budgets are now enforced per run, conservatively. The in-process ledger starts from
what the shared one said this run (its grants' times, a refusal until it frees, how many
reservations of every run its windows last held, and a reservation whose answer never came,
which the server may have applied, as granted), never from a whole fresh window; and whatever it
knows, this run's own requests in any window are capped at ``[state] offline_share`` of the
account's budget (at least one): a run cannot know what the runs it no longer hears from send,
so ``n`` runs without the shared ledger send at most ``n`` times that share in any window, on
top of what the shared ledger granted (a run that never reached Redis knows nothing else).
The swap is made once however many requests (concurrent probes and chunks) saw the failure:
each caller whose call to the failed ledger raised goes on with the in-process one.

A provider's wait that closes the account's window is capped at :data:`LONGEST_CLOSE_S` (a
hostile or broken ``Retry-After`` never closes a shared account for years).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from relay_review.kinds import KINDS
from relay_review.records import CatalogEntry, Outcome, OutcomeKind
from relay_review.state.ledger import (
    CONSERVATIVE,
    DAY_S,
    OFFLINE_SHARE,
    Budget,
    Ledger,
    MemoryLedger,
    Window,
)

log = logging.getLogger("relay_review.routing")

#: Longest a ledger call may take before the run goes on without the shared ledger (the
#: default of ``[state] timeout_s``).
LEDGER_TIMEOUT_S = 1.0
#: Longest a provider's "nothing left until T" may close an account's window (its day).
LONGEST_CLOSE_S = DAY_S

T = TypeVar("T")


class AccountBudgets:
    """Reserve before each request; learn closed windows after (see the module doc)."""

    def __init__(
        self,
        ledger: Ledger | None = None,
        limits: Mapping[str, Budget] | None = None,
        identities: Mapping[str, str] | None = None,
        timeout: float = LEDGER_TIMEOUT_S,
        share: float = OFFLINE_SHARE,
    ) -> None:
        self.ledger: Ledger = ledger or MemoryLedger()
        self.timeout = timeout  # [state] timeout_s: the longest one ledger call may take
        self.share = share  # [state] offline_share: this run's share once the shared one is lost
        #: what the ledger said this run, per ledger key: grant times, the last refusal's end
        self._granted: dict[str, list[float]] = {}
        self._held: dict[str, tuple[float, Window]] = {}
        self._seen: dict[str, tuple[float, int, int]] = {}  # when, minute and day counts
        self.limits = dict(limits or {})  # account -> its policy budget
        self.identities = dict(identities or {})  # account -> what it is: its ledger key
        self.refusals = 0
        #: account -> requests this run let out (probes and serving): what the run cost it
        self.sent: Counter[str] = Counter()
        #: account -> (every run's requests in the last 24 h, the budget's rpd), as the shared
        #: ledger last counted them; dropped once that ledger is lost (no shared count then)
        self.shared_day: dict[str, tuple[int, int]] = {}

    @property
    def shared(self) -> bool:
        """The run's ledger is a shared one (not this process's, from the start or since the
        shared one was lost)."""
        return not isinstance(self.ledger, MemoryLedger)

    def budget_of(self, entry: CatalogEntry) -> tuple[str, Budget]:
        """``(ledger key, budget)`` for a request on ``entry``. The key is the window the
        provider counts the request in, whatever this run's policy says: a free route of a kind
        whose free tier is counted apart (OpenRouter) counts in the account's ``:free`` window,
        so two repositories whose policies differ (one sets ``rpm``, one keeps the published
        tier) share one window instead of each filling its own."""
        key = self.identities.get(entry.account, entry.account)
        kind = KINDS.get(entry.route.provider)  # the route's provider kind: its published tier
        published = None
        if entry.cost == "free" and kind is not None and (kind.free_rpm or kind.free_rpd):
            key, published = f"{key}:free", Budget(kind.free_rpm, kind.free_rpd)
        explicit = self.limits.get(entry.account)
        if explicit is not None and (explicit.rpm or explicit.rpd):
            return key, explicit
        return key, published or Budget()

    async def admit(self, entry: CatalogEntry, remaining: float) -> Outcome | None:
        """None when a slot was reserved (send the request); else the refusal as an outcome."""
        key, budget = self.budget_of(entry)
        answer = await self._call(
            lambda ledger: ledger.reserve(key, budget), max(0.05, min(self.timeout, remaining))
        )
        now = time.time()
        if answer.in_window is not None:
            self._seen[key] = (now, *answer.in_window)
            if budget.rpd and self.shared:  # a late answer after the loss is not kept
                self.shared_day[entry.account] = (max(0, answer.in_window[1]), budget.rpd)
        if answer.granted:
            mine = self._granted.setdefault(key, [])
            mine[:] = [t for t in mine if t > now - DAY_S][-10_000:]
            mine.append(now)
            self.sent[entry.account] += 1
            return None
        if answer.window in ("minute", "day"):
            self._held[key] = (now + answer.wait_s, answer.window)
        self.refusals += 1
        return Outcome(
            kind=OutcomeKind.RATE_LIMITED,
            retry_after=round(answer.wait_s, 3),
            detail=answer.detail,
            sent=False,
        )

    def closed(self, entry: CatalogEntry) -> bool:
        """Whether the ledger refused ``entry``'s budget this run, or the provider said nothing
        is left on it until a reset, and that window has not freed yet: a request on it now
        would be refused too (what this run heard; no ledger call)."""
        return self.frees_in(entry) is not None

    async def learn(self, entry: CatalogEntry, outcome: Outcome) -> None:
        """Close the account's window when the provider said nothing is left until a reset."""
        if outcome.kind is not OutcomeKind.RATE_LIMITED or outcome.http_status is None:
            return
        if not (outcome.quota_exhausted or outcome.daily_quota) or not outcome.retry_after:
            return
        key, _ = self.budget_of(entry)
        seconds = min(outcome.retry_after, LONGEST_CLOSE_S)
        until = time.time() + seconds
        held = self._held.get(key)
        if held is None or held[0] < until:  # heard: the account's other routes are held too
            self._held[key] = (until, "closed")
        await self._call(lambda ledger: ledger.close(key, seconds), self.timeout)

    def frees_in(self, entry: CatalogEntry) -> float | None:
        """Seconds until the window this run heard closed on ``entry``'s budget frees (None when
        it is open): every route sharing that budget waits as long."""
        key, _ = self.budget_of(entry)
        held = self._held.get(key)
        wait = held[0] - time.time() if held is not None else 0.0
        return wait if wait > 0 else None

    def shares_budget(self, entry: CatalogEntry, other: CatalogEntry) -> bool:
        """Whether a request on ``other`` counts in the window a request on ``entry`` does."""
        return self.budget_of(entry)[0] == self.budget_of(other)[0]

    async def _call(self, op: Callable[[Ledger], Awaitable[T]], timeout: float) -> T:
        """``op`` on the ledger, bounded by ``timeout``; on any failure of a shared ledger,
        ``op`` again on the in-process one that replaced it (see the module doc)."""
        ledger = self.ledger
        if isinstance(ledger, MemoryLedger):
            return await op(ledger)
        try:
            return await asyncio.wait_for(op(ledger), timeout=timeout)
        except TimeoutError:  # the cause as the warning names it: the setting to raise
            cause = TimeoutError(f"no answer within [state] timeout_s = {timeout:g} s")
            self._fall_back(ledger, cause)
        except Exception as exc:  # the shared ledger failed: never fail the run for it
            self._fall_back(ledger, exc)
        return await op(self.ledger)

    def _fall_back(self, failed: Ledger, exc: BaseException) -> None:
        """Replace ``failed`` by an in-process ledger, once: a concurrent caller whose call to
        ``failed`` raised after another caller swapped it finds the swap made and says nothing."""
        if self.ledger is not failed:
            return
        pending = getattr(failed, "pending", None)
        maybe: dict[str, list[float]] = pending() if callable(pending) else {}
        fresh = MemoryLedger(share=self.share)
        for key in {*self._granted, *self._held, *self._seen, *maybe}:
            fresh.seed(
                key,
                self._granted.get(key, []),
                self._held.get(key),
                self._seen.get(key),
                maybe.get(key),
            )
        self.ledger = fresh
        self.shared_day.clear()  # what other runs send is not heard any more
        report = getattr(failed, "report_failure", None)
        if callable(report):
            report(exc)  # the store says it once, for memory and ledger together
        else:
            log.warning(
                "quota ledger unavailable (%s); this run %s", type(exc).__name__, CONSERVATIVE
            )
