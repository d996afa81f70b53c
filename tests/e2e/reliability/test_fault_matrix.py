"""The fault matrix (issue 6, item 1): every model fault class, end to end through ``relay-review
run`` (Prism for GitHub, the fault fleet for models), alone and mixed.

* **alone**: the faulty route is the whole catalog -> the "Review unavailable" comment is posted,
  names the fault, and the run stays within its deadline;
* **with one healthy route** (after the faulty one in catalog order) -> the healthy route serves
  the verdict and the comment still names the fault;
* **mixed**: every fault at once, with and without a healthy route;
* **mid-review death**: a route that serves one chunk and then dies -> the next chunk fails over
  (chunks one at a time, and three at a time);
* **bounds**: a pool of silent routes ends at the deadline, every route's fate reported; a long
  ``Retry-After`` never holds up a deferred route that is free now.

Faults a probe sees are named by the readiness table's preflight status and HTTP columns (and
by the outcome kind in the JSON report's readiness ``detail``). Faults that strike only while
serving (the probe passed) are named by the attempt timeline (phase and outcome).

Cells run in this process (:func:`action_harness.run_in_process`: the action's entrypoint over
the runner's environment, against the same Prism and a real fleet on 127.0.0.1); the first cell
of each fault family (:data:`FAMILIES`), the silent pool bounded by the run deadline and one
mid-review death go through ``relay-review run`` as a subprocess, as the runner starts it.
The cells whose fault waits out a bound (:data:`WAITING`) run all at once instead, once per
session (:func:`waiting_cells`): each its own process (the subprocess cells as above, the others
forked from a warm fork server running the CLI's ``run``), with its own GitHub mock in front of
the session's Prism and its own fleet; each test asserts on its own cell as before.
Each run gets its own fleet (a thread, ~3 ms to start): behaviour scripts advance per request, so
runs must not share one; Prism is one per session.
Bounds are small (``POLICY_HEAD``: each stall costs one bound, so they set the matrix's running
time; 1.5 s for a first byte or a probe is what a healthy local route meets on a loaded machine,
and every fault script is far outside its bound); "within the deadline" is checked on the
report's own clocks (``elapsed_s`` for the review, ``run_elapsed_s`` for the whole run) against
the policy's deadline plus :data:`REVIEW_MARGIN_S` / :data:`RUN_MARGIN_S`, never on wall-clock
speed.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from action_harness import (
    FLEET_KEY,
    ActionProcess,
    Run,
    action_env,
    api_file,
    collect_run,
    policy_toml,
    posted_bodies,
    run_action,
    run_in_process,
    start_action,
)
from forked_cli import ForkedCli
from github_mock import MockGitHub, proxy_beside
from relay_review.drill import FaultFleet
from relay_review.drill.review import reviewer_reply
from session_once import once_per_session

DEADLINE = 15.0
MIXED_DEADLINE = 30.0
#: The review stage stops at the deadline; allow for the scheduler on a loaded machine.
REVIEW_MARGIN_S = 1.5
#: The whole run also publishes after the review (a few GitHub calls to the local mock).
RUN_MARGIN_S = 8.0

POLICY_HEAD = f"""\
[catalog]
limit = 40
account_cap = 8

[serving]
connect = 1
first_byte = 1.5
idle = 1
attempt = 2.5
deadline = {DEADLINE:g}

[preflight]
mode = "eager"  # the matrix checks what a probe finds, then what serving finds
probe_budget = 1
probe_timeout = 1.5

[discovery]
timeout = 3

