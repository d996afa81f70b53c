"""Removing secret values from text that leaves the process (defence in depth).

Keys should never reach a message in the first place; this is the second guard for servers that
echo them. A secret is removed wherever it appears:

* whole;
* cut off: a text cut to length can end inside a key, so a prefix of at least
  :data:`MIN_SECRET_CHARS` characters that stands right before a cut mark (``…`` or ``...``)
  or at the very end of the text is removed too (a prefix followed by anything else is left
  alone: public key prefixes such as ``sk-or-v1-`` are not secret);
* escaped: Markdown rendering puts a backslash before characters such as ``_`` and a zero-width
  space after ``@``, so those are skipped while matching (``nvapi\\_abc`` is still the key);
* encoded: a server that echoes what it received may echo it percent-encoded (a key with ``+``,
  ``/`` or ``=``, as self-hosted tokens can have) or in base64 (``Authorization: Basic`` is
  ``base64(user:key)``; a debug page may print a header that way). Each of those forms is a
  secret too (:func:`forms`), cut off or escaped like the key itself. In base64 a key's
  characters depend on where it starts in the encoded bytes, so each of the three alignments is
  a form: the characters that only the key's bytes decide (the
  `GitHub runner <https://github.com/actions/runner>`_ masks a secret's base64 forms alike).
"""

from __future__ import annotations

import base64
import functools
import re
import urllib.parse
from collections.abc import Iterable, Iterator

#: Shorter values are not treated as secrets (placeholders such as ``EMPTY`` for a local server
#: would otherwise shred every text); they are never sent anywhere but their own server.
MIN_SECRET_CHARS = 8
REPLACEMENT = "***"
_CUT_MARKS = ("…", "...")
_ESCAPE = "\\"
_ZERO_WIDTH = "\u200b"


def usable_secrets(values: Iterable[str]) -> list[str]:
    """Distinct stripped values long enough to redact, longest first."""
    kept = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
    return sorted(kept, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str], replacement: str = REPLACEMENT) -> str:
    """``text`` without any of ``secrets``: whole, cut off at a truncation point, escaped or
    encoded (see the module's docs)."""
    bare = _bare(text)
    for secret in usable_secrets(secrets):
        for form in forms(secret):
            if _bare(form[:MIN_SECRET_CHARS]) not in bare:
                continue  # the common case, cheaply
            spans = list(_appearances(text, form))
            if spans:
                text = _replaced(text, spans, replacement)
                bare = _bare(text)
    return text


def _replaced(text: str, spans: list[tuple[int, int]], replacement: str) -> str:
    """``text`` with each of the ordered, disjoint ``spans`` replaced, in one pass (a server
    echoing a key 40,000 times must not cost a copy of the text per echo)."""
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts += (text[last:start], replacement)
        last = end
    parts.append(text[last:])
    return "".join(parts)


@functools.lru_cache(maxsize=256)
def forms(secret: str) -> tuple[str, ...]:
    """``secret`` and the distinct forms it takes encoded: percent-encoded (as ``quote`` leaves
    ``/`` and as it encodes it), and in base64 and URL-safe base64 at each of the three
    alignments (only the characters the secret's own bytes decide). Longest first."""
    found = {secret, urllib.parse.quote(secret), urllib.parse.quote(secret, safe="")}
    raw = secret.encode()
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw).decode("ascii")
        end = len(encoded) - (encoded.count("=") + 1 if encoded.endswith("=") else 0)
        # shift 1 or 2 lead bytes colour the first 2 or 3 characters; padding colours the last
        core = encoded[(8 * shift + 5) // 6 : end]
        found |= {core, core.translate(_URL_SAFE)}
    return tuple(sorted(found, key=len, reverse=True))


_URL_SAFE = str.maketrans("+/", "-_")


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


@functools.lru_cache(maxsize=256)
def _head(secret: str) -> re.Pattern[str]:
    """The secret's first :data:`MIN_SECRET_CHARS` characters, each maybe escaped, found at
    every position (a lookahead: a false start overlapping the real key cannot hide it)."""
    head = "".join(
        f"{re.escape(_ESCAPE)}?{re.escape(c)}{_ZERO_WIDTH}?" for c in secret[:MIN_SECRET_CHARS]
    )
    return re.compile(f"(?=({head}))")


def _appearances(text: str, secret: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every appearance of ``secret`` in ``text`` that must go (see above)."""
    last_end = 0
    for match in _head(secret).finditer(text):
        start, i, n = match.start(), match.end(1), MIN_SECRET_CHARS
        if start < last_end:
            continue
        while n < len(secret) and i < len(text):
            if text[i] == secret[n]:
                i += 1
            elif text[i] == _ESCAPE and text[i + 1 : i + 2] == secret[n]:
                i += 2
            else:
                break
            n += 1
            if text[i : i + 1] == _ZERO_WIDTH:
                i += 1
        if n == len(secret) or i == len(text) or text.startswith(_CUT_MARKS, i):
            last_end = i
            yield start, i


def _bare(text: str) -> str:
    """``text`` without the characters escaping adds (for a cheap first test)."""
    return text.replace(_ESCAPE, "").replace(_ZERO_WIDTH, "")
