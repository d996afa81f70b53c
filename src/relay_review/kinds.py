"""The provider kinds table: what a policy's ``kind = "..."`` means, and the key-name conventions.

Pure data at the bottom of the house: the policy, discovery, the catalog and routing read it, and
it imports only the record types it is written in. An *account* is one credential for one kind
(two keys of one kind are two accounts: separate quotas, one outage domain), named after its key
variable (``NVIDIA_NIM_API_KEY_SUB`` -> ``nvidia_nim_sub``). "Free" comes only from price
evidence, never from a name: ``pricing`` says where a kind's evidence is read, and a kind whose
free tier is an account plan prices as ``unknown`` until the policy declares the account free.
``stream_usage`` is set only where the provider documents ``stream_options.include_usage``:
elsewhere an unknown parameter could earn a 400 that takes a free route out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from relay_review.records import KindName, Pricing

#: The placeholder a kind's base URL may hold, filled from the account's ``url_env`` variable.
ACCOUNT_ID_PLACEHOLDER = "{account_id}"
CLOUDFLARE_BASE_URL = (
    f"https://api.cloudflare.com/client/v4/accounts/{ACCOUNT_ID_PLACEHOLDER}/ai/v1"
)


@dataclass(frozen=True)
class Kind:
    """A provider kind: what a policy's ``kind = "..."`` means.

    ``stream_usage``: the kind accepts ``stream_options: {"include_usage": true}`` (token counts
    in the last streamed chunk). ``gateway``: the account fronts other providers (a LiteLLM
    proxy, ...), so a 401/402/403 on one model may be one upstream's; the account's key is
    confirmed bad by ``GET /models`` before every route of the account is taken out.
    """

    name: str
    base_url: str | None
    key_env: str | None
    pricing: Pricing
    models_dev_provider: str | None = None
    #: accepts ``stream_options.include_usage`` (documented by the provider)
    stream_usage: bool = False
    #: how models are listed: ``openai`` (``GET {base}/models``) or ``cloudflare``
    #: (``GET {base without /v1}/models/search``, paged, with per-model prices)
    listing: Literal["openai", "cloudflare"] = "openai"
    #: the variable whose value fills ``{account_id}`` in ``base_url``
    url_env: str | None = None
    #: a prefix the listing puts before ids that chat calls do not need (Gemini's ``models/``)
    id_prefix: str | None = None
    #: fronts other providers: a 401/402/403 may be one upstream's (see routing.accounts)
    gateway: bool = False
    #: the provider's published free-tier limits per account (requests per minute / per day),
    #: the quota ledger's default for the account's free routes (None: not published)
    free_rpm: int | None = None
    free_rpd: int | None = None


KINDS: dict[str, Kind] = {
    "openrouter": Kind(
        "openrouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        "listing",
        stream_usage=True,
        free_rpm=20,  # OpenRouter free tier: 20/min and 50/day per account (docs, 2026-09)
        free_rpd=50,
    ),
    "nvidia_nim": Kind(
        "nvidia_nim",
        "https://integrate.api.nvidia.com/v1",
        "NVIDIA_NIM_API_KEY",
        "models.dev",
        "nvidia",
        stream_usage=True,
    ),
    "opencode": Kind(
        "opencode", "https://opencode.ai/zen/v1", "OPENCODE_API_KEY", "models.dev", "opencode"
    ),
    "groq": Kind(
        "groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", "unknown", stream_usage=True
    ),
    "cerebras": Kind("cerebras", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY", "unknown"),
    "gemini": Kind(
        "gemini",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "unknown",
        stream_usage=True,
        id_prefix="models/",
    ),
    "mistral": Kind("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", "unknown"),
    "cloudflare": Kind(
        "cloudflare",
        CLOUDFLARE_BASE_URL,
        "CLOUDFLARE_API_TOKEN",
        "listing",
        listing="cloudflare",
        url_env="CLOUDFLARE_ACCOUNT_ID",
    ),
    "sambanova": Kind("sambanova", "https://api.sambanova.ai/v1", "SAMBANOVA_API_KEY", "unknown"),
    "huggingface": Kind("huggingface", "https://router.huggingface.co/v1", "HF_TOKEN", "unknown"),
    "openai_compatible": Kind(
        "openai_compatible", None, None, "unknown", stream_usage=True, gateway=True
    ),
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
    url_env: str | None = None


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
    EnvFamily("GROQ_API_KEY", "groq", "groq", KINDS["groq"].base_url or "", None),
    EnvFamily("CEREBRAS_API_KEY", "cerebras", "cerebras", KINDS["cerebras"].base_url or "", None),
    EnvFamily("GEMINI_API_KEY", "gemini", "gemini", KINDS["gemini"].base_url or "", None),
    EnvFamily("MISTRAL_API_KEY", "mistral", "mistral", KINDS["mistral"].base_url or "", None),
    EnvFamily(
        "CLOUDFLARE_API_TOKEN",
        "cloudflare",
        "cloudflare",
        CLOUDFLARE_BASE_URL,
        None,
        url_env="CLOUDFLARE_ACCOUNT_ID",
    ),
    EnvFamily(
        "SAMBANOVA_API_KEY", "sambanova", "sambanova", KINDS["sambanova"].base_url or "", None
    ),
    EnvFamily("HF_TOKEN", "huggingface", "huggingface", KINDS["huggingface"].base_url or "", None),
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


def stream_usage(provider: str) -> bool:
    """Whether chat calls to this kind ask for usage (``stream_options.include_usage``)."""
    kind = KINDS.get(provider)
    return bool(kind and kind.stream_usage)


def is_gateway(provider: str) -> bool:
    """Whether an auth failure on one of this kind's routes needs the key confirmed bad first."""
    kind = KINDS.get(provider)
    return bool(kind and kind.gateway)


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


def family_url_env(family: EnvFamily, account: str) -> str | None:
    """The variable that fills a family account's base URL: ``cloudflare_work`` ->
    ``CLOUDFLARE_ACCOUNT_ID_WORK``; None for families whose URL holds no placeholder."""
    if family.url_env is None:
        return None
    if account == family.account:
        return family.url_env
    return f"{family.url_env}_{account[len(family.account) + 1 :].upper()}"


def account_url_env(account: str, kind: str) -> str | None:
    """The variable that fills an account's ``{account_id}``, by its name's key convention."""
    family = env_family_for(account, kind)
    if family is not None:
        return family_url_env(family, account)
    spec = KINDS.get(kind)
    return spec.url_env if spec else None


def fill_base_url(base_url: str, url_env: str | None, environ: Mapping[str, str]) -> str:
    """Fill ``{account_id}`` from ``environ[url_env]``; unchanged when unset (discovery then
    reports the missing variable instead of calling a URL with a placeholder in it)."""
    if ACCOUNT_ID_PLACEHOLDER not in base_url or not url_env:
        return base_url
    value = environ.get(url_env, "").strip()
    return base_url.replace(ACCOUNT_ID_PLACEHOLDER, value) if value else base_url