[review]
concurrency = 1
"""

HEALTHY = "healthy"  # the healthy account; fault accounts are named "f-<id>" (sorted before it)
HEALTHY_MODEL = "vendor/reviewer"
SHELL_LINE = 'subprocess.run(f"tar -czf {target} {folder}", shell=True, check=True)'
PATCH = (
    "@@ -1,3 +1,5 @@\n"
    " import subprocess\n"
    " \n"
    " def export(folder, target):\n"
    f"+    {SHELL_LINE}\n"
    "+    return target"
)
FILES = [api_file("app/export.py", "modified", PATCH, 2, 0)]


def fleet_reply(body: dict[str, Any]) -> str:
    """Probes get ``ready``; review requests an honest verdict (a high finding on shell=True)."""
    if "single word: ready" in body["messages"][-1]["content"]:
        return "ready"
    return reviewer_reply(body)


@dataclass(frozen=True)
class Fault:
    """One fault class: its fleet script and how the comment and report must name it.

    ``status``/``http``: the readiness row's preflight and http cells (faults a probe sees).
    ``phase``/``outcome``: the attempt timeline's cells (faults that strike while serving).
    ``detail``: text the report's readiness detail (or failed attempt's detail) must contain.
    """

    id: str
    script: str
    detail: str
    status: str = "ready"
    http: str = "-"
    phase: str | None = None
    outcome: str | None = None

    @property
    def account(self) -> str:
        return f"f-{self.id}"

    @property
    def model(self) -> str:
        return f"vendor/{self.id}"

    @property
    def agent_id(self) -> str:
        return f"{self.account}/{self.model}"


FAULTS = [
    # a probe sees it
    # (a probe's first-byte, idle and attempt bounds are all probe_timeout: either may strike)
    Fault("stall", "stall", "no headers", status="timeout"),
    Fault("headers-stall", "headers-stall", "but no body byte", status="timeout", http="200"),
    # Retry-After beyond the deadline: never tried again
    Fault("429-header", "429@60", "rate_limited retry after 60s", status="deferred", http="429"),
    Fault("429-date", "429@60,date", "rate_limited retry after 5", status="deferred", http="429"),
    Fault("429-meta", "429@60,meta", "rate_limited retry after 5", status="deferred", http="429"),
    # no hint: tried again when nothing better is left, and refused again
    Fault(
        "429-none",
        "429@noheader",
        "rate_limited - HTTP 429",
        status="deferred",
        http="429",
        phase="response",
        outcome="rate\\_limited",
    ),
    Fault("404", "404", "not_found", status="rejected", http="404"),
    Fault("401", "401", "auth_failed", status="rejected", http="401"),
    Fault("403", "403", "auth_failed", status="rejected", http="403"),
    Fault("402", "402", "payment_required", status="rejected", http="402"),
    Fault(
        "500",
        "500",
        "server_error",
        status="deferred",
        http="500",
        phase="response",
        outcome="server\\_error",
    ),
    Fault(
        "503",
        "503",
        "server_error",
        status="deferred",
        http="503",
        phase="response",
        outcome="server\\_error",
    ),
    Fault(
        "500-body-stall",
        "500@stall",
        "server_error - HTTP 500 (error body stalled)",
        status="deferred",
        http="500",
        phase="response",
        outcome="server\\_error",
    ),
    Fault("error-body", "error-body", "bad_reply - error body", status="rejected", http="200"),
    Fault(
        "sse-error-400",
        "sse-error@code=400",
        "bad_reply - error event",
        status="rejected",
        http="200",
    ),
    # a mid-stream error with a retryable code (502) may recover: deferred, tried last
    Fault(
        "sse-error-502",
        "sse-error",
        "server_error - mid-stream error event",
        status="deferred",
        http="200",
        phase="stream",
        outcome="server\\_error",
    ),
    Fault("finish-error", "finish-error", "finish_reason error", status="rejected", http="200"),
    Fault("cut", "cut", "bad_reply - stream cut", status="rejected", http="200"),
    Fault("rst", "cut@rst", "bad_reply - stream cut", status="rejected", http="200"),
    Fault("no-finish", "no-finish", "without finish_reason", status="rejected", http="200"),
    Fault("empty", "empty", "bad_reply - empty reply", status="rejected", http="200"),
    Fault(
        "length-empty",
        "length-empty",
        "finish_reason length with no content",
        status="rejected",
        http="200",
    ),
    Fault("garbage", "garbage", "bad_reply - unparsable event", status="rejected", http="200"),
    Fault("context", "context", "context_too_long", status="rejected", http="400"),
    Fault(
        "closed",
        "close",
        "connection_error",
        status="deferred",
        phase="connect",
        outcome="connection\\_error",
    ),
    # the probe passes; the fault strikes while serving
    Fault(
        "idle-gap",
        "healthy>drip@4,n=2",
        "timeout in idle",
        phase="idle",
        outcome="timeout",
        http="200",
    ),
    Fault(
        "overrun",
        "healthy>drip@0.25,n=60",
        "timeout in attempt",
        phase="attempt",
        outcome="timeout",
        http="200",
    ),
    Fault(
        "serve-headers-stall",
        "healthy>headers-stall",
        "headers but no body byte",
        phase="first\\_byte",
        outcome="timeout",
        http="200",
    ),
    Fault(
        "serve-stall",
        "healthy>stall",
        "timeout in first_byte",
        phase="first\\_byte",
        outcome="timeout",
    ),
]
PROBE_FAULTS = [f for f in FAULTS if f.status != "ready"]
#: The fault families; the first cell of each (the fault alone) runs ``relay-review run`` as a
#: subprocess, every other cell runs in this process.
FAMILIES = {
    "probe timeout": ["stall", "headers-stall"],
    "rate limit": ["429-header", "429-date", "429-meta", "429-none"],
    "rejected": ["404", "401", "403", "402", "context"],
    "server error": ["500", "503", "500-body-stall", "sse-error-502"],
    "bad reply": [
        "cut",
        "error-body",
        "sse-error-400",
        "finish-error",
        "rst",
        "no-finish",
        "empty",
        "length-empty",
        "garbage",
    ],
    "connection": ["closed"],
    "serving timeout": ["serve-stall", "idle-gap", "overrun", "serve-headers-stall"],
}
SUBPROCESS_CELLS = frozenset(ids[0] for ids in FAMILIES.values())
#: Faults whose cells wait out a bound (a stall or a drip): those waits set the matrix's running
#: time, so these cells (alone and before the healthy route) run all at once in
#: :func:`waiting_cells`, each its own process with its own mock and fleet, with the other runs
#: that wait (:func:`waiting_runs`).
WAITING = frozenset(f.id for f in FAULTS if "stall" in f.script or "drip" in f.script)


@pytest.fixture
def make_fleet() -> Iterator[Any]:
    """Start fleets for one test (scripts advance per request, so no sharing between runs)."""
    started: list[FaultFleet] = []

    def make(accounts: dict[str, Any]) -> FaultFleet:
        fleet = FaultFleet(accounts, reply=fleet_reply).start_in_thread()
        started.append(fleet)
        return fleet

    yield make
    for fleet in started:
        fleet.stop()


def fleet_accounts(faults: list[Fault], *, healthy: bool, **extra: str) -> dict[str, Any]:
    accounts: dict[str, Any] = {
        f.account: {"models": {f.model: f.script}, "api_key": FLEET_KEY} for f in faults
    }
    if healthy:
        accounts[HEALTHY] = {"models": {HEALTHY_MODEL: "healthy"}, "api_key": FLEET_KEY}
    for name, script in extra.items():
        accounts[name] = {"models": {f"vendor/{name}": script}, "api_key": FLEET_KEY}
    return accounts


def run_cell(
    root: Path, mock: MockGitHub, policy: str, files: list[dict[str, Any]], *, subprocess: bool
) -> Run:
    """One run of the action: ``relay-review run`` as a subprocess, or its entrypoint in this
    process (the same environment, Prism and fleet either way)."""
    run = run_action if subprocess else run_in_process
    return run(root, mock, {"policy": policy}, files=files)


def policy_for(fleet: FaultFleet, head: str = POLICY_HEAD) -> str:
    return policy_toml(fleet, *fleet.accounts, head=head)


def md_rows(body: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header starts with ``first_column``, as
    {column name: cell} (by name, so added columns do not shift what a test reads)."""
    header: list[str] | None = None
    rows = []
    for line in body.splitlines():
        if not line.startswith("| "):
            header = None if not line.startswith("|---") else header
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == first_column:
            header = cells
        elif header is not None and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def table_row(body: str, account: str, model: str) -> dict[str, str]:
    """The readiness table's row for one route (cells as Markdown-escaped text)."""
    rows = [
        r for r in md_rows(body, "prio") if (r["account"], r["model"]) == (md(account), md(model))
    ]
    assert len(rows) == 1, f"no single readiness row for {account}/{model} in:\n{body}"
    return rows[0]


