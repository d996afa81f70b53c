"""Reproduce the Dockerfile's install in a fresh virtual environment and start its ENTRYPOINT.

No Docker engine runs where .ci/run runs, so this script reads the Dockerfile and carries out
its instructions itself, so the reproduction cannot drift from the image:

- ``FROM python:X.Y.Z-...``: the running Python must be X.Y (the lock is compiled for it);
- ``ENV``: set for every later step;
- ``COPY``: copied from the build context (honouring .dockerignore's patterns) into a stand-in
  for the image's file system;
- ``RUN``: run with ``/bin/sh -c``, ``pip`` being the fresh venv's, image paths mapped to the
  stand-in (``/opt/...``) and to the venv (``/usr/local/bin/...``);
- ``ENTRYPOINT``: started with the environment of a ``push`` event (anything but a pull request
  must exit 0 with a notice), from an empty workspace, with no provider keys.

Any other instruction fails the script (``USER`` and ``WORKDIR`` are against GitHub's rules for
container actions), as does an image path it does not know how to map. Afterwards the venv must
hold exactly the versions pinned in requirements.lock (and ``pip check`` must pass).

Usage: ``python .ci/docker_repro.py`` from anywhere; exits non-zero with the reason on failure.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".ci" / "docker-repro"
VENV = WORK / "venv"
FS = WORK / "fs"
WORKSPACE = WORK / "workspace"
#: image path prefix -> where it lives in the reproduction
PATH_MAP = {"/opt/": f"{FS}/opt/", "/usr/local/bin/": f"{VENV}/bin/"}
#: distributions a venv has before anything is installed (not in the lock)
VENV_OWN = {"pip"}


class ReproError(Exception):
    """The Dockerfile cannot be reproduced faithfully, or the reproduction failed."""


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            word, _, rest = full.partition(" ")
            out.append((word.upper(), rest.strip()))
    if pending.strip():
        raise ReproError("Dockerfile ends inside a continued line")
    return out


def apply_args(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The instructions with each ``ARG NAME=default`` before ``FROM`` applied to ``FROM``
    (``${NAME}`` / ``$NAME``) and dropped: what ``docker build`` uses without ``--build-arg``."""
    defaults: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    for word, args in steps:
        if word == "ARG" and not any(w == "FROM" for w, _ in out):
            name, _, default = args.partition("=")
            defaults[name.strip()] = default.strip()
            continue
        if word == "FROM":
            for name, value in defaults.items():
                args = args.replace("${" + name + "}", value).replace("$" + name, value)
        out.append((word, args))
    return out


def map_paths(command: str) -> str:
    """Rewrite image paths to the reproduction's; fail on an absolute path it cannot map."""
    for image, local in PATH_MAP.items():
        command = command.replace(image, local)
    for match in re.finditer(r"(?:^|[\s=\"'])(/[A-Za-z][^\s\"']*)", command):
        path = match.group(1)
        if not any(path.startswith(local) for local in PATH_MAP.values()):
            raise ReproError(f"cannot map image path {path!r}; teach .ci/docker_repro.py")
    return command


def ignore_rules() -> list[tuple[bool, str]]:
    """.dockerignore as ``(excluded?, pattern)`` in order; the last match wins (Docker's rule)."""
    path = REPO / ".dockerignore"
    rules: list[tuple[bool, str]] = []
    if path.exists():
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            pattern = line[1:] if negated else line
            rules.append((not negated, pattern.strip("/")))
    return rules


