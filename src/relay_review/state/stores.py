"""The stores: where a :class:`~relay_review.state.memory.Memory` lives between runs.

Every store has the same two calls (:class:`Store`): ``load`` before routing and ``save`` after,
both made by the pipeline only. A store never fails a run: a missing record loads as empty, an
unusable one (corrupt, oversized, another version, not ours) as empty with one warning, and a
save that cannot be written is one warning too. A later backend (Redis) implements the same
protocol.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from relay_review._files import atomic_write
from relay_review.state.memory import MAX_BYTES, Memory, Unusable, decode, encode

log = logging.getLogger("relay_review.state")


class Store(Protocol):
    """Memory across runs: read once before routing, written once after."""

    #: What the report calls it: ``none``, ``file`` or ``comment``.
    kind: str

    def load(self) -> Memory:
        """The remembered record; empty when there is none or it is unusable (one warning)."""
        ...

    def save(self, memory: Memory) -> None:
        """Keep ``memory`` for the next run (a failure is one warning, never an error)."""
        ...


def warn_unusable(where: str, why: str) -> None:
    """The one warning for a store that is ignored."""
    log.warning("state %s ignored (%s); this run starts without memory", where, why)


class NullStore:
    """``none``: nothing remembered, nothing written."""

    kind = "none"

    def load(self) -> Memory:
        return Memory()

    def save(self, memory: Memory) -> None:
        return None


class FileStore:
    """``file:PATH`` or a plain path: one JSON file, replaced atomically under an exclusive
    ``flock`` on ``PATH.lock`` beside it, so concurrent local runs never lose a whole write."""

    kind = "file"

    def __init__(self, path: str | Path, limit: int = 1024 * 1024) -> None:
        self.path = Path(path)
        self.limit = limit

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def load(self) -> Memory:
        try:
            with self._locked():
                data = self.path.read_bytes()
        except FileNotFoundError:
            return Memory()
        except OSError as exc:
            warn_unusable(str(self.path), f"cannot read: {exc.strerror or exc}")
            return Memory()
        try:
            return decode(data, self.limit)
        except Unusable as exc:
            warn_unusable(str(self.path), str(exc))
            return Memory()

    def save(self, memory: Memory) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                atomic_write(self.path, encode(memory, self.limit), mode=0o600)
        except OSError as exc:
            log.warning("state %s not written (%s)", self.path, exc.strerror or exc)


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
    """The record in a comment body's payload line; None when there is none; raises
    :class:`Unusable` when it is there but cannot be used."""
    match = _PAYLOAD.search(body or "")
    if match is None:
        return None
    if len(match.group(2)) > limit:
        raise Unusable(f"payload of {len(match.group(2))} characters, more than {limit}")
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise Unusable("payload is not base64") from None
    return decode(data, limit)


class CommentStore:
    """``comment``: a hidden payload line in the sticky comment the action already owns.

    ``read_body`` returns the body of the comment found by marker **and** author (or None); the
    GitHub edge provides it, so a payload in anyone else's comment is never read. ``save`` keeps
    the line for the publisher to put into the comment it posts (:attr:`line`).
    """

    kind = "comment"

    def __init__(self, read_body: Callable[[], str | None]) -> None:
        self.read_body = read_body
        self.line: str | None = None

    def load(self) -> Memory:
        try:
            body = self.read_body()
        except Exception as exc:  # memory never fails a run
            warn_unusable("comment", f"cannot read the sticky comment: {type(exc).__name__}")
            return Memory()
        try:
            return payload_of(body) or Memory()
        except Unusable as exc:
            warn_unusable("comment", str(exc))
            return Memory()

    def save(self, memory: Memory) -> None:
        self.line = payload_line(memory)
