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

Which budget: the account's ``rpm``/``rpd`` from the policy when set (every request of the
account counts); otherwise the provider's published free-tier limits for its free routes
(OpenRouter: 20/min, 50/day, counted apart from priced routes); otherwise none.

A ledger that fails (Redis unreachable, slow or stopped mid-run) is replaced for the rest of the
run by an in-process one, with one warning: the budget still holds within this run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from relay_review.models import CatalogEntry, Outcome, OutcomeKind
from relay_review.providers.kinds import KINDS
from relay_review.state.ledger import Budget, Ledger, MemoryLedger

log = logging.getLogger("relay_review.routing")

#: Longest a ledger call may take before the run goes on without the shared ledger.
LEDGER_TIMEOUT_S = 1.0


class AccountBudgets:
    """Reserve before each request; learn closed windows after (see the module doc)."""

    def __init__(
        self,
        ledger: Ledger | None = None,
        limits: Mapping[str, Budget] | None = None,
        identities: Mapping[str, str] | None = None,
    ) -> None:
        self.ledger: Ledger = ledger or MemoryLedger()
        self.limits = dict(limits or {})  # account -> its policy budget
        self.identities = dict(identities or {})  # account -> what it is: its ledger key
        self.refusals = 0

    def budget_of(self, entry: CatalogEntry) -> tuple[str, Budget]:
        """``(ledger key, budget)`` for a request on ``entry``."""
        key = self.identities.get(entry.account, entry.account)
        explicit = self.limits.get(entry.account)
        if explicit is not None and (explicit.rpm or explicit.rpd):
            return key, explicit
        kind = KINDS.get(entry.route.provider)  # the route's provider kind: its published tier
        if entry.cost == "free" and kind is not None and (kind.free_rpm or kind.free_rpd):
            return f"{key}:free", Budget(kind.free_rpm, kind.free_rpd)
        return key, Budget()

    async def admit(self, entry: CatalogEntry, remaining: float) -> Outcome | None:
        """None when a slot was reserved (send the request); else the refusal as an outcome."""
        key, budget = self.budget_of(entry)
        try:
            answer = await asyncio.wait_for(
                self.ledger.reserve(key, budget),
                timeout=max(0.05, min(LEDGER_TIMEOUT_S, remaining)),
            )
        except Exception as exc:  # the shared ledger failed: never fail the run for it
            self._fall_back(exc)
            answer = await self.ledger.reserve(key, budget)
        if answer.granted:
            return None
        self.refusals += 1
        return Outcome(
            kind=OutcomeKind.RATE_LIMITED,
            retry_after=round(answer.wait_s, 3),
            detail=answer.detail,
            sent=False,
        )

    async def learn(self, entry: CatalogEntry, outcome: Outcome) -> None:
        """Close the account's window when the provider said nothing is left until a reset."""
        if outcome.kind is not OutcomeKind.RATE_LIMITED or outcome.http_status is None:
            return
        if not (outcome.quota_exhausted or outcome.daily_quota) or not outcome.retry_after:
            return
        key, _ = self.budget_of(entry)
        try:
            await asyncio.wait_for(
                self.ledger.close(key, outcome.retry_after), timeout=LEDGER_TIMEOUT_S
            )
        except Exception as exc:
            self._fall_back(exc)
            await self.ledger.close(key, outcome.retry_after)

    def _fall_back(self, exc: BaseException) -> None:
        if isinstance(self.ledger, MemoryLedger):
            raise exc
        report = getattr(self.ledger, "report_failure", None)
        if callable(report):
            report(exc)  # the store says it once, for memory and ledger together
        else:
            log.warning(
                "quota ledger unavailable (%s); this run goes on with an in-process ledger",
                type(exc).__name__,
            )
        self.ledger = MemoryLedger()
