"""Benchmark: start-up (issue 25), the time from process start to the first request.

Runs ``relay-review chat`` against a one-route fault fleet (a healthy route that answers at
once) and takes, per run, the fleet's arrival time of the first request minus the time the
process was spawned (both on the system's monotonic clock): imports, the discovery file, the
catalog and the memory load (``--state`` a state file the first run wrote), and nothing of the
request itself. The bare interpreter's start (``python -c pass``) is printed beside it, and the
CPU time (user + sys) of each whole run, start to exit, as the kernel counts it: what every
``relay-review`` subprocess of the test suite costs. The package is byte-compiled first (as an
installed one is): with ``PYTHONDONTWRITEBYTECODE`` set, every run would otherwise compile
relay-review's modules from source.

Machines differ (one of these 2-core machines ran the same code twice as slowly as another), so
the same runs time two **floors** against the same fleet: a script that imports only asyncio and
httpx and sends one POST with ``httpx.AsyncClient`` (what any httpx-based tool pays before its
first request), and the same script that first defines one pydantic model and validates one
value with it (what a tool whose records are pydantic models pays, as relay-review's are:
pydantic's import and its first validator). relay-review's start-up is printed over both. The
floors, like relay-review, keep httpx from importing its command-line client (click, rich and
pygments, when installed, as rich is in the development environment and not in the action's
image), so the figures are the same in either environment.

With ``--instructions`` (needs valgrind) it also counts the instructions each process executes
until its first ``connect`` (the same count on every machine of one architecture, load or not):
relay-review, the two floors and the bare interpreter. The CA
bundle, which relay-review loads in a thread while the rest of the path runs (OpenSSL, without
the GIL), is counted on its own too.

The interpreter's build matters as much as the code: an interpreter built with profile-guided
and link-time optimization (the official ``python`` image the action's Dockerfile names, and
Debian's ``python3.11``, which CI's stand-in base image carries) runs the same start-up in
fewer instructions and less time than one built without them (pyenv's default build). So the
first line names the interpreter, and CI (.ci/docker_ci.py) also runs this benchmark inside
the action's image, with the image's own interpreter: the start-up users meet.

    python bench/startup.py [--runs 7] [--instructions]

Goal: median start-up <= 0.2 s.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import relay_review
from relay_review.drill.fleet import FaultFleet
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for

SCENARIO = Scenario("startup", "one healthy route", {"solo": {"vendor/model": "healthy"}})

#: The floor: asyncio, httpx and one POST to the URL in argv[1] (no CA bundle: the URL is http).
#: httpx's command-line client is kept out as ``relay_review/__init__.py`` keeps it out.
FLOOR = """
import sys
sys.modules.setdefault("httpx._main", None)
import asyncio, httpx
async def post():
    async with httpx.AsyncClient(verify=False) as client:
        await client.post(sys.argv[1], json={"model": "vendor/model", "messages": []})
asyncio.run(post())
"""

#: The pydantic floor: the floor after one model is defined and one value validated with it.
PYDANTIC_FLOOR = (
    """
from pydantic import BaseModel
class Route(BaseModel):
    model: str
