"""The harness for running ``relay-review run`` end to end, as the runner starts it: a subprocess
with ``INPUT_*`` and ``GITHUB_*`` set, GitHub played by Prism serving GitHub's OpenAPI description
(``github_mock``), the models by a fault fleet on 127.0.0.1, events from
``@octokit/webhooks-examples``. Shared by ``tests/e2e/test_run_action.py`` and
``tests/e2e/reliability/``.

Prism answers from GitHub's static examples: ``GET /pulls/{n}`` always says the head is
``6dcb09b5...`` (so the event's head is set to it, or to another SHA to simulate a push during the
run), and the issue-comments listing is chosen with ``Prefer`` (``relay-forged``,
``relay-sticky``). The PR's files and the policy files are stubbed with realistic bodies (Prism's
examples carry no usable patch, and its policy example is not a policy of this project's format).
Where GitHub's *state* matters (no duplicate comment, a head that moves, two runs racing), tests
turn on ``mock.comments_overlay(head)``; :func:`start_action` starts a run without waiting, so
two can run at once (give each its own root and token, e.g. :data:`TOKEN_B`).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli_harness import saved_logging
from github_mock import MockGitHub, webhook_examples
from relay_review.drill import FaultFleet

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"  # the head of every Prism pull request
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"
#: The default branch's tip, where the workflow runs from (``GITHUB_SHA``): the webhook
#: example's base commit (its pull request targets the default branch, ``master``).
DEFAULT_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
DEFAULT_REF = "refs/heads/master"
REPO = "Codertocat/Hello-World"  # the webhook examples' repository
NUMBER = 2
POLICY_REPO = "octo-org/relay-policy"
POLICY_PATH = ".github/relay-review.toml"

TOKEN = "ghs_FAKEtokenNeverLogged0123456789abcdef"
#: A second run's token (concurrent runs are told apart by their token).
TOKEN_B = "ghs_FAKEtokenOfRunB0123456789abcdef0123"
KEY_ENV = "FAKE_FLEET_API_KEY"
FLEET_KEY = "sk-fake-fleet-key-0123456789abcdef"
UNUSED_KEY = "sk-fake-unused-key-fedcba9876543210"
SECRETS = (TOKEN, FLEET_KEY, UNUSED_KEY)

# --- the pull request: one real patch, one binary file --------------------------------------

QUERY_LINE = 'query = "SELECT * FROM users WHERE name = \'%s\'" % request.form["name"]'
PATCH = (
    "@@ -10,4 +10,6 @@ def login(request):\n"
    '     user = find_user(request.form["name"])\n'
    '-    if user.check(request.form["password"]):\n'
    f"+    {QUERY_LINE}\n"
    "+    rows = db.execute(query)\n"
    "+    if rows:\n"
    "         return ok(user)\n"
    "     return denied()"
)


def api_file(name: str, status: str, patch: str | None, adds: int, dels: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "sha": "bbcd538c8e72b8c175046e27cc8f907076331401",
        "filename": name,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
        "blob_url": f"https://github.com/{REPO}/blob/{SHA}/{name}",
        "raw_url": f"https://github.com/{REPO}/raw/{SHA}/{name}",
        "contents_url": f"https://api.github.com/repos/{REPO}/contents/{name}?ref={SHA}",
    }
    if patch is not None:
        entry["patch"] = patch
    return entry


#: ``app/auth.py`` at the head: the file PATCH was made against (context around its hunk).
HEAD_AUTH_LINES = [
    "from app.db import db",
    "from app.users import find_user",
    "",
    "",
    "def ok(user):",
    "    return {'user': user.name}",
    "",
    "",
    "def login(request):",
    '    user = find_user(request.form["name"])',
    f"    {QUERY_LINE}",
    "    rows = db.execute(query)",
    "    if rows:",
    "        return ok(user)",
    "    return denied()",
    "",
    "",
    "def denied():",
    "    return {'error': 'denied'}",
    "",
]
HEAD_AUTH = "\n".join(HEAD_AUTH_LINES)
#: The conventional guidelines file (read at the base commit when the policy names none).
GUIDELINES_PATH = ".github/relay-review.md"

FILES = [
    api_file("app/auth.py", "modified", PATCH, 3, 1),
    api_file("assets/logo.png", "added", None, 0, 0),
]


def finding(line: int, quote: str, severity: str, message: str) -> dict[str, Any]:
    return {
        "path": "app/auth.py",
        "line": line,
        "side": "RIGHT",
        "quote": quote,
        "severity": severity,
        "message": message,
    }


#: Verdict per fleet account (the fleet replies by model id).
VERDICTS: dict[str, dict[str, Any]] = {
    "acme/reviewer": {
        "summary": "Replaces the password check with a SQL query built from user input.",
        "decision": "approve",  # advisory only: the decision is computed
        "findings": [
            finding(11, QUERY_LINE, "high", "SQL injection: the name is formatted into SQL."),
            finding(99, "nope", "low", "A line outside the diff."),
        ],
    },
    "pair/reviewer": {
        "summary": "Two smaller issues.",
        "findings": [
            finding(12, "rows = db.execute(query)", "medium", "Result set is never closed."),
            finding(13, "if rows:", "low", "Truthiness of a cursor is always true."),
        ],
    },
}


def fleet_reply(body: dict[str, Any]) -> str:
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"  # a preflight probe
    return json.dumps(VERDICTS[body["model"]])


#: The standard fleet: two honest reviewers, a 503 route and one that echoes the key in a 500.
FLEET_ACCOUNTS: dict[str, Any] = {
    "acme": {"models": {"acme/reviewer": "healthy"}, "api_key": FLEET_KEY},
    "pair": {"models": {"pair/reviewer": "healthy"}, "api_key": FLEET_KEY},
    "down": {"models": {"down/broken": "503"}, "api_key": FLEET_KEY},
    "leaky": {"models": {"leaky/oops": "500@leak"}, "api_key": FLEET_KEY},
}


def standard_fleet() -> FaultFleet:
    """The standard fleet (use as a context manager: ``with standard_fleet() as fleet``)."""
    return FaultFleet(FLEET_ACCOUNTS, reply=fleet_reply)


FAST = """\
[serving]
connect = 2
first_byte = 5
idle = 5
attempt = 10
deadline = 20

