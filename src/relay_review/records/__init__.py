"""Records that cross stage boundaries: one typed shape per concept, from the policy's accounts
to the run's report.

Settings resolve accounts (:mod:`.account`); discovery turns them into routes and the catalog
selects and ranks them (:mod:`.route`); preflight and failover turn each chat call into an
:class:`Outcome` (:mod:`.outcome`) and record probes, attempts and the route that served
(:mod:`.serving`); how discovery went (:mod:`.discovery`), the review's findings
(:mod:`.finding`), the cost (:mod:`.quota`) and what the action adds (:mod:`.action`) go into
the run's report (:mod:`.report`), which is scrubbed into a typed copy (:mod:`.scrub`) before
it is rendered.

Callers import from here. Each name is loaded from its module on first use, so that ``chat``
and ``preflight`` define only the records on their path before their first request (each
record class costs pydantic's model construction; the report's and the action's records come
after the reply; tests/e2e/test_startup_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_review._lazy import lazy_names

if TYPE_CHECKING:
    from relay_review.records.account import Account, KindName, Pricing, has_key
    from relay_review.records.action import (
        EarlierFinding,
        GithubReport,
        Inline,
        LifecycleReport,
        PolicyReport,
        PolicySource,
        PullRequestReport,
        Refused,
        ResolveFailed,
        ReviewPosted,
        RunContext,
    )
    from relay_review.records.discovery import DiscoveredAccount, DiscoveryError, DiscoveryReport
    from relay_review.records.finding import Finding
    from relay_review.records.outcome import Deadlines, Outcome, OutcomeKind, Phase, Usage
    from relay_review.records.quota import DayCount, KeyUsage, QuotaReport
    from relay_review.records.report import (
        ACTION_KEYS,
        ChatReport,
        ChunkReport,
        Decision,
        FileReport,
        MemoryReport,
        NotPosted,
        PreflightReport,
        ReviewStatus,
        RunReport,
        Stopped,
        Verdict,
    )
    from relay_review.records.route import (
        RESPONSE_FORMATS,
        Catalog,
        CatalogEntry,
        CatalogReport,
        CatalogSummary,
        Cost,
        Route,
        SelectedRoute,
    )
    from relay_review.records.scrub import Redactor, scrubbed
    from relay_review.records.serving import (
        ABANDONED_MARK,
        Attempt,
        ChatMessage,
        Probe,
        Readiness,
        ServedBy,
    )

#: public name -> the module that defines it
_HOME = {
    "ABANDONED_MARK": "relay_review.records.serving",
    "ACTION_KEYS": "relay_review.records.report",
    "Account": "relay_review.records.account",
    "Attempt": "relay_review.records.serving",
    "Catalog": "relay_review.records.route",
    "CatalogEntry": "relay_review.records.route",
    "CatalogReport": "relay_review.records.route",
    "CatalogSummary": "relay_review.records.route",
    "ChatMessage": "relay_review.records.serving",
    "ChatReport": "relay_review.records.report",
    "ChunkReport": "relay_review.records.report",
    "Cost": "relay_review.records.route",
    "DayCount": "relay_review.records.quota",
    "Deadlines": "relay_review.records.outcome",
    "Decision": "relay_review.records.report",
    "DiscoveredAccount": "relay_review.records.discovery",
    "DiscoveryError": "relay_review.records.discovery",
    "DiscoveryReport": "relay_review.records.discovery",
    "EarlierFinding": "relay_review.records.action",
    "FileReport": "relay_review.records.report",
    "Finding": "relay_review.records.finding",
    "GithubReport": "relay_review.records.action",
    "Inline": "relay_review.records.action",
    "KeyUsage": "relay_review.records.quota",
    "KindName": "relay_review.records.account",
    "LifecycleReport": "relay_review.records.action",
    "MemoryReport": "relay_review.records.report",
    "NotPosted": "relay_review.records.report",
    "Outcome": "relay_review.records.outcome",
    "OutcomeKind": "relay_review.records.outcome",
    "Phase": "relay_review.records.outcome",
    "PolicyReport": "relay_review.records.action",
    "PolicySource": "relay_review.records.action",
    "PreflightReport": "relay_review.records.report",
    "Pricing": "relay_review.records.account",
    "Probe": "relay_review.records.serving",
    "PullRequestReport": "relay_review.records.action",
    "QuotaReport": "relay_review.records.quota",
    "RESPONSE_FORMATS": "relay_review.records.route",
    "Readiness": "relay_review.records.serving",
    "Redactor": "relay_review.records.scrub",
    "Refused": "relay_review.records.action",
    "ResolveFailed": "relay_review.records.action",
    "ReviewPosted": "relay_review.records.action",
    "ReviewStatus": "relay_review.records.report",
    "Route": "relay_review.records.route",
    "RunContext": "relay_review.records.action",
    "RunReport": "relay_review.records.report",
    "SelectedRoute": "relay_review.records.route",
    "ServedBy": "relay_review.records.serving",
    "Stopped": "relay_review.records.report",
    "Usage": "relay_review.records.outcome",
    "Verdict": "relay_review.records.report",
    "has_key": "relay_review.records.account",
    "scrubbed": "relay_review.records.scrub",
}

__getattr__ = lazy_names(__name__, _HOME)

__all__ = [
    "ABANDONED_MARK",
    "ACTION_KEYS",
    "RESPONSE_FORMATS",
    "Account",
    "Attempt",
    "Catalog",
    "CatalogEntry",
    "CatalogReport",
    "CatalogSummary",
    "ChatMessage",
    "ChatReport",
    "ChunkReport",
    "Cost",
    "DayCount",
    "Deadlines",
    "Decision",
    "DiscoveredAccount",
    "DiscoveryError",
    "DiscoveryReport",
    "EarlierFinding",
    "FileReport",
    "Finding",
    "GithubReport",
    "Inline",
    "KeyUsage",
    "KindName",
    "LifecycleReport",
    "MemoryReport",
    "NotPosted",
    "Outcome",
    "OutcomeKind",
    "Phase",
    "PolicyReport",
    "PolicySource",
    "PreflightReport",
    "Pricing",
    "Probe",
    "PullRequestReport",
    "QuotaReport",
    "Readiness",
    "Redactor",
    "Refused",
    "ResolveFailed",
    "ReviewPosted",
    "ReviewStatus",
    "Route",
    "RunContext",
    "RunReport",
    "SelectedRoute",
    "ServedBy",
    "Stopped",
    "Usage",
    "Verdict",
    "has_key",
    "scrubbed",
]
