"""The stores: where a :class:`~relay_review.state.memory.Memory` lives between runs.

Every store has the same two calls (:class:`Store`): ``load`` before routing and ``save`` after,
both made by the pipeline only. A store never fails a run: a missing record loads as empty, an
unusable one (corrupt, oversized, not UTF-8, nested too deep, another version, not ours) as
empty with one warning, an unusable entry in a usable record (a wrong type, a time that is not
finite, negative or impossible now) is dropped with one warning for all of them, and this run's
save overwrites what was dropped. A save that cannot be written is one warning too.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from relay_review._files import atomic_write, not_a_file
from relay_review.state.ledger import Ledger
from relay_review.state.memory import (
    MAX_BYTES,
    Limits,
    Loaded,
    Memory,
    Unusable,
    decode,
    encode,
    newer_routes,
    parse,
    read_record,
)

log = logging.getLogger("relay_review.state")


@dataclass(frozen=True)
class Wanted:
    """The entries one run needs, by name: a store that keeps one key per entry (Redis) reads
    exactly these (no scan of the keyspace, no other setup's entries); a store that keeps one
    record (file, comment) reads it whole and ignores this.

    ``routes`` and ``accounts`` are stored route keys and account identities (the run's catalog,
    :mod:`relay_review.pipeline.memory`), ``chunks`` review-cache keys, ``findings`` the scopes
    of a pull request's findings (``{owner}/{repo}#{number}:``; every finding stored under one),
    ``latest`` the files (:func:`latest_unit`) whose latest reviewed unit is wanted, whatever its
    content: what says a file changed since an earlier review (its key names the content).
    """

    routes: frozenset[str] = field(default_factory=frozenset)
    accounts: frozenset[str] = field(default_factory=frozenset)
    chunks: frozenset[str] = field(default_factory=frozenset)
    findings: frozenset[str] = field(default_factory=frozenset)
    latest: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(
        cls,
        routes: Iterable[str] = (),
        accounts: Iterable[str] = (),
        chunks: Iterable[str] = (),
        findings: Iterable[str] = (),
        latest: Iterable[str] = (),
    ) -> Wanted:
        return cls(
            frozenset(routes),
            frozenset(accounts),
            frozenset(chunks),
            frozenset(findings),
            frozenset(latest),
        )

    def __or__(self, other: Wanted) -> Wanted:
        return Wanted(
            self.routes | other.routes,
            self.accounts | other.accounts,
            self.chunks | other.chunks,
            self.findings | other.findings,
            self.latest | other.latest,
        )


def latest_unit(scope: str, path: str) -> str:
    """The name under which a store of one key per entry points to the latest file unit of
    ``path`` reviewed under ``scope`` (32 hex digits of SHA-256: paths are the author's text)."""
    return hashlib.sha256(f"{scope}\0{path}".encode()).hexdigest()[:32]


def findings_scope(repo: str, number: int) -> str:
    """The prefix of a pull request's findings in memory (``owner/repo#12:``)."""
    return f"{repo}#{number}:"


@dataclass(frozen=True)
class Borrowed:
    """Route memory taken from another pull request's sticky comment: where (``#12``), and the
    stored route keys and account identities whose memos came from it (newer than this pull
    request's own, or not in it)."""

    where: str
    routes: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()


class Store(Protocol):
    """Memory across runs: read once before routing, written once after; and what else a
    caller may need of it, the same for every store (None or False where it has none)."""

    @property
    def kind(self) -> str:
        """What the report calls it: ``none``, ``file``, ``comment`` or ``redis``."""
        ...

    @property
    def keeps(self) -> bool:
        """False for the store that keeps nothing (``none``): no record to fold or write."""
        ...

    @property
    def ledger(self) -> Ledger | None:
        """The quota ledger this store shares with every run that uses it (Redis); None: the
        run keeps its budgets in-process."""
        ...

    @property
    def line(self) -> str | None:
        """The payload line the last :meth:`save` left for the sticky comment (``comment``);
        None for a store that writes its record itself."""
        ...

    @property
    def borrowed(self) -> Borrowed | None:
        """What the last :meth:`load` took from another pull request (``comment``), if any."""
        ...

    @property
    def reviews_off(self) -> str:
        """Why this store keeps no review cache and findings' states while it keeps route
        memory (a shared Redis without a state key); empty when it keeps them."""
        ...

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        """The remembered record; empty when there is none or it is unusable, without the
        entries that are unusable (or impossible under ``limits``); one warning for either.
        A store of one key per entry reads only ``wanted`` (none: nothing)."""
        ...

    def save(self, memory: Memory) -> None:
        """Keep ``memory`` for the next run (a failure is one warning, never an error)."""
        ...


def warn_unusable(where: str, why: str) -> None:
    """The one warning for a store that is ignored."""
    log.warning("state %s ignored (%s); this run starts without memory", where, why)


def warn_entries(where: str, loaded: Loaded) -> Memory:
    """The one warning for the entries of a store that were dropped (if any); the rest."""
    if loaded.ignored:
        log.warning(
            "state %s: %d unusable %s ignored (%s); this run overwrites %s",
            where,
            loaded.ignored,
            "entry" if loaded.ignored == 1 else "entries",
            loaded.why,
            "it" if loaded.ignored == 1 else "them",
        )
    return loaded.memory


class NullStore:
    """``none``: nothing remembered, nothing written."""

    kind = "none"
    keeps = False
    ledger: Ledger | None = None
    line: str | None = None
    borrowed: Borrowed | None = None
    reviews_off = ""

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        return Memory.of()

    def save(self, memory: Memory) -> None:
        return None


class FileStore:
    """``file:PATH`` or a plain path: one JSON file, replaced atomically under an exclusive
    ``flock`` on ``PATH.lock`` beside it, so concurrent local runs never lose a whole write."""

    kind = "file"
    keeps = True
    ledger: Ledger | None = None
    line: str | None = None
    borrowed: Borrowed | None = None
    reviews_off = ""

    def __init__(self, path: str | Path, limit: int = 1024 * 1024) -> None:
        self.path = Path(path)
        self.limit = limit
        #: What the last load found at the path instead of memory (None: memory or nothing).
        self._kept: str | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        # a FIFO would block the read, and a device is no place for memory
        self._kept = not_a_file(self.path)
        if self._kept is None:
            try:
                with self._locked(), self.path.open("rb") as f:
                    data = f.read(self.limit + 1)  # never more than the bound into memory
            except FileNotFoundError:
                return Memory.of()
            except OSError as exc:
                warn_unusable(str(self.path), f"cannot read: {exc.strerror or exc}")
                return Memory.of()
            obj, self._kept = _memory_or_not(data, self.limit)
        if self._kept:  # named by mistake (a discovery report, anything else)
            warn_unusable(
                str(self.path),
                f"it {self._kept}, not relay-review memory; it is not written over: remove it "
                "or name another file",
            )
            return Memory.of()
        try:  # an empty file (obj None) is not valid JSON: said, then written over
            loaded = read_record(obj, limits) if obj is not None else decode(data, self.limit)
            return warn_entries(str(self.path), loaded)
        except Unusable as exc:
            warn_unusable(str(self.path), str(exc))
            return Memory.of()

    def save(self, memory: Memory) -> None:
        problem = not_a_file(self.path)  # no lock file beside a device either
        if problem:
            self._kept_back(problem)
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                kept = self._held()
                if kept:
                    self._kept_back(kept)
                    return
                atomic_write(self.path, encode(memory, self.limit), mode=0o600)
        except OSError as exc:
            log.warning("state %s not written (%s)", self.path, exc.strerror or exc)

    def _kept_back(self, what: str) -> None:
        """A save that must not replace what is at the path: one warning, unless the load said
        so already."""
        if what != self._kept:
            log.warning(
                "state %s not written: it %s, not relay-review memory; remove it or name "
                "another file",
                self.path,
                what,
            )

    def _held(self) -> str | None:
        """What the file at the path holds when it is not relay-review memory of any version,
        which a save must not replace (None: no file, an empty one, or a memory record)."""
        try:
            with self.path.open("rb") as f:
                return _memory_or_not(f.read(self.limit + 1), self.limit)[1]
        except FileNotFoundError:
            return None


def _memory_or_not(data: bytes, limit: int) -> tuple[Any, str | None]:
    """``data`` parsed once: ``(the JSON value, None)`` for a relay-review memory record of any
    version (an object with a whole-number ``version``), ``(None, None)`` for an empty file,
    else ``(None, what it holds instead)``."""
    if not data.strip():
        return None, None
    try:
        obj = parse(data, limit)
    except Unusable as exc:
        return None, f"holds data that is {exc}"
    if not isinstance(obj, dict) or type(obj.get("version")) is not int:
        return None, "holds JSON of another kind"
    return obj, None


#: The hidden line of the sticky comment that carries the payload.
PAYLOAD_LINE = "<!-- relay-review:state v{version} {data} -->"
_PAYLOAD = re.compile(r"^<!-- relay-review:state v(\d+) (\S*) -->$", re.M)


def payload_line(memory: Memory, limit: int = MAX_BYTES) -> str:
    """``memory`` as one hidden comment line: base64 of compact JSON, at most ``limit`` bytes
    once encoded (the oldest entries are dropped to fit)."""
    room = (limit * 3) // 4 - 64  # base64 grows 4/3; leave room for the line around it
    data = base64.b64encode(encode(memory, room)).decode()
    return PAYLOAD_LINE.format(version=memory.version, data=data)


def payload_of(body: str | None, limit: int = MAX_BYTES) -> Memory | None:
    """The usable entries of a comment body's payload line; None when there is none; raises
    :class:`Unusable` when it is there but cannot be used."""
    loaded = read_payload(body, limit)
    return None if loaded is None else loaded.memory


def read_payload(
    body: str | None, limit: int = MAX_BYTES, limits: Limits | None = None
) -> Loaded | None:
    """The record in a comment body's payload line (see :func:`~.memory.decode`); None when
    there is none; raises :class:`Unusable` when it is there but cannot be used."""
    match = _PAYLOAD.search(body) if isinstance(body, str) else None
    if match is None:
        return None
    if len(match.group(2)) > limit:
        raise Unusable(f"payload of {len(match.group(2))} characters, more than {limit}")
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise Unusable("payload is not base64") from None
    return decode(data, limit, limits)


class CommentStore:
    """``comment``: a hidden payload line in the sticky comment the action already owns.

    ``read_body`` returns the body of the comment found by marker **and** author (or None); the
    GitHub edge provides it, so a payload in anyone else's comment is never read. ``save`` keeps
    the line for the publisher to put into the comment it posts (:attr:`line`).

    ``read_others`` (optional) returns the sticky comments of the repository's *other* pull
    requests, found the same way (marker **and** author), newest updated first, as ``(where,
    body)``. Of the newest whose payload passes the same decoding (size, base64, version,
    schema, times possible under the limits) and holds memos of this run's routes or accounts
    (``wanted``), the **route memory** only is taken (never its review cache nor its findings)
    and merged into this pull request's own: per route, the newer memo wins (own on a tie). A
    listing that fails, and the unusable payloads, cost one warning each at most; the run goes
    on with its own memory. Read only when ``wanted`` names routes or accounts (or is None).
    """

    kind = "comment"
    keeps = True
    ledger: Ledger | None = None

    def __init__(
        self,
        read_body: Callable[[], str | None],
        read_others: Callable[[], Iterable[tuple[str, str | None]]] | None = None,
    ) -> None:
        self.read_body = read_body
        self.read_others = read_others
        self.line: str | None = None
        #: What the last load took from another pull request (None: nothing).
        self.borrowed: Borrowed | None = None
        self.reviews_off = ""

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        own = self._own(limits)
        if self.read_others is None or (
            wanted is not None and not (wanted.routes or wanted.accounts)
        ):
            return own
        found = self._other(limits, wanted)
        if found is None:
            return own
        where, other = found
        merged, routes, accounts = newer_routes(own, other)
        self.borrowed = Borrowed(where, frozenset(routes), frozenset(accounts))
        log.info(
            "state comment: route memory from %s (%d of this run's routes, %d accounts; "
            "%d newer than this pull request's own)",
            where,
            len(other.routes),
            len(other.accounts),
            len(routes) + len(accounts),
        )
        return merged

    def _own(self, limits: Limits | None) -> Memory:
        try:
            body = self.read_body()
        except Exception as exc:  # memory never fails a run
            warn_unusable("comment", f"cannot read the sticky comment: {type(exc).__name__}")
            return Memory.of()
        try:
            loaded = read_payload(body, limits=limits)
            return Memory.of() if loaded is None else warn_entries("comment", loaded)
        except Unusable as exc:
            warn_unusable("comment", str(exc))
            return Memory.of()

    def _other(self, limits: Limits | None, wanted: Wanted | None) -> tuple[str, Memory] | None:
        """``(where, its route memory for wanted)`` of the newest usable other pull request."""
        assert self.read_others is not None
        try:
            candidates = list(self.read_others())
        except Exception as exc:  # memory never fails a run
            status = getattr(exc, "status", None)
            log.warning(
                "state comment: other pull requests' route memory not read (%s%s); this run "
                "uses this pull request's own only",
                type(exc).__name__,
                f", HTTP {status}" if status else "",
            )
            return None
        ignored, why = 0, ""
        found: tuple[str, Memory] | None = None
        for where, body in candidates:
            try:
                loaded = read_payload(body, limits=limits)
            except Unusable as exc:
                ignored, why = ignored + 1, why or f"{where}: {exc}"
                continue
            if loaded is None:
                continue  # a sticky comment without memory (a run with state none)
            if loaded.ignored:
                ignored, why = ignored + 1, why or f"{where}: {loaded.why}"
            memory = loaded.memory
            routes = {
                k: v for k, v in memory.routes.items() if wanted is None or k in wanted.routes
            }
            accounts = {
                k: v for k, v in memory.accounts.items() if wanted is None or k in wanted.accounts
            }
            if routes or accounts:
                found = (where, Memory.of(routes=routes, accounts=accounts))
                break
        if ignored:
            log.warning(
                "state comment: %d other pull %s route memory ignored (%s)",
                ignored,
                "request's" if ignored == 1 else "requests'",
                why,
            )
        return found

    def save(self, memory: Memory) -> None:
        self.line = payload_line(memory)


class SplitStore:
    """A shared store that keeps no review memory (a Redis without a state key), next to the
    sticky comment: route and account memory and the ledger in the shared store, the review
    cache and the findings' states in the comment's payload (:class:`CommentStore`: read only
    from our own comment, so its author is its integrity). Nobody who can write to the shared
    store sets a verdict, and a pull request still reuses its own reviews."""

    keeps = True
    borrowed: Borrowed | None = None
    reviews_off = ""

    def __init__(self, shared: Store, comment: CommentStore) -> None:
        self.shared = shared
        self.comment = comment

    @property
    def kind(self) -> str:
        return self.shared.kind

    @property
    def ledger(self) -> Ledger | None:
        return self.shared.ledger

    @property
    def line(self) -> str | None:
        return self.comment.line

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        shared = self.shared.load(limits, wanted)
        own = self.comment.load(limits, wanted)
        return Memory.of(
            routes=shared.routes, accounts=shared.accounts, chunks=own.chunks, findings=own.findings
        )

    def save(self, memory: Memory) -> None:
        self.shared.save(memory.route_memory())
        self.comment.save(memory.review_memory())
