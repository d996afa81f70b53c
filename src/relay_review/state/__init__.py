"""Memory across runs behind one small interface (:class:`Store`: ``load`` / ``save``).

Where it lives is chosen by a URL (``--state``, ``RELAY_REVIEW_STATE``, the action's ``state``):

- a plain path or ``file:PATH``: one JSON file, written atomically under a lock;
- ``none``: no memory;
- ``comment`` (the action only, its default): a hidden payload in the sticky comment;
- ``redis://[:password@]host[:port][/db][?prefix=P]`` or ``rediss://...`` (TLS, certificate
  verified): shared by every run that uses it, with the quota ledger (:mod:`.redis_store`).

What is remembered (:mod:`.memory`): each route's last outcome with its time (:mod:`.routes`
turns it into zero requests for dead or cooling routes and no probe for proven ones) and each
reviewed chunk's verified findings by content hash (:mod:`.chunks`). The pipeline reads it once
before routing and writes it once after; no stage below the pipeline knows which store holds it.
"""

from __future__ import annotations

from collections.abc import Callable

from relay_review.state.memory import Memory
from relay_review.state.stores import CommentStore, FileStore, NullStore, Store

__all__ = [
    "ENV_VAR",
    "CommentStore",
    "FileStore",
    "Memory",
    "NullStore",
    "Store",
    "open_store",
    "state_password",
]

#: The environment variable that chooses the store when no flag does.
ENV_VAR = "RELAY_REVIEW_STATE"


def check_state_url(text: str, *, action: bool = False) -> str:
    """``text`` as a store URL, or ValueError saying what is allowed (``comment`` only in the
    action)."""
    url = text.strip()
    if url.startswith(("redis://", "rediss://")):
        return _check_redis_url(url)
    if url in ("none", "comment"):
        if url == "comment" and not action:
            raise ValueError("comment is only for the action; use a path, file:PATH or none")
        return url
    path = url[len("file:") :] if url.startswith("file:") else url
    if not path or "\n" in path or "\x00" in path or len(path) > 1024:
        raise ValueError(
            "is not allowed; use none, file:PATH, a path, redis://HOST or rediss://HOST"
            + (", or comment" if action else "")
        )
    return url


def open_store(url: str | None, read_body: Callable[[], str | None] | None = None) -> Store:
    """The store a (checked) URL names; ``read_body`` reads the sticky comment for ``comment``."""
    if not url or url == "none":
        return NullStore()
    if url == "comment":
        return CommentStore(read_body or (lambda: None))
    if url.startswith(("redis://", "rediss://")):
        from relay_review.state.redis_store import RedisStore, split_prefix

        plain, prefix = split_prefix(url)
        return RedisStore(plain, prefix=prefix)
    return FileStore(url[len("file:") :] if url.startswith("file:") else url)


def _check_redis_url(url: str) -> str:
    """A ``redis://``/``rediss://`` URL with a host, one line, no control characters."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname
    except ValueError:
        host = None
    if not host or not url.isprintable() or len(url) > 2048:
        raise ValueError("is not allowed; use redis://[:PASSWORD@]HOST[:PORT][/DB][?prefix=P]")
    return url


def state_password(url: str) -> str | None:
    """The password of a ``redis://``/``rediss://`` state URL (masked like a key), else None."""
    from urllib.parse import urlsplit

    if not url.strip().startswith(("redis://", "rediss://")):
        return None
    try:
        return urlsplit(url.strip()).password or None
    except ValueError:
        return None
