"""A credential account, defaults resolved: where to call and which variable holds its key
(never the key). Built by :mod:`relay_review.config.accounts`; read by discovery."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

#: The provider kinds a policy may name (``kinds.py`` says what each one means).
KindName = Literal[
    "openrouter",
    "nvidia_nim",
    "opencode",
    "groq",
    "cerebras",
    "gemini",
    "mistral",
    "cloudflare",
    "sambanova",
    "huggingface",
    "openai_compatible",
]


#: Where a kind's price evidence comes from.
Pricing = Literal["listing", "models.dev", "declared-free", "unknown"]


class Account(BaseModel):
    """One credential account, defaults resolved: where to call, which variable holds its key.

    Built by :mod:`relay_review.config.accounts` (policy and environment); read by discovery. Key
    *values* are never held here, only the name of the variable that holds the key.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    name: str
    kind: KindName
    base_url: str
    api_key_env: str
    pricing: Pricing
    models_dev_provider: str | None = None
    source: Literal["policy", "env"] = "policy"


def has_key(account: Account, environ: Mapping[str, str]) -> bool:
    """Whether the account's key variable holds a non-empty value (the value is not returned)."""
    return bool(environ.get(account.api_key_env, "").strip())
