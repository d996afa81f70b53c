"""Route discovery: list each account's models, keep the chat-capable ones, attach price evidence.

Every account with a key is asked ``GET {base_url}/models`` concurrently, each request bounded by
``[discovery] timeout`` (an :class:`httpx.Timeout` per phase and an :func:`asyncio.timeout` over
the whole request). One account failing (timeout, HTTP error, connection error, bad JSON, wrong
shape) is recorded under ``errors`` and does not stop the others. Error texts never contain a key:
keys are only sent as ``Authorization: Bearer`` to the account's own base URL, and every error
text is scrubbed of every key value before it is recorded.

**Which models are kept** (chat-capable text models), first rule that applies (one exception:
a model of the name list's ``moderation`` family is dropped even when it declares text to text,
since guard classifiers are listed as text generators):

1. Modalities declared by the listing: OpenRouter's ``architecture.output_modalities`` must
   contain ``"text"`` and ``architecture.input_modalities`` (when present) must contain ``"text"``;
   the older ``architecture.modality`` string (``"text+image->text"``) is read the same way.
2. A type the listing declares: Mistral's ``capabilities.completion_chat``, a ``type`` or
   ``mode`` string (``chat``, ``language``, ``code`` are chat; anything else is not; LiteLLM's
   ``/v1/models`` gives each id the ``mode`` of its cost map: ``image_generation``,
   ``embedding``, ``responses``, ...), Cloudflare's ``task.name`` (``Text Generation``). The
   reason reported names the field and value (``declared mode: image_generation``).
3. Modalities declared by Models.dev (``modalities.input`` / ``modalities.output``) for the model
   joined by exact id (accounts with ``pricing = "models.dev"``).
4. The name list :data:`NAME_RULES`, for listings that declare nothing (NVIDIA, OpenCode, Groq,
   gateways, self-hosted servers), matched on the lower-cased id by substring or whole
   ``-``/``_``/``/``/``.``/``:``-separated word. Families (each the reason reported when it
   drops a model): ``image`` (the word ``image`` as in ``gpt-image-1`` or ``-image-``,
   ``dall-e``, ``flux``,
   ``stable-diffusion``, ``sdxl``, ``imagen``), ``video`` (``sora``, ``veo``), ``embedding``
   (``embed``, ``bge``, ``clip``), ``rerank``, ``audio`` (tts, whisper, transcribe, speech, asr),
   ``realtime`` (``realtime``, ``live``), ``moderation`` (``guard``, ``safety``,
   ``moderation``: Llama Guard and its kin are classifiers, not chat models), ``ocr``,
   ``legacy completion`` (OpenAI's completions-only ``babbage-002``, ``davinci-002``,
   ``text-davinci-*``, ``gpt-3.5-turbo-instruct``; other ``-instruct`` models are chat models
   and kept) and ``responses-only`` (OpenAI's ``o1-pro``, ``o3-pro``, ``gpt-5*-pro``,
   ``gpt-5*-codex``, ``*-deep-research``, ``computer-use-preview``: Responses API only). The
   families follow the ``mode`` LiteLLM's bundled cost map (1.108.7) gives each OpenAI id.
   ``chat-latest``, ``gpt-5-chat-latest`` and the ``-search-preview`` models are kept: that map
   gives them mode ``chat`` and they answer ``/chat/completions``.

Ids that are empty, contain whitespace or control characters, or repeat within one listing are
skipped (a repeat would make two routes with one ``agent_id``). The report's ``dropped`` table
counts every id left out, per account and reason.

**Listings.** ``GET {base_url}/models`` (``{"data": [...]}``) for every kind but Cloudflare,
whose OpenAI-compatible ``/ai/v1`` has no model list: its catalog is
``GET .../ai/models/search`` (paged), with a ``task`` per model and prices per million tokens
(see :func:`cloudflare_entry`). Workers AI's daily free allocation (10,000 neurons) is an
allowance, not a price of 0: its routes carry their listed prices and reach the free pool only
when the policy declares the account free. Gemini's ``models/`` id prefix is dropped (chat calls
name the model without it).

**Price evidence** (``prompt_price_per_1k`` / ``completion_price_per_1k``, USD per 1,000 tokens;
``null`` means unknown, and the catalog never selects an unknown route):

- ``listing`` (OpenRouter; Cloudflare's prices converted to its form): ``pricing.prompt`` /
  ``pricing.completion`` are strings in USD per
  *token*, multiplied by 1000 (exactly, with :class:`~decimal.Decimal`). When both are 0 but any
  other price field (``request``, ``image``, ``web_search``, ``input_cache_read``, ...) is above
  0 or unreadable, the route is **not** free and its per-token price does not say what it costs:
  both prices are ``null`` and ``price_note`` says why. ``discount`` is not a price and is
  ignored. A negative price (OpenRouter's ``-1`` for variable-priced routers) is ``null`` too.
  A ``:free`` suffix decides nothing.
- ``models.dev``: https://models.dev/api.json is fetched once when some account needs it, and
  the model is joined by exact id under the account's Models.dev provider key (``nvidia``,
  ``opencode``, ``opencode-go``). Its ``cost`` numbers are USD per *million* tokens, divided by
  1000. Every cost field 0 -> 0.0 / 0.0; ``input`` and ``output`` both 0 while another cost field
  is above 0 -> ``null`` as above; ``cost`` missing, or without ``input`` and ``output`` ->
  ``null``. Not in Models.dev, or Models.dev unreachable -> ``null``.
- ``declared-free`` -> 0.0 / 0.0. ``unknown`` -> ``null``.

Routes with ``null`` prices carry a ``price_note``. ``context_length`` comes from the listing
(``context_length``, ``top_provider.context_length`` or vLLM's ``max_model_len``) or else
Models.dev's ``limit.context``; ``null`` when neither says.

When an ``openrouter`` account has a key, OpenRouter's ZDR feed is fetched too and saved,
byte for byte, beside the report as ``<report stem>.zdr.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import httpx

from relay_review import __version__
from relay_review._files import atomic_write
from relay_review.providers.kinds import ACCOUNT_ID_PLACEHOLDER, KINDS, account_url_env
from relay_review.records import Account, has_key
from relay_review.redact import redact

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NameRule:
    """One family of non-chat models recognised by name: the reason reported when it drops one.

    The lower-cased id matches when it contains one of ``substrings``, has one of ``tokens`` as
    a whole ``-``/``_``/``/``/``.``/``:``-separated word, or its last ``/`` segment matches
    ``pattern``.
    """

    reason: str
    substrings: tuple[str, ...] = ()
    tokens: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None


#: The documented name list, for listings that declare neither modalities nor a type. The
#: families follow the ``mode`` LiteLLM's bundled cost map gives each OpenAI id (1.108.7:
#: image_generation, video_generation, embedding, audio_speech, audio_transcription, realtime,
#: moderation, completion, responses), plus the non-chat families NVIDIA and Groq list.
NAME_RULES: tuple[NameRule, ...] = (
    NameRule(
        "image",
        ("dall-e", "stable-diffusion", "stable_diffusion", "sdxl", "flux", "imagen", "deplot"),
        frozenset({"image", "sd3"}),
    ),
    NameRule("video", (), frozenset({"sora", "veo"})),
    NameRule("embedding", ("embed", "retriever", "nvclip"), frozenset({"bge", "clip"})),
    NameRule("rerank", ("rerank",)),
    NameRule(
        "audio",
        ("whisper", "parakeet", "speech", "transcri", "audio"),
        frozenset({"asr", "tts", "stt", "canary", "riva", "fastpitch", "hifigan"}),
    ),
    NameRule("realtime", ("realtime",), frozenset({"live"})),
    NameRule("moderation", ("guard", "safety", "moderation")),
    NameRule("ocr", (), frozenset({"ocr"})),
    # OpenAI's completions-only models (``POST /v1/completions``, no chat endpoint)
    NameRule(
        "legacy completion",
        ("text-davinci", "text-curie", "text-babbage", "text-ada"),
        pattern=re.compile(r"^(ft:)?(babbage|davinci)-002$|^gpt-3\.5-turbo-instruct(-\d+)?$"),
    ),
    # OpenAI models served by the Responses API only (no /chat/completions)
    NameRule(
        "responses-only",
        ("deep-research", "computer-use"),
        pattern=re.compile(r"^(o\d+|gpt-\d+(\.\d+)?)-(pro|codex)\b|^codex-mini"),
    ),
)
#: Every substring and token of :data:`NAME_RULES` (kept for callers of the older flat lists).
NON_CHAT_SUBSTRINGS: tuple[str, ...] = tuple(s for rule in NAME_RULES for s in rule.substrings)
NON_CHAT_TOKENS: frozenset[str] = frozenset(t for rule in NAME_RULES for t in rule.tokens)
#: Declared listing types that mean a chat model (Together-style ``type``, LiteLLM ``mode``,
#: Cloudflare's ``task.name`` lower-cased); any other declared value means it is not one.
CHAT_TYPES: frozenset[str] = frozenset({"chat", "language", "code", "text generation"})
IGNORED_PRICE_FIELDS: frozenset[str] = frozenset({"discount"})

ZDR_ERROR_ACCOUNT = "openrouter-zdr"
MODELS_DEV_ERROR_ACCOUNT = "models.dev"

_TOKEN_SPLIT = re.compile(r"[-_/.:\s]+")
#: Reasons for skipping an entry that is not a model at all.
INVALID_ID = "invalid id"
DUPLICATE_ID = "duplicate id"
_DETAIL_LIMIT = 200
#: Cloudflare's model search is paged: this many per page, at most this many pages.
CLOUDFLARE_PER_PAGE = 100
CLOUDFLARE_MAX_PAGES = 20
_PER_MILLION = Decimal(1_000_000)


class DiscoveryBounds(Protocol):
    """What discovery reads from the policy's ``[discovery]`` table (``settings.DiscoveryPolicy``).

    A protocol, so this edge does not import the settings module (which imports provider kinds).
    """

    @property
    def timeout(self) -> float: ...
    @property
    def models_dev_url(self) -> str: ...
    @property
    def zdr_url(self) -> str: ...


class PriceEvidence(NamedTuple):
    """Per-1k prompt and completion prices (None = unknown) and, when unknown, why."""

    prompt: float | None
    completion: float | None
    note: str | None = None


@dataclass
class AccountSummary:
    """How discovery went for one account, for the progress lines (never holds a key)."""

    account: str
    kind: str
    status: str  # "ok", "error" or "skipped"
    listed: int = 0
    kept: int = 0
    error: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    def dropped_text(self) -> str:
        """``"image 56, audio 16"``: the models left out by reason, most first ("" for none)."""
        ranked = sorted(self.dropped.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{reason} {count}" for reason, count in ranked)


@dataclass
class DiscoveryResult:
    """The discovery report (``routes``, ``errors``, ``dropped``, ``zdr_feed``), the ZDR feed.

    ``dropped`` maps each listed account to how many of its listed ids were left out, by reason.
    """

    routes: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    zdr_feed: bytes | None = None
    accounts: list[AccountSummary] = field(default_factory=list)

    def report(self, zdr_feed_name: str | None) -> dict[str, Any]:
        """The report as JSON-ready data; ``zdr_feed_name`` names the saved feed, if any."""
        dropped = {s.account: s.dropped for s in self.accounts if s.status == "ok"}
        return {
            "routes": self.routes,
            "errors": self.errors,
            "dropped": dropped,
            "zdr_feed": zdr_feed_name,
        }


class _FetchError(Exception):
    """A failed fetch, already phrased for the report (and scrubbed of keys)."""


# --------------------------------------------------------------------------------------------
# pure rules


def is_chat_model(entry: Mapping[str, Any], declared: Mapping[str, Any] | None = None) -> bool:
    """Whether a listing entry is a chat-capable text model: declared modalities, else its name.

    ``declared`` is the Models.dev record joined to this model, if any.
    """
    return non_chat_reason(entry, declared) is None


def non_chat_reason(
    entry: Mapping[str, Any], declared: Mapping[str, Any] | None = None
) -> str | None:
    """Why a listing entry is not a chat model (the reason the report counts), or None if it is.

    Declared first (the listing's modalities or type, then Models.dev's modalities); the name
    list when nothing is declared, and for the ``moderation`` family also over a declared
    text-to-text (Llama Guard and its kin are listed as text generators but classify).
    """
    verdict = _declared_text_chat(entry.get("architecture"))
    reason = "declared modalities"
    if verdict is None and (typed := _declared_type(entry)) is not None:
        verdict, reason = typed
    if verdict is None and isinstance(declared, Mapping):
        modalities = declared.get("modalities")
        if isinstance(modalities, Mapping):
            verdict = _modalities_verdict(modalities.get("input"), modalities.get("output"))
            reason = "declared modalities (models.dev)"
    by_name = non_chat_by_name(str(entry.get("id", "")))
    if verdict is None:
        return by_name
    if not verdict:
        return reason
    # a guard/safety classifier declares text in, text out, and still is not a chat model
    return by_name if by_name == "moderation" else None


def chat_by_name(model_id: str) -> bool:
    """The documented name filter: False for image, embedding, audio, moderation, ... models."""
    return non_chat_by_name(model_id) is None


def non_chat_by_name(model_id: str) -> str | None:
    """The :data:`NAME_RULES` family a model id belongs to (its reason), or None for chat."""
    lowered = model_id.lower()
    tokens = set(_TOKEN_SPLIT.split(lowered))
    last = lowered.rsplit("/", 1)[-1]
    for rule in NAME_RULES:
        if any(part in lowered for part in rule.substrings) or tokens & rule.tokens:
            return rule.reason
        if rule.pattern is not None and rule.pattern.search(last):
            return rule.reason
    return None


def _declared_type(entry: Mapping[str, Any]) -> tuple[bool, str] | None:
    """A type the listing declares, and the reason text if it is not chat: Mistral's
    ``capabilities.completion_chat``, a ``type`` or ``mode`` string (Together, LiteLLM's
    ``/v1/models``), Cloudflare's ``task.name``; None when none is given."""
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, Mapping) and isinstance(capabilities.get("completion_chat"), bool):
        return capabilities["completion_chat"], "declared capabilities: no completion_chat"
    task = entry.get("task")
    if isinstance(task, Mapping):
        task = task.get("name")
    for name, value in (("type", entry.get("type")), ("mode", entry.get("mode")), ("task", task)):
        if isinstance(value, str) and value.strip():
            declared = value.strip().lower()
            return declared in CHAT_TYPES, f"declared {name}: {_clip(declared, 40)}"
    return None


