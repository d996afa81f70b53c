"""Every source of configuration is a :class:`Layer`, and :func:`merge_layers` is the one place
a :class:`~relay_review.config.schema.Policy` is assembled from them.

The sources: the policy file, the inline policy, command-line flags and action inputs (the last
two through :func:`check_override` as they are read, so a bad flag or input is refused in the
file's words before any work). Each layer is validated alone, so its errors name it; rules
across keys are checked on the merged whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from relay_review.config.explain import allowed, explain, show
from relay_review.config.schema import Policy, ServingPolicy
from relay_review.errors import UsageError
from relay_review.kinds import KINDS

DEFAULT_POLICY_FILE = "relay-review.toml"
#: Where the action reads the policy in a repository, and the commands in the current directory.
DEFAULT_POLICY_PATH = ".github/relay-review.toml"
INLINE_SOURCE = "inline policy"


@dataclass(frozen=True)
class Layer:
    """One source of policy values, laid over the sources before it.

    ``source`` names it in error messages (a file path, ``input `policy```, ``command line``).
    ``caps_attempt``: a deadline set here lowers the ``serving.attempt`` (and an inherited
    ``serving.first_token``) it inherits from the layers below (one attempt never outlasts the
    run), unless this layer sets the attempt too;
    flags and action inputs work this way, so ``--deadline 5`` alone needs no policy edit while
    ``--attempt-timeout 900 --deadline 5`` is refused like the same two keys in a file.
    """

    source: str
    data: Mapping[str, Any]
    caps_attempt: bool = False


def file_layer(path: str | Path) -> Layer:
    """The policy file at ``path`` as a layer (read and parsed; validated when merged)."""
    source = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{source}: policy file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{source}: cannot read the policy file ({exc})") from None
    return Layer(source, parse_toml(raw, source))


def load_policy(
    path: str | Path | None = None, text: str | None = None, *, text_source: str = INLINE_SOURCE
) -> Policy:
    """Read the policy file (if any), lay inline TOML over it (if any); see :func:`merge_layers`."""
    layers = [file_layer(path)] if path is not None else []
    if text is not None:
        layers.append(Layer(text_source, parse_toml(text, text_source)))
    return merge_layers(layers)


def merge_layers(layers: Sequence[Layer]) -> Policy:
    """The one way every source becomes a Policy: files, inline TOML, flags, action inputs.

    Each layer is validated on its own first, so an error names the layer it came from; then the
    layers are merged in order (tables key by key, ``accounts`` replaced wholesale) and the
    merged whole is validated again, rules across keys included; its errors name every layer
    (``a.toml + command line: ...``). No layers: the built-in defaults.
    """
    if not layers:  # the defaults as they are: no validator built (a test checks they pass)
        defaults = Policy.model_construct()
        _check_consistency(defaults, "built-in defaults")
        return defaults
    merged: dict[str, Any] = {}
    for layer in layers:
        validate_policy_data(layer.data, layer.source, layer=True)
        merged = merge_policy_data(merged, layer.data)
        serving = layer.data.get("serving") or {}
        if layer.caps_attempt and "deadline" in serving and "attempt" not in serving:
            merged = _cap_attempt(
                merged, serving["deadline"], first_token="first_token" not in serving
            )
    return validate_policy_data(
        merged, " + ".join(layer.source for layer in layers) or "built-in defaults"
    )


def _cap_attempt(data: dict[str, Any], deadline: float, *, first_token: bool) -> dict[str, Any]:
    """Lower ``serving.attempt`` (set below, or the default) to ``deadline`` when it is longer,
    and (``first_token``: this layer does not set it) an inherited ``serving.first_token`` too."""
    serving = dict(data.get("serving") or {})
    attempt = serving.get("attempt", ServingPolicy.model_fields["attempt"].default)
    if isinstance(attempt, int | float) and attempt > deadline:
        serving["attempt"] = deadline
    inherited = serving.get("first_token")
    if first_token and isinstance(inherited, int | float) and inherited > deadline:
        serving["first_token"] = deadline
    return {**data, "serving": serving}


class OverrideError(ValueError):
    """A single override value the policy refuses; ``allowed`` says what it accepts in words."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        super().__init__(f"{key} = {show(value)} is not allowed; use {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def check_override(key: str, value: Any) -> Any:
    """Check one value for the policy key ``key`` (``catalog.limit``) by the policy's own rules.

    Flags and action inputs call this as they are read, so a bad one is refused before any work
    with the same words a policy file gets; returns the value as the policy holds it.
    """
    section, name = key.split(".")
    try:
        policy = Policy.model_validate({section: {name: value}})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise OverrideError(key, value, allowed(Policy, tuple(error["loc"]), error)) from None
    return getattr(getattr(policy, section), name)


def parse_policy(text: str, source: str = INLINE_SOURCE) -> Policy:
    """Validate a policy given as TOML text; ``source`` names it in error messages."""
    return validate_policy_data(parse_toml(text, source), source)


def merge_policy_data(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Lay ``override`` over ``base``: tables merge key by key, other values (lists too) replace."""
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_policy_data(old, value)
        else:
            merged[key] = value
    return merged


def validate_policy_data(data: Mapping[str, Any], source: str, *, layer: bool = False) -> Policy:
    """Validate parsed TOML as a :class:`Policy`; the first problem becomes one UsageError.

    ``layer``: ``data`` is one layer of several (a pinned file, the inline policy): every key
    and value is checked, but rules across keys (``serving.attempt <= serving.deadline``) wait
    for the merged policy, where another layer may set the other key.
    """
    try:
        policy = Policy.model_validate(dict(data))
    except ValidationError as exc:
        raise UsageError(explain(exc, source, Policy)) from None
    if not layer:
        _check_consistency(policy, source)
    return policy


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML, turning a syntax error into a UsageError that names the source."""
    import tomllib  # only where there is a policy to parse: not the built-in defaults' start-up

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:  # arrays or tables nested past the interpreter's stack
        raise UsageError(f"{source}: not valid TOML: nested too deeply") from None


def _check_consistency(policy: Policy, source: str) -> None:
    """Rules that span keys: unique account names, a base URL where the kind has none, deadlines."""
    seen: dict[str, int] = {}
    for index, account in enumerate(policy.accounts):
        if account.name in seen:
            raise UsageError(
                f"{source}: accounts[{index}].name = {show(account.name)} is not allowed; "
                f"use a name no other account has (accounts[{seen[account.name]}] has it)"
            )
        seen[account.name] = index
        if account.base_url is None and KINDS[account.kind].base_url is None:
            raise UsageError(
                f"{source}: accounts[{index}].base_url is required for kind {account.kind}; "
                "use an http:// or https:// URL"
            )
    serving = policy.serving
    if serving.attempt > serving.deadline:
        raise UsageError(
            f"{source}: serving.attempt = {show(serving.attempt)} is not allowed; use a number "
            f"of seconds > 0 and at most serving.deadline ({show(serving.deadline)})"
        )
    if serving.first_token is not None and serving.first_token > serving.attempt:
        raise UsageError(
            f"{source}: serving.first_token = {show(serving.first_token)} is not allowed; use a "
            f"number of seconds > 0 and at most serving.attempt ({show(serving.attempt)})"
        )
