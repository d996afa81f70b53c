"""Text discovery puts in its report and reasons: one line, printable, clipped (a listing is
input, so a name or an error message from it can be anything)."""

from __future__ import annotations

DETAIL_LIMIT = 200


def clip(text: str, limit: int = DETAIL_LIMIT) -> str:
    """One line, printable, at most ``limit`` characters."""
    flat = "".join(c if c.isprintable() else " " for c in text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