def attempt_rows(body: str, agent_id: str) -> list[dict[str, str]]:
    """The attempt timeline's rows for one route."""
    return [r for r in md_rows(body, "#") if r["route"] == md(agent_id)]


def unescaped(cell: str) -> str:
    """A Markdown cell's text as written before escaping (backslashes and U+200B removed)."""
    return re.sub(r"\\(.)", r"\1", cell).replace("\u200b", "")


def md(text: str) -> str:
    """How the comment escapes route names (only the characters these tests use)."""
    return text.replace("_", "\\_")


def assert_names_fault(
    body: str, report: dict[str, Any], fault: Fault, *, served: bool = True
) -> None:
    """The comment names the fault: its readiness row, and its attempt rows when it was served
    (``served=False``: a healthy route came first, so a deferred route was never tried again)."""
    row = table_row(body, fault.account, fault.model)
    assert (row["preflight"], row["served"]) == (fault.status, ""), (fault.id, row)
    if fault.status != "ready":
        assert row["http"] == fault.http, (fault.id, row)
    probe = next(r for r in report["readiness"] if r["agent_id"] == fault.agent_id)
    details = [probe["detail"]] + [
        a["detail"] for a in report["attempts"] if a["agent_id"] == fault.agent_id
    ]
    assert any(fault.detail in d for d in details), (fault.id, details)
    assert fault.detail in unescaped(row["found"]), (fault.id, row)  # the table names it
    if fault.phase is not None and (served or fault.status == "ready"):
        attempts = attempt_rows(body, fault.agent_id)
        assert attempts, f"no attempt row for {fault.agent_id}"
        last = attempts[-1]
        assert (last["for"], last["phase"], last["outcome"]) == (
            "serve",
            fault.phase,
            fault.outcome,
        ), attempts
        if fault.http != "-" and fault.status == "ready":
            assert last["http"] == fault.http, attempts


