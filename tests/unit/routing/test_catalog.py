"""The catalog contract: worked examples, exit-2 inputs, ZDR matching, order independence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_harness import run_cli
from relay_review.cli import main
from relay_review.routing.catalog import (
    ZdrIndex,
    build_catalog,
    parse_discovery,
    parse_zdr_feed,
)


def route(account: str, model: str, *, provider: str | None = None, price=(0.0, 0.0), **extra):
    """A discovery-report route; provider ``openrouter`` unless given (the ZDR feed is
    OpenRouter's list, so only OpenRouter routes can be ZDR by it)."""
    raw = {"account": account, "provider": provider or "openrouter", "model": model}
    if price is not None:
        raw["prompt_price_per_1k"], raw["completion_price_per_1k"] = price
    raw.update(extra)
    return raw


def select(raws, zdr=None, **kw):
    return build_catalog(parse_discovery({"routes": raws}), zdr, **kw)


def accounts_of(catalog):
    return [e.account for e in catalog.selected]


# --- worked examples -----------------------------------------------------------------------


def three_accounts_of_eight():
    return [
        route(acct, f"vendor/model-{i}", provider=prov)
        for acct, prov in (
            ("nvidia_nim", "nvidia_nim"),
            ("nvidia_nim_sub", "nvidia_nim"),
            ("openrouter", "openrouter"),
        )
        for i in range(8)
    ]


def test_eight_per_account_cap_eight_gives_four_each_and_one_per_account_first():
    cat = select(three_accounts_of_eight(), limit=12, account_cap=8)
    assert cat.report.selected_by_account == {"nvidia_nim": 4, "nvidia_nim_sub": 4, "openrouter": 4}
    assert accounts_of(cat)[:3] == ["nvidia_nim", "nvidia_nim_sub", "openrouter"]
    assert [e.priority for e in cat.selected] == list(range(12, 0, -1))


def test_eight_per_account_cap_two_gives_two_each():
    cat = select(three_accounts_of_eight(), limit=12, account_cap=2)
    assert cat.report.selected_by_account == {"nvidia_nim": 2, "nvidia_nim_sub": 2, "openrouter": 2}
    assert len(cat.selected) == 6
    assert cat.report.excluded == {"account_cap": 18}


def test_pick_order_a_b_o():
    raws = (
        [route("a", f"m{i}") for i in range(5)]
        + [route("b", "m0")]
        + [route("o", f"m{i}") for i in range(2)]
    )
    cat = select(raws, limit=12, account_cap=8)
    assert "".join(accounts_of(cat)) == "aboaoaaa"
    # inside an account, routes are taken by (model, agent_id)
    assert [e.route.model for e in cat.selected if e.account == "a"] == [f"m{i}" for i in range(5)]


def test_zdr_route_ranks_above_every_non_zdr_route_of_same_cost():
    raws = [route("a", f"m{i}") for i in range(4)] + [route("z", "vendor/private")]
    cat = select(raws, ["vendor/private"], limit=12)
    assert cat.selected[0].agent_id == "z/vendor/private"
    assert cat.selected[0].zdr is True
    assert cat.report.zdr_selected == 1


def test_tiers_free_zdr_free_priced_zdr_priced():
    raws = [
        route("a", "priced", price=(0.1, 0.2)),
        route("a", "priced-zdr", price=(0.1, 0.0)),
        route("b", "free"),
        route("b", "free-zdr"),
        route("c", "unknown", price=None),
        route("c", "also-unknown", price=(None, None)),
    ]
    cat = select(raws, ["priced-zdr", "free-zdr"], pool="auto")
    assert [e.route.model for e in cat.selected] == ["free-zdr", "free", "priced-zdr", "priced"]
    assert [(e.cost.value, e.zdr) for e in cat.selected] == [
        ("free", True),
        ("free", False),
        ("priced", True),
        ("priced", False),
    ]
    r = cat.report
    assert (r.total_routes, r.free_routes, r.priced_routes, r.unknown_routes) == (6, 2, 2, 2)
    assert r.excluded == {"unknown_cost": 2}


def test_pool_free_excludes_priced_and_require_zdr_keeps_zdr_only():
    raws = [route("a", "p", price=(1, 1)), route("a", "f"), route("b", "fz")]
    cat = select(raws, ["fz"], pool="free", require_zdr=True)
    assert [e.agent_id for e in cat.selected] == ["b/fz"]
    assert cat.report.excluded == {"not_zdr": 1, "priced_not_in_pool": 1}


def test_limit_stops_fill_and_empty_selection_is_fine():
    raws = [route("a", f"m{i}") for i in range(5)]
    cat = select(raws, limit=2)
    assert len(cat.selected) == 2 and cat.report.excluded == {"limit": 3}
    empty = select([route("a", "m", price=None)])
    assert empty.selected == [] and empty.report.account_diversity == 0


def test_account_cap_counts_across_tiers():
    raws = [route("a", "z1"), route("a", "z2"), route("a", "n1"), route("b", "n1")]
    cat = select(raws, ["a-only/z1", "z1", "z2"], account_cap=2)
    assert [e.agent_id for e in cat.selected] == ["a/z1", "a/z2", "b/n1"]


def test_defaults_filled_from_kind_and_convention():
    (r,) = parse_discovery({"routes": [route("nvidia_nim_sub", "x/y", provider="nvidia_nim")]})
    assert r.agent_id == "nvidia_nim_sub/x/y"
    assert r.api_key_env == "NVIDIA_NIM_API_KEY_SUB"
    assert r.base_url == "https://integrate.api.nvidia.com/v1"


# --- exit 2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prices", "field"),
    [
        ((0.0, "missing"), "completion_price_per_1k"),
        (("missing", 0.0), "prompt_price_per_1k"),
        ((0.0, None), "completion_price_per_1k"),
        ((-0.1, 0.0), "prompt_price_per_1k"),
        ((0.0, float("nan")), "completion_price_per_1k"),
        ((float("inf"), 0.0), "prompt_price_per_1k"),
        ((True, 0.0), "prompt_price_per_1k"),
        ((0.0, False), "completion_price_per_1k"),
        (("0", 0.0), "prompt_price_per_1k"),
        ((0.0, "0.0"), "completion_price_per_1k"),
    ],
)
def test_bad_prices_exit_2_naming_index_and_field(tmp_path, capsys, prices, field):
    bad = {"account": "a", "provider": "p", "model": "m"}
    for name, value in zip(("prompt_price_per_1k", "completion_price_per_1k"), prices, strict=True):
        if value != "missing":
            bad[name] = value
    report = {"routes": [route("a", "ok"), bad]}
    path = tmp_path / "d.json"
    path.write_text(json.dumps(report))  # json.dumps writes NaN/Infinity, as Python's json reads
    assert main(["catalog", "--discovery", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"routes[1].{field}" in err


def test_duplicate_agent_id_exits_2(tmp_path, capsys):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"routes": [route("a", "m"), route("b", "x", agent_id="a/m")]}))
    assert main(["catalog", "--discovery", str(path)]) == 2
    assert "routes[1].agent_id" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        '{"routes": {}}',
        '{"routes": [1]}',
        '{"routes": [{"provider": "p", "model": "m"}]}',
        '{"routes": [{"account": "a", "provider": "p", "model": 3}]}',
    ],
)
def test_malformed_reports_exit_2(tmp_path, capsys, content):
    path = tmp_path / "d.json"
    path.write_text(content)
    assert main(["catalog", "--discovery", str(path)]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--limit", "-1"],
        ["--limit", "x"],
        ["--account-cap", "-2"],
        ["--pool", "cheap"],
        ["--format", "xml"],
    ],
)
def test_bad_flags_exit_2(tmp_path, argv):
    path = tmp_path / "d.json"
    path.write_text('{"routes": []}')
    with pytest.raises(SystemExit) as exc:
        main(["catalog", "--discovery", str(path), *argv])
    assert exc.value.code == 2


