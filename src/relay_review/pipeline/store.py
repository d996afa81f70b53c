"""Which store the command line opens: ``--state``, else ``RELAY_REVIEW_STATE``, checked the same
way and never echoed (a Redis URL may hold a password). The commands reach ``state/`` only
through here; the action opens its store from its ``state`` input (:mod:`.action`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from relay_review.errors import UsageError
from relay_review.state import ENV_VAR, KEY_ENV, Store, check_key, check_state_url, open_store

#: The environment variable naming the store when ``--state`` is not given.
STATE_ENV = ENV_VAR

__all__ = [
    "STATE_ENV",
    "Store",
    "check_store_url",
    "cli_state_url",
    "open_cli_store",
    "store_location",
]


def check_store_url(text: str) -> str:
    """``text`` as a store URL: a path, ``file:PATH``, ``none`` or a Redis URL; raises
    :class:`ValueError` (whose message never holds the text)."""
    return check_state_url(text)


def open_cli_store(
    url: str | None, environ: Mapping[str, str], timeout: float | None = None
) -> Store:
    """The store ``url`` names (``--state``, already checked), else ``RELAY_REVIEW_STATE``
    (checked the same way; :class:`UsageError` when it is wrong), else none; its calls bounded
    by ``timeout`` (the policy's ``[state] timeout_s``); a Redis store's review memory signed
    with ``RELAY_REVIEW_STATE_KEY`` (:mod:`relay_review.state.seal`), when it is set."""
    url = cli_state_url(url, environ)
    key = None
    if environ.get(KEY_ENV, "").strip():
        try:
            key = check_key(environ[KEY_ENV])
        except ValueError as exc:
            raise UsageError(f"{KEY_ENV} (value hidden) {exc}") from None
    return open_store(url, timeout=timeout, key=key)


def cli_state_url(url: str | None, environ: Mapping[str, str]) -> str | None:
    """The store URL a command uses: ``url`` (``--state``, already checked), else
    ``RELAY_REVIEW_STATE`` (checked the same way; :class:`UsageError` when it is wrong), else
    None."""
    if url is None and environ.get(ENV_VAR, "").strip():
        try:
            return check_state_url(environ[ENV_VAR])
        except ValueError as exc:
            raise UsageError(f"{ENV_VAR} (value hidden): {exc}") from None
    return url


def store_location(url: str | None) -> str | None:
    """Where a (checked) store URL keeps memory, one text for every spelling of one place: a
    file's absolute path (``file:`` or not, relative or not), a Redis URL as it is; None for
    ``none`` or no URL. Never shown: a Redis URL may hold a password."""
    if not url or url == "none":
        return None
    if url.startswith(("redis://", "rediss://")):
        return url
    path = Path(url.removeprefix("file:"))
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a symlink loop: the store says so when it opens it
        return str(path.absolute())