def assert_within_deadline(run: Run, deadline: float = DEADLINE) -> None:
    report = run.report
    assert report is not None
    assert report["elapsed_s"] <= deadline + REVIEW_MARGIN_S, report["elapsed_s"]
    assert report["run_elapsed_s"] <= deadline + RUN_MARGIN_S, report["run_elapsed_s"]


def only_body(bodies: list[str]) -> str:
    assert len(bodies) == 1, bodies
    return bodies[0]


@dataclass(frozen=True)
class Cell:
    """One finished cell: the run, the comment bodies it posted, how many chat requests each
    fleet account got, and the requests Prism refused (spec problems; none expected)."""

    run: Run
    bodies: list[str]
    requests: dict[str, int]
    problems: list[str]


def cell_key(fault: Fault, healthy: bool) -> str:
    return f"{fault.id}+{'healthy' if healthy else 'alone'}"


def cell_record(run: Run, mock: MockGitHub, fleet: FaultFleet) -> dict[str, Any]:
    """What the tests read of a cell, as JSON (to hand it to another xdist worker)."""
    return {
        "code": run.code,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "outputs": run.outputs,
        "summary": run.summary,
        "report": run.report,
        "root": str(run.root),
        "bodies": posted_bodies(mock),
        "requests": {account: len(fleet.chat_requests(account)) for account in fleet.accounts},
        "problems": mock.problems(),
    }


def cell_from(record: dict[str, Any]) -> Cell:
    run = Run(
        code=record["code"],
        stdout=record["stdout"],
        stderr=record["stderr"],
        outputs=record["outputs"],
        summary=record["summary"],
        report=record["report"],
        root=Path(record["root"]),
    )
    return Cell(run, record["bodies"], record["requests"], record["problems"])


@dataclass(frozen=True)
class Spec:
    """One run of :func:`waiting_runs`: its fleet accounts, policy head, changed files, and
    whether it runs as ``relay-review run`` (a subprocess) or forked."""

    accounts: dict[str, Any]
    head: str = POLICY_HEAD
    files: tuple[dict[str, Any], ...] = tuple(FILES)
    subprocess: bool = False


def waiting_runs() -> dict[str, Spec]:
    """The runs that wait out bounds, by key: every :data:`WAITING` cell (alone, and before the
    healthy route), every fault at once (with and without the healthy route), the silent pool,
    and the mid-review deaths that stall."""
    runs = {
        cell_key(fault, healthy): Spec(
            fleet_accounts([fault], healthy=healthy),
            subprocess=not healthy and fault.id in SUBPROCESS_CELLS,
        )
        for fault in FAULTS
        if fault.id in WAITING
        for healthy in (False, True)
    }
    runs[EVERY_FAULT] = Spec(fleet_accounts(FAULTS, healthy=True), EVERY_FAULT_HEAD)
    runs[EVERY_DEAD] = Spec(fleet_accounts(FAULTS, healthy=False), EVERY_DEAD_HEAD)
    runs[SILENT_POOL] = Spec(fleet_accounts(STALLS, healthy=False), SILENT_HEAD, subprocess=True)
    runs[death_key("stall")] = Spec(dying_accounts("stall"), DEATH_HEAD, tuple(CHUNK_FILES))
    runs[CONCURRENT_DEATH] = Spec(
        CONCURRENT_DEATH_ACCOUNTS, CONCURRENT_DEATH_HEAD, tuple(CONCURRENT_CHUNK_FILES)
    )
    return runs