def _declared_text_chat(architecture: Any) -> bool | None:
    """Read OpenRouter's ``architecture``; None when it declares no modalities."""
    if not isinstance(architecture, Mapping):
        return None
    verdict = _modalities_verdict(
        architecture.get("input_modalities"), architecture.get("output_modalities")
    )
    if verdict is not None:
        return verdict
    modality = architecture.get("modality")
    if isinstance(modality, str) and "->" in modality:
        inputs, _, outputs = modality.partition("->")
        return _modalities_verdict(inputs.split("+"), outputs.split("+"))
    return None


def _modalities_verdict(inputs: Any, outputs: Any) -> bool | None:
    """Text in and text out, from declared lists; None when the output list is not declared."""
    if not isinstance(outputs, list):
        return None
    outs = {str(x).strip().lower() for x in outputs}
    ins = {str(x).strip().lower() for x in inputs} if isinstance(inputs, list) else {"text"}
    return "text" in outs and "text" in ins


def _number(value: Any) -> Decimal | None:
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
    prompt, completion = _number(pricing.get("prompt")), _number(pricing.get("completion"))
    if prompt is None or completion is None:
        return PriceEvidence(None, None, "the listing has no numeric prompt and completion price")
    if prompt < 0 or completion < 0:
        return PriceEvidence(None, None, "the listing gives a negative (variable) price")
    if prompt == 0 and completion == 0:
        for name in sorted(pricing):
            if name in ("prompt", "completion") or name in IGNORED_PRICE_FIELDS:
                continue
            other = _number(pricing[name])
            if other is None or other != 0:
                return PriceEvidence(
                    None,
                    None,
                    f"prompt and completion are 0 but pricing.{name} is "
                    f"{_clip(str(pricing[name]), 40)}: not free, per-token price unknown",
                )
        return PriceEvidence(0.0, 0.0)
    return PriceEvidence(float(prompt * 1000), float(completion * 1000))


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
    prompt, completion = _number(cost.get("input")), _number(cost.get("output"))
    if prompt is None or completion is None:
        return PriceEvidence(None, None, "models.dev cost lacks input or output")
    if prompt == 0 and completion == 0:
        if all(value == 0 for value in leaves):
            return PriceEvidence(0.0, 0.0)
        return PriceEvidence(
            None, None, "models.dev input and output are 0 but another cost field is not"
        )
    return PriceEvidence(float(prompt / 1000), float(completion / 1000))


