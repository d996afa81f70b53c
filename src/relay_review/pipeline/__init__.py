"""Wires the stages in order: the only package that knows the order of the pipeline.

One module per flow:

- :mod:`.routes`: ``preflight`` (probe the catalog) and ``chat`` (one request with failover),
  the CLI's ``preflight`` and ``chat`` commands;
- :mod:`.review`: ``catalog -> preflight (background) -> failover serving per chunk -> verdict
  -> report`` (the ``review`` command, the drill, and the action's review stage);
- :mod:`.action`: the GitHub Action, ``inputs -> event -> policy -> discovery -> catalog ->
  pull request files -> review -> publish -> step summary, outputs, report file``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from relay_review.pipeline.routes import chat, preflight, warm_up

# ``review`` (the review flow) is not imported here: ``chat`` and ``preflight`` must not load the
# review stages (prompt, verdict, diff parsing) before their first request; import it from
# :mod:`.review`.
__all__ = ["chat", "preflight", "run_sync", "warm_up"]


def run_sync(coro: Any) -> Any:
    """Run a pipeline coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro)
