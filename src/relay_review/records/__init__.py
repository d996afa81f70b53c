"""Records that cross stage boundaries: one typed shape per concept, from the policy's accounts
to the run's report.

Settings resolve accounts (:mod:`.account`); discovery turns them into routes and the catalog
selects and ranks them (:mod:`.route`); preflight and failover turn each chat call into an
:class:`Outcome` (:mod:`.outcome`) and record probes, attempts and the route that served
(:mod:`.serving`); the review's findings (:mod:`.finding`), the cost (:mod:`.quota`) and what
the action adds (:mod:`.action`) go into the run's report (:mod:`.report`), which is scrubbed
into a typed copy (:mod:`.scrub`) before it is rendered. Callers import from here.
"""

from __future__ import annotations

from relay_review.records.account import Account, KindName, Pricing, has_key
from relay_review.records.action import (
    DiscoveredAccount,
    DiscoveryError,
    DiscoveryReport,
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