def _cost_leaves(cost: Mapping[str, Any]) -> Iterable[Decimal | None]:
    """Every number in a Models.dev ``cost`` table, nested tiers included."""
    for value in cost.values():
        if isinstance(value, Mapping):
            yield from _cost_leaves(value)
        else:
            yield _number(value)


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
) -> list[dict[str, Any]]:
    """Turn one account's listing entries into report routes (chat models only, with evidence).

    ``dropped``, when given, counts every entry left out, by reason (:func:`non_chat_reason`'s
    reasons, ``invalid id``, ``duplicate id``).
    """
    dropped = Counter() if dropped is None else dropped
    catalog: Mapping[str, Any] = {}
    if account.pricing == "models.dev" and isinstance(models_dev, Mapping):
        provider = models_dev.get(account.models_dev_provider or "")
        models = provider.get("models") if isinstance(provider, Mapping) else None
        catalog = models if isinstance(models, Mapping) else {}
    routes: dict[str, dict[str, Any]] = {}
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
        route: dict[str, Any] = {
            "account": account.name,
            "provider": account.kind,
            "model": model,
            "agent_id": f"{account.name}/{model}",
            "base_url": account.base_url,
            "api_key_env": account.api_key_env,
            "prompt_price_per_1k": evidence.prompt,
            "completion_price_per_1k": evidence.completion,
            "context_length": context_length(entry, record),
        }
        if evidence.prompt is None or evidence.completion is None:
            route["price_note"] = evidence.note or "no price evidence"
        if fmt := response_format_support(entry):
            route["response_format"] = fmt
        routes[model] = route
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


