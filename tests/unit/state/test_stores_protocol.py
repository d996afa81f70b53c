"""What every store gives its callers through the ``Store`` protocol (issue 21): whether it keeps
anything, its shared quota ledger, the payload line for the sticky comment and the route memory
it borrowed; the action's ``KeptStore`` passes each of them on (no ``__getattr__``, no
``isinstance``: a forgotten one would silently drop the shared ledger or the payload line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_review.config import Policy
from relay_review.pipeline.action import KeptStore
from relay_review.pipeline.memory import RunMemory
from relay_review.pipeline.routes import account_budgets
from relay_review.state import CommentStore, FileStore, Memory, NullStore, Store
from relay_review.state.ledger import MemoryLedger, RedisLedger
from relay_review.state.memory import RouteMemo
from relay_review.state.redis_store import RedisStore
from relay_review.state.stores import payload_line, payload_of

NOW = 1_800_000_000.0
PROVEN = RouteMemo(state="proven", outcome="ok", at=NOW - 60, until=NOW + 3600)


def stores(tmp_path: Path) -> dict[str, Store]:
    # a Redis store connects at its first call only: none is made here
    return {
        "none": NullStore(),
        "file": FileStore(tmp_path / "state.json"),
        "comment": CommentStore(lambda: None),
        "redis": RedisStore("redis://127.0.0.1:9/0", timeout=0.1),
    }


def test_every_store_answers_the_protocol(tmp_path: Path) -> None:
    found = {
        name: (s.kind, s.keeps, type(s.ledger).__name__, s.line, s.borrowed)
        for name, s in stores(tmp_path).items()
    }
    assert found == {
        "none": ("none", False, "NoneType", None, None),
        "file": ("file", True, "NoneType", None, None),
        "comment": ("comment", True, "NoneType", None, None),
        "redis": ("redis", True, "RedisLedger", None, None),
    }


@pytest.mark.parametrize("name", ["none", "file", "comment", "redis"])
def test_kept_store_passes_every_answer_on(tmp_path: Path, name: str) -> None:
    inner = stores(tmp_path)[name]
    kept = KeptStore(inner)
    assert (kept.kind, kept.keeps, kept.ledger, kept.line, kept.borrowed) == (
        inner.kind,
        inner.keeps,
        inner.ledger,
        inner.line,
        inner.borrowed,
    )


def test_the_shared_ledger_reaches_the_budgets_through_the_kept_store() -> None:
    inner = RedisStore("redis://127.0.0.1:9/0", timeout=0.1)
    budgets = account_budgets(Policy(), KeptStore(inner))
    assert isinstance(inner.ledger, RedisLedger) and budgets.ledger is inner.ledger
    assert isinstance(account_budgets(Policy(), KeptStore(NullStore())).ledger, MemoryLedger)


def test_the_comment_line_and_borrowed_memory_through_the_kept_store() -> None:
    other = payload_line(Memory(routes={"k/m": PROVEN}))
    inner = CommentStore(lambda: None, lambda: [("#12", f"<!-- sticky -->\n{other}\n")])
    kept = KeptStore(inner)
    memory = kept.load()
    assert kept.borrowed is not None and kept.borrowed.where == "#12"
    assert set(memory.routes) == {"k/m"}
    assert kept.save_line(memory) == inner.line
    decoded = payload_of(kept.line)
    assert decoded is not None and set(decoded.routes) == {"k/m"}


def test_a_store_that_keeps_nothing_is_never_written(tmp_path: Path) -> None:
    saved: list[Memory] = []

    class Spy(NullStore):
        def save(self, memory: Memory) -> None:
            saved.append(memory)

    kept = KeptStore(Spy())
    assert kept.save_line(Memory(routes={"k/m": PROVEN})) is None
    run = RunMemory.load(kept, clock=lambda: NOW)
    run.save(None, Policy())
    assert saved == []
    # one that keeps is written by both
    store = FileStore(tmp_path / "state.json")
    KeptStore(store).save_line(Memory(routes={"k/m": PROVEN}))
    assert (tmp_path / "state.json").exists()
