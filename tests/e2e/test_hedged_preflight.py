"""Hedged preflight (issue 25) through the CLI on the fault fleet, at the default policy: the
fleet's call log is the evidence of what each run cost. Ratios are bench/hedge.py's; here only
request counts and generous bounds."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from cli_harness import run_cli
from relay_review.config import MemoryPolicy, PreflightPolicy, parse_policy
from relay_review.config.schema import MAX_LIFETIME_S
from relay_review.drill.fleet import FaultFleet
from relay_review.drill.scenarios import (
    _MIXED,
    PORT_ENV,
    Scenario,
    discovery_for,
    drill_environ,
    fleet_for,
)
from relay_review.errors import UsageError
from relay_review.routing.board import HEDGE_FACTOR

pytestmark = pytest.mark.integration

HEALTHY = "healthy@0.1"
FIRST = ("nim_a", "deepseek-ai/deepseek-v4-flash")  # first in catalog order
LAST = ("router", "qwen/qwen3-coder:free")  # last in catalog order
DRILL_HEALTHY = ("nim_b", "meta/llama-3.3-70b-instruct")
PROBE_TOKENS = 16
CHAT = ["chat", "--discovery"]


def mix(healthy_at: tuple[str, str]) -> Scenario:
    """The drill's 12-route mix (8 stalls, 2 x 429, 1 x 404) with the healthy route moved."""
    accounts = {name: dict(models) for name, models in _MIXED.items()}
    accounts[DRILL_HEALTHY[0]][DRILL_HEALTHY[1]] = _MIXED[healthy_at[0]][healthy_at[1]]
    accounts[healthy_at[0]][healthy_at[1]] = HEALTHY
    return Scenario("mix", "test mix", accounts, HEALTHY)


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def chat(
    fleet: FaultFleet, scenario: Scenario, tmp: Path, *extra: str, policy: str = ""
) -> tuple[dict[str, Any], list[Any]]:
    """``relay-review chat`` over the fleet: (its JSON report, the chat requests it sent).
    Through ``cli.main`` in this process (tests/support/cli_harness.py; the chat command as a
    process: tests/e2e/test_routing_fleet.py)."""
    discovery = tmp / "discovery.json"
    discovery.write_text(json.dumps(discovery_for(scenario, fleet)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
    env.update(drill_environ(scenario))
    args = ["--policy", str(tmp / "policy.toml")] if policy else []
    if policy:
        (tmp / "policy.toml").write_text(policy)
    start = len(fleet.requests)
    proc = run_cli(
        *CHAT, str(discovery), "--message", "hi", "--format", "json", *args, *extra,
        env=env, cwd=tmp,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout), [r for r in fleet.requests[start:] if r.is_chat]


def route(r: Any) -> str:
    return f"{r.account}/{r.model}"


def test_healthy_first_costs_exactly_one_request(tmp_path: Path) -> None:
    scenario = mix(FIRST)
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    assert report["served_by"]["agent_id"] == "/".join(FIRST)
    assert len(sent) == 1 and sent[0].max_tokens != PROBE_TOKENS  # the real request, no probe
    assert report["probes_sent"] == 0
    rows = {r["agent_id"]: r for r in report["readiness"]}
    assert rows["/".join(FIRST)]["detail"] == "served without a probe"
    others = [r for a, r in rows.items() if a != "/".join(FIRST)]
    assert all(r["status"] == "unprobed" and r["detail"].startswith("not needed") for r in others)


def test_healthy_last_costs_one_request_per_route_plus_one(tmp_path: Path) -> None:
    scenario = mix(LAST)
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    healthy = "/".join(LAST)
    assert report["served_by"]["agent_id"] == healthy
    per_route: dict[str, int] = {}
    for r in sent:
        per_route[route(r)] = per_route.get(route(r), 0) + 1
    assert len(sent) <= len(report["readiness"]) + 1 and max(per_route.values()) <= 2
    ready = {r["agent_id"] for r in report["readiness"] if r["status"] == "ready"}
    full = [route(r) for r in sent if r.max_tokens != PROBE_TOKENS]
    # one full-size request to a route no probe found ready (the first, stalled), one served
    assert len([a for a in full if a not in ready]) <= 1 and full.count(healthy) == 1
    first = "/".join(FIRST)
    attempts = {a["agent_id"]: a for a in report["attempts"]}
    assert attempts[first]["outcome"] == "cancelled" and healthy in attempts[first]["detail"]
    rows = {r["agent_id"]: r for r in report["readiness"]}
    assert "cancelled" in rows[first]["detail"] and rows[healthy]["status"] == "ready"
    # no stall was waited out: the first-byte bound is 20 s, the probe bound 10 s
    assert report["time_to_reply_s"] < 8.0


def test_all_stalled_is_bounded_by_the_deadline(tmp_path: Path) -> None:
    scenario = Scenario(
        "stalled",
        "every route silent",
        {a: {f"vendor/model-{i}": "stall" for i in range(4)} for a in ("nim_a", "nim_b", "router")},
        healthy=None,
    )
    # 2 s (was 4): either cuts the first request's 20 s first-byte bound and every probe's 10 s
    deadline = 2.0
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path, "--deadline", str(deadline))
    assert report["served_by"] is None and report["elapsed_s"] <= deadline + 0.5
    assert len(sent) <= 12 and len([r for r in sent if r.max_tokens != PROBE_TOKENS]) == 1
    assert all(r["status"] != "unprobed" or r["detail"] for r in report["readiness"])


@pytest.mark.parametrize("lifetimes", ["default", "longest"])
def test_warm_run_serves_the_remembered_route_with_one_request(
    tmp_path: Path, lifetimes: str
) -> None:
    # "longest": every [memory] lifetime at its bound; a longer one (1e12 s) stored times that
    # memory refuses to load back, and the warm run forgot its route without a word
    policy = ""
    if lifetimes == "longest":
        policy = "[memory]\n" + "".join(
            f"{k} = {MAX_LIFETIME_S}\n" for k in MemoryPolicy.model_fields
        )
    scenario = mix(LAST)
    os.environ[PORT_ENV] = free_port()  # memory knows an account by its base URL
    try:
        with fleet_for(scenario) as fleet:
            state = ["--state", str(tmp_path / "state.json")]
            chat(fleet, scenario, tmp_path, *state, policy=policy)
            report, sent = chat(fleet, scenario, tmp_path, *state, policy=policy)
    finally:
        del os.environ[PORT_ENV]
    assert report["served_by"]["agent_id"] == "/".join(LAST)
    assert [route(r) for r in sent] == ["/".join(LAST)] and report["probes_sent"] == 0


def test_eager_mode_probes_before_serving(tmp_path: Path) -> None:
    scenario = mix(FIRST)
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path, policy='[preflight]\nmode = "eager"\n')
    assert report["probes_sent"] == 6  # the default probe budget, probed at once
    assert len([r for r in sent if r.max_tokens == PROBE_TOKENS]) == 6


