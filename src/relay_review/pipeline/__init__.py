"""Wires the stages in order: the only package that knows the order of the pipeline.

One module per flow:

- :mod:`.catalog`: discovery report -> catalog, for every caller;
- :mod:`.routes`: ``preflight`` (probe the catalog) and ``chat`` (one request with failover),
  the CLI's ``preflight`` and ``chat`` commands;
- :mod:`.review`: ``catalog -> preflight (background) -> failover serving per chunk -> verdict
  -> report`` (the ``review`` command, the drill, and the action's review stage), with
  :mod:`.serve` (serving the chunks: response forms, reply acceptance, re-planning);
- :mod:`.action`: the GitHub Action, ``inputs -> event -> policy -> discovery -> catalog ->
  pull request files -> review -> publish -> step summary, outputs, report file``; publishing
  in :mod:`.publish`, with :mod:`.lifecycle` (findings across pushes) and :mod:`.outputs`.

And memory across runs, read before routing and written after, for every flow:
:mod:`.memory` (the run's view of the store), :mod:`.route_memory` (what a route's outcome
leaves for the next run, and how it settles routes before routing), :mod:`.review_cache`
(what a reviewed file leaves: keys and memos) and :mod:`.reuse` (which files a run reuses, and
what its chunks leave for the next). The store itself is :mod:`relay_review.state`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relay_review.pipeline.routes import chat, preflight

# ``review`` (the review flow) is not imported here: ``chat`` and ``preflight`` must not load the
# review stages (prompt, verdict, diff parsing) before their first request; import it from
# :mod:`.review`.
__all__ = ["chat", "preflight", "run_sync"]


def run_sync(coro: Any) -> Any:
    """Run a pipeline coroutine from synchronous code (the CLI)."""
    import asyncio  # not for the catalog command, which runs no coroutine

    return asyncio.run(coro)


def __getattr__(name: str) -> Any:
    """``chat`` and ``preflight`` from :mod:`.routes`, imported on first use: the
    ``catalog`` command reaches :mod:`.catalog` through this package without loading them."""
    if name in ("chat", "preflight"):
        from relay_review.pipeline import routes

        return getattr(routes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