def run_waiting_at_once(workdir: Path, session_mock: MockGitHub) -> dict[str, dict[str, Any]]:
    """Every run of :func:`waiting_runs` started at once, each with its own mock
    (:func:`github_mock.proxy_beside`, the session's Prism behind it), fleet and runner folders:
    the subprocess runs as ``relay-review run`` (:func:`start_action`), the others as the CLI's
    ``run`` forked from a warm fork server (tests/support/forked_cli.py).
    key -> :func:`cell_record`."""
    records: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        started = []
        for key, spec in waiting_runs().items():
            mock = stack.enter_context(proxy_beside(session_mock))
            fleet = FaultFleet(spec.accounts, reply=fleet_reply).start_in_thread()
            stack.callback(fleet.stop)
            root = workdir / key
            inputs = {"policy": policy_for(fleet, spec.head)}
            proc: ActionProcess | ForkedCli
            if spec.subprocess:
                proc = start_action(root, mock, inputs, files=list(spec.files))
            else:
                env = action_env(root, mock, inputs, files=list(spec.files))
                proc = ForkedCli(["run"], env, root / "workspace", "run", outdir=root)
            started.append((key, proc, mock, fleet, root))
        for key, proc, mock, fleet, root in started:
            if isinstance(proc, ActionProcess):
                run = proc.wait()
            else:
                out, err = proc.communicate(timeout=120)
                code = -1 if proc.returncode is None else proc.returncode
                run = collect_run(root, code, out, err, time.monotonic() - proc.started)
            records[key] = cell_record(run, mock, fleet)
    return records


@pytest.fixture(scope="session")
def waiting_cells(
    tmp_path_factory: pytest.TempPathFactory, github_mock_server: MockGitHub
) -> dict[str, dict[str, Any]]:
    """The :data:`WAITING` cells, run once per test session (under xdist the first worker to
    need them runs them while the others wait on a lock, then read them back)."""
    return dict(
        once_per_session(
            tmp_path_factory,
            "fault-matrix-waiting-cells",
            lambda folder: run_waiting_at_once(folder, github_mock_server),
        )
    )


def matrix_cell(
    request: pytest.FixtureRequest,
    root: Path,
    mock: MockGitHub,
    make_fleet: Any,
    fault: Fault,
    *,
    healthy: bool,
) -> Cell:
    """One cell of the matrix: from :func:`waiting_cells` for a :data:`WAITING` fault, else
    run now on the test's mock (a subprocess for the first cell of each family, alone)."""
    if fault.id in WAITING:
        cells: dict[str, dict[str, Any]] = request.getfixturevalue("waiting_cells")
        return cell_from(cells[cell_key(fault, healthy)])
    fleet = make_fleet(fleet_accounts([fault], healthy=healthy))
    subprocess = not healthy and fault.id in SUBPROCESS_CELLS
    run = run_cell(root, mock, policy_for(fleet), FILES, subprocess=subprocess)
    return cell_from(cell_record(run, mock, fleet))


# --- each fault alone, and each fault before one healthy route --------------------------------


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault_alone_posts_unavailable_naming_it(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    github_mock: MockGitHub,
    make_fleet: Any,
    fault: Fault,
) -> None:
    cell = matrix_cell(request, tmp_path, github_mock, make_fleet, fault, healthy=False)
    run = cell.run
    assert run.code == 1, run.stdout  # on-unavailable: fail
    assert cell.problems == []
    body = only_body(cell.bodies)
    assert "Review unavailable" in body and "No route served after" in body
    report = run.report
    assert report is not None and report["decision"] == "unavailable"
    assert run.outputs["decision"] == "unavailable" and run.outputs["served-by"] == ""
    assert_names_fault(body, report, fault)
    assert_within_deadline(run)
    # a failed route is never tried twice in one run (probe + at most one serving attempt)
    assert cell.requests[fault.account] <= 2


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault_then_healthy_route_serves_the_verdict(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    github_mock: MockGitHub,
    make_fleet: Any,
    fault: Fault,
) -> None:
    cell = matrix_cell(request, tmp_path, github_mock, make_fleet, fault, healthy=True)
    run = cell.run
    assert run.code == 0, run.stdout
    assert cell.problems == []
    body = only_body(cell.bodies)
    assert "Changes requested" in body and "shell=True" in body
    report = run.report
    assert report is not None and report["decision"] == "request_changes"
    assert report["served_by"]["agent_id"] == f"{HEALTHY}/{HEALTHY_MODEL}"
    assert table_row(body, HEALTHY, HEALTHY_MODEL)["served"] == "SERVED"
    assert_names_fault(body, report, fault, served=False)
    assert_within_deadline(run)
    # the fault route comes first in catalog order: it was probed, the healthy one was not
    order = [e["agent_id"] for e in report["catalog"]["selected"]]
    assert order == [fault.agent_id, f"{HEALTHY}/{HEALTHY_MODEL}"]
    if fault.phase is not None and fault.status == "ready":  # served first, then failed over
        outcomes = [(a["agent_id"], a["outcome"]) for a in report["attempts"]]
        assert outcomes[-1] == (f"{HEALTHY}/{HEALTHY_MODEL}", "ok")
        assert outcomes[0][0] == fault.agent_id


