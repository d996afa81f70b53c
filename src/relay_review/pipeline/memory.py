"""The pipeline's side of memory across runs: read once before routing, written once after.

Only the pipeline calls these; routing sees a board with remembered routes laid on it, and the
review sees which chunks are already reviewed. Which store holds the memory is not their concern.

**Accounts are known by what they are, not by their name** (a policy's free choice): the store
keys an account by :func:`account_identity` (its kind, a hash of its base URL and an HMAC
fingerprint of its key) and a route by ``{identity}/{model}``, so one key shares its memory and
its quota ledger across repositories, and two servers both called ``local`` never do. Within a
run, :class:`RunMemory` lays the stored entries of this run's accounts on a view keyed by name
(what routing knows), and folds the view back under the identities when it saves. Before it
writes, every string of the record is scrubbed of the run's secrets (:mod:`relay_review.redact`).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relay_review.config import MemoryPolicy, Policy
from relay_review.kinds import KINDS, fill_base_url
from relay_review.pipeline.route_memory import (
    Origins,
    Recalled,
    horizon,
    recall,
    remember,
    routes_avoided,
)
from relay_review.records import CatalogEntry
from relay_review.redact import redact_data, usable_secrets
from relay_review.routing.board import RouteBoard
from relay_review.routing.session import RoutingSession
from relay_review.state import Limits, Memory, NullStore, Store, Wanted
from relay_review.state.seal import KEY_ENV as STATE_KEY_ENV

if TYPE_CHECKING:
    from relay_review.records import MemoryReport

#: The HMAC key of key fingerprints: a fixed, public domain tag. A fingerprint must be the same
#: in every repository that uses the key (so they share one budget) and must not reveal it; the
#: strength is the key's own entropy (values under 8 characters are placeholders, not secrets).
FINGERPRINT_KEY = b"relay-review/account-fingerprint/v1"


def account_identity(kind: str, base_url: str, api_key: str) -> str:
    """``{kind}:{url12}:{key16}``: the kind, the first 12 hex digits of SHA-256 of the base URL
    (lower-cased, without a trailing slash) and the first 16 of HMAC-SHA256 of the key (never
    the key, nor the URL, which may name a private host and is shown in a public comment)."""
    url = base_url.strip().rstrip("/").lower()
    where = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    key = api_key.strip().encode("utf-8", "surrogatepass")
    fingerprint = hmac.new(FINGERPRINT_KEY, key, hashlib.sha256).hexdigest()[:16]
    return f"{kind[:40]}:{where}:{fingerprint}"


def account_identities(
    entries: Iterable[CatalogEntry], environ: Mapping[str, str]
) -> dict[str, str]:
    """Each account name of ``entries`` -> its :func:`account_identity` (key from ``environ``)."""
    found: dict[str, str] = {}
    for e in entries:
        r = e.route
        if r.account in found:
            continue
        spec = KINDS.get(r.provider)
        base = fill_base_url(r.base_url or "", spec.url_env if spec else None, environ)
        found[r.account] = account_identity(r.provider, base, environ.get(r.api_key_env, ""))
    return found


def route_keys(entries: Iterable[CatalogEntry], identities: Mapping[str, str]) -> dict[str, str]:
    """Each route's agent id -> its stored key ``{account identity}/{model}``."""
    return {
        e.agent_id: f"{identities[e.account]}/{e.route.model}"
        for e in entries
        if e.account in identities
    }


def limits(policy: MemoryPolicy | None, now: float) -> Limits:
    """What a stored entry's times may be under ``policy``'s ``[memory]`` times (the default
    policy when None) when read at ``now`` (:class:`~relay_review.state.memory.Limits`)."""
    policy = policy or MemoryPolicy()
    return Limits(now=now, horizon=horizon(policy), findings=policy.findings)


def run_secrets(entries: Iterable[CatalogEntry], environ: Mapping[str, str]) -> list[str]:
    """The keys of the catalog's accounts and the state key (what every store record is
    scrubbed of, at least: a model may quote a key the diff holds)."""
    return [
        environ.get(STATE_KEY_ENV, ""),
        *(environ.get(e.route.api_key_env, "") for e in entries),
    ]


