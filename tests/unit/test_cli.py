"""The CLI speaks one language: shared --format words, -v anywhere, exit codes that say whether
anything worked, unusable routes refused by index, and one line naming missing keys."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
from pathlib import Path

import pytest

from relay_review import cli
from relay_review.commands import discover as discover_cmd
from relay_review.pipeline.outputs import serving_routes
from relay_review.pipeline.routes import zdr_blocked_line
from relay_review.records import RunReport
from relay_review.render import plural
from relay_review.routing.catalog import build_catalog, parse_discovery


def write_routes(tmp_path: Path, routes: list[dict]) -> Path:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"routes": routes}), encoding="utf-8")
    return path


def free(account: str, model: str, provider: str = "openrouter", **extra) -> dict:
    return {
        "account": account,
        "provider": provider,
        "model": model,
        "prompt_price_per_1k": 0,
        "completion_price_per_1k": 0,
        **extra,
    }


def test_every_format_flag_uses_one_vocabulary() -> None:
    words = set()
    for name in ("catalog", "preflight", "chat", "review", "drill"):
        parser = cli.build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (fmt,) = [a for a in sub.choices[name]._actions if a.dest == "format"]
        words |= set(fmt.choices)
    assert words == {"json", "text", "markdown"}


def test_verbose_after_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_routes(tmp_path, [free("a", "m")])
    assert cli.main(["catalog", "--discovery", str(path), "-v"]) == 0
    assert cli.main(["-v", "catalog", "--discovery", str(path), "--format", "text"]) == 0
    args = cli.build_parser("catalog").parse_args(["-v", "catalog", "--discovery", "x"])
    assert args.verbose is True  # a -v before the command is not undone by the sub-parser


def test_route_with_unknown_provider_and_no_base_url_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_routes(tmp_path, [free("a", "m"), free("mine", "m", provider="my_gateway")])
    assert cli.main(["catalog", "--discovery", str(path)]) == 2
    err = capsys.readouterr().err
    assert "routes[1].base_url: missing, and provider 'my_gateway' has no default URL" in err
    ok = write_routes(tmp_path, [free("mine", "m", provider="x", base_url="http://h/v1")])
    assert cli.main(["catalog", "--discovery", str(ok)]) == 0


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("flag", "content", "said"),
    [
        ("--discovery", DEEP, "not valid JSON (nested too deeply)"),
        ("--discovery", b"\xff\xfe{}", "not UTF-8 text"),
        ("--zdr-feed", DEEP, "not valid JSON (nested too deeply)"),
        ("--policy", "a = " + DEEP, "not valid TOML: nested too deeply"),
        ("--discovery", '{"x": 1}', 'expected an object with a "routes" list'),
        ("--zdr-feed", "[]", 'expected an object with a "data" list'),
    ],
)
def test_a_bad_input_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: str | bytes, said: str
) -> None:
    """Each was a RecursionError or UnicodeDecodeError traceback, exit 1, or (a report of
    another shape) an error that did not name the file (a newcomer's audit)."""
    routes = write_routes(tmp_path, [free("a", "m")])
    bad = tmp_path / "bad"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = ["catalog", "--discovery", str(routes), flag, str(bad)]
    assert cli.main(args if flag != "--discovery" else [*args[:2], str(bad)]) == 2
    err = capsys.readouterr().err
    assert said in err and str(bad) in err


def test_discover_refuses_an_out_that_is_no_file_before_discovering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--out /dev/null`` (a device), a directory, ``''``: refused at once, exit 2, before any
    request (as root, ``--out /dev/full`` replaced the device node with a JSON file)."""
    for name in [k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN", "_KEY_SUB"))]:
        monkeypatch.delenv(name)  # refused before the keys are looked at, too
    for out in ("/dev/null", str(tmp_path), ""):
        assert cli.main(["discover", "--out", out]) == 2
        err = capsys.readouterr().err
        assert "--out" in err and (
            "not a regular file" in err or "directory" in err or "names no file" in err
        ), err


def test_preflight_without_keys_exits_1_naming_the_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.delenv("NVIDIA_NIM_API_KEY", raising=False)
    path = write_routes(tmp_path, [free("openrouter", "m"), free("nvidia_nim", "n", "nvidia_nim")])
    assert cli.main(["preflight", "--discovery", str(path), "--format", "text"]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        "relay-review preflight: no key for any selected route; set one of: "
        "NVIDIA_NIM_API_KEY, OPENROUTER_API_KEY"
    )
    assert "0 probes sent" in captured.out


def test_discover_exits_1_when_every_account_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MINE_KEY", "k")
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[discovery]\ntimeout = 1\n[[accounts]]\nname = "mine"\nkind = "openai_compatible"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "MINE_KEY"\n',
        encoding="utf-8",
    )
    for name in ("OPENROUTER_API_KEY", "NVIDIA_NIM_API_KEY", "OPENCODE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser()
    discover_cmd.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "r.json"
    args = parser.parse_args(["discover", "--out", str(out), "--policy", str(policy)])
    assert discover_cmd.run(args) == 1
    assert out.is_file()  # the report (with the error) is still written
    err = capsys.readouterr().err
    assert "(0 routes, 1 error, no ZDR feed)" in err
    assert err.strip().endswith("every account with a key failed")


def test_plural() -> None:
    assert [plural(n, "chunk") for n in (0, 1, 2)] == ["0 chunks", "1 chunk", "2 chunks"]


def test_served_by_lists_every_serving_route_once_in_chunk_order() -> None:
    report = {
        "served_by": {"agent_id": "a/x"},
        "chunks": [
            {"served_by": {"agent_id": "b/y"}},
            {"served_by": None},
            {"served_by": {"agent_id": "a/x"}},
            {"served_by": {"agent_id": "b/y"}},
        ],
    }
    assert serving_routes(RunReport.from_json(report)) == ["b/y", "a/x"]
    assert serving_routes(RunReport.from_json({"served_by": {"agent_id": "a/x"}})) == ["a/x"]
    assert serving_routes(RunReport.from_json({"served_by": None})) == []


def test_require_zdr_leaving_no_route_is_one_line_naming_the_input() -> None:
    routes = parse_discovery(
        {"routes": [free("openrouter", "q:free"), free("n", "m", "nvidia_nim")]}
    )
    # NVIDIA's model is in OpenRouter's feed by name: that is no evidence about NVIDIA
    catalog = build_catalog(routes, ["m", "q"], require_zdr=True)
    line = zdr_blocked_line(catalog, "auto", True)
    assert line is not None and "\n" not in line
    assert "require-zdr is auto and this repository is private" in line
    assert "none of the 2 eligible routes is ZDR" in line
    assert "require-zdr: false" in line
    assert "visibility is unknown" in (zdr_blocked_line(catalog, "auto", None) or "")
    open_catalog = build_catalog(routes, ["m"], require_zdr=False)
    assert zdr_blocked_line(open_catalog, "auto", True) is None


@pytest.mark.parametrize("fails", [False, True])
def test_the_programs_imports_are_frozen_out_of_collection(fails: bool) -> None:
    """As the program (``process``): no collection while the command imports, what it made is
    frozen after, and collection is on again even when the import fails."""
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        expected = pytest.raises(ImportError) if fails else contextlib.nullcontext()
        with expected, cli.imports_uncollected(True):
            assert not gc.isenabled()
            made = [[] for _ in range(1000)]  # tracked containers, as imports make
            if fails:
                raise ImportError("a command module that does not import")
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()  # this test process's objects go back to collection
        gc.enable()


def test_a_callers_main_freezes_nothing() -> None:
    """``main([...])`` (a test, an embedding program) leaves collection as it found it."""
    frozen = gc.get_freeze_count()
    with cli.imports_uncollected(False):
        assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_probe_budget_help_says_what_each_preflight_mode_does_with_it() -> None:
    """Hedged preflight (the default) probes every other route once when the first request is
    slow or fails, whatever the budget (11 probes in the 12-route ``mixed`` drill at the default
    6); only eager preflight and the ``preflight`` command keep to it. The help said "most
    probes per run (6)" for every mode."""
    for name in ("preflight", "chat", "review", "drill"):
        parser = cli.build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (flag,) = [a for a in sub.choices[name]._actions if "--probe-budget" in a.option_strings]
        text = flag.help or ""
        assert "eager preflight and the preflight command: most routes probed" in text
        assert "hedged: 0 sends no probes" in text and "every other route" in text