# --- all faults at once -----------------------------------------------------------------------


EVERY_FAULT = "every-fault"
EVERY_FAULT_HEAD = POLICY_HEAD.replace("probe_budget = 1", f"probe_budget = {len(FAULTS) + 1}")
EVERY_DEAD = "every-route-dead"
# serving-phase faults are tried one after another (each up to 2.5 s): a longer deadline
EVERY_DEAD_HEAD = POLICY_HEAD.replace("probe_budget = 1", f"probe_budget = {len(FAULTS)}").replace(
    f"deadline = {DEADLINE:g}", f"deadline = {MIXED_DEADLINE:g}"
)


def test_every_fault_at_once_then_healthy_serves(waiting_cells: dict[str, Any]) -> None:
    cell = cell_from(waiting_cells[EVERY_FAULT])  # run with the others that wait
    run = cell.run
    assert run.code == 0, run.stdout
    assert cell.problems == []
    body = only_body(cell.bodies)
    report = run.report
    assert report is not None and report["decision"] == "request_changes"
    assert report["served_by"]["agent_id"] == f"{HEALTHY}/{HEALTHY_MODEL}"
    for fault in PROBE_FAULTS:  # every probe-visible fault is named in its row
        row = table_row(body, fault.account, fault.model)
        assert (row["preflight"], row["http"], row["served"]) == (fault.status, fault.http, "")
    assert len([r for r in report["readiness"] if r["status"] != "unprobed"]) == len(FAULTS) + 1
    assert_within_deadline(run)


def test_every_route_dead_gives_a_bounded_failure_comment(waiting_cells: dict[str, Any]) -> None:
    cell = cell_from(waiting_cells[EVERY_DEAD])  # run with the others that wait
    run = cell.run
    assert run.code == 1, run.stdout
    assert cell.problems == []
    body = only_body(cell.bodies)
    assert "Review unavailable" in body and "No route served after" in body
    report = run.report
    assert report is not None and report["decision"] == "unavailable"
    for fault in FAULTS:
        row = table_row(body, fault.account, fault.model)
        assert row["served"] == "" and row["preflight"] == fault.status, row
    # every route that could still be tried was tried, the timeline says how each one failed:
    # serving-phase faults (their probe passed), and deferred routes free before the deadline
    # (a 429 asking for ~30 s must not hold them up: the run ends by exhaustion, not deadline)
    for fault in FAULTS:
        if fault.phase is not None:
            assert_names_fault(body, report, fault)
    assert report["stopped"] == "exhausted", report["stopped"]
    assert "app/export.py" in body  # the file is listed as not reviewed, with the reason
    (file,) = report["files"]
    assert file["status"] == "skipped" and "no route could review it" in file["reason"]
    assert_within_deadline(run, MIXED_DEADLINE)


def test_a_long_retry_after_does_not_hold_up_a_route_free_now(
    tmp_path: Path, github_mock: MockGitHub, make_fleet: Any
) -> None:
    # both routes are deferred by their probe; the first in catalog order asks for 12 s (inside
    # the 15 s deadline), the second gave a 503 with no hint and has recovered since
    fleet = make_fleet(
        fleet_accounts([], healthy=False, **{"a-limited": "429@12", "b-recovered": "503>healthy"})
    )
    head = POLICY_HEAD.replace("probe_budget = 1", "probe_budget = 2")
    run = run_cell(tmp_path, github_mock, policy_for(fleet, head), FILES, subprocess=False)
    assert run.code == 0, run.stdout
    report = run.report
    assert report is not None and report["decision"] == "request_changes"
    assert report["served_by"]["agent_id"] == "b-recovered/vendor/b-recovered"
    ((agent, started),) = [(a["agent_id"], a["started_s"]) for a in report["attempts"]]
    assert agent == "b-recovered/vendor/b-recovered"
    assert started < 6.0  # not after the other route's 12 s Retry-After (margin: half of it)
    statuses = [r["status"] for r in report["readiness"]]
    assert statuses == ["deferred", "deferred"]
    assert_within_deadline(run)


