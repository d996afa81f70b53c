"""Wires the stages in order. The only module that knows the order of the pipeline.

``catalog -> preflight (background) -> failover serving -> (review engine) -> report``
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from relay_review.models import Catalog
from relay_review.routing.preflight import ChatFn
from relay_review.routing.session import RoutingSession
from relay_review.settings import Policy


def _session(
    catalog: Catalog, policy: Policy, environ: Mapping[str, str], chat: ChatFn | None
) -> RoutingSession:
    return RoutingSession(
        catalog.selected,
        preflight=policy.preflight,
        serving=policy.serving,
        environ=environ,
        chat=chat,
        started_at=time.monotonic(),
    )


async def preflight(
    catalog: Catalog, policy: Policy, environ: Mapping[str, str], chat: ChatFn | None = None
) -> dict[str, Any]:
    """Probe the catalog and classify every route (the ``preflight`` command's report)."""
    async with _session(catalog, policy, environ, chat) as session:
        await session.wait_preflight()
    return {
        "catalog": catalog.to_json(),
        "readiness": session.readiness(),
        "probes_sent": session.probes_sent,
        "elapsed_s": session.elapsed(),
    }


async def chat(
    catalog: Catalog,
    policy: Policy,
    environ: Mapping[str, str],
    messages: list[dict],
    chat_fn: ChatFn | None = None,
) -> dict[str, Any]:
    """Serve one chat request with preflight and failover (the ``chat`` command's report)."""
    async with _session(catalog, policy, environ, chat_fn) as session:
        result = await session.serve(messages)
    return {
        "reply": result.reply,
        "served_by": result.served_by.model_dump() if result.served_by else None,
        "stopped": result.stopped,
        "attempts": [a.model_dump() for a in result.attempts],
        "readiness": session.readiness(),
        "catalog": catalog.to_json(),
        "probes_sent": session.probes_sent,
        "elapsed_s": session.elapsed(),
    }


def run_sync(coro: Any) -> Any:
    """Run a pipeline coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro)
