"""Built-in provider kinds: base URLs, key-name conventions and where price evidence comes from.

An *account* is one credential for one kind. Two keys of one kind are two accounts (separate
quotas, same outage domain). Account names follow the key names:
``OPENROUTER_API_KEY`` -> ``openrouter``; ``NVIDIA_NIM_API_KEY_SUB`` -> ``nvidia_nim_sub``.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay_review.models import KindName, Pricing


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
OPENCODE_GO_BASE_URL = "https://opencode.ai/zen/go/v1"


@dataclass(frozen=True)
class EnvFamily:
    """A key-name convention that turns ``<key_env>`` / ``<key_env>_<SUFFIX>`` into accounts.

    ``OPENCODE_GO_API_KEY`` is its own family: kind ``opencode`` but the Go endpoint and the
    Models.dev provider key ``opencode-go``.
    """

    key_env: str
    account: str
    kind: KindName
    base_url: str
    models_dev_provider: str | None


ENV_FAMILIES: tuple[EnvFamily, ...] = (
    EnvFamily(
        "OPENROUTER_API_KEY", "openrouter", "openrouter", "https://openrouter.ai/api/v1", None
    ),
    EnvFamily(
        "NVIDIA_NIM_API_KEY",
        "nvidia_nim",
        "nvidia_nim",
        "https://integrate.api.nvidia.com/v1",
        "nvidia",
    ),
    EnvFamily("OPENCODE_API_KEY", "opencode", "opencode", "https://opencode.ai/zen/v1", "opencode"),
    EnvFamily(
        "OPENCODE_GO_API_KEY", "opencode_go", "opencode", OPENCODE_GO_BASE_URL, "opencode-go"
    ),
)


def env_family_for(account: str, kind: str) -> EnvFamily | None:
    """The key convention an account name follows (``opencode_go_sub`` -> OpenCode Go), if any.

    The longest matching family name wins, so ``opencode_go`` is not read as ``opencode`` + ``_go``.
    """
    matches = [
        fam
        for fam in ENV_FAMILIES
        if fam.kind == kind and (account == fam.account or account.startswith(fam.account + "_"))
    ]
    return max(matches, key=lambda fam: len(fam.account), default=None)


def family_key_env(family: EnvFamily, account: str) -> str:
    """A family account's key variable: ``opencode_go_sub`` -> ``OPENCODE_GO_API_KEY_SUB``."""
    if account == family.account:
        return family.key_env
    return f"{family.key_env}_{account[len(family.account) + 1 :].upper()}"


def default_base_url(provider: str) -> str | None:
    """The kind's chat base URL, or None for kinds without one (``openai_compatible``)."""
    kind = KINDS.get(provider)
    return kind.base_url if kind else None


def default_key_env(account: str, provider: str) -> str:
    """The conventional key variable for an account.

    ``nvidia_nim`` -> ``NVIDIA_NIM_API_KEY``; ``nvidia_nim_sub`` -> ``NVIDIA_NIM_API_KEY_SUB``;
    ``opencode_go`` -> ``OPENCODE_GO_API_KEY``; an account whose name follows no family ->
    ``<ACCOUNT>_API_KEY``.
    """
    family = env_family_for(account, provider)
    if family is not None:
        return family_key_env(family, account)
    return f"{account.upper().replace('-', '_')}_API_KEY"
