"""The release path to a prebuilt image: ``.ci/release_pin.py`` (action.yml pinned to an image
by digest) and what ``.github/workflows/release.yml`` promises. The push, pull and run against a
real registry are in tests/e2e/test_container.py (run by .ci/docker_ci.py where an engine runs);
zizmor (.ci/run) and actionlint (tests/project/test_quickstart_lint.py) lint the workflow."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32
GHCR = f"docker://ghcr.io/owner/relay-review@{DIGEST}"


def release_pin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_pin", ROOT / ".ci" / "release_pin.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pin_changes_only_runs_image() -> None:
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    pinned = yaml.safe_load(release_pin().pin(text, GHCR))
    source = yaml.safe_load(text)
    assert source["runs"] == {"using": "docker", "image": "Dockerfile"}  # main builds; forks too
    assert pinned["runs"] == {"using": "docker", "image": GHCR}
    assert {**pinned, "runs": source["runs"]} == source


@pytest.mark.parametrize(
    "ref",
    [
        "docker://ghcr.io/owner/relay-review:v1.2.3",  # a tag can be re-pushed: digests only
        "ghcr.io/owner/relay-review@" + DIGEST,  # not docker://
        "docker://ghcr.io/Owner/relay-review@" + DIGEST,  # registries want lower case
        "docker://ghcr.io/owner/relay-review@sha256:abc",
        GHCR + "\n  env: {X: 1}",  # no second line smuggled into action.yml
    ],
)
def test_pin_refuses_anything_but_a_lower_case_digest_reference(ref: str) -> None:
    with pytest.raises(ValueError, match="reference"):
        release_pin().pin((ROOT / "action.yml").read_text(encoding="utf-8"), ref)


def test_pin_refuses_an_action_already_pinned() -> None:
    once = release_pin().pin((ROOT / "action.yml").read_text(encoding="utf-8"), GHCR)
    with pytest.raises(ValueError, match="exactly one"):
        release_pin().pin(once, GHCR)


@pytest.mark.integration
def test_pin_script_exit_codes(tmp_path: Path) -> None:
    action = tmp_path / "action.yml"
    action.write_text((ROOT / "action.yml").read_text(encoding="utf-8"), encoding="utf-8")
    script = [sys.executable, str(ROOT / ".ci" / "release_pin.py"), str(action)]
    bad = subprocess.run([*script, "docker://x/y:latest"], capture_output=True, text=True)
    assert bad.returncode == 2 and "action.yml" in bad.stderr
    assert "image: Dockerfile" in action.read_text()
    ok = subprocess.run([*script, GHCR], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert f"  image: {GHCR}\n" in action.read_text()


def test_release_workflow_builds_pushes_attests_and_pins() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    on = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert on == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {
        "contents": "write",
        "packages": "write",
        "id-token": "write",
        "attestations": "write",
    }
    steps = job["steps"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert all("@" in u and len(u.split("@")[1]) == 40 for u in uses), uses  # SHA pins
    (attest,) = [s for s in steps if s.get("uses", "").startswith("actions/attest-build")]
    assert attest["with"]["push-to-registry"] is True
    assert attest["with"]["subject-digest"] == "${{ steps.push.outputs.digest }}"
    runs = "\n".join(s.get("run", "") for s in steps)
    order = [
        "docker build --pull",
        "docker push",
        "release_pin.py action.yml",
        "git commit",
        "gh release create",
    ]
    positions = [runs.index(word) for word in order]
    assert positions == sorted(positions)
    assert steps.index(attest) < next(
        i for i, s in enumerate(steps) if "release_pin" in s.get("run", "")
    )
    assert "${{" not in runs  # every expression reaches the shell through env, never inline
