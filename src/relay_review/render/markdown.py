"""Hostile text made inert for GitHub-flavoured Markdown: escaped text, inline code whose fence
cannot be closed early, tables and folded ``<details>`` blocks. Every Markdown rendering (the
sticky comment, the step summary, line comments) writes untrusted text through these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from relay_review._text import show_invisible
from relay_review.render.terminal import text_cell

#: Escaped with a backslash: emphasis, code, links, headings, tables, strike-through, and ``$``
#: (GitHub renders ``$...$`` and ``$$`` blocks as math, which could swallow what follows).
_MD_SPECIAL = str.maketrans(
    {c: f"\\{c}" for c in "\\`*_{}[]()#!|~$"}
    | {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\r": " ", "\n": " "}
)


#: An issue or pull-request reference (``#12``, ``org/repo#12``) once ``#`` is escaped.
_ISSUE_REF = re.compile(r"\\#(?=\w)")


#: GitHub's other issue-reference form, ``GH-12``.
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)


def md_text(value: Any, limit: int = 1000) -> str:
    """Hostile text made inert for Markdown: escaped, one line, length-capped.

    At most ``limit`` characters of ``value`` are kept (``…`` marks a cut); escaping can make
    the result longer (``&`` -> ``&amp;``, U+E0041 -> ``&lt;U+E0041&gt;``). ``<`` is escaped,
    so no HTML, no hidden comment and no marker can start; every ``@`` is followed by U+200B,
    so no ``@user`` or ``@org/team`` mention can ping anyone; autolinks (``://``, ``www.``) and
    issue references (``#12``, ``GH-12``) are broken the same way, so hostile text makes no
    live link and no cross-reference event; every invisible or format character (bidirectional
    controls, zero-width characters, tags, variation selectors, Hangul fillers:
    :func:`relay_review._text.invisible_class`) is shown as a visible ``<U+200E>`` escape (no
    text displayed reversed or hidden, as in "Trojan Source").
    """
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = show_invisible(text.replace("\r", " ").replace("\n", " "))
    text = text.translate(_MD_SPECIAL).replace("@", "@\u200b")
    text = _GH_REF.sub("\\1\u200b-", _ISSUE_REF.sub("\\#\u200b", text))
    return text.replace("://", ":\u200b//").replace("www.", "www\u200b.")


def md_code(value: Any, limit: int = 200) -> str:
    """Hostile text shown as inline code: one line, length-capped, and a fence longer than any
    backtick run inside, so it cannot be closed early. GitHub links no mention inside code;
    ``<!--`` gets a U+200B after ``<`` so the raw body never holds a hidden comment (a forged
    sticky marker) outside the lines we write; invisible and format characters are shown as
    visible ``<U+200E>`` escapes (:func:`relay_review._text.show_invisible`)."""
    text = str(value).replace("\r", " ").replace("\n", " ")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = show_invisible(text)
    text = text.replace("<!--", "<\u200b!--")
    longest = 0
    run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_cell(value: Any) -> str:
    """A table cell: numbers as they are, text escaped."""
    if value is None or isinstance(value, int | float):
        return text_cell(value)
    return md_text(value, 200)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; cells must already be Markdown-safe."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(text_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def details(summary: str, body: str, *, opened: bool = False) -> str:
    tag = "<details open>" if opened else "<details>"
    return f"{tag}<summary>{summary}</summary>\n\n{body}\n\n</details>"
