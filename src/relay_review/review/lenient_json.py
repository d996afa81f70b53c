"""A forgiving JSON reader for the almost-JSON small models write.

Literal newlines and tabs inside strings, trailing commas, single quotes, Python's
None/True/False, bare keys, comments, and replies cut at ``max_tokens``: :class:`LenientReader`
reads all of that in one linear pass from a given position. A value cut by the end of the text
is *incomplete*: an array keeps its complete items (a cut reply keeps its complete findings), an
object keeps its complete members, anything else cut is dropped.
"""

from __future__ import annotations

import re
from typing import Any

_MAX_DEPTH = 64
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_WORD_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
    "NaN": None,
    "undefined": None,
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\"}
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}


class NotJson(Exception):
    """Not (tolerable) JSON at this position."""


class LenientReader:
    """A forgiving JSON reader over ``text`` (see the module docstring)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.consumed = 0

    def parse(self, pos: int) -> tuple[Any, int, bool]:
        """``(value, end, complete)`` of the value starting at ``pos``; raises :class:`NotJson`."""
        value, end, complete = self._value(pos, 0)
        self.consumed += end - pos
        return value, end, complete

    def _ws(self, i: int) -> int:
        t, n = self.text, self.n
        while i < n:
            c = t[i]
            if c in " \t\r\n\ufeff\xa0":
                i += 1
            elif t.startswith("//", i):
                j = t.find("\n", i)
                i = n if j < 0 else j + 1
            elif t.startswith("/*", i):
                j = t.find("*/", i + 2)
                i = n if j < 0 else j + 2
            else:
                break
        return i

    def _value(self, i: int, depth: int) -> tuple[Any, int, bool]:
        i = self._ws(i)
        if i >= self.n:
            return None, i, False
        c = self.text[i]
        if c == "{":
            return self._object(i + 1, depth + 1)
        if c == "[":
            return self._array(i + 1, depth + 1)
        if c in "\"'":
            return self._string(i)
        number = _NUMBER.match(self.text, i)
        if number:
            end = number.end()
            raw = number.group().lstrip("+")
            try:
                value: Any = int(raw) if raw.lstrip("-").isdigit() else float(raw)
            except ValueError:  # e.g. an int too long for int()
                raise NotJson(i) from None
            return value, end, end < self.n  # a number at the very end may be cut
        word = _WORD_RE.match(self.text, i)
        if word and word.group() in _LITERALS:
            return _LITERALS[word.group()], word.end(), True
        raise NotJson(i)

    def _string(self, i: int) -> tuple[str, int, bool]:
        quote = self.text[i]
        stop = _STRING_STOP[quote]
        t = self.text
        out: list[str] = []
        i += 1
        while True:
            m = stop.search(t, i)
            if m is None:
                out.append(t[i:])
                return "".join(out), self.n, False
            j = m.start()
            out.append(t[i:j])
            if t[j] == quote:
                return "".join(out), j + 1, True
            if j + 1 >= self.n:  # a backslash at the very end
                return "".join(out), self.n, False
            e = t[j + 1]
            if e == "u":
                hexa = t[j + 2 : j + 6]
                if len(hexa) < 4:
                    return "".join(out), self.n, False
                try:
                    code = int(hexa, 16)
                except ValueError:
                    out.append("u")
                    i = j + 2
                    continue
                i = j + 6
                if 0xD800 <= code < 0xDC00 and t.startswith("\\u", i):
                    try:
                        low = int(t[i + 2 : i + 6], 16)
                    except ValueError:
                        low = -1
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                out.append(chr(code))
                continue
            out.append(_ESCAPES.get(e, e))
            i = j + 2

    def _key(self, i: int) -> tuple[str, int, bool]:
        if self.text[i] in "\"'":
            return self._string(i)
        word = _WORD_RE.match(self.text, i)
        if word is None:
            raise NotJson(i)
        return word.group(), word.end(), True

    def _object(self, i: int, depth: int) -> tuple[dict[str, Any], int, bool]:
        if depth > _MAX_DEPTH:
            raise NotJson(i)
        out: dict[str, Any] = {}
        while True:
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            c = self.text[i]
            if c == "}":
                return out, i + 1, True
            if c == ",":
                i += 1
                continue
            key, i, complete = self._key(i)
            if not complete:
                return out, i, False
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            if self.text[i] != ":":
                raise NotJson(i)
            value, i, complete = self._value(i + 1, depth)
            if not complete:
                if isinstance(value, list | dict) and value:
                    out[key] = value
                return out, i, False
            out[key] = value

    def _array(self, i: int, depth: int) -> tuple[list[Any], int, bool]:
        if depth > _MAX_DEPTH:
            raise NotJson(i)
        out: list[Any] = []
        while True:
            i = self._ws(i)
            if i >= self.n:
                return out, i, False
            c = self.text[i]
            if c == "]":
                return out, i + 1, True
            if c == ",":
                i += 1
                continue
            value, i, complete = self._value(i, depth)
            if not complete:
                return out, i, False  # the cut item is dropped
            out.append(value)
