"""Configuration: the policy (``relay-review.toml``), the layers it is built from, and accounts.

:mod:`.schema` holds the strict policy models, :mod:`.layers` turns every source (file, inline
policy, flags, action inputs) into one validated Policy, :mod:`.explain` words a validation
error as one sentence naming the field, and :mod:`.accounts` finds the accounts of the policy
and the environment. The action's inputs (:mod:`.inputs`) are imported on their own, never
from here: they read through ``github.actions`` and ``state``, which a command that needs only
the policy should not load.
"""

from __future__ import annotations

from relay_review.config.accounts import env_accounts, key_conventions, resolve_accounts
from relay_review.config.layers import (
    Layer,
    OverrideError,
    check_override,
    file_layer,
    load_policy,
    merge_layers,
    merge_policy_data,
    parse_policy,
    parse_toml,
    validate_policy_data,
)
from relay_review.config.schema import (
    AccountPolicy,
    CatalogPolicy,
    DiscoveryPolicy,
    GitHubPolicy,
    MemoryPolicy,
    Policy,
    PreflightPolicy,
    ReviewPolicy,
    ServingPolicy,
    StatePolicy,
    resolve_require_zdr,
)

__all__ = [
    "AccountPolicy",
    "CatalogPolicy",
    "DiscoveryPolicy",
    "GitHubPolicy",
    "Layer",
    "MemoryPolicy",
    "OverrideError",
    "Policy",
    "PreflightPolicy",
    "ReviewPolicy",
    "ServingPolicy",
    "StatePolicy",
    "check_override",
    "env_accounts",
    "file_layer",
    "key_conventions",
    "load_policy",
    "merge_layers",
    "merge_policy_data",
    "parse_policy",
    "parse_toml",
    "resolve_accounts",
    "resolve_require_zdr",
    "validate_policy_data",
]
