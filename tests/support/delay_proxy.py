"""A small delaying TCP proxy: every reply from the upstream reaches the client late.

Put in front of a real redis-server, it plays a slow shared store (a distant or overloaded
Redis): each chunk the upstream sends is held back a random 0.3-2 s (seeded, so a run is
repeatable) before it is forwarded; what the client sends goes through at once. Threads, no
event loop, so it serves subprocesses and the test's own clients alike.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from types import TracebackType


class DelayProxy:
    """``127.0.0.1:port`` -> ``upstream``, each reply delayed ``low``-``high`` seconds.

    Use as a context manager; ``url`` is a ``redis://`` URL through the proxy. ``replies``
    counts the chunks forwarded (how many slow answers the client waited for).
    """

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        low: float = 0.3,
        high: float = 2.0,
        seed: int = 19,
    ) -> None:
        self.upstream = upstream
        self.low, self.high = low, high
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.replies = 0
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="delay-proxy", daemon=True)

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting and cut every connection (their threads end at once)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _delay(self) -> float:
        with self._lock:
            return self._random.uniform(self.low, self.high)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            for source, sink, slow in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(source, sink, slow), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, slow: bool) -> None:
        source.settimeout(None)
        try:
            while not self._stop.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if slow:
                    end = time.monotonic() + self._delay()
                    while not self._stop.is_set() and time.monotonic() < end:
                        time.sleep(0.02)
                    with self._lock:
                        self.replies += 1
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
