"""The capped body reader shared by listings and the chat call's non-stream bodies."""

from __future__ import annotations

import httpx
import pytest

from relay_review.providers.body import read_capped


class _Chunks(httpx.AsyncByteStream):
    """A body sent in the given chunks; counts how many were pulled."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.pulled = 0

    async def __aiter__(self):  # type: ignore[override]
        for chunk in self.chunks:
            self.pulled += 1
            yield chunk


@pytest.mark.parametrize(
    ("chunks", "whole", "kept"),
    [
        ((b"abc", b"de"), True, b"abcde"),  # exactly the cap: whole
        ((b"abc", b"def"), False, b"abcde"),  # one byte over: the first cap bytes, not whole
        ((b"abcdefgh",), False, b"abcde"),  # one chunk past the cap
        ((), True, b""),
    ],
)
async def test_whole_up_to_the_cap_and_the_first_cap_bytes_past_it(chunks, whole, kept) -> None:
    into = bytearray()
    response = httpx.Response(200, stream=_Chunks(*chunks))
    assert await read_capped(response, 5, into) is whole
    assert bytes(into) == kept


async def test_reading_stops_at_the_cap() -> None:
    """Past the cap no further chunk is pulled (a hostile server's endless body is not read)."""
    stream = _Chunks(b"abcdef", b"never", b"read")
    assert not await read_capped(httpx.Response(200, stream=stream), 5, bytearray())
    assert stream.pulled == 1