SHORT_DEADLINE = 4.0
SILENT_POOL = "silent-pool"
#: Five unprobed routes that never answer (:data:`SILENT_POOL`).
STALLS = [Fault(f"silent-{i}", "stall", "") for i in range(1, 6)]
SILENT_HEAD = (
    POLICY_HEAD.replace("probe_budget = 1", "probe_budget = 0")
    .replace("first_byte = 1.5", "first_byte = 2.5")
    .replace("attempt = 2.5", "attempt = 3")
    .replace(f"deadline = {DEADLINE:g}", f"deadline = {SHORT_DEADLINE:g}")
)


def test_the_deadline_bounds_a_pool_of_silent_routes(waiting_cells: dict[str, Any]) -> None:
    # five unprobed routes that never answer: the deadline, not the pool, ends the run
    # (relay-review run as a subprocess, at once with the other runs that wait)
    stalls = STALLS
    cell = cell_from(waiting_cells[SILENT_POOL])
    run = cell.run
    assert run.code == 1, run.stdout
    assert cell.problems == []
    report = run.report
    assert report is not None and report["decision"] == "unavailable"
    assert report["stopped"] == "deadline"
    assert report["why"] == "no route produced a valid verdict before the deadline"
    # in catalog order: one full first-byte wait, then (start-up permitting) a second one cut
    # short by the deadline; the rest never tried, and said so
    tried = [a["agent_id"] for a in report["attempts"]]
    assert 1 <= len(tried) <= 2 and tried == [f.agent_id for f in stalls[: len(tried)]]
    assert {a["outcome"] for a in report["attempts"]} == {"timeout"}
    assert "bounded by the run deadline" in report["attempts"][-1]["detail"]
    never = [r for r in report["readiness"] if "never tried" in r["detail"]]
    assert [r["agent_id"] for r in never] == [f.agent_id for f in stalls[len(tried) :]]
    body = only_body(cell.bodies)
    assert "Review unavailable" in body and "before the deadline" in body
    for fault in stalls:
        assert table_row(body, fault.account, fault.model)["preflight"] == "unprobed"
    assert_within_deadline(run, SHORT_DEADLINE)


# --- a route that dies mid-review -------------------------------------------------------------


def chunk_file(name: str, with_finding: bool) -> dict[str, Any]:
    """A file big enough to be its own chunk at ``chunk_tokens = 256``."""
    lines = [
        f"value_{i} = compute_something_long(argument_{i}, other_argument_{i})" for i in range(9)
    ]
    if with_finding:
        lines[4] = SHELL_LINE
    patch = f"@@ -0,0 +1,{len(lines)} @@\n" + "\n".join(f"+{line}" for line in lines)
    return api_file(name, "added", patch, len(lines), 0)


CHUNK_FILES = [chunk_file(f"app/part_{i}.py", with_finding=i == 2) for i in range(1, 4)]


#: How the dying route dies on its second request -> the outcome its attempt row shows.
DEATHS = {"stall": "timeout", "cut@rst": "bad\\_reply", "503": "server\\_error"}
#: The death that runs ``relay-review run`` as a subprocess (the others run in this process,
#: but for the stall: it waits out a bound, so it runs with the others that do, forked).
SUBPROCESS_DEATH = "cut@rst"
WAITING_DEATH = "stall"
DEATH_HEAD = POLICY_HEAD.replace("probe_budget = 1", "probe_budget = 2") + "chunk_tokens = 256\n"


def death_key(death_script: str) -> str:
    return f"death+{death_script}"


def dying_accounts(death_script: str) -> dict[str, Any]:
    """ "a-dying" answers its probe and the first chunk, then dies; "b-backup" serves the rest.

    Both are probed at once and the first ready route serves chunk 1: "b-backup" answers 0.3 s
    late, so a loaded machine that slows "a-dying"'s probe does not let "b-backup" serve first
    (seen once in CI)."""
    return fleet_accounts(
        [], healthy=False, **{"a-dying": f"healthy*2>{death_script}", "b-backup": "healthy@0.3"}
    )


