"""Resource bounds (issue 6, item 8): a pull request at GitHub's limits — 3,000 files, a 20 MB
diff — reviewed end to end by ``relay-review run`` stays under the documented memory budget
(512 MB peak RSS, docs/reliability.md) and inside the run deadline.

The PR's files come from the files API in 30 pages of 100 (``Link: rel="next"``), as GitHub
serves them; the models from a local fleet of honest reviewers. The same PR is measured in
``bench/pr_scale.py`` (figures and ratios); this test asserts the bounds on the real subprocess.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs

import pytest

from action_harness import NUMBER, REPO, policy_toml, posted_bodies, pr_payload, run_action
from github_mock import Exchange, MockGitHub
from relay_review.drill import FaultFleet
from relay_review.drill.review import drill_reply

ROOT_DIR = Path(__file__).resolve().parents[3]
BUDGET_MB = 512
DEADLINE_S = 90
PER_PAGE = 100


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pr_scale", ROOT_DIR / "bench" / "pr_scale.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reviewers() -> Iterator[FaultFleet]:
    accounts = {
        "alpha": {"models": {"alpha/reviewer": "healthy"}, "api_key": "sk-scale-alpha-0123456789"},
        "beta": {"models": {"beta/reviewer": "healthy"}, "api_key": "sk-scale-alpha-0123456789"},
    }
    with FaultFleet(accounts, reply=drill_reply) as fleet:
        yield fleet


def paginated(mock: MockGitHub, files: list[dict[str, Any]]) -> Any:
    """A files-API responder: ``page``/``per_page`` from the query, GitHub's ``Link`` header."""
    last = (len(files) + PER_PAGE - 1) // PER_PAGE

    def respond(exchange: Exchange) -> tuple[int, Any, dict[str, str]]:
        query = parse_qs(exchange.query)
        page = int(query.get("page", ["1"])[0])
        per_page = int(query.get("per_page", [str(PER_PAGE)])[0])
        assert per_page == PER_PAGE, "relay-review asks for the largest page GitHub allows"
        base = f"{mock.url}{exchange.path}?per_page={per_page}"
        links = [f'<{base}&page={page + 1}>; rel="next"'] if page < last else []
        links.append(f'<{base}&page={last}>; rel="last"')
        chunk = files[(page - 1) * per_page : page * per_page]
        return 200, chunk, {"Link": ", ".join(links)}

    return respond


def test_3000_files_20_mb_within_memory_budget_and_deadline(
    tmp_path: Path, github_mock: MockGitHub, reviewers: FaultFleet
) -> None:
    files = bench_module().big_pr_files(3000, 20.0)
    assert len(files) == 3000
    assert sum(len(f.get("patch") or "") for f in files) >= 20 * 10**6
    github_mock.stub(
        "GET",
        f"/pulls/{NUMBER}/files$",
        200,
        times=None,
        respond=paginated(github_mock, files),
    )
    head = (
        "[serving]\nconnect = 2\nfirst_byte = 10\nidle = 10\nattempt = 30\n"
        f"deadline = {DEADLINE_S}\n"
    )
    policy = policy_toml(reviewers, "alpha", "beta", head=head)
    # the PR changes 3,100 files; GitHub lists 3,000 of them
    run = run_action(
        tmp_path / "run",
        github_mock,
        {"policy": policy},
        payload=pr_payload(changed_files=3100),
        env_extra={"FAKE_FLEET_API_KEY": "sk-scale-alpha-0123456789"},
        measure_memory=True,
        timeout=DEADLINE_S + 120,
    )
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    peak_mb = run.peak_rss_mb
    assert peak_mb is not None and peak_mb > 30, "the action process was not measured"
    print(f"\n3,000 files / 20 MB: peak RSS {peak_mb:.0f} MB, {run.report['run_elapsed_s']} s")

    # every page was read, once
    pages = github_mock.calls("GET", f"/pulls/{NUMBER}/files$")
    assert sorted(parse_qs(c.query).get("page", ["1"])[0] for c in pages) == sorted(
        str(p) for p in range(1, 31)
    )
    assert peak_mb < BUDGET_MB, f"peak RSS {peak_mb:.0f} MB is over the {BUDGET_MB} MB budget"
    report = run.report
    assert report is not None
    assert report["run_elapsed_s"] <= DEADLINE_S
    assert report["served_by"] is not None
    # every file accounted for: reviewed, or listed as not reviewed with a reason
    assert len(report["files"]) == 3000
    reviewed = [f for f in report["files"] if f["status"] == "reviewed"]
    skipped = [f for f in report["files"] if f["status"] != "reviewed"]
    assert reviewed and skipped
    assert all(f.get("reason") for f in skipped)
    assert {f["path"] for f in report["files"]} == {f["filename"] for f in files}
    (body,) = posted_bodies(github_mock)
    assert len(body) <= 65_536
    assert f"{len(skipped)} files were not reviewed" in body
    # most of the diff went unreviewed (max_chunks): said at the top, and never an approval
    assert report["decision"] != "approve" and report["partial"]
    assert "100 beyond the 3,000 files GitHub lists" in report["partial"]
    assert "the pull request changes 3100 files; GitHub lists 3000" in run.stdout
    assert "> **Partial review:** " in body.split("###")[0]
    assert json.loads((tmp_path / "run" / "workspace" / "relay-review-report.json").read_text())
    assert REPO in report["pull_request"]["repo"]
