"""One account's listing entries as :class:`~relay_review.records.Route` records: chat models
only, each with its price evidence, context window and declared structured output.

Ids that are empty, contain whitespace or control characters, or repeat within one listing are
skipped (a repeat would make two routes with one ``agent_id``); every id left out is counted by
reason for the report's ``dropped`` table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from relay_review.providers.discovery.chat_filter import non_chat_reason
from relay_review.providers.discovery.prices import (
    PriceEvidence,
    listing_prices,
    models_dev_prices,
)
from relay_review.records import Account, Cost, Route

#: Reasons for skipping an entry that is not a model at all.
INVALID_ID = "invalid id"
DUPLICATE_ID = "duplicate id"


def context_length(entry: Mapping[str, Any], record: Any = None) -> int | None:
    """The model's context window from the listing, else from its Models.dev record.

    Listing forms read: ``context_length`` (OpenRouter, Groq, Mistral's ``max_context_length``
    too), ``top_provider.context_length`` (OpenRouter), ``max_model_len`` (vLLM),
    ``max_input_tokens`` (LiteLLM), ``context_window`` (Groq, Together), ``inputTokenLimit``
    (Gemini's native listing) and llama-server's ``meta.n_ctx`` (the window the server was
    started with, ``-c``; preferred over ``n_ctx_train``, which the server cannot serve).
    """
    top = entry.get("top_provider")
    meta = entry.get("meta")
    candidates = [
        meta.get("n_ctx") if isinstance(meta, Mapping) else None,
        entry.get("context_length"),
        top.get("context_length") if isinstance(top, Mapping) else None,
        entry.get("max_model_len"),
        entry.get("max_input_tokens"),  # LiteLLM's /v1/models
        entry.get("context_window"),
        entry.get("max_context_length"),
        entry.get("inputTokenLimit"),
    ]
    if isinstance(record, Mapping) and isinstance(record.get("limit"), Mapping):
        candidates.append(record["limit"].get("context"))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, float) and value.is_integer() and value > 0:
            return int(value)
    return None


def _valid_model_id(value: Any) -> bool:
    """A usable model id: a non-empty string without whitespace or control characters."""
    return (
        isinstance(value, str)
        and bool(value)
        and len(value) <= 300
        and all(c.isprintable() and not c.isspace() for c in value)
    )


def response_format_support(entry: Mapping[str, Any]) -> str | None:
    """What structured output the listing declares (OpenRouter's ``supported_parameters``).

    ``json_schema`` when ``structured_outputs`` is listed, ``json_object`` when only
    ``response_format`` is, else None: the review then asks for JSON in the prompt alone, since
    sending an unsupported parameter to a free route can earn a 400 that takes it out.
    """
    params = entry.get("supported_parameters")
    if not isinstance(params, list):
        return None
    if "structured_outputs" in params:
        return "json_schema"
    if "response_format" in params:
        return "json_object"
    return None


def build_routes(
    account: Account,
    entries: Sequence[Any],
    models_dev: Mapping[str, Any] | None,
    models_dev_error: str | None = None,
    dropped: Counter[str] | None = None,
) -> list[Route]:
    """Turn one account's listing entries into routes (chat models only, with evidence), by
    model id (``index`` 0: :func:`~relay_review.providers.discovery.discover` numbers the routes
    in the report's order).

    ``dropped``, when given, counts every entry left out, by reason (:func:`non_chat_reason`'s
    reasons, ``invalid id``, ``duplicate id``).
    """
    dropped = Counter() if dropped is None else dropped
    catalog: Mapping[str, Any] = {}
    if account.pricing == "models.dev" and isinstance(models_dev, Mapping):
        provider = models_dev.get(account.models_dev_provider or "")
        models = provider.get("models") if isinstance(provider, Mapping) else None
        catalog = models if isinstance(models, Mapping) else {}
    routes: dict[str, Route] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or not _valid_model_id(entry.get("id")):
            dropped[INVALID_ID] += 1
            continue
        model = entry["id"]
        if model in routes:
            dropped[DUPLICATE_ID] += 1
            continue
        record = catalog.get(model) if account.pricing == "models.dev" else None
        if reason := non_chat_reason(entry, record):
            dropped[reason] += 1
            continue
        evidence = _evidence(account, entry, record, models_dev, models_dev_error)
        unknown = evidence.prompt is None or evidence.completion is None
        routes[model] = Route(
            index=0,
            account=account.name,
            provider=account.kind,
            model=model,
            agent_id=f"{account.name}/{model}",
            base_url=account.base_url,
            api_key_env=account.api_key_env,
            prompt_price_per_1k=evidence.prompt,
            completion_price_per_1k=evidence.completion,
            context_length=context_length(entry, record),
            cost=Cost.of(evidence.prompt, evidence.completion),  # PriceEvidence gives both or none
            response_format=response_format_support(entry),
            price_note=(evidence.note or "no price evidence") if unknown else None,
        )
    return [routes[model] for model in sorted(routes)]


def _evidence(
    account: Account,
    entry: Mapping[str, Any],
    record: Any,
    models_dev: Mapping[str, Any] | None,
    models_dev_error: str | None,
) -> PriceEvidence:
    """Dispatch on the account's pricing source."""
    if account.pricing == "listing":
        return listing_prices(entry.get("pricing"))
    if account.pricing == "models.dev":
        if models_dev is None:
            return PriceEvidence(None, None, f"models.dev unavailable ({models_dev_error})")
        return models_dev_prices(record, account.models_dev_provider)
    if account.pricing == "declared-free":
        return PriceEvidence(0.0, 0.0)
    return PriceEvidence(None, None, "the account's pricing is 'unknown'")
