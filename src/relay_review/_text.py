"""Text helpers shared by the edges (GitHub, providers) and the review core.

Kept in a neutral module so an edge never imports another edge or the review package for them.
"""

from __future__ import annotations

import re

__all__ = ["scrub_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8.

    JSON may carry ``\\ud800``-style escapes and ``surrogateescape`` decoding leaves
    ``\\udc80``-``\\udcff``; a valid pair is one code point in a ``str``, so any surrogate
    left is lone.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