[preflight]
probe_budget = 4
probe_timeout = 3

[discovery]
timeout = 3

[github]
write_interval = 0
"""


def policy_toml(fleet: FaultFleet, *accounts: str, head: str = FAST) -> str:
    """A policy declaring fleet accounts as self-hosted, declared-free endpoints."""
    parts = [head]
    for name in accounts:
        parts.append(
            "[[accounts]]\n"
            f'name = "{name}"\n'
            'kind = "openai_compatible"\n'
            f'base_url = "{fleet.base_url(name)}"\n'
            'pricing = "declared-free"\n'
            f'api_key_env = "{KEY_ENV}"\n'
        )
    return "\n".join(parts)


def contents_body(repo: str, text: str, path: str = POLICY_PATH) -> dict[str, Any]:
    """A contents-API answer for a file (``type: file``, base64 content): the policy file
    unless ``path`` says otherwise."""
    raw = text.encode()
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(raw),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": base64.encodebytes(raw).decode(),
        "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
        "url": f"https://api.github.com/repos/{repo}/contents/{path}",
        "git_url": None,
        "html_url": None,
        "download_url": None,
        "_links": {"self": "", "git": None, "html": None},
    }


# --- running the action --------------------------------------------------------------------

#: What the runner passes for every input of action.yml when the workflow sets nothing.
ACTION_DEFAULTS = {
    "github-token": TOKEN,
    "policy": "",
    "orchestrator-repo": "",
    "orchestrator-ref": "",
    "orchestrator-path": POLICY_PATH,
    "orchestrator-min-ref": "",
    "pool": "",
    "limit": "",
    "account-cap": "",
    "require-zdr": "",
    "deadline": "",
    "first-byte-timeout": "",
    "probe-budget": "",
    "exclude": "",
    "review-drafts": "false",
    "author-associations": "OWNER, MEMBER, COLLABORATOR",
    "fail-on": "never",
    "on-unavailable": "fail",
    "inline-comments": "false",
    "comment-author": "",
    "language": "",
    "trigger": "/relay-review",
    "state": "comment",
}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    report: dict[str, Any] | None
    root: Path
    #: Peak resident memory of the action process (``measure_memory=True``), in MB.
    peak_rss_mb: float | None = None
    #: Wall time from start to exit, in seconds.
    wall_s: float = 0.0

    def files_text(self) -> str:
        """Every file the run left under its root (workspace, outputs, summary, temp)."""
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.root.rglob("*")) if p.is_file()
        )


def parse_outputs(text: str) -> dict[str, str]:
    """``GITHUB_OUTPUT`` as the runner reads it (``name<<DELIM`` blocks)."""
    result: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if "<<" in lines[i]:
            name, delimiter = lines[i].split("<<", 1)
            end = lines.index(delimiter, i + 1)
            result[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return result


def pr_payload(index: int = 0, **changes: Any) -> dict[str, Any]:
    """A ``pull_request`` example with its head set to Prism's SHA (and ``changes`` applied)."""
    payload = copy.deepcopy(webhook_examples("pull_request")[index])
    pr = payload["pull_request"]
    pr["head"]["sha"] = changes.pop("head_sha", SHA)
    pr.update(changes)
    return payload


