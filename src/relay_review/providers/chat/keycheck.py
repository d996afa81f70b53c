"""Whether a gateway's key is refused for the whole account: one authenticated ``GET /models``.

A gateway passes an upstream's 401/402/403 through for one model; the listing tells a bad gateway
key from one bad upstream (``routing.accounts`` decides over the answer).
"""

from __future__ import annotations

import asyncio

import httpx

from relay_review.records import Deadlines


async def key_check(
    client: httpx.AsyncClient, *, base_url: str, api_key: str | None, deadlines: Deadlines
) -> bool | None:
    """Whether one authenticated ``GET {base_url}/models`` refuses the key (401/403: True).

    A gateway passes an upstream's 401/402/403 through for one model; this call tells a bad
    gateway key (the listing refuses it too) from one bad upstream. False: the listing accepted
    the key; None: no answer within ``deadlines`` (connect, first byte, attempt) or another
    status, so nothing is confirmed.
    """
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    timeout = httpx.Timeout(
        connect=deadlines.connect, read=deadlines.first_byte, write=None, pool=deadlines.connect
    )
    url = base_url.rstrip("/") + "/models"
    try:
        async with asyncio.timeout(min(deadlines.attempt, deadlines.first_byte)):
            async with client.stream("GET", url, headers=headers, timeout=timeout) as response:
                status = response.status_code
    except (TimeoutError, httpx.HTTPError, httpx.InvalidURL):
        return None
    if status in (401, 403):
        return True
    return False if 200 <= status < 300 else None
