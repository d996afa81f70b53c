"""Benchmark: start-up (issue 25), the time from process start to the first request.

Runs ``relay-review chat`` against a one-route fault fleet (a healthy route that answers at
once) and takes, per run, the fleet's arrival time of the first request minus the time the
process was spawned (both on the system's monotonic clock): imports, the discovery file, the
catalog and the memory load (``--state`` a state file the first run wrote), and nothing of the
request itself. The bare interpreter's start (``python -c pass``) is printed beside it, and the
CPU time (user + sys) of each whole run, start to exit, as the kernel counts it: the figure that
stays put on a loaded machine, and what every ``relay-review`` subprocess of the test suite
costs. The
package is byte-compiled first (as an installed one is): with ``PYTHONDONTWRITEBYTECODE`` set,
every run would otherwise compile relay-review's modules from source.

    python bench/startup.py [--runs 7]

Goal: median start-up <= 0.2 s.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import relay_review
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for

SCENARIO = Scenario("startup", "one healthy route", {"solo": {"vendor/model": "healthy"}})


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    compileall.compile_dir(Path(relay_review.__file__).parent, quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
    env.update(drill_environ(SCENARIO))
    with tempfile.TemporaryDirectory() as tmp, fleet_for(SCENARIO) as fleet:
        discovery = Path(tmp) / "discovery.json"
        discovery.write_text(json.dumps(discovery_for(SCENARIO, fleet)))
        state = Path(tmp) / "state.json"
        command = [sys.executable, "-m", "relay_review", "chat", "--discovery", str(discovery)]
        command += ["--message", "hi", "--format", "json", "--state", str(state)]
        startups: list[float] = []
        cpus: list[float] = []
        for i in range(args.runs + 1):
            before = len(fleet.requests)
            spawned = time.monotonic()
            code, stderr, cpu = run_counted(command, env, tmp)
            assert code == 0, stderr
            first = fleet.requests[before]
            if i:  # the first run writes the state file the others load
                startups.append(first.at - spawned)
                cpus.append(cpu)
    bare = bare_start(args.runs)
    median = statistics.median(startups)
    print(f"runs {args.runs}: start-up (spawn -> first request) median {median:.3f}s")
    print(f"  min {min(startups):.3f}s, max {max(startups):.3f}s; bare interpreter {bare:.3f}s")
    print(f"  cpu per run (user+sys, start to exit) median {statistics.median(cpus):.3f}s")
    print(f"  goal <= 0.200s: {'meets' if median <= 0.2 else 'MISSES'}")


if __name__ == "__main__":
    main()