PEAK_RSS_FILE = "peak-rss-kib"
#: The measuring parent: runs argv[2:], writes its children's peak RSS (KiB) to argv[1].
_PEAK_RSS = (
    "import resource, subprocess, sys; rc = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(rc)"
)


@dataclass
class ActionProcess:
    """A ``relay-review run`` started by :func:`start_action`; :meth:`wait` collects it."""

    proc: subprocess.Popen[str]
    root: Path
    started: float = field(default_factory=time.monotonic)

    def wait(self, timeout: float = 120) -> Run:
        """Wait for the run (killed after ``timeout`` s, then TimeoutExpired) and collect it."""
        try:
            stdout, stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise
        wall = time.monotonic() - self.started
        return collect_run(self.root, self.proc.returncode, stdout, stderr, wall)


def action_env(
    root: Path,
    mock: MockGitHub,
    inputs: dict[str, str] | None = None,
    *,
    payload: dict[str, Any] | None = None,
    event_name: str = "pull_request_target",
    files: list[dict[str, Any]] | None = None,
    env_extra: dict[str, str] | None = None,
    event_text: str | None = None,
) -> dict[str, str]:
    """Stub the pull request on ``mock``, lay out the runner's folders under ``root`` and return
    the environment the runner gives the action (shared by :func:`start_action` and
    :func:`run_in_process`; the arguments are theirs)."""
    mock.prefer("GET", "^/user$", "code=403")  # GITHUB_TOKEN: GET /user is not allowed
    mock.stub("GET", f"/pulls/{NUMBER}/files$", 200, FILES if files is None else files, times=None)
    # after the test's own rules (the first match wins): no guidelines file at the base, and
    # the head version of app/auth.py (context around its hunk)
    mock.stub(
        "GET", f"/contents/{re.escape(GUIDELINES_PATH)}$", 404, {"message": "Not Found"}, times=None
    )
    mock.stub(
        "GET", "/contents/app/auth.py$", 200, contents_body(REPO, HEAD_AUTH, "app/auth.py"), None
    )
    workspace, temp = root / "workspace", root / "runner-temp"
    workspace.mkdir(parents=True)
    temp.mkdir()
    event_path = root / "event.json"
    if event_text is None:
        event_text = json.dumps(payload if payload is not None else pr_payload())
    event_path.write_text(event_text)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": mock.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_SHA": DEFAULT_SHA,
        "GITHUB_REF": DEFAULT_REF,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(root / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(root / "summary.md"),
        "RUNNER_TEMP": str(temp),
        KEY_ENV: FLEET_KEY,
        "UNUSED_VENDOR_API_KEY": UNUSED_KEY,
    }
    for name, value in {**ACTION_DEFAULTS, **(inputs or {})}.items():
        env[f"INPUT_{name.upper()}"] = value
    env.update(env_extra or {})
    return env


