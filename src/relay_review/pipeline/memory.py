"""The pipeline's side of memory across runs: read once before routing, written once after.

Only the pipeline calls these; routing sees a board with remembered routes laid on it, and the
review sees which chunks are already reviewed. Which store holds the memory is not their concern.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from relay_review.models import CatalogEntry, MemoryReport
from relay_review.routing.preflight import plan_probes
from relay_review.routing.session import RoutingSession
from relay_review.settings import MemoryPolicy, Policy
from relay_review.state import Limits, Memory, NullStore, Store
from relay_review.state.routes import Recalled, recall, remember


@dataclass
class RunMemory:
    """One run's memory: the store, what it held at the start, and what this run added."""

    store: Store = field(default_factory=NullStore)
    memory: Memory = field(default_factory=Memory)
    recalled: Recalled = field(default_factory=Recalled)
    clock: Callable[[], float] = time.time
    reused_chunks: int = 0

    @classmethod
    def load(
        cls,
        store: Store | None,
        clock: Callable[[], float] = time.time,
        policy: MemoryPolicy | None = None,
    ) -> RunMemory:
        """Read the store (never fails: an unusable one is empty, and entries impossible under
        ``policy``'s times are dropped, with one warning)."""
        store = store or NullStore()
        now = clock()
        return cls(store=store, memory=store.load(Limits.of(policy, now)).fresh(now), clock=clock)

    def recall_onto(self, session: RoutingSession) -> None:
        """Lay the remembered routes on the session's board before it starts."""
        self.recalled = recall(session.board, self.memory, self.clock())

    def report(
        self,
        entries: Sequence[CatalogEntry],
        probes_sent: int,
        environ: Mapping[str, str],
        policy: Policy,
    ) -> MemoryReport:
        """What memory did: routes settled, chunks reused, requests avoided (probes a run without
        memory would have sent beyond those sent, and one per reused chunk)."""
        blind, _ = plan_probes(entries, environ, policy.preflight.probe_budget)
        avoided = self.reused_chunks + max(0, len(blind) - probes_sent)
        if self.store.kind == "none":
            avoided = 0
        r = self.recalled
        return MemoryReport(
            store=self.store.kind,
            proven=r.proven,
            dead=r.dead,
            cooling=r.cooling,
            reused_chunks=self.reused_chunks,
            requests_avoided=avoided,
        )

    def save(self, session: RoutingSession | None, policy: Policy) -> None:
        """Fold this run's route outcomes into the memory and write it (never fails)."""
        if self.store.kind == "none":
            return
        if session is not None:
            self.memory = remember(self.memory, session.board, self.clock(), policy.memory)
        self.store.save(self.memory)
