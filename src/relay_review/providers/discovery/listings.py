"""Fetching the listings: each account's models, Models.dev's ``api.json``, OpenRouter's ZDR feed.

``GET {base_url}/models`` (``{"data": [...]}``) for every kind but Cloudflare, whose
OpenAI-compatible ``/ai/v1`` has no model list: its catalog is ``GET .../ai/models/search``
(paged, prices per million tokens), turned into the same entry shape. Workers AI's daily free
allocation is an allowance, not a price of 0. Gemini's ``models/`` id prefix is dropped (chat
calls name the model without it). Every failure is a :class:`FetchError` phrased for the report.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import httpx

from relay_review.kinds import ACCOUNT_ID_PLACEHOLDER, KINDS, account_url_env
from relay_review.providers.body import read_capped
from relay_review.providers.discovery.prices import number
from relay_review.providers.discovery.text import clip
from relay_review.records import Account

#: Cloudflare's model search is paged: this many per page, at most this many pages.
CLOUDFLARE_PER_PAGE = 100
CLOUDFLARE_MAX_PAGES = 20
#: Most bytes of one listing, counted after its content-encoding is undone (a gzip bomb of a
#: few hundred KB cannot fill memory). Models.dev's ``api.json``, the largest, is a few MB.
LISTING_BODY_MAX = 32 * 1024 * 1024
_PER_MILLION = Decimal(1_000_000)


class FetchError(Exception):
    """A failed fetch, already phrased for the report (and scrubbed of keys)."""


def _http_detail(content: bytes) -> str:
    """A short reason from an error reply: the provider's ``error.message`` if it gives one."""
    try:
        body = json.loads(content)
    except ValueError:
        return ""
    message: Any = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        errors = body.get("errors")
        if not message and isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
            message = errors[0].get("message")  # Cloudflare: {"success": false, "errors": [...]}
        message = message or body.get("message") or body.get("detail")
    return f": {clip(message)}" if isinstance(message, str) and message.strip() else ""


