"""Signed review memory for a shared store: what a writer without the state key cannot forge.

Whoever can write to a shared Redis can write any value under any of our keys, and every key
is named from public inputs (a repository, a content hash, a fingerprint). A review-cache entry
decides a verdict with zero requests, so an unsigned one is a verdict anyone with the Redis
password can set. A :class:`Seal` signs each such entry with HMAC-SHA256 under the run's state
key (a secret only the setup's own runs hold), bound to the key name the entry is stored
under, and refuses at load any entry whose signature is missing or wrong.

The signature is the stored JSON object's first member, ``"sig"``, over the exact bytes of the
rest, so the stored value stays a JSON object whose ``at`` the store's scripts compare (newer
wins) and a signed entry is never re-serialised before it is checked.
"""

from __future__ import annotations

import hashlib
import hmac
import re

#: What a signature covers before the entry's name and bytes (a new layout gets a new tag).
DOMAIN = b"relay-review/state-seal/v1\0"
#: The shortest state key accepted (``openssl rand -hex 32`` gives 64 characters): a short
#: one could be found offline from the signed entries any reader of the store sees.
MIN_KEY_CHARS = 16
#: The environment variable the command line reads the state key from (never a flag: argv is
#: visible to every process on the machine).
KEY_ENV = "RELAY_REVIEW_STATE_KEY"

_SIGNED = re.compile(rb'\A\{"sig":"([0-9a-f]{64})",(?=")')


def check_key(text: str) -> str:
    """``text`` as a state key (surrounding whitespace dropped); raises :class:`ValueError`
    whose message never holds the text."""
    key = text.strip()
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not UTF-8 text; use random letters and digits") from None
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(
            f"is {len(key)} characters long; use at least {MIN_KEY_CHARS} random characters "
            "(for example the output of `openssl rand -hex 32`), kept in a secret"
        )
    return key


class Seal:
    """Signs and checks entries under one state key (see the module doc)."""

    def __init__(self, key: str) -> None:
        self._key = key.encode("utf-8")

    def _mac(self, name: bytes, body: bytes) -> str:
        message = DOMAIN + name + b"\0" + body
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def close(self, name: str, body: str) -> str:
        """``body`` (a non-empty JSON object, as a store writes it) signed for key ``name``."""
        if not body.startswith("{") or body.lstrip("{ ").startswith("}"):
            raise ValueError("only a non-empty JSON object is signed")
        rest = body[1:].encode("utf-8")
        return f'{{"sig":"{self._mac(name.encode(), rest)}",{body[1:]}'

    def open(self, name: bytes, value: bytes) -> bytes | None:
        """The entry ``value`` stored under ``name`` without its signature (a JSON object), or
        None when it holds none, or one this key did not make for this name."""
        match = _SIGNED.match(value)
        if match is None:
            return None
        rest = value[match.end() :]
        if not hmac.compare_digest(match.group(1).decode(), self._mac(name, rest)):
            return None
        return b"{" + rest
