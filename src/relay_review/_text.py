"""Text helpers shared by the edges (GitHub, providers) and the review core.

Kept in a neutral module so an edge never imports another edge or the review package for them.

:func:`invisible_class` is the one predicate for characters that change what text *does* without
showing: a committable suggestion holding one is refused
(:func:`relay_review.review.suggestions.suggestion_problem`) and the comment shows each one as a
visible ``<U+200E>`` escape (:func:`show_invisible`, used by :mod:`relay_review.render`).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["find_invisible", "invisible_class", "scrub_text", "show_invisible"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8.

    JSON may carry ``\\ud800``-style escapes and ``surrogateescape`` decoding leaves
    ``\\udc80``-``\\udcff``; a valid pair is one code point in a ``str``, so any surrogate
    left is lone.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


# -- invisible and format characters ----------------------------------------------------------

#: (first, last, class) ranges checked before the general category, most specific first.
#: Together with every general-category ``Cf`` character they cover Unicode's
#: Default_Ignorable_Code_Point set (DerivedCoreProperties.txt, unassigned code points included).
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x061C, 0x061C, "bidirectional control"),  # ARABIC LETTER MARK
    (0x200E, 0x200F, "bidirectional control"),  # LRM, RLM
    (0x202A, 0x202E, "bidirectional control"),  # embeddings and overrides
    (0x2066, 0x2069, "bidirectional control"),  # isolates
    (0x200B, 0x200D, "zero-width character"),  # ZWSP, ZWNJ, ZWJ
    (0x2060, 0x2060, "zero-width character"),  # WORD JOINER
    (0xFEFF, 0xFEFF, "zero-width character"),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFE00, 0xFE0F, "variation selector"),
    (0xE0100, 0xE01EF, "variation selector"),
    (0x180B, 0x180D, "variation selector"),  # Mongolian free variation selectors
    (0x180F, 0x180F, "variation selector"),
    (0x115F, 0x1160, "Hangul filler"),
    (0x3164, 0x3164, "Hangul filler"),
    (0xFFA0, 0xFFA0, "Hangul filler"),
    (0xE0000, 0xE007F, "tag character"),
    (0x034F, 0x034F, "default-ignorable character"),  # COMBINING GRAPHEME JOINER
    (0x17B4, 0x17B5, "default-ignorable character"),  # Khmer inherent vowels
    (0x2065, 0x2065, "default-ignorable character"),
    (0xFFF0, 0xFFF8, "default-ignorable character"),
    (0xE0080, 0xE00FF, "default-ignorable character"),
    (0xE01F0, 0xE0FFF, "default-ignorable character"),
    (0x2028, 0x2029, "line or paragraph separator"),
)
#: Code points below this are ASCII or Latin-1 controls; the first invisible one above is U+00AD.
_FIRST_NON_CONTROL = 0xA0


def invisible_class(ch: str) -> str | None:
    """What kind of invisible or format character ``ch`` is (None: an ordinary one).

    Covers every Bidi_Control, every general-category ``Cf`` (format) character (U+00AD, U+180E,
    U+061C, U+200B-U+200F, U+2060-U+2064, U+FEFF, U+FFF9-U+FFFB, tags, ...), every other
    Default_Ignorable_Code_Point (variation selectors, Hangul fillers U+115F/U+1160/U+3164/
    U+FFA0, U+034F, ...), U+2028/U+2029, and C0/C1 control characters other than tab and line
    feed. The class names the reason in a refusal ("bidirectional control", "tag character").
    """
    cp = ord(ch)
    if cp < _FIRST_NON_CONTROL:
        if cp < 0x20 or cp >= 0x7F:
            return None if ch in "\t\n" else "control character"
        return None
    for first, last, name in _RANGES:
        if first <= cp <= last:
            return name
    if unicodedata.category(ch) == "Cf":
        return "format character"
    return None


def find_invisible(text: str) -> tuple[str, str] | None:
    """The first invisible or format character of ``text`` and its class, if any."""
    for ch in text:
        name = invisible_class(ch)
        if name is not None:
            return ch, name
    return None


def show_invisible(text: str) -> str:
    """``text`` with every invisible or format character shown as a visible escape
    (``<U+200E>``), so nothing in a comment displays differently from what it holds."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(f"<U+{ord(c):04X}>" if invisible_class(c) else c for c in text)