def excluded(rel: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether the context path ``rel`` (POSIX, relative) is left out of the build context."""
    result = False
    parts = rel.split("/")
    for exclude, pattern in rules:
        if pattern.startswith("**/"):
            tail = pattern[3:]
            hit = any(fnmatch.fnmatchcase(part, tail) for part in parts)
        else:
            # a pattern matches the path itself or any of its parent directories
            hit = any(
                fnmatch.fnmatchcase("/".join(parts[: i + 1]), pattern) for i in range(len(parts))
            )
        if hit:
            result = exclude
    return result


def copy(args: str, env: dict[str, str]) -> None:
    """``COPY src... dest`` from the build context into the stand-in file system."""
    words = shlex.split(args)
    if any(w.startswith("--") for w in words):
        raise ReproError(f"COPY flags are not reproduced: {args}")
    if len(words) < 2:
        raise ReproError(f"COPY needs a source and a destination: {args}")
    *sources, dest = words
    rules = ignore_rules()
    target = Path(map_paths(dest))
    into_dir = dest.endswith("/") or len(sources) > 1
    for source in sources:
        src = (REPO / source).resolve()
        if REPO not in src.parents and src != REPO:
            raise ReproError(f"COPY source outside the build context: {source}")
        rel = src.relative_to(REPO).as_posix()
        if not src.exists() or excluded(rel, rules):
            raise ReproError(f"COPY {source}: not in the build context (.dockerignore?)")
        if src.is_dir():
            dst = target / src.name if into_dir else target
            for path in sorted(src.rglob("*")):
                sub = path.relative_to(REPO).as_posix()
                if path.is_file() and not excluded(sub, rules):
                    out = dst / path.relative_to(src)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, out)
        else:
            out = target / src.name if into_dir else target
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)
        print(f"  COPY {source} -> {dest}")


def run_shell(args: str, env: dict[str, str]) -> None:
    """``RUN`` (shell form) with the venv first on PATH."""
    if args.startswith("["):
        raise ReproError("exec-form RUN is not reproduced; use the shell form")
    command = map_paths(args)
    print(f"  RUN {args}", flush=True)
    done = subprocess.run(
        ["/bin/sh", "-c", command], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        raise ReproError(f"RUN exited {done.returncode}: {args}")
    lines = done.stdout.strip().splitlines()
    if lines:
        print(f"    {lines[-1]}")


def check_base(args: str) -> None:
    """``FROM python:X.Y.Z-...``: this Python must be X.Y, the version the lock is built for."""
    match = re.fullmatch(r"python:(\d+)\.(\d+)(?:\.\d+)?-[\w.-]+(?:@sha256:[0-9a-f]{64})?", args)
    if not match:
        raise ReproError(f"FROM {args}: expected an official python:X.Y.Z-<variant> image")
    want = (int(match.group(1)), int(match.group(2)))
    have = sys.version_info[:2]
    if want != have:
        raise ReproError(
            f"FROM {args} is Python {want[0]}.{want[1]} but this is Python "
            f"{have[0]}.{have[1]}: run the reproduction with the image's Python version"
        )
    print(f"  FROM {args} (this Python: {sys.version.split()[0]})")


def locked_pins() -> dict[str, str]:
    """``{normalised name: version}`` from requirements.lock."""
    pins: dict[str, str] = {}
    text = (REPO / "requirements.lock").read_text(encoding="utf-8")
    for match in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", text, re.M):
        pins[normalise(match.group(1))] = match.group(2)
    return pins


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_installed(env: dict[str, str]) -> None:
    """The venv holds exactly the locked versions, plus relay-review itself and pip."""
    subprocess.run([f"{VENV}/bin/python", "-m", "pip", "check"], env=env, check=True)
    listed = subprocess.run(
        [f"{VENV}/bin/python", "-m", "pip", "list", "--format=json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    have = {normalise(d["name"]): d["version"] for d in json.loads(listed)}
    if have.pop("relay-review", None) is None:
        raise ReproError("relay-review is not installed in the venv")
    for name in VENV_OWN:
        have.pop(name, None)
    want = locked_pins()
    if have != want:
        extra = {k: v for k, v in have.items() if want.get(k) != v}
        missing = {k: v for k, v in want.items() if have.get(k) != v}
        raise ReproError(f"venv differs from requirements.lock: extra {extra}, missing {missing}")
    print(f"  installed = requirements.lock ({len(want)} pins) + relay-review; pip check ok")


def start_entrypoint(args: str, env: dict[str, str]) -> None:
    """Start the exec-form ENTRYPOINT as the runner would for a ``push`` event."""
    try:
        argv = json.loads(args)
    except json.JSONDecodeError:
        raise ReproError("ENTRYPOINT must be exec form (a JSON array)") from None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ReproError("ENTRYPOINT must be a non-empty JSON array of strings")
    if not argv[0].startswith("/"):
        raise ReproError("ENTRYPOINT must start with an absolute path")
    argv = [map_paths(argv[0]), *argv[1:]]
    WORKSPACE.mkdir(parents=True)
    event = WORK / "event.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": "0" * 40}), encoding="utf-8")
    output, summary = WORK / "github_output", WORK / "step_summary"
    output.touch()
    summary.touch()
    # What the runner hands a container action for a push: GITHUB_* and INPUT_* (hyphen kept),
    # and no provider keys. Everything else from this machine's environment is left out.
    smoke = {
        "PATH": env["PATH"],
        "HOME": str(WORKSPACE),
        "LANG": "C.UTF-8",
        **{k: v for k, v in env.items() if k.startswith(("PYTHON", "PIP_"))},
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKSPACE": str(WORKSPACE),
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # nothing listens: a push must not call out
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "INPUT_GITHUB-TOKEN": "dummy",
        "INPUT_ORCHESTRATOR-PATH": ".github/relay-review.toml",
        "INPUT_REVIEW-DRAFTS": "false",
        "INPUT_AUTHOR-ASSOCIATIONS": "OWNER, MEMBER, COLLABORATOR",
        "INPUT_FAIL-ON": "never",
        "INPUT_ON-UNAVAILABLE": "fail",
        "INPUT_INLINE-COMMENTS": "false",
    }
    print(f"  ENTRYPOINT {args} (GITHUB_EVENT_NAME=push)", flush=True)
    done = subprocess.run(
        argv, env=smoke, cwd=WORKSPACE, capture_output=True, text=True, timeout=120
    )
    # Shown quoted, so a runner executing this script does not act on the workflow commands.
    for line in (done.stdout + done.stderr).splitlines():
        print(f"    > {line}")
    if done.returncode != 0:
        raise ReproError(f"the entrypoint exited {done.returncode} for a push event (want 0)")
    if not any(line.startswith("::notice") for line in done.stdout.splitlines()):
        raise ReproError("the entrypoint printed no ::notice line for a push event")
    print("  entrypoint: exit 0 with a ::notice line")


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    try:
        steps = apply_args(instructions((REPO / "Dockerfile").read_text(encoding="utf-8")))
        if not steps or steps[0][0] != "FROM":
            raise ReproError("the Dockerfile must start with FROM")
        if [word for word, _ in steps].count("FROM") > 1:
            raise ReproError("multi-stage builds are not reproduced")
        entrypoint = None
        for word, args in steps:
            if word == "FROM":
                check_base(args)
                base = getattr(sys, "_base_executable", sys.executable)
                subprocess.run([base, "-m", "venv", str(VENV)], check=True)
                env["PATH"] = f"{VENV}/bin{os.pathsep}{env.get('PATH', '')}"
            elif word == "ENV":
                pairs = shlex.split(args)
                if not all("=" in pair for pair in pairs):
                    raise ReproError(f"use ENV key=value: {args}")
                for pair in pairs:
                    key, _, value = pair.partition("=")
                    env[key] = value
                print(f"  ENV {args}")
            elif word == "COPY":
                copy(args, env)
            elif word == "RUN":
                run_shell(args, env)
            elif word == "ENTRYPOINT":
                entrypoint = args
            elif word in ("USER", "WORKDIR"):
                raise ReproError(f"{word} is against GitHub's rules for container actions")
            elif word == "LABEL":
                continue
            else:
                raise ReproError(f"{word} is not reproduced; teach .ci/docker_repro.py")
        if entrypoint is None:
            raise ReproError("the Dockerfile has no ENTRYPOINT")
        check_installed(env)
        start_entrypoint(entrypoint, env)
    except ReproError as exc:
        print(f"docker reproduction: FAILED: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"docker reproduction: FAILED: {exc}", file=sys.stderr)
        return 1
    print("docker reproduction: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
