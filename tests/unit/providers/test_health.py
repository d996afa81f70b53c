"""Published health as a zero-request prior (issue 25): OpenRouter's endpoints and key listings
replayed from cassettes of the documented shapes (``tests/cassettes/openrouter_health/``, not
recordings: see ``tools/write_health_cassettes.py``), the catalog's order, the readiness table
and the footer, and an end-to-end ``relay-review chat`` on the fault fleet serving both
listings."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import httpx
import pytest
import vcr

from cli_harness import run_cli
from relay_review.config import parse_policy
from relay_review.drill.fleet import FaultFleet
from relay_review.pipeline.routes import published_health
from relay_review.providers.health import (
    FREE_PER_DAY,
    endpoint_uptime,
    key_info,
    model_uptime,
    percent,
    read_health,
)
from relay_review.records import (
    Catalog,
    CatalogEntry,
    Cost,
    QuotaReport,
    RunReport,
    SelectedRoute,
)
from relay_review.render import comment_markdown, quota_line, readiness_table
from relay_review.routing.catalog import build_catalog, parse_discovery, rank_by_uptime

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes" / "openrouter_health"
replay = vcr.VCR(
    cassette_library_dir=str(CASSETTES), record_mode="none", filter_headers=["authorization"]
)
BASE = "https://openrouter.ai/api/v1"
KEY = "or-test-key-not-a-secret-0000"
MODELS = (
    "qwen/qwen3-coder:free",
    "openai/gpt-oss-120b:free",
    "meta-llama/llama-3.3-70b-instruct:free",
)


def route(account: str, model: str, provider: str = "openrouter", base: str = BASE, **extra):
    return {
        "account": account,
        "provider": provider,
        "model": model,
        "base_url": base,
        "api_key_env": f"{account.upper()}_KEY",
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
        **extra,
    }


def catalog_of(raws, **kw) -> Catalog:
    return build_catalog(parse_discovery({"routes": raws}), **kw)


def openrouter_catalog() -> Catalog:
    return catalog_of([route("openrouter", m) for m in MODELS])


ENV = {"OPENROUTER_KEY": KEY}
CHAT = ["chat", "--discovery"]


# --- parsing: every number is input --------------------------------------------------------


def test_percent_clamps_and_ignores_what_is_not_a_finite_number() -> None:
    assert percent(250) == 100.0 and percent(-3) == 0.0 and percent(62.5) == 62.5
    for bad in (float("nan"), float("inf"), "99", None, True, [1]):
        assert percent(bad) is None
    huge = json.loads("1" + "0" * 400)  # a JSON integer no float can hold
    assert percent(huge) == 100.0 and percent(-huge) == 0.0


def test_a_key_figure_no_float_can_hold_is_unknown_not_a_crash() -> None:
    huge = json.loads('{"data": {"is_free_tier": true, "usage_daily": 1' + "0" * 400 + "}}")
    info = key_info("openrouter", huge)
    assert info.usage_daily is None and info.is_free_tier is True


def test_an_endpoint_counts_its_worse_recent_figure_and_a_model_its_best_endpoint() -> None:
    assert endpoint_uptime({"uptime_last_5m": 55, "uptime_last_30m": 62.0}) == 55
    assert endpoint_uptime({"uptime_last_30m": 99.5}) == 99.5
    assert endpoint_uptime({"uptime_last_1d": 99.9}) is None  # a day says nothing of now
    listing = {"data": {"endpoints": [{"uptime_last_30m": 40}, {"uptime_last_30m": 97}]}}
    assert model_uptime(listing) == 97
    assert model_uptime({"data": {"endpoints": []}}) is None
    with pytest.raises(ValueError):
        model_uptime({"data": {"endpoints": "none"}})


def test_documented_shapes_replayed_give_uptime_per_route_and_the_free_tier() -> None:
    with replay.use_cassette("health_free_tier.yaml") as cassette:
        health = asyncio.run(read_health(openrouter_catalog().selected, ENV, 5.0))
        assert cassette.play_count == 4  # one per distinct model, one for the account's key
    assert health.errors == []
    assert health.uptime == {
        "openrouter/qwen/qwen3-coder:free": 99.5,  # the better provider's lower of 5m / 30m
        "openrouter/openai/gpt-oss-120b:free": 55.0,  # its last 5 minutes, though 30 say 62
        "openrouter/meta-llama/llama-3.3-70b-instruct:free": 100.0,  # NaN, "99" ignored; 250 -> 100
    }
    info = health.keys["openrouter"]
    assert info.is_free_tier is True and info.free_per_day == FREE_PER_DAY == 50
    assert health.requests == 4


def test_failures_cost_one_warning_and_leave_the_order_alone(caplog) -> None:
    policy = parse_policy("")
    catalog = openrouter_catalog()
    with replay.use_cassette("health_failures.yaml"), caplog.at_level(logging.WARNING):
        ranked, health = asyncio.run(published_health(catalog, policy, ENV))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "HTTP 404" in text and "not valid JSON" in text and "HTTP 401" in text
    assert KEY not in text
    assert health.uptime == {} and health.keys == {}
    assert [e.agent_id for e in ranked.selected] == [e.agent_id for e in catalog.selected]


def test_no_request_for_other_kinds_or_without_a_key_or_when_turned_off() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"unexpected request {request.url}")

    transport = httpx.MockTransport(refuse)
    others = catalog_of([route("nim", "meta/llama", provider="nvidia_nim", base="http://x/v1")])
    for catalog, env, text in (
        (others, {"NIM_KEY": "k"}, ""),
        (openrouter_catalog(), {}, ""),
        (openrouter_catalog(), ENV, "[discovery]\nhealth = false"),
    ):
        ranked, health = asyncio.run(
            published_health(catalog, parse_policy(text), env, transport=transport)
        )
        assert health.requests == 0 and ranked == catalog


# --- the prior on the catalog's order ---------------------------------------------------------


def test_low_uptime_routes_go_last_within_their_tier_only() -> None:
    raws = [
        route("openrouter", "a/free-low"),
        route("openrouter", "b/free-ok"),
        route("openrouter", "c/free-unknown"),
        route("openrouter", "d/priced-ok", prompt_price_per_1k=1.0, completion_price_per_1k=1.0),
        route("openrouter", "e/priced-low", prompt_price_per_1k=1.0, completion_price_per_1k=1.0),
    ]
    catalog = catalog_of(raws, pool="auto")
    before = [e.route.model for e in catalog.selected]
    assert before == ["a/free-low", "b/free-ok", "c/free-unknown", "d/priced-ok", "e/priced-low"]
    uptime = {
        "openrouter/a/free-low": 40.0,
        "openrouter/b/free-ok": 99.0,
        "openrouter/d/priced-ok": 95.0,
        "openrouter/e/priced-low": 10.0,
    }
    ranked = rank_by_uptime(catalog, uptime, 90.0)
    after = [e.route.model for e in ranked.selected]
    # the low free route goes behind the other free ones, never behind a priced route
    assert after == ["b/free-ok", "c/free-unknown", "a/free-low", "d/priced-ok", "e/priced-low"]
    assert [e.priority for e in ranked.selected] == [5, 4, 3, 2, 1]
    assert {e.route.model: e.uptime for e in ranked.selected}["a/free-low"] == 40.0
    assert ranked.report == catalog.report  # the same selection: order only
    assert rank_by_uptime(catalog, uptime, 0.0).selected[0].route.model == "a/free-low"


def test_zdr_first_stays_above_the_prior() -> None:
    raws = [route("openrouter", "z/zdr-low"), route("openrouter", "n/plain-ok")]
    catalog = build_catalog(parse_discovery({"routes": raws}), ["z/zdr-low"])
    ranked = rank_by_uptime(catalog, {"openrouter/z/zdr-low": 5.0}, 90.0)
    assert [e.route.model for e in ranked.selected] == ["z/zdr-low", "n/plain-ok"]


# --- rendering ---------------------------------------------------------------------------------


def entry_json(agent: str, uptime: float | None, priority: int) -> SelectedRoute:
    e = CatalogEntry(
        route=parse_discovery({"routes": [route("openrouter", agent)]})[0],
        cost=Cost.FREE,
        zdr=False,
        priority=priority,
        uptime=uptime,
    )
    return e.summary()


def test_readiness_table_and_footer_show_the_prior_and_the_cost() -> None:
    selected = [entry_json("q/ok", 99.5, 2), entry_json("o/low", 62.0, 1)]
    unknown = entry_json("x/none", None, 3)  # no published uptime: none shown, none stored
    assert "uptime" not in unknown.model_dump(mode="json")
    table = readiness_table([*selected, unknown], [], None)
    assert "free, uptime 99.5 %" in table and "free, uptime 62 %" in table
    (row,) = [line for line in table.splitlines() if "x/none" in line]
    assert "uptime" not in row and " free " in row
    report = {
        "decision": "approve",
        "summary": "fine",
        "catalog": {"selected": selected},
        "quota": {
            "requests_by_account": {"openrouter": 3},
            "keys": {"openrouter": {"is_free_tier": True, "free_per_day": 50}},
        },
    }
    body = comment_markdown(RunReport.from_json(report))
    assert "uptime 62 %" in body
    assert "3 requests; 3 on `openrouter` of its 50 free a day" in body
    assert "does not report how many are left today" in body
    # hostile numbers in a report read back are not shown as counts
    report["quota"]["requests_by_account"] = {"openrouter": -5, "x": "9"}
    assert "0 requests; 0 on `openrouter`" in comment_markdown(RunReport.from_json(report))


def test_the_footer_says_what_is_left_today_where_a_shared_ledger_counted_it() -> None:
    """With a shared ledger's count of the day: "41 of 50 left today on `openrouter`" (the
    issue's form); without one the key endpoint's facts; hostile counts read back are 0."""
    quota = QuotaReport.model_validate(
        {
            "requests_by_account": {"openrouter": 3, "nim": 1},
            "keys": {"openrouter": {"is_free_tier": True, "free_per_day": 50}},
            "shared_day": {"openrouter": {"used": 9, "per_day": 50}},
        }
    )
    line = quota_line(quota, lambda text, _n: f"`{text}`")
    assert line == (
        "4 requests; 41 of 50 left today on `openrouter` (the shared ledger's count of every "
        "run's requests in the last 24 h)"
    )
    spent = QuotaReport.model_validate(
        {"shared_day": {"a": {"used": 70, "per_day": 50}, "b": {"used": -1, "per_day": True}}}
    )
    assert spent.shared_day["b"].used == 0 and spent.shared_day["b"].per_day == 0
    assert quota_line(spent) == "0 requests; 0 of 50 left today on a (the shared ledger's " + (
        "count of every run's requests in the last 24 h)"
    )
    assert QuotaReport.model_validate({"shared_day": {"x": 3}}).shared_day == {}
    # a huge count from a broken or hostile store never reads as quota left
    flooded = QuotaReport.model_validate({"shared_day": {"a": {"used": 10**12, "per_day": 50}}})
    assert flooded.shared_day["a"].left == 0


# --- end to end: the CLI on the fault fleet serving OpenRouter's listings ------------------------


FLEET = {
    "router": {
        "api_key": KEY,
        "models": {
            "vendor/first-low:free": "healthy@0.1",
            "vendor/second-ok:free": "healthy@0.1",
            "vendor/third-ok:free": "stall",
        },
        "uptime": {"vendor/first-low:free": 31.0, "vendor/second-ok:free": 99.0},
        "key_info": {"is_free_tier": True, "usage": 0, "usage_daily": 0, "limit": None},
    }
}


@pytest.mark.integration
def test_chat_cli_ranks_the_low_uptime_route_last_and_reports_the_cost(tmp_path: Path) -> None:
    with FaultFleet(FLEET) as fleet:
        base = fleet.base_url("router")
        discovery = {
            "routes": [
                {**route("router", m, base=base), "api_key_env": "ROUTER_KEY"}
                for m in FLEET["router"]["models"]
            ]
        }
        (tmp_path / "discovery.json").write_text(json.dumps(discovery))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
        env["ROUTER_KEY"] = KEY
        proc = run_cli(  # cli.main, in this process (tests/support/cli_harness.py)
            *CHAT, "discovery.json", "--message", "hi", "--format", "json", env=env, cwd=tmp_path
        )
        requests = fleet.requests
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    order = [e["model"] for e in report["catalog"]["selected"]]
    # the first route in discovery order has published uptime 31 %: served and probed last
    assert order == ["vendor/second-ok:free", "vendor/third-ok:free", "vendor/first-low:free"]
    assert report["catalog"]["selected"][2]["uptime"] == 31.0
    assert report["served_by"]["model"] == "vendor/second-ok:free"
    chats = [r for r in requests if r.is_chat]
    assert [r.model for r in chats] == ["vendor/second-ok:free"]  # a good day: one request
    listings = [r.path.rsplit("/v1", 1)[1] for r in requests if not r.is_chat]
    assert sorted(listings) == sorted(
        [f"/models/{m}/endpoints" for m in FLEET["router"]["models"]] + ["/key"]
    )
    assert report["quota"]["requests_by_account"] == {"router": 1}
    assert report["quota"]["keys"]["router"]["free_per_day"] == 50
    assert "warning" not in proc.stderr.lower()


# --- end to end: the action, its comment and step summary -----------------------------------------


def router_policy(fleet: FaultFleet) -> str:
    """The action's fast policy with the fleet's ``router`` account as an OpenRouter account
    (its ZDR listing on the fleet too)."""
    from action_harness import FAST, KEY_ENV

    return (
        FAST.replace("[discovery]\n", f'[discovery]\nzdr_url = "{fleet.root_url}/zdr"\n')
        + "\n[[accounts]]\n"
        + 'name = "router"\nkind = "openrouter"\npricing = "declared-free"\n'
        + f'base_url = "{fleet.base_url("router")}"\napi_key_env = "{KEY_ENV}"\n'
    )


@pytest.mark.integration
def test_action_ranks_by_uptime_and_says_what_the_review_cost(tmp_path: Path, github_mock) -> None:
    from action_harness import FLEET_KEY, fleet_reply, posted_bodies, run_action

    accounts = {
        "router": {
            "api_key": FLEET_KEY,
            "models": {"acme/reviewer": "healthy", "pair/reviewer": "healthy"},
            "uptime": {"acme/reviewer": 40.0, "pair/reviewer": 99.0},
            "key_info": {"is_free_tier": True, "usage": 0, "usage_daily": 0, "limit": None},
        }
    }
    with FaultFleet(accounts, reply=fleet_reply) as fleet:
        policy = router_policy(fleet)
        run = run_action(tmp_path, github_mock, {"policy": policy})
        chats = fleet.chat_requests()
        listings = sorted(
            r.path for r in fleet.requests if "/endpoints" in r.path or "/key" in r.path
        )
    assert run.code == 0, run.stdout + run.stderr
    # without the prior acme/reviewer ranks first (by model id); its 40 % puts it last
    assert [e["model"] for e in run.report["catalog"]["selected"]] == [
        "pair/reviewer",
        "acme/reviewer",
    ]
    assert run.report["served_by"]["model"] == "pair/reviewer"
    assert [r.model for r in chats] == ["pair/reviewer"]
    base = "/router/v1"
    assert listings == [
        f"{base}/key",
        f"{base}/models/acme/reviewer/endpoints",
        f"{base}/models/pair/reviewer/endpoints",
    ]
    assert run.report["quota"]["requests_by_account"] == {"router": 1}
    (body,) = posted_bodies(github_mock)
    cost = "1 request; 1 on `router` of its 50 free a day"
    for text in (body, run.summary):
        assert cost in text and "uptime 40 %" in text and "uptime 99 %" in text
    logged = [ln for ln in run.stdout.splitlines() if not ln.startswith("::add-mask::")]
    assert FLEET_KEY not in body + run.summary + run.stderr + "\n".join(logged)
    assert "published health unavailable" not in run.stdout
    assert "published health: uptime for 2 routes; 1 below min_uptime 90 %" in run.stdout


@pytest.mark.integration
def test_action_on_a_shared_ledger_says_how_many_are_left_today(
    tmp_path: Path, github_mock
) -> None:
    """Two reviews sharing one Redis (the org's store): the second one's footer and step
    summary count both runs' requests of the day against OpenRouter's 50 free a day."""
    from action_harness import (
        FLEET_KEY,
        PATCH,
        api_file,
        fleet_reply,
        posted_bodies,
        run_action,
    )
    from redis_server import RedisServer

    accounts = {
        "router": {
            "api_key": FLEET_KEY,
            "models": {"pair/reviewer": "healthy"},
            "key_info": {"is_free_tier": True, "usage": 0, "usage_daily": 0, "limit": None},
        }
    }
    server = RedisServer(tmp_path / "redis")
    try:
        with FaultFleet(accounts, reply=fleet_reply) as fleet:
            policy = router_policy(fleet)
            inputs = {"policy": policy, "state": server.url}
            first = run_action(tmp_path / "run1", github_mock, inputs)
            github_mock.reset()  # another push, one more line: the review is not reused
            patch = PATCH.replace("+10,6 @@", "+10,7 @@") + "\n+    audit(user)"
            other = api_file("app/auth.py", "modified", patch, 4, 1)
            runs = [first, run_action(tmp_path / "run2", github_mock, inputs, files=[other])]
            chats = fleet.chat_requests()
    finally:
        server.stop()
    assert [r.code for r in runs] == [0, 0], runs[1].stdout + runs[1].stderr
    assert len(chats) == 2
    assert runs[1].report["quota"]["shared_day"] == {"router": {"used": 2, "per_day": 50}}
    body = posted_bodies(github_mock)[-1]
    left = "1 request; 48 of 50 left today on `router` (the shared ledger's count"
    for text in (body, runs[1].summary):
        assert left in text, text[-600:]


@pytest.mark.integration
def test_action_a_failed_listing_costs_one_warning(tmp_path: Path, github_mock) -> None:
    """The action's entrypoint in this process (the runs above are processes)."""
    from action_harness import FLEET_KEY, fleet_reply, run_in_process

    # no key_info: the fleet answers /key with 404 (the uptime listing still answers)
    accounts = {"router": {"api_key": FLEET_KEY, "models": {"acme/reviewer": "healthy"}}}
    with FaultFleet(accounts, reply=fleet_reply) as fleet:
        policy = router_policy(fleet)
        run = run_in_process(tmp_path, github_mock, {"policy": policy})
    assert run.code == 0, run.stdout + run.stderr
    assert run.report["served_by"]["model"] == "acme/reviewer"
    warnings = [ln for ln in run.stdout.splitlines() if "published health unavailable" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("::warning")
    # the cost line, without the key endpoint's free-tier part (serve + repair: 2 requests;
    # before, this matched the memory line's "1 request saved" by chance)
    sent = sum(run.report["quota"]["requests_by_account"].values())
    assert sent == 2 and f" · {sent} requests · " in run.summary
    assert "free a day" not in run.summary


@pytest.mark.integration
def test_a_run_whose_every_file_is_reused_reads_no_published_health(
    tmp_path: Path, github_mock
) -> None:
    """The same head reviewed again: every file is reused from the first run's review, no
    request is sent, so neither is a listing (an audit found the health read ran anyway)."""
    from action_harness import FLEET_KEY, NUMBER, SHA, fleet_reply, run_on_pr

    accounts = {
        "router": {
            "api_key": FLEET_KEY,
            "models": {"acme/reviewer": "healthy"},
            "uptime": {"acme/reviewer": 99.0},
            "key_info": {"is_free_tier": True, "usage": 0, "usage_daily": 0, "limit": None},
        }
    }

    def listings(fleet: FaultFleet, since: int) -> list[str]:
        return [
            r.path for r in fleet.requests[since:] if "/endpoints" in r.path or "/key" in r.path
        ]

    with FaultFleet(accounts, reply=fleet_reply) as fleet:
        inputs = {"policy": router_policy(fleet)}
        overlay = github_mock.comments_overlay(SHA)  # GitHub's state kept across the runs
        first = run_on_pr(tmp_path / "first", github_mock, overlay, inputs, NUMBER)
        assert first.code == 0, first.stdout + first.stderr
        assert len(listings(fleet, 0)) == 2  # the key and the route's endpoints
        before = len(fleet.requests)
        again = run_on_pr(tmp_path / "again", github_mock, overlay, inputs, NUMBER)
        after = fleet.requests[before:]
    assert again.code == 0, again.stdout + again.stderr
    assert again.report["memory"]["reused_files"] >= 1 and not [r for r in after if r.is_chat]
    # discovery still lists the models (the catalog comes first); the health listings do not go
    assert listings(fleet, before) == [], [r.path for r in after]
    assert "published health" not in again.stdout