@dataclass
class RunMemory:
    """One run's memory: the store, what it held at the start, and what this run added.

    ``memory`` is the view keyed by this run's names (routes by agent id, accounts by name);
    ``stored`` the record as the store keeps it (by identity), the other accounts' included.
    """

    store: Store = field(default_factory=NullStore)
    memory: Memory = field(default_factory=Memory.of)
    recalled: Recalled = field(default_factory=Recalled)
    clock: Callable[[], float] = time.time
    reused_chunks: int = 0
    reused_files: int = 0
    #: Chunks a run without memory would have sent beyond those sent (files reused).
    chunks_avoided: int = 0
    #: Why reviewable files were not reused (see :class:`relay_review.records.MemoryReport`).
    not_reused: str = ""
    stored: Memory = field(default_factory=Memory.of)
    #: account name -> identity, agent id -> stored route key (this run's catalog)
    identities: dict[str, str] = field(default_factory=dict)
    routes: dict[str, str] = field(default_factory=dict)
    #: values every record is scrubbed of before it is written
    secrets: list[str] = field(default_factory=list)
    #: the view's memos another pull request left (``state: comment``), and where from
    origins: Origins = field(default_factory=Origins)

    @classmethod
    def load(
        cls,
        store: Store | None,
        clock: Callable[[], float] = time.time,
        *,
        entries: Sequence[CatalogEntry] = (),
        environ: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
        policy: MemoryPolicy | None = None,
        chunks: Iterable[str] = (),
        latest: Iterable[str] = (),
    ) -> RunMemory:
        """Read the store (never fails: an unusable one is empty, and entries impossible under
        ``policy``'s times are dropped, with one warning) and lay the entries of ``entries``'
        accounts on the view by name. A store of one key per entry reads only what this run
        needs: ``entries``' routes and accounts, the review-cache keys ``chunks`` and the latest
        units of the files ``latest`` (:func:`~relay_review.state.latest_unit`)."""
        store = store or NullStore()
        environ = environ or {}
        now = clock()
        identities = account_identities(entries, environ)
        routes = route_keys(entries, identities)
        wanted = Wanted.of(routes.values(), identities.values(), chunks, latest=latest)
        stored = store.load(limits(policy, now), wanted).fresh(now)
        view = Memory.of(
            routes={a: stored.routes[k] for a, k in routes.items() if k in stored.routes},
            accounts={n: stored.accounts[i] for n, i in identities.items() if i in stored.accounts},
            chunks=dict(stored.chunks),
        )
        keys = usable_secrets([*run_secrets(entries, environ), *secrets])
        borrowed = store.borrowed  # the comment store's other pull request
        origins = Origins()
        if borrowed is not None:
            origins = Origins(
                routes={a: borrowed.where for a, k in routes.items() if k in borrowed.routes},
                accounts={
                    n: borrowed.where for n, i in identities.items() if i in borrowed.accounts
                },
            )
        return cls(
            store=store,
            memory=view,
            clock=clock,
            stored=stored,
            identities=identities,
            routes=routes,
            secrets=keys,
            origins=origins,
        )

    def load_chunks(self, keys: Iterable[str], policy: MemoryPolicy | None = None) -> None:
        """Add the review-cache entries ``keys`` that the first read did not hold (a store of
        one key per entry reads by name; a store of one record held them all already)."""
        missing = {k for k in keys if k not in self.memory.chunks}
        if not missing:
            return
        now = self.clock()
        more = self.store.load(limits(policy, now), Wanted.of(chunks=missing)).fresh(now)
        got = {k: v for k, v in more.chunks.items() if k in missing}
        if got:
            self.memory = self.memory.model_copy(update={"chunks": {**self.memory.chunks, **got}})
            self.stored = self.stored.model_copy(update={"chunks": {**self.stored.chunks, **got}})

    def route_of(self, agent_id: str) -> str | None:
        """The stored key of this run's route ``agent_id`` (None: not in this run's catalog)."""
        return self.routes.get(agent_id)

    def agent_of(self, route_key: str) -> str | None:
        """This run's agent id for a stored route key (None: the catalog does not select it)."""
        for agent, key in self.routes.items():
            if key == route_key:
                return agent
        return None

    def recall_onto(self, session: RoutingSession) -> None:
        """Lay the remembered routes on the session's board before it starts."""
        self.recalled = recall(session.board, self.memory, self.clock(), self.origins)

    def recall_only(self, entries: Sequence[CatalogEntry]) -> RouteBoard:
        """A board of ``entries`` with the remembered routes laid on it, for a run that sends
        no request (every file reused): its rows say what memory holds, and the counts too."""
        board = RouteBoard(entries)
        self.recalled = recall(board, self.memory, self.clock(), self.origins)
        return board

    def report(
        self,
        board: RouteBoard,
        environ: Mapping[str, str],
        policy: Policy,
        served: Sequence[str] | None,
        *,
        eager: bool | None = None,
    ) -> MemoryReport:
        """What memory did: routes settled, files reused, requests avoided (the chunks a run
        without memory would have sent beyond those sent, and its requests to routes: see
        :func:`~relay_review.pipeline.route_memory.routes_avoided`; ``eager`` defaults to the
        policy's preflight mode)."""
        pre = policy.preflight
        routes = routes_avoided(
            board,
            self.recalled,
            environ,
            served,
            probe_budget=pre.probe_budget,
            eager=pre.mode == "eager" if eager is None else eager,
        )
        avoided = self.chunks_avoided + routes if self.store.keeps else 0
        from relay_review.records import MemoryReport  # after the reply: the report's records

        r = self.recalled
        return MemoryReport(
            store=self.store.kind,
            proven=r.proven,
            dead=r.dead,
            cooling=r.cooling,
            reused_chunks=self.reused_chunks,
            reused_files=self.reused_files,
            requests_avoided=avoided,
            not_reused=self.not_reused,
        )

    def to_store(self) -> Memory:
        """The view folded back under identities, with the other accounts' entries kept."""
        mine_routes = set(self.routes.values())
        mine_accounts = set(self.identities.values())
        routes = {k: v for k, v in self.stored.routes.items() if k not in mine_routes}
        routes.update(
            {self.routes[a]: v for a, v in self.memory.routes.items() if a in self.routes}
        )
        accounts = {k: v for k, v in self.stored.accounts.items() if k not in mine_accounts}
        accounts.update(
            {self.identities[n]: v for n, v in self.memory.accounts.items() if n in self.identities}
        )
        return Memory.of(routes=routes, accounts=accounts, chunks=dict(self.memory.chunks))

    def save(self, session: RoutingSession | None, policy: Policy) -> None:
        """Fold this run's route outcomes into the memory, scrub it of the run's secrets and
        write it (never fails)."""
        if not self.store.keeps:
            return
        if session is not None:
            self.memory = remember(self.memory, session.board, self.clock(), policy.memory)
        self.store.save(scrub(self.to_store(), self.secrets))


def scrub(memory: Memory, secrets: Sequence[str]) -> Memory:
    """``memory`` with every string (keys included) cleared of ``secrets`` (as the comment is)."""
    if not secrets:
        return memory
    return Memory.model_validate(redact_data(memory.model_dump(mode="json"), secrets))
