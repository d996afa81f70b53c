"""Memory across runs behind one small interface (:class:`Store`: ``load`` / ``save``).

Where it lives is chosen by a URL (``--state``, ``RELAY_REVIEW_STATE``, the action's ``state``):

- a plain path or ``file:PATH``: one JSON file, written atomically under a lock;
- ``none``: no memory;
- ``comment`` (the action only, its default): a hidden payload in the sticky comment (route
  memory is also read from the newest sticky comment of the repository's other pull requests);
- ``redis://[[user]:password@]host[:port][/db][?prefix=P][&cluster=true]`` or ``rediss://...``
  (TLS, certificate verified unless ``ssl_cert_reqs=none``, which is warned about): shared by
  every run that uses it, with the quota ledger (:mod:`.redis_store`); a Redis Cluster through
  any of its nodes (detected at connect, or ``cluster=true``). Anyone who can write to a shared
  Redis could set a cached verdict, so it never holds the action's review cache (that stays in
  the sticky comment) and holds the command line's only signed with its state key (:mod:`.seal`).

Any other ``word://`` text is refused, never taken for a path (:mod:`.urls` checks them all,
without echoing a password). Every record a store returns was validated when read
(:mod:`.memory`): a bad one is dropped with one warning and overwritten by the run's save.

What is remembered (the schema, :mod:`.memory`): each route's last outcome with its time and
each reviewed chunk's verified findings by content hash. This package is persistence only: what
to remember and how to apply it is the pipeline's (:mod:`relay_review.pipeline.route_memory`
turns a memo into zero requests for dead or cooling routes and no probe for proven ones,
:mod:`relay_review.pipeline.review_cache` reuses a file's review). The pipeline reads it once
before routing and writes it once after; no stage below the pipeline knows which store holds it.
Nothing here imports a domain package (an import-linter contract in ``pyproject.toml``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from relay_review.state.ledger import Ledger
from relay_review.state.memory import Limits, Memory
from relay_review.state.seal import KEY_ENV, MIN_KEY_CHARS, Seal, check_key
from relay_review.state.stores import (
    Borrowed,
    CommentStore,
    FileStore,
    NullStore,
    SplitStore,
    Store,
    Wanted,
    findings_scope,
    latest_unit,
)
from relay_review.state.urls import StateUrlError, check_state_url, checks_off, url_secrets

__all__ = [
    "ENV_VAR",
    "KEY_ENV",
    "Borrowed",
    "CommentStore",
    "FileStore",
    "Ledger",
    "Limits",
    "Memory",
    "NullStore",
    "StateUrlError",
    "Store",
    "Wanted",
    "check_key",
    "check_state_url",
    "findings_scope",
    "latest_unit",
    "open_store",
    "url_secrets",
]

#: The environment variable that chooses the store when no flag does.
ENV_VAR = "RELAY_REVIEW_STATE"

log = logging.getLogger("relay_review.state")


def open_store(
    url: str | None,
    read_body: Callable[[], str | None] | None = None,
    *,
    timeout: float | None = None,
    read_others: Callable[[], Iterable[tuple[str, str | None]]] | None = None,
    key: str | None = None,
) -> Store:
    """The store a (checked) URL names; ``read_body`` reads the sticky comment for ``comment``,
    ``read_others`` the other pull requests' (route memory only, see :class:`CommentStore`);
    ``timeout`` bounds each Redis call (the policy's ``[state] timeout_s``; default 1 s).
    A ``rediss://`` URL with ``ssl_cert_reqs=none`` is opened with one warning. A Redis keeps
    route memory and the ledger; the review cache and findings' states go to the sticky comment
    when ``read_body`` reads one (the action: :class:`SplitStore`), else into the Redis signed
    with ``key`` (checked, :func:`check_key`; :mod:`.seal`), else nowhere (the log says so)."""
    if not url or url == "none":
        return NullStore()
    if url == "comment":
        return CommentStore(read_body or (lambda: None), read_others)
    if url.startswith(("redis://", "rediss://")):
        from relay_review.state.redis_store import (
            TIMEOUT_S,
            RedisStore,
            redact_url,
            split_options,
        )

        if checks_off(url):
            log.warning(
                "state %s: ssl_cert_reqs=none turns the server's certificate check off; anyone "
                "between this runner and Redis can read and change the shared memory and ledger",
                redact_url(url),
            )
        options = split_options(url)
        shared = RedisStore(
            options.url,
            prefix=options.prefix,
            cluster=options.cluster,
            timeout=timeout or TIMEOUT_S,
            seal=Seal(key) if key else None,
        )
        if read_body is not None:  # the action: review memory in our own sticky comment
            return SplitStore(shared, CommentStore(read_body))
        if not key:
            log.info(
                "state %s: no state key, so the review cache and findings' states are not kept "
                "(anyone who can write to a shared Redis could forge a cached verdict); set %s "
                "to a secret of at least %d characters to keep them there, signed",
                redact_url(url),
                KEY_ENV,
                MIN_KEY_CHARS,
            )
        return shared
    return FileStore(url[len("file:") :] if url.startswith("file:") else url)