def start_action(
    root: Path,
    mock: MockGitHub,
    inputs: dict[str, str] | None = None,
    *,
    payload: dict[str, Any] | None = None,
    event_name: str = "pull_request_target",
    files: list[dict[str, Any]] | None = None,
    env_extra: dict[str, str] | None = None,
    measure_memory: bool = False,
    event_text: str | None = None,
    image: str | None = None,
) -> ActionProcess:
    """Start ``relay-review run`` like the runner does, without waiting (for concurrent runs:
    give each its own ``root`` and, to tell them apart on the mock, its own ``github-token``).

    ``env_extra`` adds (or, with ``""``, blanks) environment variables such as provider keys.
    ``measure_memory`` starts the action under a small Python parent that records the action's
    peak RSS (``ru_maxrss`` of its one child; it includes only that parent's small pre-``exec``
    image) into ``Run.peak_rss_mb``. ``event_text`` replaces the event payload file's text.
    ``image`` runs the action's Docker image instead, as the runner starts it
    (:func:`container_command`).
    """
    env = action_env(
        root,
        mock,
        inputs,
        payload=payload,
        event_name=event_name,
        files=files,
        env_extra=env_extra,
        event_text=event_text,
    )
    command = [sys.executable, "-m", "relay_review", "run"]
    if image is not None:
        command, env = container_command(image, root, env)
    elif measure_memory:
        command = [sys.executable, "-c", _PEAK_RSS, str(root / PEAK_RSS_FILE), *command]
    proc = subprocess.Popen(
        command,
        env=env,
        cwd=root / "workspace",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return ActionProcess(proc, root)


def run_in_process(
    root: Path,
    mock: MockGitHub,
    inputs: dict[str, str] | None = None,
    *,
    payload: dict[str, Any] | None = None,
    event_name: str = "pull_request_target",
    files: list[dict[str, Any]] | None = None,
    env_extra: dict[str, str] | None = None,
    event_text: str | None = None,
) -> Run:
    """The same run as :func:`run_action`, in this process: the action's entrypoint
    (``relay_review.commands.run.run_action``) over the same environment, against the same
    Prism and fleet, with its stdout and stderr captured.

    What it does not cover is the process itself: the console script, ``cli.main``'s logging
    set-up and signal handling, interpreter start-up and exit. Each suite that uses it keeps a
    subprocess run per family (:func:`run_action`) for those.
    """
    from relay_review.commands.run import run_action as action_entrypoint

    env = action_env(
        root,
        mock,
        inputs,
        payload=payload,
        event_name=event_name,
        files=files,
        env_extra=env_extra,
        event_text=event_text,
    )
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _process_logging(err):
        code = action_entrypoint(env)
    return collect_run(root, code, out.getvalue(), err.getvalue(), time.monotonic() - started)


@contextlib.contextmanager
def _process_logging(stream: io.StringIO) -> Iterator[None]:
    """The root logger as ``cli.main`` leaves it in a fresh process (one handler at INFO on
    stderr, ``httpx`` at WARNING), so the action's own ``log_to_stdout`` and the log lines
    tests read behave as in a subprocess; pytest's own handlers are put back afterwards."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    with saved_logging() as root:
        root.handlers = [handler]
        root.setLevel(logging.INFO)
        logging.getLogger("httpx").setLevel(logging.WARNING)
        yield


def collect_run(root: Path, code: int, stdout: str, stderr: str, wall_s: float) -> Run:
    """Everything a finished run left under ``root`` (outputs, summary, report, peak RSS)."""
    output = root / "output.txt"
    summary = root / "summary.md"
    report_path = root / "workspace" / "relay-review-report.json"
    peak = root / PEAK_RSS_FILE
    return Run(
        code=code,
        stdout=stdout,
        stderr=stderr,
        outputs=parse_outputs(output.read_text()) if output.exists() else {},
        summary=summary.read_text() if summary.exists() else "",
        report=json.loads(report_path.read_text()) if report_path.exists() else None,
        root=root,
        peak_rss_mb=int(peak.read_text()) / 1024 if peak.exists() else None,
        wall_s=wall_s,
    )


#: Where the runner mounts its folders in an action's container.
CONTAINER_WORKSPACE = "/github/workspace"


def container_command(
    image: str, root: Path, env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """``docker run`` of ``image`` the way the runner starts a Docker container action.

    The runner mounts the workspace at /github/workspace (and makes it the working directory),
    its home at /github/home, the event payload's folder at /github/workflow and the output and
    summary files' folder at /github/file_commands, and passes ``INPUT_*``/``GITHUB_*`` and the
    step's env with ``-e NAME`` (values from the docker client's environment, not argv). Here
    ``root`` is that folder, so the files land where :meth:`ActionProcess.wait` reads them. The
    mock and the fleet listen on 127.0.0.1: the container shares the host's network.
    """
    home, workflow = root / "home", root / "workflow"
    home.mkdir(exist_ok=True)
    workflow.mkdir(exist_ok=True)
    event = Path(env["GITHUB_EVENT_PATH"])
    (workflow / "event.json").write_bytes(event.read_bytes())
    inside = {
        **env,
        "HOME": "/github/home",
        "GITHUB_EVENT_PATH": "/github/workflow/event.json",
        "GITHUB_WORKSPACE": CONTAINER_WORKSPACE,
        "GITHUB_OUTPUT": "/github/file_commands/output.txt",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/summary.md",
        "RUNNER_TEMP": "/github/runner_temp",
    }
    inside.pop("PATH", None)  # the image's own PATH
    command = [
        "docker",
        "run",
        "--rm",
        "--network",
        "host",
        "--workdir",
        CONTAINER_WORKSPACE,
        "-v",
        f"{root / 'workspace'}:{CONTAINER_WORKSPACE}",
        "-v",
        f"{home}:/github/home",
        "-v",
        f"{workflow}:/github/workflow",
        "-v",
        f"{root}:/github/file_commands",
        "-v",
        f"{root / 'runner-temp'}:/github/runner_temp",
    ]
    for name in sorted(inside):
        command += ["-e", f"{name}={inside[name]}" if name == "HOME" else name]
    command.append(image)
    client_env = {
        **inside,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),  # the docker client's own configuration
    }
    for name in ("DOCKER_HOST", "DOCKER_CONFIG"):
        if name in os.environ:
            client_env[name] = os.environ[name]
    return command, client_env


def run_action(
    root: Path,
    mock: MockGitHub,
    inputs: dict[str, str] | None = None,
    *,
    payload: dict[str, Any] | None = None,
    event_name: str = "pull_request_target",
    files: list[dict[str, Any]] | None = None,
    env_extra: dict[str, str] | None = None,
    timeout: float = 120,
    measure_memory: bool = False,
    event_text: str | None = None,
    image: str | None = None,
) -> Run:
    """Start ``relay-review run`` like the runner does and collect everything it left.

    ``env_extra``, ``measure_memory`` and ``event_text``: see :func:`start_action`.
    """
    process = start_action(
        root,
        mock,
        inputs,
        payload=payload,
        event_name=event_name,
        files=files,
        env_extra=env_extra,
        measure_memory=measure_memory,
        event_text=event_text,
        image=image,
    )
    return process.wait(timeout)


def posted_bodies(mock: MockGitHub) -> list[str]:
    """Comment bodies sent (created or edited)."""
    return [
        c.body["body"]
        for c in mock.calls()
        if c.method in ("POST", "PATCH") and "/comments" in c.path and isinstance(c.body, dict)
    ]


def assert_nothing_posted(mock: MockGitHub) -> None:
    assert not [c for c in mock.calls() if c.method in ("POST", "PATCH")], mock.calls()


def run_on_pr(
    root: Path,
    mock: MockGitHub,
    overlay: Any,
    inputs: dict[str, str],
    number: int,
    *,
    body: str | None = None,
    subprocess: bool = False,
) -> Run:
    """One run on pull request ``number`` of the repository, GitHub's state (``overlay``: the
    comments, threads) kept from earlier runs; ``body``: the pull request's description
    (``subprocess``: ``relay-review run`` as a process, else the entrypoint in this one)."""
    mock.reset()  # the previous run's stubs go; the comments stay
    mock.overlay = overlay
    if number != NUMBER:  # the harness stubs the files of NUMBER only
        mock.stub("GET", f"/pulls/{number}/files$", 200, FILES, times=None)
    payload = pr_payload(number=number)
    payload["number"] = number
    if body is not None:
        payload["pull_request"]["body"] = body
    return (run_action if subprocess else run_in_process)(
        root / f"pr{number}", mock, inputs, payload=payload
    )