@pytest.mark.parametrize("death_script", list(DEATHS))
def test_route_dying_mid_review_fails_over_per_chunk(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    github_mock: MockGitHub,
    make_fleet: Any,
    death_script: str,
) -> None:
    if death_script == WAITING_DEATH:
        cells: dict[str, Any] = request.getfixturevalue("waiting_cells")
        cell = cell_from(cells[death_key(death_script)])
    else:
        fleet = make_fleet(dying_accounts(death_script))
        subprocess = death_script == SUBPROCESS_DEATH
        policy = policy_for(fleet, DEATH_HEAD)
        run = run_cell(tmp_path, github_mock, policy, CHUNK_FILES, subprocess=subprocess)
        cell = cell_from(cell_record(run, github_mock, fleet))
    run = cell.run
    assert run.code == 0, run.stdout
    assert cell.problems == []
    report = run.report
    assert report is not None
    chunks = report["chunks"]
    assert len(chunks) == 3, chunks
    servers = [c["served_by"]["agent_id"] for c in chunks]
    assert servers == [
        "a-dying/vendor/a-dying",
        "b-backup/vendor/b-backup",
        "b-backup/vendor/b-backup",
    ]
    assert all(c["stopped"] == "served" for c in chunks)
    attempts = [(a["agent_id"].split("/")[0], a["outcome"]) for a in report["attempts"]]
    assert attempts[0] == ("a-dying", "ok")
    assert attempts[1][0] == "a-dying" and attempts[1][1] != "ok"  # the death, on chunk 2
    assert attempts[2:] == [("b-backup", "ok"), ("b-backup", "ok")]
    # the dead route is out for the rest of the run: probe, chunk 1, chunk 2's failed attempt
    assert cell.requests["a-dying"] == 3
    assert report["decision"] == "request_changes" and report["stopped"] == "served"
    assert all(f["status"] == "reviewed" for f in report["files"])
    body = only_body(cell.bodies)
    assert "Changes requested" in body and "app/part_2.py:5" in body
    assert table_row(body, "a-dying", "vendor/a-dying")["served"] == "SERVED"
    assert table_row(body, "b-backup", "vendor/b-backup")["served"] == "SERVED"
    (death,) = [r for r in attempt_rows(body, "a-dying/vendor/a-dying") if r["outcome"] != "ok"]
    assert death["outcome"] == DEATHS[death_script]
    assert_within_deadline(run)


CONCURRENT_DEATH = "death+concurrent"
CONCURRENT_DEATH_ACCOUNTS = fleet_accounts(
    [], healthy=False, **{"a-dying": "healthy*2>stall", "b-backup": "healthy@0.3"}
)
CONCURRENT_DEATH_HEAD = (
    POLICY_HEAD.replace("probe_budget = 1", "probe_budget = 2").replace(
        "concurrency = 1", "concurrency = 3"
    )
    + "chunk_tokens = 256\n"
)
CONCURRENT_CHUNK_FILES = [chunk_file(f"app/part_{i}.py", with_finding=i == 2) for i in range(1, 6)]


def test_route_dying_mid_review_with_concurrent_chunks(waiting_cells: dict[str, Any]) -> None:
    # five chunks, three at a time over two ready routes: the dying route's second request
    # stalls; that chunk (and every later one) is served by the backup, none is lost
    # (forked, at once with the other runs that wait)
    cell = cell_from(waiting_cells[CONCURRENT_DEATH])
    run = cell.run
    assert run.code == 0, run.stdout
    assert cell.problems == []
    report = run.report
    assert report is not None and report["decision"] == "request_changes"
    assert [c["stopped"] for c in report["chunks"]] == ["served"] * 5
    assert all(f["status"] == "reviewed" for f in report["files"])
    failed = [a for a in report["attempts"] if a["outcome"] != "ok"]
    assert [(a["agent_id"], a["outcome"], a["phase"]) for a in failed] == [
        ("a-dying/vendor/a-dying", "timeout", "first_byte")
    ]
    by_route = [c["served_by"]["agent_id"] for c in report["chunks"]]
    assert by_route.count("a-dying/vendor/a-dying") == 1  # before it died
    assert cell.requests["a-dying"] == 3  # probe, one chunk, the stalled one
    assert_within_deadline(run)


def test_every_fault_class_is_in_one_family() -> None:
    """Each family's first cell is the one run as a subprocess: no fault class may be left out
    of :data:`FAMILIES` (it would never run through the process) or listed twice."""
    listed = [fault_id for ids in FAMILIES.values() for fault_id in ids]
    assert sorted(listed) == sorted(f.id for f in FAULTS)
    assert len(SUBPROCESS_CELLS) == len(FAMILIES)
