"""A provider's response body read up to a cap (listings, error bodies, plain JSON replies).

A hostile or broken server may send any amount: reading stops at the cap, so one reply never
holds more than ``cap`` bytes in memory. (Streamed replies are capped as they decode, in
:mod:`relay_review.providers.chat.call`.)
"""

from __future__ import annotations

import contextlib

import httpx


async def read_capped(response: httpx.Response, cap: int, into: bytearray) -> bool:
    """Read ``response``'s decoded body into ``into``, at most ``cap`` bytes in all; False when
    the body was longer (``into`` then holds its first ``cap`` bytes and reading has stopped)."""
    # httpx types aiter_bytes() as an AsyncIterator; it is an async generator (has aclose)
    async with contextlib.aclosing(response.aiter_bytes()) as chunks:  # type: ignore[type-var]
        async for chunk in chunks:
            room = cap - len(into)
            into += chunk[:room]
            if len(chunk) > room:
                return False
    return True
