"""Progress lines during long waits (routing/progress.py): what a line says, when it is due,
the phase the chat call moves it through, and -- end to end -- that the ``mixed-deep`` drill
(a probe stall, then a longer serving stall) is never silent for long."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from cli_harness import run_cli
from relay_review.records import Deadlines
from relay_review.routing import progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _wait(clock: Clock, **deadlines: float) -> progress.Wait:
    d = Deadlines(**{"connect": 5, "first_byte": 60, "idle": 30, "attempt": 120, **deadlines})
    return progress.Wait("nim_a/qwen/qwen3", "serve", d, 1e9, clock, clock.now)


def test_a_line_names_what_is_awaited_the_route_and_the_bound_in_force() -> None:
    clock = Clock()
    w = _wait(clock, first_token=90)
    clock.now += 12
    assert w.line() == "waiting for first byte from nim_a/qwen/qwen3 (12 s of 60 s)"
    w.phase = progress.FIRST_TOKEN
    assert w.line() == "waiting for first token from nim_a/qwen/qwen3 (12 s of 90 s)"
    w.phase = progress.REST
    assert w.line() == "waiting for the rest of the reply from nim_a/qwen/qwen3 (12 s of 120 s)"


def test_the_bound_never_reaches_past_the_run_deadline() -> None:
    clock = Clock()
    w = _wait(clock)
    w.deadline_at = clock.now + 25
    clock.now += 7
    assert w.line().endswith("(7 s of 25 s)")


def test_a_probe_says_it_is_a_probe() -> None:
    clock = Clock()
    d = Deadlines(connect=5, first_byte=10, idle=10, attempt=10, attempt_name="probe timeout")
    w = progress.Wait("router/x:free", "probe", d, 1e9, clock, clock.now)
    clock.now += 6
    assert w.line() == "waiting for probe reply from router/x:free (6 s of 10 s)"


def test_due_after_five_quiet_seconds_then_at_most_every_ten() -> None:
    clock = Clock()
    w = _wait(clock)
    clock.now += 4.9
    assert not progress.due(w)
    clock.now += 0.2
    assert progress.due(w)
    w.said_at = clock.now
    clock.now += 9.9
    assert not progress.due(w)
    clock.now += 0.2
    assert progress.due(w)


def test_tracking_registers_and_the_chat_call_moves_the_phase() -> None:
    d = Deadlines(connect=5, first_byte=60, idle=30, attempt=120)

    async def main() -> tuple[list[str], list[str], int]:
        seen: list[str] = []
        with progress.tracking("a/m", d, deadline_at=time.monotonic() + 100) as w:
            assert w is not None
            seen.append(w.phase)
            progress.phase(progress.FIRST_TOKEN)
            seen.append(w.phase)
            progress.phase(progress.REST)
            seen.append(w.phase)
            routes = [x.route for x in progress.in_flight()]
        return seen, routes, len(progress.in_flight())

    seen, routes, left = asyncio.run(main())
    assert seen == [progress.FIRST_BYTE, progress.FIRST_TOKEN, progress.REST]
    assert routes == ["a/m"] and left == 0
    progress.phase(progress.REST)  # nothing tracked: a no-op, never an error


#: The deep drill's bounds and the progress cadence below, scaled by this from the defaults
#: (a 10 s probe bound, a 20 s first-byte bound, lines after 5 s and then every 10 s): the
#: property -- no gap between lines reaches the stall it covers -- is the same at any scale.
SCALE = 0.2


@pytest.mark.integration  # the drill on a fault fleet (a socket server), in process
def test_the_deep_drill_is_never_silent_for_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``drill --scenario mixed-deep`` with eager preflight waits out stalled probes (10 s at
    the defaults), then a stalled first byte (20 s): it printed nothing for the first, then
    nothing for the second. Now every gap between log lines stays well under that, and the
    progress lines name the route they wait on. (Hedged preflight, the default, serves this
    drill in about a second: nothing to wait for.) Run in this process with every bound and
    the progress cadence scaled by :data:`SCALE` (tests/e2e/test_routing_fleet.py runs the
    drill command as a process)."""
    monkeypatch.setattr(progress, "QUIET_S", progress.QUIET_S * SCALE)
    monkeypatch.setattr(progress, "EVERY_S", progress.EVERY_S * SCALE)
    monkeypatch.setattr(progress, "TICK_S", progress.TICK_S * SCALE)
    probe_s, first_byte_s = 10 * SCALE, 20 * SCALE
    eager = tmp_path / "eager.toml"
    eager.write_text('[preflight]\nmode = "eager"\n')
    stamped: list[tuple[float, str]] = []
    run = run_cli(
        "drill",
        "--scenario",
        "mixed-deep",
        "--policy",
        str(eager),
        "--probe-timeout",
        str(probe_s),
        "--first-byte-timeout",
        str(first_byte_s),
        cwd=tmp_path,
        stamped=stamped,
    )
    assert run.returncode == 0, run.stderr
    times = [t for t, _ in stamped]
    gaps = [b - a for a, b in itertools.pairwise([*times, run.wall_s])]
    lines = [s for _, s in stamped]
    # start-up to the first line (the quick probe replies) is not scaled: the bound it had
    assert times[0] < 16, stamped[:3]
    # EVERY_S between two progress lines by design; generous for a loaded machine (16 s at the
    # defaults), but well under the first-byte stall this drill used to be silent through
    assert max(gaps) < 16 * SCALE < first_byte_s, list(zip(gaps, lines, strict=True))
    waiting = [s for s in lines if s.startswith("INFO relay_review.progress: waiting for ")]
    assert any("probe reply from nim_a/deepseek-ai/deepseek-v4-flash (" in s for s in waiting)
    first_byte = [s for s in waiting if "first byte from nim_a/qwen/" in s]
    assert len(first_byte) >= 2, waiting  # the stall: after QUIET_S and again EVERY_S later
    assert all(s.endswith(f"of {first_byte_s:.0f} s)") for s in first_byte), first_byte
    # one route's lines in order: its progress lines before the attempt line that ends them
    attempt = next(i for i, s in enumerate(lines) if "route=nim_a/qwen/" in s)
    assert all(lines.index(s) < attempt for s in first_byte)


def test_a_retry_after_wait_says_what_it_waits_out() -> None:
    clock = Clock()

    async def main() -> str:
        with progress.pausing("nim_b/llama", "the retry-after", 30.0, clock=clock) as w:
            assert w is not None and [x.route for x in progress.in_flight()] == ["nim_b/llama"]
            clock.now += 12
            assert progress.stall_detail("nim_b/llama") is None  # not a request
            return w.line()

    assert asyncio.run(main()) == "waiting out the retry-after of nim_b/llama (12 s of 30 s)"


def test_a_request_still_in_flight_says_how_long_it_stalled() -> None:
    clock = Clock()
    d = Deadlines(connect=5, first_byte=60, idle=30, attempt=120)

    async def main() -> list[str | None]:
        out = []
        with progress.tracking("a/m", d, deadline_at=1e9, clock=clock):
            clock.now += 12
            out.append(progress.stall_detail("a/m"))
            progress.phase(progress.FIRST_TOKEN)
            out.append(progress.stall_detail("a/m"))
        out.append(progress.stall_detail("a/m"))
        return out

    assert asyncio.run(main()) == ["stalled: no byte in 12 s", "stalled: no token in 12 s", None]