# --------------------------------------------------------------------------------------------
# I/O


def _clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """One line, printable, at most ``limit`` characters."""
    flat = "".join(c if c.isprintable() else " " for c in text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _scrub(text: str, secrets: Iterable[str]) -> str:
    """Remove every secret value in ``text``, whole or cut (keys should never get there)."""
    return redact(text, secrets, "[redacted]")


def _http_detail(response: httpx.Response) -> str:
    """A short reason from an error reply: the provider's ``error.message`` if it gives one."""
    try:
        body = json.loads(response.content)
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
    return f": {_clip(message)}" if isinstance(message, str) and message.strip() else ""


async def _get_json(
    client: httpx.AsyncClient, url: str, timeout: float, headers: Mapping[str, str] | None = None
) -> tuple[Any, bytes]:
    """GET a JSON document within ``timeout`` seconds overall; raise _FetchError on any failure."""
    try:
        async with asyncio.timeout(timeout):
            response = await client.get(url, headers=dict(headers or {}))
    except (TimeoutError, httpx.TimeoutException):
        raise _FetchError(f"timed out after {timeout:g} s") from None
    except httpx.ConnectError as exc:
        raise _FetchError(f"connection failed: {_clip(str(exc)) or type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise _FetchError(f"{type(exc).__name__}: {_clip(str(exc))}") from None
    if not response.is_success:
        raise _FetchError(f"HTTP {response.status_code}{_http_detail(response)}")
    try:
        return json.loads(response.content), response.content
    except ValueError:
        raise _FetchError("the reply is not valid JSON") from None


async def _list_models(
    client: httpx.AsyncClient, account: Account, key: str, timeout: float
) -> list[Any]:
    """One account's listing entries: ``GET {base_url}/models``'s ``data`` list, or Cloudflare's
    model search turned into the same shape (:func:`cloudflare_entry`)."""
    kind = KINDS.get(account.kind)
    if ACCOUNT_ID_PLACEHOLDER in account.base_url:
        variable = account_url_env(account.name, account.kind) or "the account id variable"
        raise _FetchError(f"{variable} is not set (it fills the base URL's {{account_id}})")
    headers = {"Authorization": f"Bearer {key}"}
    if kind is not None and kind.listing == "cloudflare":
        return await _list_cloudflare(client, account.base_url, timeout, headers)
    payload, _ = await _get_json(client, f"{account.base_url}/models", timeout, headers)
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        raise _FetchError('unexpected reply: expected {"data": [...]}')
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
        payload, _ = await _get_json(client, url, timeout, headers)
        result = payload.get("result") if isinstance(payload, Mapping) else None
        if not isinstance(result, list):
            raise _FetchError('unexpected reply: expected {"result": [...]}')
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
            amount = _number(item.get("price"))
            unit = item["unit"].strip()
            name = {"per M input tokens": "prompt", "per M output tokens": "completion"}.get(unit)
            if name and amount is not None:
                pricing[name] = str(amount / _PER_MILLION)
            else:
                pricing[unit] = str(item.get("price"))
        entry["pricing"] = pricing
    return entry


async def _fetch_zdr(client: httpx.AsyncClient, url: str, timeout: float) -> bytes:
    """OpenRouter's ZDR feed, checked for the ``{"data": [...]}`` shape, as the bytes received."""
    payload, raw = await _get_json(client, url, timeout)
    if not isinstance(payload, Mapping) or not isinstance(payload.get("data"), list):
        raise _FetchError('unexpected reply: expected {"data": [...]}')
    return raw


async def _fetch_models_dev(client: httpx.AsyncClient, url: str, timeout: float) -> dict[str, Any]:
    """Models.dev's ``api.json`` (provider id -> provider with ``models``)."""
    payload, _ = await _get_json(client, url, timeout)
    if not isinstance(payload, dict):
        raise _FetchError("unexpected reply: expected a JSON object of providers")
    return payload


async def _outcome(coro: Any, secrets: Sequence[str]) -> tuple[Any, str | None]:
    """Await ``coro``; a failure becomes a scrubbed error text instead of an exception."""
    try:
        return await coro, None
    except _FetchError as exc:
        return None, _scrub(str(exc), secrets)
    except Exception as exc:  # a bug or an odd transport error must not sink the other accounts
        logger.debug("discovery fetch failed unexpectedly", exc_info=True)
        return None, _scrub(f"{type(exc).__name__}: {_clip(str(exc))}", secrets)


async def discover(
    accounts: Sequence[Account],
    environ: Mapping[str, str],
    settings: DiscoveryBounds,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> DiscoveryResult:
    """List every keyed account's models concurrently and build the discovery report.

    Accounts without a key are reported as skipped. Models.dev is fetched only when a keyed
    account prices from it; the ZDR feed only when a keyed ``openrouter`` account exists.
    """
    keyed = [acc for acc in accounts if has_key(acc, environ)]
    keys = {acc.name: environ[acc.api_key_env].strip() for acc in keyed}
    secrets = sorted(set(keys.values()), key=len, reverse=True)
    timeout = settings.timeout
    result = DiscoveryResult()
    want_models_dev = any(acc.pricing == "models.dev" for acc in keyed)
    want_zdr = any(acc.kind == "openrouter" for acc in keyed)

    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        headers={"User-Agent": f"relay-review/{__version__}", "Accept": "application/json"},
        transport=transport,
    ) as client:
        jobs = [
            _outcome(_list_models(client, acc, keys[acc.name], timeout), secrets) for acc in keyed
        ]
        if want_models_dev:
            jobs.append(
                _outcome(_fetch_models_dev(client, settings.models_dev_url, timeout), secrets)
            )
        if want_zdr:
            jobs.append(_outcome(_fetch_zdr(client, settings.zdr_url, timeout), secrets))
        outcomes = list(await asyncio.gather(*jobs))

    listings = outcomes[: len(keyed)]
    extra = outcomes[len(keyed) :]
    models_dev, models_dev_error = extra.pop(0) if want_models_dev else (None, None)
    if want_models_dev and models_dev_error:
        result.errors.append(
            {"account": MODELS_DEV_ERROR_ACCOUNT, "kind": "models.dev", "error": models_dev_error}
        )
    if want_zdr:
        result.zdr_feed, zdr_error = extra.pop(0)
        if zdr_error:
            result.errors.append(
                {"account": ZDR_ERROR_ACCOUNT, "kind": "openrouter", "error": zdr_error}
            )

    by_name = {acc.name: outcome for acc, outcome in zip(keyed, listings, strict=True)}
    for acc in accounts:
        if acc.name not in by_name:
            result.accounts.append(
                AccountSummary(acc.name, acc.kind, "skipped", error=f"{acc.api_key_env} is not set")
            )
            continue
        entries, error = by_name[acc.name]
        if error:
            result.errors.append({"account": acc.name, "kind": acc.kind, "error": error})
            result.accounts.append(AccountSummary(acc.name, acc.kind, "error", error=error))
            logger.debug("account %s: %s", acc.name, error)
            continue
        dropped: Counter[str] = Counter()
        routes = build_routes(acc, entries, models_dev, models_dev_error, dropped)
        result.routes.extend(routes)
        summary = AccountSummary(
            acc.name,
            acc.kind,
            "ok",
            listed=len(entries),
            kept=len(routes),
            dropped=dict(sorted(dropped.items())),
        )
        result.accounts.append(summary)
        logger.debug(
            "account %s: %d listed, %d kept; dropped: %s",
            acc.name,
            len(entries),
            len(routes),
            summary.dropped_text() or "none",
        )

    result.routes.sort(key=lambda r: (r["account"], r["model"]))
    result.errors.sort(key=lambda e: (e["account"], e["error"]))
    result.accounts.sort(key=lambda s: s.account)
    return result


def zdr_feed_path(out: Path) -> Path:
    """Where the ZDR feed is saved: ``report.json`` -> ``report.zdr.json`` beside it."""
    return out.with_name(f"{out.stem}.zdr.json")


def write_report(result: DiscoveryResult, out: str | Path) -> dict[str, Any]:
    """Write the report (and the ZDR feed beside it, if fetched); return the report written.

    Without a fetched feed, a feed file left there by an earlier run is removed, so the
    directory never holds ZDR evidence the report does not vouch for.
    """
    out = Path(out)
    feed_path = zdr_feed_path(out)
    if result.zdr_feed is not None:
        atomic_write(feed_path, result.zdr_feed)
        report = result.report(feed_path.name)
    else:
        feed_path.unlink(missing_ok=True)
        report = result.report(None)
    atomic_write(out, (json.dumps(report, indent=2, allow_nan=False) + "\n").encode())
    return report
