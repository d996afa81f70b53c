"""Drill scenarios: the fault fleet, a catalog over it, and preflight + failover run against it.

A scenario is a set of accounts whose model ids script faults (see
:mod:`relay_review.drill.script`). Running one measures time-to-reply against the healthy route's
own direct latency (one request straight to an identical healthy model on a reference account
outside the catalog), and counts the probes sent and the output tokens they asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from relay_review import _tls, pipeline
from relay_review.config import CatalogPolicy, Policy
from relay_review.drill.fleet import HOST, FaultFleet
from relay_review.errors import UsageError
from relay_review.pipeline.catalog import catalog_for
from relay_review.providers.chat.call import chat_call
from relay_review.records import ChatMessage, ChatReport, Cost, Route
from relay_review.routing.preflight import PROBE_MAX_TOKENS
from relay_review.state import Store

log = logging.getLogger("relay_review.drill")

REFERENCE = "reference"
DRILL_MESSAGE = "Say hello to the operator in one short sentence."


@dataclass(frozen=True)
class Scenario:
    """Accounts -> {model id: behaviour script}; ``healthy`` is the script of the route to find."""

    name: str
    description: str
    accounts: Mapping[str, Mapping[str, str]]
    healthy: str | None = "healthy@0.4"


_MIXED: dict[str, dict[str, str]] = {
    "nim_a": {
        "deepseek-ai/deepseek-v4-flash": "stall",
        "meta/llama-3.3-70b-instruct": "429@30",
        "qwen/qwen3-coder-480b-a35b-instruct": "stall",
        "z-ai/glm-4.6": "stall",
    },
    "nim_b": {
        "deepseek-ai/deepseek-v4-flash": "stall",
        "meta/llama-3.3-70b-instruct": "healthy@0.4",
        "moonshotai/kimi-k2-instruct": "404",
        "qwen/qwen3-coder-480b-a35b-instruct": "stall",
    },
    "router": {
        "deepseek/deepseek-v4-flash:free": "headers-stall",
        "meta-llama/llama-3.3-70b-instruct:free": "429@30",
        "openai/gpt-oss-120b:free": "stall",
        "qwen/qwen3-coder:free": "stall",
    },
}


def _swap(
    accounts: Mapping[str, Mapping[str, str]], a: tuple[str, str], b: tuple[str, str]
) -> dict[str, dict[str, str]]:
    """A copy of ``accounts`` with the behaviours of routes ``a`` and ``b`` exchanged."""
    out = {name: dict(models) for name, models in accounts.items()}
    out[a[0]][a[1]], out[b[0]][b[1]] = accounts[b[0]][b[1]], accounts[a[0]][a[1]]
    return out


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "mixed",
            "12 routes over 3 accounts: 8 stalled, 2 rate-limited, 1 not-found, 1 healthy "
            "(5th in catalog order, inside the probe budget)",
            _MIXED,
        ),
        Scenario(
            "mixed-deep",
            "the same mix, but the healthy route is 9th in catalog order, beyond the probe "
            "budget: hedged preflight finds it with the probes at the hedge; eager preflight "
            "reaches it only after the probes and one unprobed stall run out",
            _swap(
                _MIXED,
                ("nim_b", "meta/llama-3.3-70b-instruct"),
                ("router", "openai/gpt-oss-120b:free"),
            ),
        ),
        Scenario(
            "all-stalled",
            "12 routes over 3 accounts, every one silent (some after sending headers): "
            "the run must end at the deadline with every route's fate reported",
            {
                account: {
                    f"vendor/model-{i}": ("headers-stall" if i % 2 else "stall") for i in range(4)
                }
                for account in ("nim_a", "nim_b", "router")
            },
            healthy=None,
        ),
        Scenario(
            "rate-limited",
            "5 routes over 3 accounts: four answer 429 with Retry-After 2 s to their first "
            "request and serve afterwards; one asks for 900 s and is never tried",
            {
                "nim_a": {"vendor/alpha": "429@2>healthy@0.4", "vendor/beta": "429@900"},
                "nim_b": {"vendor/alpha": "429@2>healthy@0.4", "vendor/beta": "429@2>healthy@0.4"},
                "router": {"vendor/alpha:free": "429@2>healthy@0.4"},
            },
        ),
    ]
}


def drill_key_env(account: str) -> str:
    """The environment variable holding the drill key of ``account``."""
    return f"RELAY_DRILL_KEY_{account.upper()}"


def drill_key(account: str) -> str:
    """The (fake, key-shaped) key the fleet expects from ``account``."""
    return f"drill-key-{account}-0123456789"


#: The port the drill's fleet listens on (default: see :func:`drill_fleet`). Memory knows an
#: account by its base URL, so drills that should remember each other's routes run on one port.
PORT_ENV = "RELAY_DRILL_PORT"
#: Where a drill with memory and no ``RELAY_DRILL_PORT`` listens: one port of this range per
#: memory location (:func:`stable_port`). Below Linux's ephemeral ports (32768 up), so no
#: outgoing connection holds one for a moment; a port in use is left for a free one.
STABLE_PORTS = range(20000, 30000)


def env_port() -> int | None:
    """The port ``RELAY_DRILL_PORT`` names (0: any free one), None when it is unset or empty."""
    text = os.environ.get(PORT_ENV, "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise UsageError(f"{PORT_ENV}={text[:20]!r}: expected 0 (a free port) to 65535")
    return int(text)


def stable_port(location: str) -> int:
    """The fleet port of drills whose memory is at ``location`` (a store's location,
    :func:`~relay_review.pipeline.store.store_location`): the same for every drill that shares
    it, and one of 10,000 (:data:`STABLE_PORTS`) by a hash, so drills with other memories
    (parallel jobs, tests) rarely want the same one."""
    digest = hashlib.sha256(location.encode("utf-8", "surrogatepass")).digest()
    return STABLE_PORTS[int.from_bytes(digest[:8], "big") % len(STABLE_PORTS)]


def fleet_for(
    scenario: Scenario, *, reply: str | Callable[[dict], str] | None = None, port: int | None = None
) -> FaultFleet:
    """The scenario's fleet (plus a reference account serving the healthy script directly), on
    ``port``; None: the port ``RELAY_DRILL_PORT`` names, any free one when it is unset."""
    accounts: dict[str, Any] = {
        name: {"models": dict(models), "api_key": drill_key(name)}
        for name, models in scenario.accounts.items()
    }
    if scenario.healthy:
        accounts[REFERENCE] = {"models": {"reference/healthy": scenario.healthy}}
    if port is None:
        port = env_port() or 0
    return FaultFleet(
        accounts, reply=reply or "Hello, operator: the drill route is alive.", port=port
    )


@contextlib.asynccontextmanager
async def drill_fleet(
    scenario: Scenario,
    *,
    reply: str | Callable[[dict], str] | None = None,
    state: str | None = None,
) -> AsyncIterator[FaultFleet]:
    """The scenario's fleet, listening until the block ends. Its port: ``RELAY_DRILL_PORT``
    when set (:class:`UsageError` when it cannot listen there); else, when the drill keeps
    memory at ``state`` (its store's location), that memory's :func:`stable_port`, so the next
    drill with it meets the same base URLs and starts warm (a port in use: a free one, with one
    warning that this drill starts cold); else a free port."""
    given = env_port()
    port = given if given is not None else stable_port(state) if state else 0
    fleet = fleet_for(scenario, reply=reply, port=port)
    try:
        await fleet.start()
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        if given is not None:
            raise UsageError(
                f"{PORT_ENV}={given}: cannot listen on {HOST}:{given} ({why})"
            ) from None
        if not port:
            raise
        log.warning(
            "%s:%d, the drill's port for this memory, is taken (%s): the fleet listens on a "
            "free port, so its routes are new to the memory and this drill starts cold (%s "
            "picks a port)",
            HOST,
            port,
            why.lower(),
            PORT_ENV,
        )
        fleet = fleet_for(scenario, reply=reply, port=0)
        await fleet.start()
    try:
        yield fleet
    finally:
        await fleet.aclose()


def routes_for(scenario: Scenario, fleet: FaultFleet) -> list[Route]:
    """The routes a discovery over the fleet finds (every route declared free)."""
    pairs = [(account, model) for account, models in scenario.accounts.items() for model in models]
    return [
        Route(
            index=i,
            account=account,
            provider="openai_compatible",
            model=model,
            agent_id=f"{account}/{model}",
            base_url=fleet.base_url(account),
            api_key_env=drill_key_env(account),
            prompt_price_per_1k=0.0,
            completion_price_per_1k=0.0,
            cost=Cost.FREE,
        )
        for i, (account, model) in enumerate(pairs)
    ]


def discovery_for(scenario: Scenario, fleet: FaultFleet) -> dict[str, Any]:
    """:func:`routes_for` as a discovery report file holds them (for ``--discovery``)."""
    return {"routes": [route.report_json() for route in routes_for(scenario, fleet)]}


def drill_environ(scenario: Scenario) -> dict[str, str]:
    """The environment that holds every scenario account's key."""
    return {drill_key_env(a): drill_key(a) for a in scenario.accounts}


async def direct_latency(
    fleet: FaultFleet, policy: Policy, messages: list[ChatMessage]
) -> float | None:
    """Seconds for one request straight to the reference healthy route (no catalog, no probes)."""
    if REFERENCE not in fleet.accounts:
        return None
    async with httpx.AsyncClient(verify=_tls.context()) as client:
        start = time.monotonic()
        outcome = await chat_call(
            client,
            base_url=fleet.base_url(REFERENCE),
            api_key=None,
            model="reference/healthy",
            messages=messages,
            deadlines=policy.serving.deadlines(),
        )
    return round(time.monotonic() - start, 3) if outcome.ok else None


@dataclass(frozen=True)
class DrillResult:
    """One scenario's run: the ``chat`` flow's report, and what the drill measured around it."""

    chat: ChatReport
    scenario: str
    description: str
    #: The healthy route's own latency, straight to an identical model outside the catalog.
    direct_latency_s: float | None
    #: Time to reply over the direct latency (None: no reply or no direct figure).
    ratio: float | None
    #: Where the healthy route sits in the catalog (1 = first), None when it is not there.
    healthy_catalog_position: int | None
    probe_tokens_requested: int
    max_probe_tokens: int
    requests_per_route: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """The drill's JSON (``--format json``): the chat report's keys, then the drill's."""
        return {
            **self.chat.to_json(),
            "scenario": self.scenario,
            "description": self.description,
            "direct_latency_s": self.direct_latency_s,
            "ratio": self.ratio,
            "healthy_catalog_position": self.healthy_catalog_position,
            "probe_tokens_requested": self.probe_tokens_requested,
            "max_probe_tokens": self.max_probe_tokens,
            "requests_per_route": self.requests_per_route,
        }


async def run_scenario(
    scenario: Scenario,
    policy: Policy,
    fleet: FaultFleet,
    *,
    message: str = DRILL_MESSAGE,
    store: Store | None = None,
) -> DrillResult:
    """Run preflight + failover over the scenario's catalog on a started fleet; measure it."""
    messages: list[ChatMessage] = [{"role": "user", "content": message}]
    direct = await direct_latency(fleet, policy, messages)
    first_request = len(fleet.requests)
    # the policy's limit and cap; the pool and ZDR as the fleet's routes are (free, not ZDR)
    section = CatalogPolicy(limit=policy.catalog.limit, account_cap=policy.catalog.account_cap)
    catalog = catalog_for(routes_for(scenario, fleet), section)
    report = await pipeline.chat(catalog, policy, drill_environ(scenario), messages, store=store)
    chats = [r for r in fleet.requests[first_request:] if r.is_chat]
    # probes ask PROBE_MAX_TOKENS at most; serving requests ask review.max_output_tokens
    probe_tokens = [
        r.max_tokens for r in chats if r.max_tokens is not None and r.max_tokens <= PROBE_MAX_TOKENS
    ]
    scripts = [scenario.accounts[e.account][e.route.model] for e in catalog.selected]
    healthy_at = next(
        (i for i, s in enumerate(scripts, 1) if s.startswith("healthy") or ">healthy" in s), None
    )
    time_to_reply = report.time_to_reply_s
    return DrillResult(
        chat=report,
        scenario=scenario.name,
        description=scenario.description,
        direct_latency_s=direct,
        ratio=round(time_to_reply / direct, 2) if direct and time_to_reply is not None else None,
        healthy_catalog_position=healthy_at,
        probe_tokens_requested=sum(probe_tokens),
        max_probe_tokens=max(probe_tokens, default=0),
        requests_per_route=dict(Counter(f"{r.account}/{r.model}" for r in chats)),
    )


async def run_named(
    name: str, policy: Policy, store: Store | None = None, *, state: str | None = None
) -> DrillResult:
    """Start the named scenario's fleet, run the scenario under ``policy`` (with the memory in
    ``store``, whose location ``state`` picks the fleet's port: :func:`drill_fleet`), stop the
    fleet."""
    scenario = SCENARIOS[name]
    async with drill_fleet(scenario, state=state) as fleet:
        return await run_scenario(scenario, policy, fleet, store=store)
