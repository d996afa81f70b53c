"""The action's real image, started the way the runner starts it (``docker run`` with the
workspace, home, workflow and file-command folders mounted and ``INPUT_*``/``GITHUB_*`` passed).

Runs only when ``RELAY_REVIEW_TEST_IMAGE`` names a built image: ``.ci/docker_ci.py`` builds the
Dockerfile on a real engine, sets it and runs this file. Everywhere else it skips, and the
Dockerfile's steps are reproduced without an engine by ``.ci/docker_repro.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from action_harness import (
    NUMBER,
    REPO,
    policy_toml,
    posted_bodies,
    run_action,
    standard_fleet,
)
from github_mock import MockGitHub, webhook_examples
from relay_review.drill import FaultFleet
from relay_review.github.comment import MARKER

IMAGE = os.environ.get("RELAY_REVIEW_TEST_IMAGE", "")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not IMAGE, reason="no image to run: .ci/docker_ci.py sets RELAY_REVIEW_TEST_IMAGE"
    ),
]


@pytest.fixture(scope="module")
def fleet() -> Iterator[FaultFleet]:
    with standard_fleet() as running:
        yield running


def test_push_event_is_skipped_with_a_notice(tmp_path: Path, github_mock: MockGitHub) -> None:
    push = webhook_examples("push")[0]
    run = run_action(tmp_path, github_mock, payload=push, event_name="push", image=IMAGE)
    assert run.code == 0, run.stdout + run.stderr
    assert "::notice::relay-review: nothing to review: not a pull request event" in run.stdout
    assert run.outputs["decision"] == "skipped"
    assert set(run.outputs) >= {"decision", "served-by", "comment-url", "findings"}
    assert not github_mock.calls()


def test_pull_request_target_posts_one_comment(
    tmp_path: Path, github_mock: MockGitHub, fleet: FaultFleet
) -> None:
    run = run_action(
        tmp_path, github_mock, {"policy": policy_toml(fleet, "acme")}, image=IMAGE, timeout=180
    )
    assert run.code == 0, run.stdout + run.stderr
    (body,) = posted_bodies(github_mock)
    assert len(github_mock.calls("POST", f"/repos/{REPO}/issues/{NUMBER}/comments$")) == 1
    assert body.startswith(MARKER + "\n")
    assert "Changes requested" in body and "SERVED" in body
    assert not [c for c in github_mock.calls() if c.status == 422]
    assert run.report is not None and run.report["decision"] == "request_changes"
    assert run.outputs["served-by"] == "acme/acme/reviewer"


def test_docker_stop_ends_the_run_at_once(tmp_path: Path) -> None:
    """SIGTERM to PID 1 (``docker stop``): one line, exit 143, well before the 10 s SIGKILL."""
    name = f"relay-review-stop-{os.getpid()}"
    proc = subprocess.Popen(
        [
            "docker",
            "run",
            "--rm",
            "--name",
            name,
            "--entrypoint",
            "/usr/local/bin/relay-review",
            IMAGE,
            "drill",
            "--scenario",
            "all-stalled",
            "--deadline",
            "60",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Stop it once it is waiting on stalled routes: its first progress line says so, and is
    # printed inside the block whose SIGTERM handler is under test. A fixed sleep raced a slow
    # engine: stopped before its handler was installed, PID 1 ignores SIGTERM (10 s, then 137),
    # and stopped before the container exists, `docker stop` fails. The read is bounded by the
    # suite's per-test timeout, as every ready-line read of the suite is.
    assert proc.stderr is not None
    try:
        first = proc.stderr.readline()
        assert "waiting for" in first, first
        started = time.monotonic()
        subprocess.run(["docker", "stop", name], check=True, capture_output=True, timeout=30)
        proc.wait(timeout=30)
    finally:  # a run that never started or never stopped is not left behind
        if proc.poll() is None:
            subprocess.run(["docker", "rm", "--force", name], capture_output=True, timeout=30)
            proc.kill()
    stderr = first + proc.stderr.read()  # through the buffer readline() filled
    assert time.monotonic() - started < 8
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert [line for line in stderr.splitlines() if "cancelled" in line] == [
        "relay-review drill: cancelled by SIGTERM; stopping without sending anything more"
    ], stderr
    assert "Traceback" not in stderr


# --------------------------------------------------------------------- the prebuilt image path

REGISTRY = os.environ.get("RELAY_REVIEW_TEST_REGISTRY", "")
PINNED_ACTION = os.environ.get("RELAY_REVIEW_TEST_PINNED_ACTION", "")
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)


@pytest.mark.skipif(
    not REGISTRY, reason="no local registry: .ci/docker_ci.py sets RELAY_REVIEW_TEST_REGISTRY"
)
def test_the_image_runs_as_pulled_from_the_registry_by_the_pinned_digest() -> None:
    """The release path, on a local registry: the image under test was pushed there, action.yml
    was pinned to it by digest (.ci/release_pin.py, as .github/workflows/release.yml does), every
    local copy was removed and the runner's way of using ``docker://`` (pull, then the ``docker
    run`` of the tests above) ran it. Here: the registry holds the manifest that digest names and
    every blob of it, and the pinned action.yml differs from action.yml only in ``runs.image``."""
    import hashlib
    import re

    import httpx
    import yaml

    match = re.fullmatch(rf"{re.escape(REGISTRY)}/([a-z0-9/-]+)@(sha256:[0-9a-f]{{64}})", IMAGE)
    assert match, IMAGE
    name, digest = match.groups()
    root = Path(__file__).resolve().parents[2]
    released = yaml.safe_load(Path(PINNED_ACTION).read_text(encoding="utf-8"))
    source = yaml.safe_load((root / "action.yml").read_text(encoding="utf-8"))
    assert released["runs"] == {"using": "docker", "image": f"docker://{IMAGE}"}
    assert {**released, "runs": source["runs"]} == source

    with httpx.Client(base_url=f"http://{REGISTRY}/v2/{name}", timeout=10) as registry:
        answer = registry.get(f"/manifests/{digest}", headers={"Accept": MANIFEST_TYPES})
        assert answer.status_code == 200
        assert "sha256:" + hashlib.sha256(answer.content).hexdigest() == digest
        manifest = answer.json()
        blobs = [manifest["config"], *manifest["layers"]]
        assert len(blobs) >= 2
        for blob in blobs:
            assert registry.head(f"/blobs/{blob['digest']}").status_code == 200, blob

    pulled = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", IMAGE],
        capture_output=True,
        text=True,
        check=True,
    )
    assert IMAGE in pulled.stdout
