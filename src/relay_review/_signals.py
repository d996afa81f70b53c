"""Cancellation: SIGTERM and SIGINT (a cancelled workflow, ``docker stop``, Ctrl-C) end a run
promptly, with one line saying so, and nothing more sent anywhere.

The first signal writes that line straight to stderr (``os.write``: safe inside a handler, even
while the main thread is printing) and raises :class:`Cancelled` in the main thread, so the run
unwinds without reaching its publishing steps. Unwinding is bounded: ``GRACE_S`` later the process
exits regardless (a request in flight, a slow close). A second signal exits at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: Seconds the run may take to unwind after a signal before the process exits regardless.
GRACE_S = 1.5
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Cancelled(KeyboardInterrupt):
    """The run was cancelled by a signal (a ``KeyboardInterrupt``, so asyncio re-raises it at
    once instead of storing it in a task). ``code`` is the shell's ``128 + signal number``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.code = 128 + signum


def _exit_now(code: int) -> None:
    os._exit(code)


@contextmanager
def cancellable(command: str) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise :class:`Cancelled` (see the module doc)."""
    fired = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired.is_set():
            _exit_now(128 + signum)
        fired.set()
        name = signal.Signals(signum).name
        line = (
            f"relay-review {command}: cancelled by {name}; stopping without sending anything more\n"
        )
        os.write(2, line.encode())
        timer = threading.Timer(GRACE_S, _exit_now, args=(128 + signum,))
        timer.daemon = True
        timer.start()
        raise Cancelled(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
