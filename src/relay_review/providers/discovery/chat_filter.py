"""Which listed models are chat-capable text models, and why the others are dropped.

The first rule that says something decides: modalities the listing declares (OpenRouter's
``architecture``), a type it declares (Mistral's ``capabilities``, a ``type`` or ``mode``, as in
LiteLLM's ``/v1/models``, Cloudflare's ``task.name``), Models.dev's modalities for the model,
then the name list for listings that declare nothing (NVIDIA, OpenCode, Groq, gateways,
self-hosted servers). One exception: the ``moderation`` family is dropped even over a declared
text to text, since guard classifiers are listed as text generators. The families follow the
``mode`` LiteLLM's bundled cost map gives each OpenAI id; ``chat-latest``,
``gpt-5-chat-latest`` and the ``-search-preview`` models are kept (mode ``chat``, they answer
``/chat/completions``), and ``-instruct`` models other than OpenAI's completions-only ones too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay_review.providers.discovery.text import clip


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

_TOKEN_SPLIT = re.compile(r"[-_/.:\s]+")


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
            return declared in CHAT_TYPES, f"declared {name}: {clip(declared, 40)}"
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