def test_preflight_mode_and_hedge_delay_are_validated() -> None:
    defaults = PreflightPolicy()
    assert (defaults.mode, defaults.hedge_delay_max, defaults.hedge_answer_max) == (
        "hedged",
        0.5,
        5.0,
    )
    policy = parse_policy('[preflight]\nmode = "eager"\nhedge_delay_max = 2\n')
    assert (policy.preflight.mode, policy.preflight.hedge_delay_max) == ("eager", 2.0)
    with pytest.raises(UsageError, match=r"preflight\.mode"):
        parse_policy('[preflight]\nmode = "lazy"\n')
    with pytest.raises(UsageError, match=r"preflight\.hedge_delay_max"):
        parse_policy("[preflight]\nhedge_delay_max = 0\n")
    assert parse_policy("[preflight]\nhedge_answer_max = 2\n").preflight.hedge_answer_max == 2.0
    with pytest.raises(UsageError, match=r"preflight\.hedge_answer_max"):
        parse_policy("[preflight]\nhedge_answer_max = 0\n")


def test_a_route_remembered_at_50_ms_is_hedged_after_the_factor_times_that_not_the_bound(
    tmp_path: Path,
) -> None:
    # the best route serves the first run with its first byte after 50 ms, then stalls
    scenario = mix(LAST)
    accounts = {name: dict(models) for name, models in scenario.accounts.items()}
    accounts[FIRST[0]][FIRST[1]] = "healthy@0.05>stall"
    scenario = Scenario("remembered", "best route fast, then stalled", accounts, HEALTHY)
    policy = "[preflight]\nhedge_delay_max = 3\n"  # the bound: far from the factor x 50 ms
    os.environ[PORT_ENV] = free_port()  # memory knows an account by its base URL
    try:
        with fleet_for(scenario) as fleet:
            state = ["--state", str(tmp_path / "state.json")]
            first, _ = chat(fleet, scenario, tmp_path, *state, policy=policy)
            routes = json.loads((tmp_path / "state.json").read_text())["routes"]
            report, sent = chat(fleet, scenario, tmp_path, *state, policy=policy)
    finally:
        del os.environ[PORT_ENV]
    assert first["served_by"]["agent_id"] == "/".join(FIRST)
    (memo,) = [m for k, m in routes.items() if k.endswith("/" + FIRST[1])]
    assert (
        memo["state"] == "proven" and 0.05 <= memo["first_byte_s"] < 0.8
    )  # 50 ms plus a loaded machine
    assert report["served_by"]["agent_id"] != "/".join(FIRST)  # it stalled: taken over
    lead = sent[0]
    assert route(lead) == "/".join(FIRST) and lead.max_tokens != PROBE_TOKENS
    probes = [r for r in sent if r.max_tokens == PROBE_TOKENS]
    assert probes, "the stalled lead was never hedged"
    gap = min(r.at for r in probes) - lead.at
    # the factor x the remembered first byte (at least the floor), under the 3 s bound (which
    # would give >= 3 s)
    assert 0.1 <= gap < min(HEDGE_FACTOR * memo["first_byte_s"] + 1.0, 2.9), gap


