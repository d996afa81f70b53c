"""Build the action's Dockerfile on a real Docker engine and run the image as the runner does.

Steps (each says what it does; any failure fails CI, except an engine that cannot start):

1. An engine: use the one answering ``docker info``; else install Debian's ``docker.io`` (one
   ``apt-get update``; this runs as root) and start ``dockerd`` with its data under /tmp. A
   ``dockerd`` started here is stopped by its PID at the end, also on failure or a signal.
2. A stand-in base image: Docker Hub cannot be reached here, so ``python:3.11-slim-bookworm``
   is replaced by one built from Debian packages: ``debootstrap --variant=minbase bookworm``
   with python3.11 and python3-venv, a venv at /usr/local (pip and console scripts land in
   /usr/local/bin, as in the official image), the official image's PATH and LANG, imported with
   ``docker import``. It is cached as a tarball keyed by a hash of its recipe. pip in it trusts
   the machine's CA bundle (/etc/pip.conf names the bundle, and a one-layer image on top of the
   imported one copies the machine's bundle there; a sandbox detail of the stand-in only).
3. ``docker build --no-cache --build-arg BASE_IMAGE=<stand-in>`` of the project's Dockerfile,
   timed: what a runner does at the start of every job of an action with ``image: Dockerfile``
   (the runner also pulls the base first; that pull is not counted here).
4. The prebuilt-image path of a release (.github/workflows/release.yml): a local registry
   (Debian's ``docker-registry``, installed when missing, started by PID on a free 127.0.0.1
   port and stopped by PID at the end) receives the image (``docker push``); action.yml is
   pinned to it by digest with ``.ci/release_pin.py`` (as the release workflow does); every local
   copy of the image and its base is removed, and the image is pulled by that digest, timed:
   what a runner does for ``image: docker://...@sha256:...``. Both times are printed with the
   difference (the time saved per run).
5. tests/e2e/test_container.py with ``RELAY_REVIEW_TEST_IMAGE`` set to the *pulled* image (its
   ``registry/name@sha256:...`` reference) and ``RELAY_REVIEW_TEST_REGISTRY`` to the registry: a
   push event (skip notice, exit 0, outputs written), a pull_request_target event against the
   GitHub mock (Prism) and the fault fleet (exit 0, one comment, no 422), ``docker stop``
   (SIGTERM handled at once), and the registry holding every blob of the pinned manifest.
6. bench/startup.py inside the pulled image (its interpreter, its installed package, a fault
   fleet inside the container, no network): the start-up users meet, printed.

Where no engine can start, it says so loudly and exits 0: .ci/run still runs the Dockerfile
reproduction without an engine (.ci/docker_repro.py). ``RELAY_REVIEW_REQUIRE_DOCKER=1`` makes
that case a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: dockerd's and the registry's state (RELAY_REVIEW_CI_STATE: another place, e.g. for two
#: checkouts on one machine, whose dockerds must not share a data root).
STATE = Path(
    os.environ.get("RELAY_REVIEW_CI_STATE", Path(tempfile.gettempdir()) / "relay-review-ci-docker")
)
SOCKET = STATE / "docker.sock"
CACHE = Path(os.environ.get("RELAY_REVIEW_CI_CACHE", "/var/cache/relay-review-ci"))
PROJECT_IMAGE = "relay-review:ci"
#: The repository the image is pushed to in the local registry (a release pushes to GHCR).
REGISTRY_REPO = "relay-review"
#: The official image's environment, repeated in the stand-in.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
PACKAGES = ("python3.11", "python3-venv", "ca-certificates")
PIP_CONF = "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


class Unavailable(Exception):
    """No Docker engine can run here (said loudly; not a CI failure by default)."""


def say(text: str) -> None:
    print(f"docker ci: {text}", flush=True)


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a command, echoing it; raise on failure."""
    say("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, text=True, **kw)  # type: ignore[call-overload]


#: The engine the docker client talks to: the dockerd started here, unless one already runs.
ENGINE = {"host": f"unix://{SOCKET}"}


def docker_env() -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": ENGINE["host"]}


def engine_answers(env: dict[str, str] | None = None) -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


def apt_install(packages: list[str], updated: list[bool]) -> None:
    """``apt-get install`` (``apt-get update`` first, once per run)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Unavailable(f"cannot install {' '.join(packages)}: needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not updated:
        run(["apt-get", "update", "-qq"], env=env)
        updated.append(True)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], env=env)


def start_dockerd(updated: list[bool]) -> subprocess.Popen[bytes]:
    """Start dockerd with its state under /tmp; wait until it answers."""
    if shutil.which("dockerd") is None:
        try:
            apt_install(["docker.io"], updated)
        except subprocess.CalledProcessError as exc:
            raise Unavailable(f"installing docker.io failed: {exc}") from None
    STATE.mkdir(parents=True, exist_ok=True)
    log = open(STATE / "dockerd.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [
            "dockerd",
            "--host",
            f"unix://{SOCKET}",
            "--data-root",
            str(STATE / "data"),
            "--exec-root",
            str(STATE / "exec"),
            "--pidfile",
            str(STATE / "dockerd.pid"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    say(f"dockerd started (PID {proc.pid}; log {STATE / 'dockerd.log'})")
    wait_ready(
        proc,
        "dockerd",
        STATE / "dockerd.log",
        lambda: engine_answers(docker_env()),
        60,
        1,
        Unavailable,
    )
    return proc


def stop_dockerd(proc: subprocess.Popen[bytes]) -> None:
    """Stop the dockerd started here, by its PID (SIGTERM, then SIGKILL after 30 s)."""
    stop_process(proc, "dockerd")


def apt_mirror() -> str:
    """The Debian mirror apt uses here (deb822 ``URIs:`` or a ``deb`` line), else the default."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for path in sources:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if not words or words[0] not in ("URIs:", "deb"):
                continue
            url = next((w for w in words[1:] if w.startswith(("http://", "https://"))), "")
            if url.rstrip("/").endswith("/debian"):
                return url
    return DEFAULT_MIRROR


def standin_recipe(mirror: str) -> str:
    """Everything that decides the stand-in's content (its cache key hashes this)."""
    return "\n".join(
        [
            "debootstrap --variant=minbase bookworm",
            mirror,
            ",".join(PACKAGES),
            "venv /usr/local",
            PIP_CONF,
            repr(sorted(BASE_ENV.items())),
        ]
    )


def build_standin(tarball: Path, mirror: str, updated: list[bool]) -> None:
    """debootstrap a minimal bookworm with Python 3.11, venv at /usr/local; tar it."""
    if shutil.which("debootstrap") is None:
        apt_install(["debootstrap"], updated)
    root = Path(tempfile.mkdtemp(prefix="relay-review-standin-"))
    try:
        started = time.monotonic()
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                "bookworm",
                str(root),
                mirror,
            ],
            stdout=subprocess.DEVNULL,
        )
        run(["chroot", str(root), "python3.11", "-m", "venv", "/usr/local"])
        (root / "etc" / "pip.conf").write_text(PIP_CONF, encoding="utf-8")
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        run(["tar", "-C", str(root), "-cf", str(partial), "."])
        partial.replace(tarball)
        say(f"stand-in base built in {time.monotonic() - started:.0f} s: {tarball}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def standin_image(updated: list[bool]) -> str:
    """The stand-in base's tag: imported from the cached tarball (built first if missing)."""
    mirror = apt_mirror()
    key = hashlib.sha256(standin_recipe(mirror).encode()).hexdigest()[:16]
    tag = f"relay-review-standin:{key}"
    env = docker_env()
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, env=env).returncode:
        tarball = CACHE / f"standin-{key}.tar"
        if tarball.is_file():
            say(f"stand-in base from the cache: {tarball}")
        else:
            build_standin(tarball, mirror, updated)
        changes = [arg for k, v in BASE_ENV.items() for arg in ("--change", f"ENV {k}={v}")]
        changes += ["--change", 'CMD ["python3"]']
        run(["docker", "import", *changes, str(tarball), tag], env=env, stdout=subprocess.DEVNULL)
    return with_host_ca(tag, env)


