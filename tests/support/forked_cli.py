"""``relay-review <command> ...`` as a process forked from a fork server that imported
relay-review once (``multiprocessing``'s forkserver): its own process -- own stores, clients,
ledger, signal handlers, stdout and stderr -- running ``cli.main``, without paying interpreter
start-up and imports each time. For tests that start many runs at once (the ledger loads, the
store-fault drills). The console script and ``python -m`` are not exercised this way; each
command family keeps a subprocess test for those.

The fork server is stopped and waited for at exit, so its CPU time and its children's is counted
in this process's children's (``/usr/bin/time pytest``), as a subprocess's is.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

from cli_harness import CliRun

#: What the fork server imports once, so that a forked run starts warm.
FORK_PRELOAD = [
    "relay_review.cli",
    "relay_review.commands.chat",
    "relay_review.commands.drill",
    "relay_review.commands.run",
    "relay_review.pipeline.routes",
    "relay_review.state.redis_store",
    "relay_review.render",
    "forked_cli",
]

_stop_at_exit: list[Any] = []


def _forkserver() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORK_PRELOAD)
    if not _stop_at_exit:
        _stop_at_exit.append(atexit.register(_stop_forkserver))
    return ctx


def _stop_forkserver() -> None:
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)  # no public way to stop it
    if stop is not None:
        stop()


def _child(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked child: ``relay-review *argv`` with ``env``, in ``cwd``, its stdout and
    stderr into the files ``out`` and ``err``; the exit code is the child's."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (fd 1 itself)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (fd 2 itself)
    from relay_review import cli

    code = cli.main(argv)
    gc.collect()  # a lost task's exception is logged when it is collected, as at process exit
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


class ForkedCli:
    """One forked ``relay-review *argv`` run in ``cwd``, read back like ``subprocess.Popen``:
    its output goes to ``<outdir>/<name>.out`` and ``.err`` (``outdir``: ``cwd`` by default)."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        name: str,
        outdir: Path | None = None,
    ) -> None:
        outdir = cwd if outdir is None else outdir
        self.out, self.err = outdir / f"{name}.out", outdir / f"{name}.err"
        args = (argv, env, str(cwd), str(self.out), str(self.err))
        self.started = time.monotonic()
        self.process = _forkserver().Process(target=_child, args=args)
        self.process.start()

    @property
    def sentinel(self) -> int:
        """Ready when the process has ended (``multiprocessing.connection.wait``)."""
        return int(self.process.sentinel)

    def communicate(self, timeout: float) -> tuple[str, str]:
        """Wait up to ``timeout`` s (then kill it); its (stdout, stderr)."""
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        return self.out.read_text(), self.err.read_text()

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode


def run_at_once(
    *argvs: list[str], outdir: Path, cwd: Path | None = None, timeout: float = 120
) -> list[CliRun]:
    """Independent ``relay-review`` runs started together, each its own forked process with
    this process's environment, in ``cwd`` (default: this one); their results in order."""
    where = Path.cwd() if cwd is None else cwd
    env = dict(os.environ)
    procs = [ForkedCli(argv, env, where, f"run-{n}", outdir) for n, argv in enumerate(argvs)]
    runs = []
    for proc in procs:
        out, err = proc.communicate(timeout)
        code = proc.returncode
        runs.append(CliRun(-1 if code is None else code, out, err, time.monotonic() - proc.started))
    return runs