async def get_json(
    client: httpx.AsyncClient, url: str, timeout: float, headers: Mapping[str, str] | None = None
) -> tuple[Any, bytes]:
    """GET a JSON document within ``timeout`` seconds overall; raise FetchError on any failure."""
    try:
        async with asyncio.timeout(timeout):
            response, content = await _get_capped(client, url, headers, LISTING_BODY_MAX)
    except (TimeoutError, httpx.TimeoutException):
        raise FetchError(f"timed out after {timeout:g} s") from None
    except httpx.ConnectError as exc:
        raise FetchError(f"connection failed: {clip(str(exc)) or type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise FetchError(f"{type(exc).__name__}: {clip(str(exc))}") from None
    if not response.is_success:
        raise FetchError(f"HTTP {response.status_code}{_http_detail(content or b'')}")
    if content is None:
        raise FetchError(f"the reply is larger than {LISTING_BODY_MAX} bytes (decoded)")
    try:
        return json.loads(content), content
    except ValueError:
        raise FetchError("the reply is not valid JSON") from None


async def _get_capped(
    client: httpx.AsyncClient, url: str, headers: Mapping[str, str] | None, cap: int
) -> tuple[httpx.Response, bytes | None]:
    """GET ``url``: the response and its decoded body, or None when that passed ``cap`` bytes
    (reading stops there)."""
    async with client.stream("GET", url, headers=dict(headers or {})) as response:
        body = bytearray()
        whole = await read_capped(response, cap, body)
        return response, bytes(body) if whole else None


async def list_models(
    client: httpx.AsyncClient, account: Account, key: str, timeout: float
) -> list[Any]:
    """One account's listing entries: ``GET {base_url}/models``'s ``data`` list, or Cloudflare's
    model search turned into the same shape (:func:`cloudflare_entry`)."""
    kind = KINDS.get(account.kind)
    if ACCOUNT_ID_PLACEHOLDER in account.base_url:
        variable = account_url_env(account.name, account.kind) or "the account id variable"
        raise FetchError(f"{variable} is not set (it fills the base URL's {{account_id}})")
    headers = {"Authorization": f"Bearer {key}"}
    if kind is not None and kind.listing == "cloudflare":
        return await _list_cloudflare(client, account.base_url, timeout, headers)
    payload, _ = await get_json(client, f"{account.base_url}/models", timeout, headers)
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        raise FetchError('unexpected reply: expected {"data": [...]}')
    if kind is not None and kind.id_prefix:
        data = [_without_prefix(entry, kind.id_prefix) for entry in data]
    return data


def _without_prefix(entry: Any, prefix: str) -> Any:
    """Gemini lists ``models/gemini-2.5-flash``; chat calls name ``gemini-2.5-flash``."""
    model = entry.get("id") if isinstance(entry, Mapping) else None
    if isinstance(model, str) and model.startswith(prefix):
        return {**entry, "id": model[len(prefix) :]}
    return entry


async def _list_cloudflare(
    client: httpx.AsyncClient, base_url: str, timeout: float, headers: Mapping[str, str]
) -> list[Any]:
    """Workers AI's catalog: ``GET .../ai/models/search`` page by page (its OpenAI-compatible
    ``/ai/v1`` has chat but no model list), each model as a :func:`cloudflare_entry`."""
    root = base_url.removesuffix("/v1")
    entries: list[Any] = []
    for page in range(1, CLOUDFLARE_MAX_PAGES + 1):
        url = f"{root}/models/search?per_page={CLOUDFLARE_PER_PAGE}&page={page}"
        payload, _ = await get_json(client, url, timeout, headers)
        result = payload.get("result") if isinstance(payload, Mapping) else None
        if not isinstance(result, list):
            raise FetchError('unexpected reply: expected {"result": [...]}')
        entries.extend(cloudflare_entry(raw) for raw in result)
        if len(result) < CLOUDFLARE_PER_PAGE:
            break
    return entries


def cloudflare_entry(raw: Any) -> Any:
    """One Workers AI catalog record as a listing entry discovery reads.

    ``{"name": "@cf/meta/llama-3.1-8b-instruct", "task": {"name": "Text Generation"},
    "properties": [{"property_id": "price", "value": [{"unit": "per M input tokens",
    "price": 0.282, "currency": "USD"}, ...]}, {"property_id": "context_window", "value":
    "128000"}]}`` -> ``{"id", "task", "context_length", "pricing"}`` with ``pricing`` in
    OpenRouter's form (USD per token, as strings): ``per M input tokens`` -> ``prompt``,
    ``per M output tokens`` -> ``completion``, any other unit kept under its own name (so a
    price per step or per audio minute still counts as "not free"). No ``price`` property ->
    no ``pricing`` (unknown).
    """
    if not isinstance(raw, Mapping):
        return raw
    entry: dict[str, Any] = {"id": raw.get("name"), "task": raw.get("task")}
    properties = raw.get("properties")
    props = {
        p["property_id"]: p.get("value")
        for p in (properties if isinstance(properties, list) else [])
        if isinstance(p, Mapping) and isinstance(p.get("property_id"), str)
    }
    window = props.get("context_window")
    if isinstance(window, str) and window.strip().isdigit():
        entry["context_length"] = int(window)
    prices = props.get("price")
    if isinstance(prices, list):
        pricing: dict[str, str] = {}
        for item in prices:
            if not isinstance(item, Mapping) or not isinstance(item.get("unit"), str):
                continue
            amount = number(item.get("price"))
            unit = item["unit"].strip()
            name = {"per M input tokens": "prompt", "per M output tokens": "completion"}.get(unit)
            if name and amount is not None:
                pricing[name] = str(amount / _PER_MILLION)
            else:
                pricing[unit] = str(item.get("price"))
        entry["pricing"] = pricing
    return entry


async def fetch_zdr(client: httpx.AsyncClient, url: str, timeout: float) -> bytes:
    """OpenRouter's ZDR feed, checked for the ``{"data": [...]}`` shape, as the bytes received."""
    payload, raw = await get_json(client, url, timeout)
    if not isinstance(payload, Mapping) or not isinstance(payload.get("data"), list):
        raise FetchError('unexpected reply: expected {"data": [...]}')
    return raw


async def fetch_models_dev(client: httpx.AsyncClient, url: str, timeout: float) -> dict[str, Any]:
    """Models.dev's ``api.json`` (provider id -> provider with ``models``)."""
    payload, _ = await get_json(client, url, timeout)
    if not isinstance(payload, dict):
        raise FetchError("unexpected reply: expected a JSON object of providers")
    return payload
