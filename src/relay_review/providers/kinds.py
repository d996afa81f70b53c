"""Built-in provider kinds: base URLs, key-name conventions and where price evidence comes from.

An *account* is one credential for one kind. Two keys of one kind are two accounts (separate
quotas, same outage domain). Account names follow the key names:
``OPENROUTER_API_KEY`` -> ``openrouter``; ``NVIDIA_NIM_API_KEY_SUB`` -> ``nvidia_nim_sub``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Pricing = Literal["listing", "models.dev", "declared-free", "unknown"]


@dataclass(frozen=True)
class Kind:
    """A provider kind: what a policy's ``kind = "..."`` means."""

    name: str
    base_url: str | None
    key_env: str | None
    pricing: Pricing
    models_dev_provider: str | None = None


KINDS: dict[str, Kind] = {
    "openrouter": Kind(
        "openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "listing"
    ),
    "nvidia_nim": Kind(
        "nvidia_nim",
        "https://integrate.api.nvidia.com/v1",
        "NVIDIA_NIM_API_KEY",
        "models.dev",
        "nvidia",
    ),
    "opencode": Kind(
        "opencode", "https://opencode.ai/zen/v1", "OPENCODE_API_KEY", "models.dev", "opencode"
    ),
    "openai_compatible": Kind("openai_compatible", None, None, "unknown"),
}

OPENROUTER_ZDR_URL = "https://openrouter.ai/api/v1/endpoints/zdr"
MODELS_DEV_URL = "https://models.dev/api.json"


def default_base_url(provider: str) -> str | None:
    """The kind's chat base URL, or None for kinds without one (``openai_compatible``)."""
    kind = KINDS.get(provider)
    return kind.base_url if kind else None


def default_key_env(account: str, provider: str) -> str:
    """The conventional key variable for an account.

    ``nvidia_nim`` -> ``NVIDIA_NIM_API_KEY``; ``nvidia_nim_sub`` -> ``NVIDIA_NIM_API_KEY_SUB``;
    an account whose name is not derived from its kind -> ``<ACCOUNT>_API_KEY``.
    """
    kind = KINDS.get(provider)
    if kind and kind.key_env:
        if account == provider:
            return kind.key_env
        prefix = provider + "_"
        if account.startswith(prefix) and len(account) > len(prefix):
            return f"{kind.key_env}_{account[len(prefix) :].upper()}"
    return f"{account.upper().replace('-', '_')}_API_KEY"