def _lead(behaviour: str) -> Scenario:
    """The healthy-last mix with the best-ranked route doing ``behaviour``."""
    scenario = mix(LAST)
    accounts = {name: dict(models) for name, models in scenario.accounts.items()}
    accounts[FIRST[0]][FIRST[1]] = behaviour
    return Scenario("lead", f"best route: {behaviour}", accounts, HEALTHY)


def test_a_lead_that_only_sends_keepalives_is_hedged_after_the_answer_bound(
    tmp_path: Path,
) -> None:
    """LiteLLM's ``: ping`` (OpenRouter's ``: OPENROUTER PROCESSING`` alike) is sent while the
    model has not started: the route took the request, but no answer comes. The lead that sends
    only those is waited on up to ``hedge_answer_max`` (5 s), not the 60 s first-token bound
    (time to reply 63.9 s before hedging), then hedged, and a ready route takes over."""
    scenario = _lead("pings@0,gap=0.1")
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    healthy, first = "/".join(LAST), "/".join(FIRST)
    assert report["served_by"]["agent_id"] == healthy
    lead = sent[0]
    assert route(lead) == first and lead.max_tokens != PROBE_TOKENS
    probes = [r for r in sent if r.max_tokens == PROBE_TOKENS]
    assert probes, "the pinging lead was never hedged"
    gap = min(r.at for r in probes) - lead.at
    assert 4.9 <= gap < 7.5, gap  # hedge_answer_max (5 s), on a loaded machine
    attempts = {a["agent_id"]: a for a in report["attempts"]}
    assert attempts[first]["outcome"] == "cancelled"
    assert attempts[first]["detail"].startswith("no answer after ")
    assert report["time_to_reply_s"] < 10.0


def test_a_lead_whose_headers_came_without_a_byte_is_hedged_at_the_hedge_delay(
    tmp_path: Path,
) -> None:
    """200 headers, then nothing: no stream flows, so the lead is hedged at hedge_delay_max
    (0.5 s), not at hedge_answer_max."""
    scenario = _lead("headers-stall")
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    assert report["served_by"]["agent_id"] == "/".join(LAST)
    lead = sent[0]
    assert route(lead) == "/".join(FIRST) and lead.max_tokens != PROBE_TOKENS
    probes = [r for r in sent if r.max_tokens == PROBE_TOKENS]
    assert probes and min(r.at for r in probes) - lead.at < 2.0  # the 0.5 s delay, loaded


