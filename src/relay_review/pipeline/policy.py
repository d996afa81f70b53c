"""The action's policy: layered from the pinned file or the reviewed repository's own (at the
commit the workflow runs from: its default branch, never a pull request's base), the inline
``policy`` input and the other inputs, each layer validated alone and then the merged whole;
and the maintainers' guidelines read at that same commit."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relay_review.config import Layer, Policy, merge_layers, parse_toml
from relay_review.config.inputs import ActionInputs
from relay_review.github import actions
from relay_review.github.errors import GitHubEdgeError, PolicyRefError
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import say
from relay_review.github.policy_ref import (
    CONVENTIONAL_GUIDELINES,
    Guidelines,
    PolicySource,
    load_pinned_policy,
    read_base_policy,
    read_guidelines,
    workflow_commit,
)
from relay_review.records import PolicyReport
from relay_review.review.prompt import Instructions

if TYPE_CHECKING:
    from github import Github

INLINE_SOURCE = "input `policy`"
INPUT_SOURCE = "action inputs"


@dataclass(frozen=True)
class PolicyOrigin:
    """Where the run's policy came from: the provenance line and its parts."""

    provenance: str
    source: PolicySource | None = None
    inline: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    #: One line for the comment when the pull request targets another branch than the
    #: default one (its policy and guidelines came from the default branch all the same).
    note: str | None = None

    def summary(self) -> PolicyReport:
        """Where the policy came from, as the report holds it."""
        return PolicyReport(
            provenance=self.provenance,
            source=self.source,
            inline=self.inline,
            input_overrides=self.overrides,
            note=self.note,
        )


def trusted_commit(gh: Github, event: PullRequestEvent, env: Mapping[str, str]) -> str:
    """The commit the workflow runs from, where the policy and guidelines are read: the
    default branch's (``GITHUB_SHA`` checked against the event's default branch, see
    :func:`relay_review.github.policy_ref.workflow_commit`)."""
    return workflow_commit(
        gh,
        event.repo_full_name,
        event.default_branch,
        event_name=event.event_name,
        github_sha=env.get("GITHUB_SHA", ""),
        github_ref=env.get("GITHUB_REF", ""),
    )


def off_default_note(event: PullRequestEvent, what: str = "policy and guidelines") -> str | None:
    """The comment's line for a pull request against another branch than the default one."""
    if not event.off_default:
        return None
    return (
        f"This pull request targets {event.base_ref[:100]}, not the default branch "
        f"{(event.default_branch or '')[:100]}: it was reviewed under the default branch's "
        f"{what} (a base branch is the author's choice, never a source of policy)."
    )


def resolve_policy(
    gh: Github, inputs: ActionInputs, event: PullRequestEvent, commit: str | None = None
) -> tuple[Policy, PolicyOrigin]:
    """The run's policy, layered: file (pinned, or the repository's own) < inline < inputs.

    * ``orchestrator-repo`` set: the file at the resolved, verified commit of ``orchestrator-ref``
      (a missing file fails closed); the inline policy overrides its keys.
    * no ``orchestrator-repo``, inline policy given: the inline policy is the whole policy.
    * neither: the reviewed repository's file at ``commit``, the commit the workflow runs from
      (:func:`trusted_commit`: the default branch's; never the head, never the pull request's
      base, which its author picks); no file there means built-in defaults.

    Each layer is validated alone (errors name it), then the merged whole: see
    :func:`relay_review.config.merge_layers`, which the command line's flags go through too.
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
        if commit is None:
            raise ValueError("the repository's own policy needs the workflow's commit")
        branch = event.default_branch or commit
        base = read_base_policy(gh, event.repo_full_name, path, commit, branch, kind="default")
        if base is None:
            provenance = f"built-in defaults (no {path} in {event.repo_full_name}@{commit[:12]})"
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
    own = not inputs.orchestrator_repo and not inputs.policy
    note = off_default_note(event, "policy and guidelines" if own else "guidelines")
    origin = PolicyOrigin(provenance, source, bool(inputs.policy), overrides, note)
    return policy, origin


def inline_key_envs(text: str | None) -> list[str]:
    """``api_key_env`` names in the inline policy, read leniently (errors come later, named)."""
    if not text:
        return []
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return []
    accounts = data.get("accounts")
    if not isinstance(accounts, list):
        return []
    return [
        a["api_key_env"]
        for a in accounts
        if isinstance(a, Mapping) and isinstance(a.get("api_key_env"), str)
    ]


def guidelines_stage(
    gh: Github, policy: Policy, event: PullRequestEvent, commit: str
) -> Guidelines | None:
    """The maintainers' guidelines at ``commit``, the commit the workflow runs from (the default
    branch's): ``review.guidelines``, else the conventional file if present. Never the head's
    nor a base branch's (the author controls both). A named file that is missing or unreadable
    is a warning, and the review goes on without it."""
    named = policy.review.guidelines
    path = named or CONVENTIONAL_GUIDELINES
    try:
        found = read_guidelines(gh, event.repo_full_name, path, commit)
    except (PolicyRefError, GitHubEdgeError) as exc:
        actions.warning(f"relay-review: guidelines {path} unreadable ({exc}); reviewing without")
        return None
    if found is None:
        if named:
            actions.warning(
                f"relay-review: no guidelines file {path} at the default branch's commit "
                f"{commit[:12]}; reviewing without"
            )
        return None
    cut = f" (cut to {len(found.text)} of {found.chars} characters)" if found.truncated else ""
    say(f"guidelines: {found.render()}{cut}")
    return found


def instructions_for(policy: Policy, guidelines: Guidelines | None) -> Instructions:
    """The maintainers' instructions for every request: guidelines, path rules, language."""
    r = policy.review
    return Instructions(
        guidelines=guidelines.text if guidelines else "",
        guidelines_source=guidelines.render() if guidelines else "",
        paths=tuple((p.glob, p.instructions) for p in r.paths),
        language=r.language,
    )
