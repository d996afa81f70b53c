"""The routing session's process-wide TLS context: made once, off the first request's path."""

from __future__ import annotations

import threading

from relay_review.routing import session


def test_the_tls_warm_up_thread_is_joined_before_the_interpreter_finalizes(monkeypatch) -> None:
    """A daemon thread still inside OpenSSL when a run that sent nothing exits crashed the
    process (SIGSEGV, about 1 run in 20 of a review whose every file was reused): the warm-up
    thread is a normal one, so the interpreter waits for it (tens of ms of file reading)."""
    monkeypatch.setattr(session, "_tls", [])
    before = set(threading.enumerate())
    session.warm_tls_context()
    started = [t for t in threading.enumerate() if t not in before and t.name == "tls-context"]
    for thread in started:
        thread.join(10)
    assert started, "the warm-up runs in its own thread"
    assert not any(t.daemon for t in started)
    assert len(session._tls) == 1 and session.tls_context() is session._tls[0]
    session.warm_tls_context()  # made: no second thread
    assert not [t for t in threading.enumerate() if t.name == "tls-context" and t.is_alive()]
