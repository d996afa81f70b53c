"""``relay-review <command> ...`` in this process: :func:`relay_review.cli.main` with its stdout,
stderr and log lines captured, under a given environment and working directory.

It runs what the console script runs (the parser, ``cli.main``'s logging set-up, the command,
its exit code) without paying interpreter start-up per call. What it does not cover is the
process itself: the console script and ``python -m``, exit at interpreter shutdown, signals sent
from outside. Each suite that uses it keeps one subprocess run per command family for those.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliRun:
    """What one in-process run left: the fields of ``subprocess.CompletedProcess`` tests read."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float


class _StampedStream(io.StringIO):
    """A text stream that also records (seconds since ``start``, line) for every whole line."""

    def __init__(self, start: float, clock: Callable[[], float]) -> None:
        super().__init__()
        self.start, self.clock = start, clock
        self.lines: list[tuple[float, str]] = []
        self._partial = ""

    def write(self, s: str) -> int:
        n = super().write(s)
        self._partial += s
        *whole, self._partial = self._partial.split("\n")
        now = self.clock() - self.start
        self.lines.extend((now, line) for line in whole)
        return n


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None, cwd: Path | None) -> Iterator[None]:
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def saved_logging() -> Iterator[logging.Logger]:
    """The root logger (yielded) for a run to set up as a process would; pytest's handlers and
    levels, and ``httpx``'s level, are put back afterwards, and what the run added is closed."""
    root, httpx_log = logging.getLogger(), logging.getLogger("httpx")
    handlers, level, httpx_level = root.handlers[:], root.level, httpx_log.level
    try:
        yield root
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers = handlers
        root.setLevel(level)
        httpx_log.setLevel(httpx_level)


@contextlib.contextmanager
def _fresh_logging() -> Iterator[None]:
    """The root logger as a fresh process has it (no handlers, WARNING), so ``cli.main``'s own
    ``logging.basicConfig`` installs its handler on the captured stderr."""
    with saved_logging() as root:
        root.handlers = []
        root.setLevel(logging.WARNING)
        yield


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")
    try:
        yield
    finally:
        sys.stdin = saved


def run_cli(
    *argv: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stamped: list[tuple[float, str]] | None = None,
    stdin: str = "",
) -> CliRun:
    """``relay-review *argv`` in this process. ``env``: the whole environment for the run
    (default: this process's); ``cwd``: its working directory; ``stamped``: filled with
    (seconds since the start, line) for each stderr line as it was written; ``stdin``: what
    the command reads from standard input."""
    from relay_review import cli

    start = time.monotonic()
    out, err = io.StringIO(), _StampedStream(start, time.monotonic)
    with (
        _environment(env, cwd),
        _fresh_logging(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _stdin(stdin),
    ):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        # what a process prints as it exits: a task whose exception nobody retrieved says so
        # when it is collected ("Task exception was never retrieved", on the asyncio logger)
        gc.collect()
    if stamped is not None:
        stamped.extend(err.lines)
    return CliRun(code, out.getvalue(), err.getvalue(), time.monotonic() - start)
