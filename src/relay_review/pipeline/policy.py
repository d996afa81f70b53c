"""The action's policy: layered from the pinned or base file, the inline ``policy`` input and
the other inputs, each layer validated alone and then the merged whole."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relay_review.action_inputs import ActionInputs
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import say
from relay_review.github.policy_ref import PolicySource, load_pinned_policy, read_base_policy
from relay_review.settings import (
    Policy,
    ServingPolicy,
    merge_policy_data,
    parse_toml,
    validate_policy_data,
)

INLINE_SOURCE = "input `policy`"
INPUT_SOURCE = "action inputs"


@dataclass(frozen=True)
class PolicyOrigin:
    """Where the run's policy came from: the provenance line and its parts."""

    provenance: str
    source: PolicySource | None = None
    inline: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance,
            "source": self.source.model_dump() if self.source else None,
            "inline": self.inline,
            "input_overrides": self.overrides,
        }


def resolve_policy(
    gh: Any, inputs: ActionInputs, event: PullRequestEvent
) -> tuple[Policy, PolicyOrigin]:
    """The run's policy, layered: file (pinned, or the base's) < inline ``policy`` < inputs.

    * ``orchestrator-repo`` set: the file at the resolved, verified commit of ``orchestrator-ref``
      (a missing file fails closed); the inline policy overrides its keys.
    * no ``orchestrator-repo``, inline policy given: the inline policy is the whole policy.
    * neither: the reviewed repository's file at the pull request's **base** commit (never the
      head); no file there means built-in defaults.

    Each layer is validated alone (errors name it), then the merged whole.
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    source: PolicySource | None = None
    path = inputs.orchestrator_path
    if inputs.orchestrator_repo:
        assert inputs.orchestrator_ref  # read_action_inputs requires it
        pinned = load_pinned_policy(
            gh,
            inputs.orchestrator_repo,
            inputs.orchestrator_ref,
            path,
            min_ref=inputs.orchestrator_min_ref,
        )
        source = pinned.source
        if source.min_sha:
            say(f"policy: {source.sha} descends from {source.min_ref} ({source.min_sha})")
        name = f"{source.repo}:{path}@{source.sha[:12]}"
        layers.append((name, parse_toml(pinned.text, name)))
        provenance = source.render()
    elif inputs.policy:
        provenance = "inline policy (workflow input `policy`)"
    else:
        base = read_base_policy(gh, event.repo_full_name, path, event.base_sha, event.base_ref)
        if base is None:
            provenance = (
                f"built-in defaults (no {path} in {event.repo_full_name}@{event.base_sha[:12]})"
            )
        else:
            source = base.source
            name = f"{source.repo}:{path}@{source.sha[:12]}"
            layers.append((name, parse_toml(base.text, name)))
            provenance = source.render()
    if inputs.policy:
        layers.append((INLINE_SOURCE, parse_toml(inputs.policy, INLINE_SOURCE)))
        if source is not None:
            provenance += " + inline policy"
    merged: dict[str, Any] = {}
    for name, data in layers:
        validate_policy_data(data, name, layer=True)  # cross-key rules: on the merged policy
        merged = merge_policy_data(merged, data)
    overrides = inputs.policy_overrides()  # validated as inputs already; checked merged below
    if overrides:
        layers.append((INPUT_SOURCE, overrides))
        merged = merge_policy_data(merged, overrides)
    if inputs.deadline is not None:
        merged = cap_attempt(merged, inputs.deadline)
    policy = validate_policy_data(merged, " + ".join(n for n, _ in layers) or "built-in defaults")
    origin = PolicyOrigin(provenance, source, bool(inputs.policy), overrides)
    return policy, origin


def cap_attempt(data: dict[str, Any], deadline: float) -> dict[str, Any]:
    """Lower ``serving.attempt`` to the ``deadline`` input when it is longer (one attempt can
    never outlast the run, and a short deadline input should not need a policy edit)."""
    serving = dict(data.get("serving") or {})
    attempt = serving.get("attempt", ServingPolicy.model_fields["attempt"].default)
    if isinstance(attempt, int | float) and attempt > deadline:
        serving["attempt"] = deadline
    return {**data, "serving": serving}


def inline_key_envs(text: str | None) -> list[str]:
    """``api_key_env`` names in the inline policy, read leniently (errors come later, named)."""
    if not text:
        return []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    accounts = data.get("accounts")
    if not isinstance(accounts, list):
        return []
    return [
        a["api_key_env"]
        for a in accounts
        if isinstance(a, Mapping) and isinstance(a.get("api_key_env"), str)
    ]