Route.model_validate({"model": "vendor/model"})
"""
    + FLOOR
)

#: Prefixed to a ``-c`` program under valgrind: the process ends at its first connect.
AT_FIRST_CONNECT = (
    "import os, sys\n"
    "sys.addaudithook(lambda event, _: os._exit(0) if event == 'socket.connect' else None)\n"
)

#: relay-review as its console script runs it (``main()`` over ``sys.argv``).
AS_THE_PROGRAM = (
    "import sys\nsys.argv[0] = 'relay-review'\n"
    "from relay_review.cli import main\nraise SystemExit(main())\n"
)

CA_BUNDLE = "import ssl, certifi\nssl.create_default_context(cafile=certifi.where())\n"


def bare_start(runs: int) -> float:
    """Median wall time of ``python -c pass`` (the interpreter's own start and exit)."""
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def run_counted(command: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, float]:
    """Run ``command``: its exit code, its stderr and the CPU seconds (user + sys) it used."""
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
    return proc.returncode, stderr, usage.ru_utime + usage.ru_stime


def first_request_after(
    command: list[str], env: dict[str, str], cwd: str, fleet: FaultFleet
) -> tuple[float, float]:
    """Spawn ``command``: seconds from its spawn to its first request at ``fleet``, and the
    CPU seconds of the whole run."""
    before = len(fleet.requests)
    spawned = time.monotonic()
    code, stderr, cpu = run_counted(command, env, cwd)
    assert code == 0 and len(fleet.requests) > before, stderr
    return fleet.requests[before].at - spawned, cpu


def instructions(command: list[str], env: dict[str, str], cwd: str) -> int:
    """Instructions ``command`` executes, all its threads, as valgrind counts them."""
    counter = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    proc = subprocess.run([*counter, *command], env=env, cwd=cwd, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    assert proc.returncode == 0 and found, proc.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    args = parser.parse_args()
    if args.instructions and not shutil.which("valgrind"):
        parser.error("--instructions needs valgrind (apt-get install valgrind)")
    compileall.compile_dir(Path(relay_review.__file__).parent, quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
    env.update(drill_environ(SCENARIO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the floor's httpx, like relay-review, from .pyc
    with tempfile.TemporaryDirectory() as tmp, fleet_for(SCENARIO) as fleet:
        discovery = Path(tmp) / "discovery.json"
        discovery.write_text(json.dumps(discovery_for(SCENARIO, fleet)))
        state = Path(tmp) / "state.json"
        chat = ["chat", "--discovery", str(discovery), "--message", "hi", "--format", "json"]
        chat += ["--state", str(state)]
        command = [sys.executable, "-m", "relay_review", *chat]
        floor = [sys.executable, "-c", FLOOR, fleet.base_url("solo") + "/chat/completions"]
        first_request_after(command, env, tmp, fleet)  # writes the state file the others load
        startups: list[float] = []
        floors: list[float] = []
        pydantic_floors: list[float] = []
        cpus: list[float] = []
        pydantic_floor = [sys.executable, "-c", PYDANTIC_FLOOR, floor[-1]]
        for _ in range(args.runs):  # interleaved: a slow moment slows all three alike
            startup, cpu = first_request_after(command, env, tmp, fleet)
            startups.append(startup)
            cpus.append(cpu)
            floors.append(first_request_after(floor, env, tmp, fleet)[0])
            pydantic_floors.append(first_request_after(pydantic_floor, env, tmp, fleet)[0])
        counts = {}
        if args.instructions:
            at_connect = [sys.executable, "-c"]
            counts = {
                "relay-review chat": instructions(
                    [*at_connect, AT_FIRST_CONNECT + AS_THE_PROGRAM, *chat], env, tmp
                ),
                "  of them the CA bundle, in its own thread": instructions(
                    [*at_connect, CA_BUNDLE], env, tmp
                )
                - instructions([*at_connect, "import ssl, certifi"], env, tmp),
                "floor (asyncio + httpx, one POST)": instructions(
                    [*at_connect, AT_FIRST_CONNECT + FLOOR, floor[-1]], env, tmp
                ),
                "floor with a pydantic model in use": instructions(
                    [*at_connect, AT_FIRST_CONNECT + PYDANTIC_FLOOR, floor[-1]], env, tmp
                ),
                "bare interpreter": instructions([*at_connect, "pass"], env, tmp),
            }
    bare = bare_start(args.runs)
    median = statistics.median(startups)
    print(f"interpreter: Python {platform.python_version()} ({sys.executable})")
    print(f"runs {args.runs}: start-up (spawn -> first request) median {median:.3f}s")
    print(f"  min {min(startups):.3f}s, max {max(startups):.3f}s; bare interpreter {bare:.3f}s")
    for name, times in (
        ("floor (asyncio + httpx, one POST)", floors),
        ("floor with a pydantic model in use", pydantic_floors),
    ):
        base = statistics.median(times)
        print(
            f"  {name} median {base:.3f}s (goal {'met' if base <= 0.2 else 'MISSED'} by it): "
            f"relay-review adds {median - base:.3f}s ({median / base:.2f} x)"
        )
    print(f"  cpu per run (user+sys, start to exit) median {statistics.median(cpus):.3f}s")
    print(f"  goal <= 0.200s: {'meets' if median <= 0.2 else 'MISSES'}")
    if counts:
        print("instructions to the first connect (valgrind; the same on every machine, per build):")
        for name, count in counts.items():
            print(f"  {name:<44} {count / 1e6:7,.0f} M")


if __name__ == "__main__":
    main()