def test_keepalives_before_a_prompt_answer_do_not_cost_a_probe(tmp_path: Path) -> None:
    """OpenRouter's comments, then the answer within the hedge delay: one request, no probe."""
    scenario = _lead("keepalive@0.05,n=2")
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    assert report["served_by"]["agent_id"] == "/".join(FIRST)
    assert len(sent) == 1 and report["probes_sent"] == 0


def test_keepalives_for_two_seconds_before_the_answer_cost_no_probe(tmp_path: Path) -> None:
    """A review-sized prompt on OpenRouter: comments every 0.5 s while the model reads it, the
    answer after ~2 s (past the 0.5 s hedge delay). The stream flows, so the hedge waits for
    its answer: one request, no probe (it cost 12 when keep-alives did not count)."""
    scenario = _lead("keepalive@0.5,n=4")
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    assert report["served_by"]["agent_id"] == "/".join(FIRST)
    assert len(sent) == 1 and sent[0].max_tokens != PROBE_TOKENS
    assert report["probes_sent"] == 0


def _remember_proven(tmp: Path, scenario: Scenario, fleet: FaultFleet, *routes: str) -> Path:
    """A state file in which a past run proved ``routes`` (agent ids), 0.1 s first byte."""
    from relay_review.pipeline.memory import account_identities, route_keys
    from relay_review.routing.catalog import build_catalog, parse_discovery
    from relay_review.state import FileStore
    from relay_review.state.memory import Memory, RouteMemo

    entries = build_catalog(parse_discovery(discovery_for(scenario, fleet))).selected
    keys = route_keys(entries, account_identities(entries, drill_environ(scenario)))
    now = time.time()
    memo = RouteMemo(state="proven", outcome="ok", at=now, until=now + 3600, first_byte_s=0.1)
    path = tmp / "state.json"
    FileStore(path).save(Memory(routes={keys[a]: memo for a in routes}))
    return path


def test_two_remembered_routes_the_first_now_stalling_is_hedged(tmp_path: Path) -> None:
    """Memory proved the first two routes; the first now stalls. Its request is hedged at the
    remembered first byte's delay: the other routes, the second remembered one included, are
    probed, and a ready one takes the request over within seconds. Before, the second
    remembered route, not yet sent, held the probes back until the first one's 20 s
    first-byte bound."""
    second = ("nim_b", "meta/llama-3.3-70b-instruct")
    accounts = {name: dict(models) for name, models in _MIXED.items()}
    accounts[FIRST[0]][FIRST[1]] = "stall"
    accounts[second[0]][second[1]] = HEALTHY
    scenario = Scenario("two-remembered", "first remembered route stalls", accounts, HEALTHY)
    os.environ[PORT_ENV] = free_port()  # memory knows an account by its base URL
    try:
        with fleet_for(scenario) as fleet:
            state = _remember_proven(tmp_path, scenario, fleet, "/".join(FIRST), "/".join(second))
            report, sent = chat(fleet, scenario, tmp_path, "--state", str(state))
    finally:
        del os.environ[PORT_ENV]
    assert report["served_by"]["agent_id"] != "/".join(FIRST)
    assert report["time_to_reply_s"] < 5.0, report["attempts"]  # was 20 s: the first-byte bound
    assert route(sent[0]) == "/".join(FIRST) and sent[0].max_tokens != PROBE_TOKENS
    by_route: dict[str, int] = {}
    for r in sent:
        by_route[route(r)] = by_route.get(route(r), 0) + 1
    assert max(by_route.values()) <= 2 and len(sent) <= len(by_route) + 1, by_route