def with_host_ca(base: str, env: dict[str, str]) -> str:
    """``base`` with this machine's CA bundle as its bundle, when the machine has one: pip in
    the build reaches PyPI through whatever TLS the machine trusts (a sandbox detail of the
    stand-in, not of the project's Dockerfile). The cached tarball stays machine-independent."""
    if not HOST_CA.is_file():
        return base
    digest = hashlib.sha256(HOST_CA.read_bytes()).hexdigest()[:12]
    tag = f"{base}-ca{digest}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, env=env).returncode:
        with tempfile.TemporaryDirectory() as context:
            shutil.copyfile(HOST_CA, Path(context) / "ca.crt")
            (Path(context) / "Dockerfile").write_text(
                f"FROM {base}\nCOPY ca.crt /etc/ssl/certs/ca-certificates.crt\n", encoding="utf-8"
            )
            run(["docker", "build", "-q", "-t", tag, context], env=env, stdout=subprocess.DEVNULL)
    return tag


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_registry(updated: list[bool]) -> tuple[subprocess.Popen[bytes], str]:
    """Start Debian's docker-registry (the distribution registry, v2 API) on a free 127.0.0.1
    port, storage under STATE; wait until ``GET /v2/`` answers. Returns it and ``HOST:PORT``
    (dockerd trusts 127.0.0.0/8 registries over plain HTTP by default)."""
    if shutil.which("docker-registry") is None:
        apt_install(["docker-registry"], updated)
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    root = STATE / "registry"
    shutil.rmtree(root / "data", ignore_errors=True)  # every run pushes to an empty registry
    (root / "data").mkdir(parents=True)
    address = f"127.0.0.1:{free_port()}"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: {address}\n",
        encoding="utf-8",
    )
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [binary, "serve", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    say(f"docker-registry started (PID {proc.pid}) at {address}; log {root / 'registry.log'}")

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    wait_ready(proc, "docker-registry", root / "registry.log", answers, 30, 0.3, RuntimeError)
    return proc, address


def wait_ready(
    proc: subprocess.Popen[bytes],
    what: str,
    log_path: Path,
    ready: Callable[[], bool],
    seconds: float,
    interval: float,
    error: type[Exception],
) -> None:
    """Wait until ``ready()`` for a process started here: ``error`` with its log's tail when it
    exits first, or after ``seconds`` (then it is stopped by its PID)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:]
            raise error(f"{what} exited with {proc.returncode}:\n{tail}")
        if ready():
            return
        time.sleep(interval)
    stop_process(proc, what)
    raise error(f"{what} did not answer within {seconds:g} s")


def stop_process(proc: subprocess.Popen[bytes], what: str) -> None:
    """Stop a process started here, by its PID (SIGTERM, then SIGKILL after 30 s)."""
    if proc.poll() is not None:
        return
    say(f"stopping {what} (PID {proc.pid})")
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def release_pin() -> object:
    """.ci/release_pin.py as a module (the release workflow's pin step)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("release_pin", REPO / ".ci" / "release_pin.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def push_pin_pull(
    address: str, bases: list[str], env: dict[str, str], *, own_engine: bool
) -> tuple[str, float]:
    """Push the built image to the registry at ``address``, pin a copy of action.yml to it by
    digest (as the release workflow does), remove every local copy of it and of its base, pull
    it back by the pinned reference. Returns that reference (``HOST:PORT/NAME@sha256:...``, as
    ``docker run`` takes it) and the seconds the pull took. On an engine started here
    (``own_engine``) every other image is removed too, so the pull is cold, as on a fresh
    runner; on an engine that was already running only our own tags are."""
    tag = f"{address}/{REGISTRY_REPO}:ci"
    run(["docker", "tag", PROJECT_IMAGE, tag], env=env)
    run(["docker", "push", tag], env=env, stdout=subprocess.DEVNULL)
    digests = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", tag],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    ref = next(d for d in json.loads(digests) if d.startswith(f"{address}/{REGISTRY_REPO}@"))
    pinned = release_pin().pin(  # type: ignore[attr-defined]
        (REPO / "action.yml").read_text(encoding="utf-8"), f"docker://{ref}"
    )
    (STATE / "action.pinned.yml").write_text(pinned, encoding="utf-8")
    image = re.search(r"^  image: docker://(\S+)$", pinned, re.M)
    assert image and image.group(1) == ref, "the pinned action.yml does not name the pushed image"
    say(f"pushed; action.yml pinned: image: docker://{ref}")
    run(
        ["docker", "rmi", "--force", tag, PROJECT_IMAGE, *bases], env=env, stdout=subprocess.DEVNULL
    )
    left = subprocess.run(
        ["docker", "image", "ls", "--quiet", "--all"], capture_output=True, text=True, env=env
    ).stdout.split()
    if not own_engine:
        say("a shared engine: other images kept, so the pull below may reuse layers (not cold)")
    if left and own_engine:  # untagged leftovers of the build would let the pull skip layers
        subprocess.run(["docker", "rmi", "--force", *left], capture_output=True, env=env)
    started = time.monotonic()
    run(["docker", "pull", image.group(1)], env=env, stdout=subprocess.DEVNULL)
    return ref, time.monotonic() - started


def startup_in_image(ref: str, env: dict[str, str]) -> None:
    """bench/startup.py inside the pulled image, with the image's interpreter (the start-up users
    meet; the development environment's interpreter may be built without the optimizations the
    image's has). Printed, not judged: machines are noisy; a crash of the benchmark fails CI."""
    say("start-up in the action's image (bench/startup.py --runs 7, its own fault fleet inside):")
    bench = REPO / "bench" / "startup.py"
    run(
        [
            "docker", "run", "--rm", "--network", "none", "--entrypoint", "python",
            "-v", f"{bench}:/bench/startup.py:ro", ref, "/bench/startup.py", "--runs", "7",
        ],
        env=env,
    )  # fmt: skip


def main() -> int:
    updated: list[bool] = []
    dockerd: subprocess.Popen[bytes] | None = None
    registry: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through finally: dockerd is stopped

    signal.signal(signal.SIGTERM, on_signal)
    try:
        if engine_answers():  # an engine already runs (the client's default): start nothing
            ENGINE["host"] = (
                os.environ.get("DOCKER_HOST")
                or subprocess.run(
                    ["docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout.strip()
            )
            say(f"using the running engine at {ENGINE['host']}")
        else:
            dockerd = start_dockerd(updated)
        env = docker_env()
        base = standin_image(updated)
        started = time.monotonic()
        build = ["docker", "build", "--no-cache", "--build-arg", f"BASE_IMAGE={base}"]
        run([*build, "-t", PROJECT_IMAGE, "."], cwd=REPO, env=env)
        build_s = time.monotonic() - started
        say(f"image {PROJECT_IMAGE} built in {build_s:.1f} s (no cache; the base already here)")
        registry, address = start_registry(updated)
        bases = sorted({base, base.split("-ca")[0]})  # the stand-in and its CA layer
        ref, pull_s = push_pin_pull(address, bases, env, own_engine=dockerd is not None)
        say(
            f"image pulled by digest in {pull_s:.1f} s; build from the Dockerfile {build_s:.1f} s: "
            f"{build_s - pull_s:.1f} s saved per run (ratio {build_s / max(pull_s, 0.01):.1f})"
        )
        test_env = {
            **env,
            "RELAY_REVIEW_TEST_IMAGE": ref,
            "RELAY_REVIEW_TEST_REGISTRY": address,
            "RELAY_REVIEW_TEST_PINNED_ACTION": str(STATE / "action.pinned.yml"),
        }
        run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rs",
                "tests/e2e/test_container.py",
            ],
            cwd=REPO,
            env=test_env,
        )
        startup_in_image(ref, env)
        return 0
    except Unavailable as exc:
        banner = "!" * 78
        print(
            f"\n{banner}\ndocker ci: NO DOCKER ENGINE: {exc}\n"
            "docker ci: the image was NOT built or run; only the engine-less reproduction "
            f"(.ci/docker_repro.py) checks the Dockerfile.\n{banner}\n",
            flush=True,
        )
        return 1 if os.environ.get("RELAY_REVIEW_REQUIRE_DOCKER") == "1" else 0
    except (subprocess.CalledProcessError, RuntimeError, AssertionError, StopIteration) as exc:
        print(f"docker ci: FAILED: {exc!r}", file=sys.stderr)
        return 1
    finally:
        if registry is not None:
            stop_process(registry, "docker-registry")
        if dockerd is not None:
            stop_dockerd(dockerd)


if __name__ == "__main__":
    sys.exit(main())
