"""Gating: whether the triggering event asks for a review, before any request (no quota spent).

A pull request event goes on when the pull request is open (a draft only with
``review-drafts``) and its author's association is in ``author-associations``. An
``issue_comment`` goes on only for a new comment on a pull request that starts with the trigger
word (input ``trigger``) by a commenter whose association is allowed; the pull request is then
fetched through the API (the payload lacks its head and base) and gated like a pull request
event. Anything else ends the run with :class:`Stop` after a notice, a one-line step summary and
``decision=skipped`` outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from relay_review.config.inputs import ActionInputs
from relay_review.github import actions
from relay_review.github.errors import github_errors
from relay_review.github.event import (
    CommentCommand,
    NotPullRequestEvent,
    PullRequestEvent,
    event_for_comment,
    load_event,
)
from relay_review.github.log import Secrets, say
from relay_review.pipeline.outputs import skipped

if TYPE_CHECKING:
    from github import Github

EXIT_OK = 0


class Stop(Exception):
    """End the run early with an exit code (after the message was logged)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def event_stage(
    env: Mapping[str, str], inputs: ActionInputs, secrets: Secrets
) -> PullRequestEvent | CommentCommand:
    with actions.group("relay-review: event"):
        event = load_event(env)
        if isinstance(event, NotPullRequestEvent):
            raise skip(env, f"nothing to review: {event.reason}")
        if isinstance(event, CommentCommand):
            return comment_gate(env, inputs, event)
        say(f"{event.event_name} ({event.action}) on {event.repo_full_name}#{event.number}")
        open_pull_request(env, inputs, event, secrets)
        if event.author_association.upper() not in inputs.author_associations:
            raise skip(
                env,
                f"the author's association {event.author_association} is not in "
                f"author-associations ({', '.join(sorted(inputs.author_associations))}); "
                "skipped (widen the input to review such pull requests)",
            )
        return event


def comment_gate(
    env: Mapping[str, str], inputs: ActionInputs, event: CommentCommand
) -> CommentCommand:
    """Let an ``issue_comment`` through only when it asks for a review the right way: a new
    comment on a pull request, starting with the trigger word, by an allowed association.
    The body is never logged or interpreted beyond the comparison with the trigger word."""
    where = f"{event.repo_full_name}#{event.number}"
    say(f"issue_comment ({event.action}) on {where}, comment {event.comment_id}")
    actions.log_untrusted(f"commenter: {event.commenter} ({event.association})")
    if event.action != "created":
        raise skip(env, f"a comment was {event.action}; only a new comment asks for a review")
    if not event.on_pull_request:
        raise skip(env, f"{where} is an issue, not a pull request; nothing to review")
    if not event.asks(inputs.trigger):
        raise skip(
            env, f"the comment does not start with {inputs.trigger} (input trigger); ignored"
        )
    if event.dismisses(inputs.trigger):
        raise skip(
            env,
            f"dismiss (after {inputs.trigger}) works as a reply in a finding's review thread, "
            "not as a comment on the pull request; ignored, no review and no quota spent",
        )
    if event.association.upper() not in inputs.author_associations:
        raise skip(
            env,
            f"{inputs.trigger} by a commenter whose association {event.association} is not in "
            f"author-associations ({', '.join(sorted(inputs.author_associations))}); ignored, "
            "no review and no quota spent",
        )
    say(f"{inputs.trigger} by an allowed commenter ({event.association}): reviewing {where}")
    return event


def commented_pull(
    gh: Github,
    env: Mapping[str, str],
    inputs: ActionInputs,
    asked: CommentCommand,
    secrets: Secrets,
) -> PullRequestEvent:
    """The pull request a trigger comment asks to review, fetched through the API at its
    current head (state and drafts gated like a pull request event; the commenter's
    association was checked, not the pull request author's)."""
    with actions.group("relay-review: pull request"):
        where = f"{asked.repo_full_name}#{asked.number}"
        with github_errors(f"cannot read the pull request {where}"):
            raw = gh.get_repo(asked.repo_full_name).get_pull(asked.number).raw_data
        event = event_for_comment(asked, raw)
        open_pull_request(env, inputs, event, secrets)
        return event


def open_pull_request(
    env: Mapping[str, str], inputs: ActionInputs, event: PullRequestEvent, secrets: Secrets
) -> None:
    """Log the pull request's base, head, title and author (untrusted), and skip it unless it
    is open and, for a draft, drafts are reviewed."""
    say(f"base {event.base_sha} ({event.base_ref}), head {event.head_sha}")
    shown = f"title: {event.title}\nauthor: {event.user_login} ({event.author_association})"
    # a title may hold a key: scrubbed, not only masked by the runner (a helper's audit)
    actions.log_untrusted(secrets.redact(shown))
    if event.state != "open":
        raise skip(env, f"#{event.number} is {event.state}; nothing to review")
    if event.draft and not inputs.review_drafts:
        raise skip(
            env, f"#{event.number} is a draft; skipped (set review-drafts: true to review drafts)"
        )


def skip(env: Mapping[str, str], reason: str) -> Stop:
    """Say why there is nothing to review (notice, step summary, outputs); the run exits 0."""
    skipped(env, reason)
    return Stop(EXIT_OK)
