"""The process's one TLS context for provider calls, made off the path to the first request.

Loading the CA bundle is some 200 M instructions of OpenSSL work (30 to 80 ms), which OpenSSL
does without the GIL. Started in a thread as the program starts (:func:`warm`, called by
:func:`relay_review.cli.main` before the command's modules import), it is made on the other core
while pydantic and httpx load, and the routing session (:func:`context`) finds it ready instead
of waiting for it. Standard library only (``ssl`` itself is imported by the thread), so that the
thread starts before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

from relay_review.errors import UsageError

if TYPE_CHECKING:
    import ssl

_lock = threading.Lock()
_made: list[ssl.SSLContext] = []
_started: list[threading.Thread] = []


def make() -> ssl.SSLContext:
    """The context httpx makes for ``verify=True`` (``httpx.create_ssl_context()``): the CA file
    or directory that ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names when set, else certifi's
    bundle (tests/unit/test_tls.py holds the two alike); :class:`UsageError` naming the
    variable when what it names cannot be read."""
    import ssl

    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        path = os.environ.get(name)
        if path:
            file, folder = (path, None) if name == "SSL_CERT_FILE" else (None, path)
            try:
                return ssl.create_default_context(cafile=file, capath=folder)
            except (OSError, ssl.SSLError) as exc:
                why = getattr(exc, "strerror", None) or exc
                raise UsageError(
                    f"{name}={path}: no CA certificates could be read ({why})"
                ) from None
    import certifi  # httpx's own dependency, imported late as httpx does

    return ssl.create_default_context(cafile=certifi.where())


def context() -> ssl.SSLContext:
    """The context, made once by the first caller (:func:`warm`'s thread, usually); the others
    wait for it."""
    with _lock:
        if not _made:
            _made.append(make())
        return _made[0]


def warm() -> None:
    """Start making the context in a thread, once per process.

    Not a daemon thread: the interpreter joins it before it finalizes (a few tens of ms of
    local file reading at most). A daemon thread still inside OpenSSL when a run that sent
    nothing (every file reused) exited crashed the process (SIGSEGV, about 1 run in 20)."""
    with _lock:
        if _made or _started:
            return
        thread = threading.Thread(target=_quietly, name="tls-context")
        _started.append(thread)
    thread.start()


def _quietly() -> None:
    """The thread's work. A context that cannot be made (``SSL_CERT_FILE`` naming no file) is
    made again by the first request's caller, whose error says so where the run reports its
    errors, instead of a thread's traceback."""
    with contextlib.suppress(Exception):
        context()
