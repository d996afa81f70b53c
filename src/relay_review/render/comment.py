"""The sticky comment (also the step summary's body): the parts of :mod:`.sections` joined,
shortened least important first until they fit the size limit, and as a last resort cut at a
line end with every ``<details>`` and code fence it opened closed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from relay_review.records import RunReport
from relay_review.render.sections import comment_sections, findings_within

COMMENT_LIMIT = 65_536


#: Which parts give way first when the comment is too long.
TRUNCATION_ORDER = (
    "walkthrough",
    "attempts",
    "reused",
    "unverified",
    "lifecycle",
    "files",
    "readiness",
    "findings",
    "head",
)


def comment_markdown(report: RunReport, *, marker: str = "", limit: int = COMMENT_LIMIT) -> str:
    """The sticky comment body: fits ``limit`` characters, shortening the least important first."""
    sections = comment_sections(report)
    chosen = {name: full for name, full, _ in sections}
    shortened: list[str] = []

    def body() -> str:
        parts = [chosen[name] for name, _, _ in sections]
        if shortened:
            parts.insert(
                -1,
                f"_Shortened to fit GitHub's size limit ({limit:,} characters here): "
                f"{', '.join(shortened)}. "
                "The full report is in the workflow's JSON report._",
            )
        return (marker + "\n" if marker else "") + "\n\n".join(parts) + "\n"

    text = body()
    shorts = {name: short for name, _, short in sections}
    for name in TRUNCATION_ORDER:
        if len(text) <= limit:
            break
        if name in chosen and chosen[name] != shorts[name]:
            chosen[name] = shorts[name]
            shortened.append(name)
            text = body()
    if len(text) > limit and "findings" in chosen:
        # still too long (many findings with long messages): fewer findings, not a cut that
        # drops the route summary, the readiness table, the footer and this note
        if "findings" not in shortened:
            shortened.append("findings")
            text = body()
        fitted = findings_within(report, limit - (len(text) - len(chosen["findings"])))
        if fitted is not None:
            chosen["findings"] = fitted
            text = body()
    if len(text) > limit:
        text = _hard_cut(text, limit, marker)
    return text


_CUT_NOTE = "\n\n_[cut at the size limit]_\n"


_CLOSE_DETAILS = "\n\n</details>"


_FENCE_OPEN = re.compile(r"^( *)(`{3,})diff$")


def _open_fence(lines: Sequence[str]) -> str:
    """The closing line of a suggestion block (:func:`suggestion_diff`) left open, or ``""``.
    Its content lines start with ``-``, ``+`` or a space after the indent, so none closes it."""
    closing = ""
    for ln in lines:
        if closing:
            if ln == closing:
                closing = ""
        elif m := _FENCE_OPEN.match(ln):
            closing = m.group(1) + m.group(2)
    return closing


def _hard_cut(text: str, limit: int, marker: str) -> str:
    """``text`` cut to ``limit`` at a line end (hostile text is one line per field, so no code
    span, escape or table row is split), with every ``<details>`` it opened closed."""
    room = limit - len(_CUT_NOTE)
    while True:
        kept = text[: max(room, 0)]
        kept = kept[: kept.rfind("\n") + 1] if "\n" in kept else ""
        if marker and not kept.startswith(marker):
            kept = marker + "\n"
        lines = kept.split("\n")
        # ours only: details() starts a line with <details> and ends with a </details> line
        unclosed = sum(
            ln.startswith(("<details>", "<details open>")) for ln in lines
        ) - lines.count("</details>")
        fence = _open_fence(lines)
        cut = kept.rstrip("\n") + (f"\n{fence}" if fence else "")
        cut += _CLOSE_DETAILS * unclosed + _CUT_NOTE
        if len(cut) <= limit or room <= 0:
            return cut[:limit]
        room -= max(len(cut) - limit, 1)
