"""The action's edge in one place (issue 21): one function decides every exit code, one builds
every caller's catalog, and the faces and GitHub edge import only what their layer allows."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from relay_review.config import CatalogPolicy, Policy
from relay_review.errors import UsageError
from relay_review.github.errors import (
    EventError,
    GitHubConnectionError,
    GitHubEdgeError,
    GitHubRateLimited,
    PolicyRefError,
)
from relay_review.github.log import Secrets
from relay_review.pipeline.action import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    exit_code,
    failure,
    log_review,
)
from relay_review.pipeline.catalog import catalog_for
from relay_review.pipeline.gate import Stop
from relay_review.pipeline.routes import build_run_catalog
from relay_review.providers.discovery import DiscoveryResult
from relay_review.routing.catalog import CatalogInputError, build_catalog, parse_discovery

SRC = Path(__file__).resolve().parents[3] / "src" / "relay_review"


@pytest.mark.parametrize(
    ("error", "code", "title"),
    [
        (UsageError("bad input"), EXIT_CONFIG, "configuration"),
        (CatalogInputError("bad report"), EXIT_CONFIG, "configuration"),
        (EventError("no payload"), EXIT_CONFIG, "configuration"),
        (PolicyRefError("refused"), EXIT_CONFIG, "policy"),  # status None: relay-review refused
        (PolicyRefError("no such ref", status=404), EXIT_CONFIG, "policy"),
        (PolicyRefError("unprocessable", status=422), EXIT_CONFIG, "policy"),
        (PolicyRefError("GitHub failed", status=502), EXIT_FAILED, "policy"),
        (GitHubEdgeError("forbidden", status=403), EXIT_FAILED, "GitHub"),
        (GitHubConnectionError("reset"), EXIT_FAILED, "GitHub"),
        (GitHubRateLimited("wait", status=429, retry_after=900), EXIT_FAILED, "GitHub"),
        (RuntimeError("a bug"), EXIT_FAILED, "internal error"),
    ],
)
def test_every_error_maps_to_one_exit_code_and_title(
    error: Exception, code: int, title: str
) -> None:
    assert exit_code(error) == code
    try:
        raise error
    except Exception as exc:
        assert failure(exc, Secrets())[1] == title


def test_a_skipped_run_exits_with_its_stop_code() -> None:
    assert exit_code(Stop(EXIT_OK)) == EXIT_OK


def test_a_bug_is_named_and_its_traceback_logged_scrubbed(capsys) -> None:
    secrets = Secrets()
    secrets.add(["sk-canary-0123456789"])
    try:
        raise KeyError("sk-canary-0123456789")
    except KeyError as exc:
        message, _ = failure(exc, secrets)
    assert message.startswith("internal error: KeyError")
    out = capsys.readouterr().out.replace("::add-mask::sk-canary-0123456789", "")
    assert "Traceback" in out and "KeyError: '***'" in out
    assert "sk-canary-0123456789" not in out


def test_the_verdict_logged_holds_no_secret_a_model_wrote_back(capsys) -> None:
    """The chat call scrubs a reply of its own route's key only: the summary and findings a
    model writes back may quote any other secret of the run (a key the diff holds)."""
    from relay_review.records import Finding, RunReport, Verdict

    leaked = ["ghs_Tk2tCanaryGithubToken0123456789", "Sk5sCanary-state-key-abcdefabcdef"]
    secrets = Secrets()
    secrets.add(leaked)
    finding = Finding(
        path="a.py", line=1, side="RIGHT", quote="x", severity="high", message=" ".join(leaked)
    )
    report = RunReport(verdict=Verdict(summary=f"quoting {leaked[0]}", findings=[finding]))
    log_review(report, secrets)
    out = capsys.readouterr().out
    out = "\n".join(line for line in out.splitlines() if not line.startswith("::add-mask::"))
    assert "summary: quoting ***" in out and "high a.py:1 (RIGHT): *** ***" in out
    assert not any(secret in out for secret in leaked)


def _free(account: str, model: str, provider: str = "openrouter") -> dict:
    return {
        "account": account,
        "provider": provider,
        "model": model,
        "prompt_price_per_1k": 0,
        "completion_price_per_1k": 0,
    }


REPORT = {"routes": [_free("or", f"m{i}:free") for i in range(5)] + [_free("n", "z", "nvidia_nim")]}
ROUTES = parse_discovery(REPORT)
FEED = {"data": [{"model_id": "m1:free"}, {"model_id": "m3:free"}]}


def test_one_catalog_function_matches_the_catalog_built_by_hand() -> None:
    section = CatalogPolicy(limit=3, account_cap=2)
    got = catalog_for(ROUTES, section, zdr_feed=lambda: FEED, require_zdr=True)
    want = build_catalog(
        parse_discovery(REPORT), ["m1:free", "m3:free"], limit=3, account_cap=2, require_zdr=True
    )
    assert got == want
    assert [e.route.model for e in got.selected] == ["m1:free", "m3:free"]
    # the defaults: [catalog] as built in, require_zdr "auto" read as false (no repository)
    assert catalog_for(ROUTES) == build_catalog(parse_discovery(REPORT))


def test_an_unusable_feed_is_raised_for_the_cli_and_warned_for_the_action(capsys) -> None:
    with pytest.raises(CatalogInputError):
        catalog_for(ROUTES, zdr_feed=lambda: {"nope": 1})
    seen: list[Exception] = []
    catalog = catalog_for(ROUTES, zdr_feed=lambda: {"nope": 1}, bad_feed=seen.append)
    assert len(seen) == 1 and catalog == build_catalog(parse_discovery(REPORT))
    # the action's stage: the feed from discovery, undecodable, is one warning, no ZDR route
    discovery = DiscoveryResult(accounts=[], routes=ROUTES, errors=[], zdr_feed=b"{")
    run_catalog = build_run_catalog(Policy(), discovery, require_zdr=False)
    assert "::warning::relay-review: the ZDR feed is unusable" in capsys.readouterr().out
    assert run_catalog.selected == catalog.selected
    fine = DiscoveryResult(
        accounts=[], routes=ROUTES, errors=[], zdr_feed=json.dumps(FEED).encode()
    )
    zdr = build_run_catalog(Policy(), fine, require_zdr=True)
    assert [e.route.model for e in zdr.selected] == ["m1:free", "m3:free"]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top, in a function or under TYPE_CHECKING."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("commands", ("github", "routing", "state")),
        ("github", ("pipeline", "render", "config.inputs")),
        ("providers", ("pipeline", "render")),
    ],
)
def test_forbidden_imports(package: str, forbidden: tuple[str, ...]) -> None:
    bad = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in sorted((SRC / package).rglob("*.py"))
        for name in sorted(_imports(path))
        if any(
            name == f"relay_review.{f}" or name.startswith(f"relay_review.{f}.") for f in forbidden
        )
    ]
    assert bad == []


@pytest.mark.integration
@pytest.mark.parametrize(("github_table", "interval"), [("", 1.0), ("write_interval = 0\n", 0.0)])
def test_the_pause_between_github_writes_is_the_policys(
    github_table: str, interval: float, tmp_path: Path, github_mock, monkeypatch
) -> None:
    """``github.write_interval`` (1 s by default: GitHub asks for at least 1 s between requests
    that create content) is the pause PyGithub keeps between the run's writes."""
    import relay_review.pipeline.action as action
    from action_harness import policy_toml, run_in_process, standard_fleet

    made: list[float] = []
    real = action.make_github

    def recording(*args, **kwargs):
        made.append(kwargs.get("seconds_between_writes", 1.0))
        return real(*args, **kwargs)

    monkeypatch.setattr(action, "make_github", recording)
    with standard_fleet() as fleet:
        policy = policy_toml(fleet, "acme", head=f"[github]\n{github_table}")
        run = run_in_process(tmp_path, github_mock, {"policy": policy})
    assert run.code == 0, run.stdout + run.stderr
    assert made[-1] == interval  # the client the run writes with, made once the policy is read
    assert "write_interval" in Policy.model_json_schema()["$defs"]["GitHubPolicy"]["properties"]