def test_missing_file_and_bad_feed_exit_2(tmp_path, capsys):
    assert main(["catalog", "--discovery", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
    good = tmp_path / "d.json"
    good.write_text('{"routes": []}')
    feed = tmp_path / "f.json"
    feed.write_text('{"models": []}')
    assert main(["catalog", "--discovery", str(good), "--zdr-feed", str(feed)]) == 2


# --- ZDR matching ------------------------------------------------------------------------------


def test_zdr_exact_match_is_case_insensitive():
    z = ZdrIndex(["Meta-Llama/Llama-3.3-70B-Instruct"])
    assert z.is_zdr("openrouter", "meta-llama/llama-3.3-70b-instruct")
    assert not z.is_zdr("openrouter", "meta-llama/llama-3.3-70b-instruct:free")


def test_zdr_feed_is_evidence_for_openrouter_routes_only():
    """OpenRouter's feed lists OpenRouter's endpoints: a same-named NVIDIA (or any other
    provider's) model is not ZDR by it, by exact id or by its last segment."""
    z = ZdrIndex(["deepseek/deepseek-v4-flash", "meta-llama/llama-3.3-70b-instruct"])
    assert not z.is_zdr("nvidia_nim", "deepseek-ai/DeepSeek-V4-Flash")
    assert not z.is_zdr("nvidia_nim", "meta-llama/llama-3.3-70b-instruct")
    assert not z.is_zdr("opencode", "deepseek-v4-flash")
    assert not z.is_zdr("openrouter", "other/deepseek-v4-flash")


def test_zdr_feed_skips_entries_without_string_model_id():
    feed = {"data": [{"model_id": "x/y"}, {"name": "n"}, {"model_id": 3}, "junk"]}
    assert parse_zdr_feed(feed) == ["x/y"]


def test_no_feed_means_no_zdr():
    cat = select([route("a", "m")])
    assert cat.selected[0].zdr is False


def test_cli_reads_feed(tmp_path):
    d = tmp_path / "d.json"
    d.write_text(json.dumps({"routes": [route("a", "m1"), route("b", "vendor/m2")]}))
    f = tmp_path / "f.json"
    f.write_text(json.dumps({"data": [{"model_id": "vendor/m2"}]}))
    # cli.main in this process (the catalog command as a process: tests/unit/providers/chat/
    # test_status.py's broken pipe)
    out = run_cli("catalog", "--discovery", str(d), "--zdr-feed", str(f))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [s["agent_id"] for s in data["selected"]] == ["b/vendor/m2", "a/m1"]
    assert data["report"]["zdr_selected"] == 1


def test_cli_reads_the_feed_discover_saved_beside_the_report(tmp_path, capsys):
    """``discover`` names its feed in the report (``zdr_feed``); catalog uses it without
    ``--zdr-feed``, so ``--require-zdr`` keeps the ZDR route instead of selecting nothing."""
    d = tmp_path / "d.json"
    routes = [route("a", "m1"), route("b", "vendor/m2")]
    d.write_text(json.dumps({"routes": routes, "zdr_feed": "d.zdr.json"}))
    (tmp_path / "d.zdr.json").write_text(json.dumps({"data": [{"model_id": "vendor/m2"}]}))
    assert main(["catalog", "--discovery", str(d), "--require-zdr"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["agent_id"] for s in data["selected"]] == ["b/vendor/m2"]


def test_format_text_and_its_old_name_table(tmp_path, capsys):
    d = tmp_path / "d.json"
    d.write_text(json.dumps({"routes": [route("a", "m1")]}))
    assert main(["catalog", "--discovery", str(d), "--format", "text", "-v"]) == 0
    text = capsys.readouterr().out
    assert "1 selected of 1 route " in text and "1 account;" in text
    assert main(["catalog", "--discovery", str(d), "--format", "table"]) == 0
    assert capsys.readouterr().out == text


def test_table_format_says_when_empty(tmp_path, capsys):
    d = tmp_path / "d.json"
    d.write_text('{"routes": []}')
    assert main(["catalog", "--discovery", str(d), "--format", "table"]) == 0
    assert "No routes selected." in capsys.readouterr().out


# --- properties --------------------------------------------------------------------------------

ACCOUNTS = ["a", "b", "nvidia_nim", "nvidia_nim_sub", "openrouter"]
MODELS = ["x/m1", "y/m1", "m2", "z/M3", "m4"]


@st.composite
def reports(draw):
    n = draw(st.integers(0, 25))
    raws, ids = [], set()
    for _ in range(n):
        account = draw(st.sampled_from(ACCOUNTS))
        model = draw(st.sampled_from(MODELS)) + draw(st.sampled_from(["", ":free", "-b"]))
        agent_id = f"{account}/{model}"
        if agent_id in ids:
            continue
        ids.add(agent_id)
        price = draw(
            st.sampled_from([(0.0, 0.0), (0, 0), (0.001, 0.0), (1.5, 2.0), None, (None, None)])
        )
        provider = (
            "openrouter"
            if account == "openrouter"
            else draw(st.sampled_from(["nvidia_nim", "opencode"]))
        )
        raws.append(route(account, model, provider=provider, price=price))
    feed = draw(st.lists(st.sampled_from(["x/m1", "other/m2", "Z/m3", "q/m4", "r/m4"]), max_size=4))
    return raws, feed


@settings(max_examples=200, deadline=None)
@given(
    data=reports(),
    perm=st.randoms(use_true_random=False),
    limit=st.integers(0, 14),
    cap=st.integers(0, 9),
    pool=st.sampled_from(["free", "auto"]),
    require_zdr=st.booleans(),
)
def test_any_permutation_gives_identical_selection(data, perm, limit, cap, pool, require_zdr):
    raws, feed = data
    kw = {"limit": limit, "account_cap": cap, "pool": pool, "require_zdr": require_zdr}
    first = select(raws, feed, **kw)
    shuffled = list(raws)
    perm.shuffle(shuffled)
    second = select(shuffled, list(reversed(feed)), **kw)
    assert first.to_json() == second.to_json()
    # invariants that hold for every selection
    assert len(first.selected) <= limit
    assert all(n <= cap for n in first.report.selected_by_account.values())
    tiers = [(e.cost.value != "free", not e.zdr) for e in first.selected]
    assert tiers == sorted(tiers)
    if pool == "free":
        assert all(e.cost.value == "free" for e in first.selected)
    if require_zdr:
        assert all(e.zdr for e in first.selected)
    assert len(first.selected) + sum(first.report.excluded.values()) == len(raws)


def test_round_robin_never_takes_a_second_route_while_another_account_has_one(tmp_path):
    raws = [route(a, f"m{i}") for a in ("a", "b", "c") for i in range(3)] + [route("d", "m0")]
    cat = select(raws, limit=12)
    assert "".join(accounts_of(cat)) == "abcdabcabc"


def test_readme_example_file_is_valid(tmp_path):
    example = Path(__file__).resolve().parents[3] / "examples" / "discovery-example.json"
    cat = select(json.loads(example.read_text())["routes"], None)
    assert cat.report.account_diversity == 3


@pytest.mark.parametrize("price", ["1" + "0" * 400, "NaN", "-1"])
def test_a_price_that_is_no_finite_number_exits_2_naming_the_field(tmp_path, capsys, price):
    """A hand-written discovery file is input: an integer no float can hold is refused like
    NaN (exit 2, the field named), not a traceback."""
    route = (
        '{"account": "a", "provider": "openai_compatible", "model": "m", '
        '"base_url": "http://127.0.0.1:9/v1", "prompt_price_per_1k": ' + price + "}"
    )
    path = tmp_path / "d.json"
    path.write_text('{"routes": [' + route + "]}")
    assert main(["catalog", "--discovery", str(path)]) == 2
    assert "routes[0].prompt_price_per_1k" in capsys.readouterr().err