def test_a_remembered_route_a_faster_one_took_over_is_not_served_first_again(
    tmp_path: Path,
) -> None:
    """A route proven in a past run stalls now and is cancelled when another is found ready:
    memory drops its proof, so the next run serves the route that answered, with one request.
    Before, the cancelled route stayed proven and every warm run sent it the request first."""
    accounts = {name: dict(models) for name, models in _MIXED.items()}
    accounts[FIRST[0]][FIRST[1]] = "stall"
    accounts[LAST[0]][LAST[1]] = HEALTHY
    scenario = Scenario("stale-proof", "a remembered route now stalls", accounts, HEALTHY)
    os.environ[PORT_ENV] = free_port()
    try:
        with fleet_for(scenario) as fleet:
            state = _remember_proven(tmp_path, scenario, fleet, "/".join(FIRST))
            first, _ = chat(fleet, scenario, tmp_path, "--state", str(state))
            report, sent = chat(fleet, scenario, tmp_path, "--state", str(state))
    finally:
        del os.environ[PORT_ENV]
    assert any(a["outcome"] == "cancelled" for a in first["attempts"]), first["attempts"]
    assert report["served_by"]["agent_id"] == "/".join(LAST)
    assert [route(r) for r in sent] == ["/".join(LAST)]


def test_a_run_cut_short_by_its_deadline_leaves_no_timeouts_in_memory(tmp_path: Path) -> None:
    """A run whose deadline (1.5 s) struck while its probes and its lead were out: those are
    abandoned, not the routes' timeouts, and memory keeps none of them, so the next run (the
    default deadline) probes and serves. Before, every route was remembered cooling for 5
    minutes and the next run sent no request at all."""
    accounts = {
        "a1": {"m/stall": "stall"},
        "a2": {"m/late": "healthy@2"},
        "a3": {"m/stall": "stall"},
    }
    scenario = Scenario("cut", "a run cut short by its deadline", accounts, "healthy@2")
    os.environ[PORT_ENV] = free_port()
    try:
        with fleet_for(scenario) as fleet:
            state = ["--state", str(tmp_path / "state.json")]
            cut, _ = chat(fleet, scenario, tmp_path, *state, "--deadline", "1.5")
            report, sent = chat(fleet, scenario, tmp_path, *state)
    finally:
        del os.environ[PORT_ENV]
    assert cut["served_by"] is None
    rows = {r["agent_id"]: r for r in cut["readiness"]}
    assert rows["a2/m/late"]["status"] == "abandoned", rows["a2/m/late"]
    assert "run deadline" in rows["a2/m/late"]["detail"]
    memory = json.loads((tmp_path / "state.json").read_text())["routes"]
    assert not any(m["outcome"] == "timeout" for m in memory.values()), memory
    assert report["served_by"]["agent_id"] == "a2/m/late", report["readiness"]
    assert sent, "the next run sent nothing"


def test_the_hedge_never_hands_the_request_to_a_route_whose_budget_is_spent(
    tmp_path: Path,
) -> None:
    """One account allowing 3 requests a minute: the lead (answering after 1.5 s) and two
    probes spend them, the other probes are refused by the budget. A probed route found ready
    must not take the request over: its request would be refused too, and the lead was about
    to answer. Before, the lead was cancelled and the reply came when the minute freed (60 s)."""
    accounts = {
        "acc": {
            "m1/a": "healthy@1.5",
            "m2/b": "healthy@0.2",
            "m3/c": "healthy@0.2",
            "m4/d": "stall",
            "m5/e": "404",
        }
    }
    scenario = Scenario(
        "spent", "an account whose minute the hedge spends", accounts, "healthy@0.2"
    )
    policy = (
        '[serving]\ndeadline = 90\nattempt = 60\nfirst_token = 60\n\n[[accounts]]\nname = "acc"\n'
        'kind = "openai_compatible"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "RELAY_DRILL_KEY_ACC"\nrpm = 3\n'
    )
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path, policy=policy)
    assert report["served_by"]["agent_id"] == "acc/m1/a", report["attempts"]
    assert report["time_to_reply_s"] < 10, report["attempts"]
    assert not any(a["outcome"] == "cancelled" for a in report["attempts"])
    assert len(sent) <= 3  # the budget's three
