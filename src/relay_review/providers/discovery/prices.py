"""Price evidence: per-1k prompt and completion prices from a listing or Models.dev, in USD.

``None`` means unknown, and the catalog never selects an unknown route, so anything that does
not prove a price (a per-token price of 0 beside another price field above 0 or unreadable, a
negative price such as OpenRouter's ``-1`` for variable-priced routers, a missing cost) is
``None`` with a note saying why. A ``:free`` suffix decides nothing; ``discount`` is not a
price. Arithmetic is exact (:class:`~decimal.Decimal`): a listing's prices are per token, so
times 1000; Models.dev's per million, so divided by 1000.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from relay_review.providers.discovery.text import clip

IGNORED_PRICE_FIELDS: frozenset[str] = frozenset({"discount"})


class PriceEvidence(NamedTuple):
    """Per-1k prompt and completion prices (None = unknown) and, when unknown, why."""

    prompt: float | None
    completion: float | None
    note: str | None = None


def number(value: Any) -> Decimal | None:
    """A finite price from a JSON number or numeric string; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def listing_prices(pricing: Any) -> PriceEvidence:
    """Price evidence from an OpenRouter ``pricing`` object (USD per token, as strings)."""
    if not isinstance(pricing, Mapping):
        return PriceEvidence(None, None, "the listing has no pricing")
    prompt, completion = number(pricing.get("prompt")), number(pricing.get("completion"))
    if prompt is None or completion is None:
        return PriceEvidence(None, None, "the listing has no numeric prompt and completion price")
    if prompt < 0 or completion < 0:
        return PriceEvidence(None, None, "the listing gives a negative (variable) price")
    if prompt == 0 and completion == 0:
        for name in sorted(pricing):
            if name in ("prompt", "completion") or name in IGNORED_PRICE_FIELDS:
                continue
            other = number(pricing[name])
            if other is None or other != 0:
                return PriceEvidence(
                    None,
                    None,
                    f"prompt and completion are 0 but pricing.{name} is "
                    f"{clip(str(pricing[name]), 40)}: not free, per-token price unknown",
                )
        return PriceEvidence(0.0, 0.0)
    return _finite(float(prompt * 1000), float(completion * 1000), "the listing")


def models_dev_prices(record: Any, provider: str | None) -> PriceEvidence:
    """Price evidence from a Models.dev model record (``cost`` in USD per million tokens)."""
    if not isinstance(record, Mapping):
        return PriceEvidence(None, None, f"not listed in models.dev under provider {provider!r}")
    cost = record.get("cost")
    if not isinstance(cost, Mapping):
        return PriceEvidence(None, None, "models.dev gives no cost for this model")
    leaves = list(_cost_leaves(cost))
    if any(value is None or value < 0 for value in leaves):
        return PriceEvidence(None, None, "models.dev cost has a value that is not a price")
    prompt, completion = number(cost.get("input")), number(cost.get("output"))
    if prompt is None or completion is None:
        return PriceEvidence(None, None, "models.dev cost lacks input or output")
    if prompt == 0 and completion == 0:
        if all(value == 0 for value in leaves):
            return PriceEvidence(0.0, 0.0)
        return PriceEvidence(
            None, None, "models.dev input and output are 0 but another cost field is not"
        )
    return _finite(float(prompt / 1000), float(completion / 1000), "models.dev")


def _finite(prompt: float, completion: float, source: str) -> PriceEvidence:
    """The prices, unless one is too large for a float (the route's price is then unknown)."""
    if math.isfinite(prompt) and math.isfinite(completion):
        return PriceEvidence(prompt, completion)
    return PriceEvidence(None, None, f"{source} gives a price out of range")


def _cost_leaves(cost: Mapping[str, Any]) -> Iterable[Decimal | None]:
    """Every number in a Models.dev ``cost`` table, nested tiers included."""
    for value in cost.values():
        if isinstance(value, Mapping):
            yield from _cost_leaves(value)
        else:
            yield number(value)
