"""Accounts: the ``[[accounts]]`` tables of the policy and the key variables of the environment.

Environment accounts are found by the kinds' key-name conventions (:func:`env_accounts`); a
policy account wins over an environment account of the same name. Key *values* are never read
into these records: an :class:`~relay_review.records.Account` only names the variable that holds
its key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from relay_review.config.schema import AccountPolicy, Policy
from relay_review.errors import UsageError
from relay_review.kinds import (
    ENV_FAMILIES,
    KINDS,
    account_url_env,
    default_key_env,
    env_family_for,
    family_key_env,
    family_url_env,
    fill_base_url,
)
from relay_review.records import Account

_SUFFIX = re.compile(r"^[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*$")


def env_accounts(environ: Mapping[str, str]) -> list[Account]:
    """Accounts found from key variables by convention; only variables with a non-empty value.

    ``OPENROUTER_API_KEY`` -> ``openrouter``; ``OPENROUTER_API_KEY_<SUFFIX>`` ->
    ``openrouter_<suffix lower-cased>``; likewise ``NVIDIA_NIM_API_KEY`` (``nvidia_nim``),
    ``OPENCODE_API_KEY`` (``opencode``), ``OPENCODE_GO_API_KEY`` (``opencode_go``, the
    OpenCode Go endpoint), ``GROQ_API_KEY``, ``CEREBRAS_API_KEY``, ``GEMINI_API_KEY``,
    ``MISTRAL_API_KEY``, ``SAMBANOVA_API_KEY``, ``HF_TOKEN`` (``huggingface``) and
    ``CLOUDFLARE_API_TOKEN`` (``cloudflare``; ``CLOUDFLARE_ACCOUNT_ID`` with the same suffix fills
    its base URL). Should two variables yield one name (``OPENCODE_API_KEY_GO`` and
    ``OPENCODE_GO_API_KEY``), the more specific family (``OPENCODE_GO_...``) wins.
    """
    found: dict[str, tuple[int, Account]] = {}
    for variable in sorted(environ):
        if not environ[variable].strip():
            continue
        for family in ENV_FAMILIES:
            if variable == family.key_env:
                name = family.account
            elif variable.startswith(family.key_env + "_") and _SUFFIX.match(
                variable[len(family.key_env) + 1 :]
            ):
                name = f"{family.account}_{variable[len(family.key_env) + 1 :].lower()}"
            else:
                continue
            account = Account(
                name=name,
                kind=family.kind,
                base_url=fill_base_url(family.base_url, family_url_env(family, name), environ),
                api_key_env=variable,
                pricing=KINDS[family.kind].pricing,
                models_dev_provider=family.models_dev_provider,
                source="env",
            )
            specificity = len(family.account)
            if name not in found or found[name][0] < specificity:
                found[name] = (specificity, account)
    return [found[name][1] for name in sorted(found)]


def policy_account(declared: AccountPolicy) -> Account:
    """Fill a declared account's unset fields from its kind and its name's key convention."""
    kind = KINDS[declared.kind]
    family = env_family_for(declared.name, declared.kind)
    base_url = declared.base_url or (family.base_url if family else kind.base_url)
    if base_url is None:  # validation requires base_url for kinds without one
        raise UsageError(f"account {declared.name}: base_url is required for kind {declared.kind}")
    if declared.api_key_env:
        key_env = declared.api_key_env
    elif family:
        key_env = family_key_env(family, declared.name)
    else:
        key_env = default_key_env(declared.name, declared.kind)
    models_dev = declared.models_dev_provider or (
        family.models_dev_provider if family else kind.models_dev_provider
    )
    return Account(
        name=declared.name,
        kind=declared.kind,
        base_url=base_url.rstrip("/"),
        api_key_env=key_env,
        pricing=declared.pricing or kind.pricing,
        models_dev_provider=models_dev,
        source="policy",
    )


def resolve_accounts(policy: Policy, environ: Mapping[str, str]) -> list[Account]:
    """Every account, sorted by name: the policy's, plus the environment's not shadowed by them.

    Policy accounts are listed whether or not their key is set (discovery skips keyless ones);
    environment accounts exist only when their variable is non-empty.
    """
    accounts = {acc.name: acc for acc in env_accounts(environ)}
    for decl in policy.accounts:
        account = policy_account(decl)
        filled = fill_base_url(account.base_url, account_url_env(decl.name, decl.kind), environ)
        if filled != account.base_url:
            account = account.model_copy(update={"base_url": filled})
        accounts[decl.name] = account
    return [accounts[name] for name in sorted(accounts)]


def key_conventions() -> list[str]:
    """The key variables searched by convention, for messages: ``OPENROUTER_API_KEY[_<SUFFIX>]``."""
    return [f"{family.key_env}[_<SUFFIX>]" for family in ENV_FAMILIES]
