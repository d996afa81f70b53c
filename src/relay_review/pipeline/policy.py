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
from relay_review.settings import Layer, Policy, merge_layers, parse_toml

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

    Each layer is validated alone (errors name it), then the merged whole: see
    :func:`relay_review.settings.merge_layers`, which the command line's flags go through too.
    """
    layers: list[Layer] = []
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
        layers.append(Layer(name, parse_toml(pinned.text, name)))
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
            layers.append(Layer(name, parse_toml(base.text, name)))
            provenance = source.render()
    if inputs.policy:
        layers.append(Layer(INLINE_SOURCE, parse_toml(inputs.policy, INLINE_SOURCE)))
        if source is not None:
            provenance += " + inline policy"
    overrides = inputs.policy_overrides()  # a deadline here lowers a longer attempt below
    if overrides:
        layers.append(Layer(INPUT_SOURCE, overrides, caps_attempt=True))
    policy = merge_layers(layers)
    origin = PolicyOrigin(provenance, source, bool(inputs.policy), overrides)
    return policy, origin


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
