"""Which environment values are secrets before any policy is read (light: the command line's
path to its first request needs them, and not the action's inputs)."""

from __future__ import annotations

from collections.abc import Mapping

from relay_review.github.actions import input_env_name
from relay_review.state import KEY_ENV, url_secrets


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values to mask that are known before any policy is read: the token input and every
    variable whose name contains ``API_KEY`` (the account conventions and common custom names),
    the password of a ``redis://`` state URL, and the state key."""
    names = [input_env_name("github-token"), "GITHUB_TOKEN", KEY_ENV]
    names += [name for name in env if "API_KEY" in name.upper()]
    values = [env[name] for name in names if env.get(name, "").strip()]
    for name in (input_env_name("state"), "RELAY_REVIEW_STATE"):  # a redis:// URL's password
        values += url_secrets(env.get(name, ""))  # as written and decoded, even if refused
    return values
