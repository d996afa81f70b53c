"""Removing secret values from text that leaves the process (defence in depth).

Keys should never reach a message in the first place; this is the second guard for servers that
echo them. A text cut to length can end inside a key, so a key's prefix that stands right before
a cut mark (``…`` or ``...``) or at the very end of the text is removed too.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Shorter values are not treated as secrets (placeholders such as ``EMPTY`` for a local server
#: would otherwise shred every text); they are never sent anywhere but their own server.
MIN_SECRET_CHARS = 8
REPLACEMENT = "***"
_CUT_MARKS = ("…", "...")


def usable_secrets(values: Iterable[str]) -> list[str]:
    """Distinct stripped values long enough to redact, longest first."""
    kept = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
    return sorted(kept, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str], replacement: str = REPLACEMENT) -> str:
    """``text`` without any of ``secrets``, whole or cut off at a truncation point."""
    for secret in usable_secrets(secrets):
        if secret in text:
            text = text.replace(secret, replacement)
        for n in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
            prefix = secret[:n]
            if prefix not in text:
                continue
            for mark in _CUT_MARKS:
                text = text.replace(prefix + mark, replacement + mark)
            if text.endswith(prefix):
                text = text[: -len(prefix)] + replacement
    return text


def redact_data(data: object, secrets: Iterable[str], replacement: str = REPLACEMENT) -> object:
    """A copy of JSON-like ``data`` with every string, keys included, redacted."""
    values = usable_secrets(secrets)
    if isinstance(data, str):
        return redact(data, values, replacement)
    if isinstance(data, dict):
        return {
            redact(str(k), values, replacement): redact_data(v, values, replacement)
            for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return [redact_data(v, values, replacement) for v in data]
    return data
