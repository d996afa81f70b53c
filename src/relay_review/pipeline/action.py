"""The GitHub Action's flow, in stage order (each stage in its own log group), and its exit code:

``inputs -> event (gating) -> [pull request, for a trigger comment] -> policy (and guidelines)
-> discovery -> catalog -> pull request files (and head files for context) -> review -> publish
(sticky comment, line comments) -> step summary, outputs, JSON report file``.

Each stage lives in its module: gating in :mod:`.gate`, the policy and guidelines in
:mod:`.policy`, discovery and the catalog in :mod:`.routes`, the pull request's files in
:mod:`.files`, the review in :mod:`.review`, publishing in :mod:`.publish` (findings across
pushes in :mod:`.lifecycle`; the report file, step summary and outputs in :mod:`.outputs`). This
module knows their order and decides every exit code in one function (:func:`exit_code`);
:func:`main` is what ``relay-review run`` calls.

Discovery's result goes to the catalog in memory. The review's :class:`RunReport` gets the
run's context (policy provenance, pull request, discovery, what GitHub took) and becomes JSON
only when published.

Exit codes:

====  =========================================================================================
0     a verdict was published and ``fail-on`` did not trigger; nothing to do (not a pull request
      event, closed, draft, author not allowed); the head moved during the run, or a concurrent
      run for a newer head owns the comment (nothing posted for the stale head); no verdict with
      ``on-unavailable: pass``; read-only token (verdict in the step summary)
1     no verdict with ``on-unavailable: fail``; ``fail-on`` triggered (``request_changes``: the
      decision is request_changes; ``high``: any verified high finding); a runtime failure
      (GitHub unreachable or answering 5xx/401/403 while reading, the comment could not be
      posted for a reason other than permissions, an internal error); GitHub's rate limit asked
      for a wait longer than ``github.max_wait`` or than the run's deadline leaves (the comment
      was not posted; the verdict is in the step summary)
2     bad configuration: an input, the policy (inline, pinned or base), a pinned ref that does
      not exist, is not a file or does not descend from ``orchestrator-min-ref``, or a missing
      or malformed event payload
====  =========================================================================================

Secrets: the token input and every variable named ``*API_KEY*`` are masked (``::add-mask::``)
before anything else is written; key variables named by the policy are masked as soon as the
policy is read. Every text that leaves the process (comment, review, summary, report file,
outputs, error annotations) is also scrubbed of those values.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from relay_review import __version__
from relay_review.config import MemoryPolicy, resolve_accounts, resolve_require_zdr
from relay_review.config.inputs import ActionInputs, read_action_inputs, secret_values
from relay_review.errors import UsageError
from relay_review.github import actions
from relay_review.github.client import DEFAULT_API_URL, WaitBudget, make_github
from relay_review.github.comment import StickyReader, recent_stickies
from relay_review.github.errors import EventError, GitHubEdgeError, PolicyRefError
from relay_review.github.event import PullRequestEvent
from relay_review.github.log import Secrets, log_to_stdout, say
from relay_review.pipeline.files import context_stage, files_stage
from relay_review.pipeline.gate import EXIT_OK, Stop, commented_pull, event_stage
from relay_review.pipeline.lifecycle import Lifecycle
from relay_review.pipeline.memory import scrub
from relay_review.pipeline.outputs import finish, set_skip_outputs
from relay_review.pipeline.policy import (
    guidelines_stage,
    inline_key_envs,
    instructions_for,
    resolve_policy,
    trusted_commit,
)
from relay_review.pipeline.publish import Published, describe_run, publish
from relay_review.pipeline.review import review
from relay_review.pipeline.route_memory import route_horizon
from relay_review.pipeline.routes import (
    build_run_catalog,
    discover_routes,
    empty_catalog_why,
    health_stage,
    zdr_blocked_line,
)
from relay_review.records import Decision, NotPosted, RunReport
from relay_review.review.noise import Noise
from relay_review.state import (
    Borrowed,
    Ledger,
    Limits,
    Memory,
    Store,
    Wanted,
    findings_scope,
    open_store,
)
from relay_review.state.memory import CLOCK_SKEW_S

EXIT_FAILED, EXIT_CONFIG = 1, 2
__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_OK", "Stop", "exit_code", "main", "run"]

#: Statuses of a policy-ref failure that mean "the configuration is wrong" (exit 2), not "GitHub
#: failed" (exit 1). ``None`` = refused by relay-review (ancestry, not a file, not UTF-8).
CONFIG_STATUSES = frozenset({None, 404, 422})


def main(env: Mapping[str, str]) -> int:
    """Run the action over ``env`` (``os.environ`` in production); the exit code. What escapes
    the stages becomes an error annotation (scrubbed) and ``decision=error`` outputs."""
    env = dict(env)
    log_to_stdout()
    secrets = Secrets()
    secrets.add(secret_values(env))
    secrets.add(env.get(name, "") for name in inline_key_envs(env.get("INPUT_POLICY")))
    try:
        return run(env, secrets)
    except Stop as stop:
        return exit_code(stop)
    except Exception as exc:
        message, title = failure(exc, secrets)
        actions.error(secrets.redact(message), title=f"relay-review: {title}")
        set_skip_outputs(env, Decision.ERROR)
        return exit_code(exc)


def run(env: dict[str, str], secrets: Secrets) -> int:
    """Run the action's stages over ``env``; the exit code. Raises :class:`Stop` for a skipped
    run, and the edges' errors (configuration, policy ref, GitHub) for :func:`main` to map."""
    started = time.monotonic()
    with actions.group("relay-review: inputs"):
        inputs = read_action_inputs(env)
        say(f"relay-review {__version__}; inputs read and validated")
    asked = event_stage(env, inputs, secrets)
    token = inputs.github_token.get_secret_value()
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    gh = make_github(token, api_url)  # the policy may come from GitHub: default bounds first
    if isinstance(asked, PullRequestEvent):
        event = asked
    else:
        event = commented_pull(gh, env, inputs, asked, secrets)
    with actions.group("relay-review: policy"):
        commit = trusted_commit(gh, event, env)  # the default branch's: never the PR's base
        policy, origin = resolve_policy(gh, inputs, event, commit)
        guidelines = guidelines_stage(gh, policy, event, commit)
        if origin.note:
            say(origin.note)
        accounts = resolve_accounts(policy, env)
        secrets.add(env.get(acc.api_key_env, "") for acc in accounts)
        say(f"policy: {origin.provenance}")
        # every later GitHub call is bounded by the policy's own per-request timeout
        gh = make_github(
            token,
            api_url,
            timeout=policy.github.timeout,
            seconds_between_writes=policy.github.write_interval,
        )
    with actions.group("relay-review: discovery"):
        remaining = policy.serving.deadline - (time.monotonic() - started)
        discovery = discover_routes(policy, accounts, env, remaining)
    with actions.group("relay-review: catalog"):
        require_zdr = resolve_require_zdr(policy.catalog.require_zdr, event.private)
        catalog = build_run_catalog(policy, discovery, require_zdr)
        if zdr_line := zdr_blocked_line(catalog, policy.catalog.require_zdr, event.private):
            actions.warning(zdr_line, title="relay-review: no zero-data-retention route")
    repo = gh.get_repo(event.repo_full_name)
    # our sticky comment as this run reads it: GET /user asked once, for the comment store's
    # reads (before the review, one listing) and the publisher (after it, which lists afresh)
    reader = StickyReader(gh, repo, event.number, inputs.comment_author)
    with actions.group("relay-review: pull request files"):
        index, unlisted = files_stage(repo, event)
        remaining = policy.serving.deadline - (time.monotonic() - started)
        heads = context_stage(repo, event, index, policy, remaining)
    with actions.group("relay-review: review"):
        run_secrets = [*secret_values(env), *(env.get(a.api_key_env, "") for a in accounts)]
        store = KeptStore(
            state_store(reader, event, inputs, policy.state.timeout_s, policy.memory),
            secrets=run_secrets,
            scope=findings_scope(event.repo_full_name, event.number),
        )
        with actions.stop_commands():  # attempt lines carry provider error texts
            report = asyncio.run(
                review(
                    index,
                    catalog,
                    policy,
                    env,
                    title=event.title,
                    body=event.body,
                    started_at=started,
                    unlisted_files=unlisted,
                    instructions=instructions_for(policy, guidelines),
                    head_files=heads,
                    store=store,
                    head_sha=event.head_sha,
                    repo=event.repo_full_name,
                    # /relay-review asks the models again (route memory still applies)
                    reuse_reviews=event.event_name != "issue_comment",
                    secrets=run_secrets,
                    # read once a request will be sent: nothing when every file is reused
                    health=lambda ranked: health_stage(
                        ranked, policy, env, policy.serving.deadline - (time.monotonic() - started)
                    ),
                )
            )
        log_review(report, secrets)
    if not catalog.selected and report.decision == Decision.UNAVAILABLE:
        report.verdict.why = zdr_blocked_line(
            catalog, policy.catalog.require_zdr, event.private
        ) or empty_catalog_why(discovery, catalog, accounts, env, require_zdr)
    describe_run(report, env, event, origin, discovery, require_zdr)
    report.guidelines = guidelines.render() if guidelines else None
    with actions.group("relay-review: publish"):
        budget = WaitBudget(
            max_wait=policy.github.max_wait,
            deadline=started + policy.serving.deadline,
            reserve=policy.github.timeout,  # the request after the wait must fit too
        )
        lifecycle = Lifecycle(
            index=index,
            unlisted=unlisted,
            memory=store.record(),
            save=store.save_line,
            single_comments=policy.github.single_comments,
            ttl=policy.memory.findings,
            deadline=started + policy.serving.deadline,
        )
        published = publish(
            gh,
            repo,
            event,
            inputs,
            report,
            secrets,
            budget,
            state_line=store.line,
            lifecycle=lifecycle,
            noise=Noise(policy.github.inline_min_severity, policy.github.max_inline),
            reader=reader,
        )
    report.github = published.summary()
    report.run_elapsed_s = round(time.monotonic() - started, 3)
    report.exit_code = exit_code(Finished(report, inputs, published))
    finish(env, report, published, secrets)
    return report.exit_code


# --------------------------------------------------------------------------------------------
# stages


class KeptStore:
    """The run's store, keeping the record it loaded and the last one saved: publishing adds
    the findings' states across pushes (:class:`~relay_review.pipeline.lifecycle.Lifecycle`) to the
    record the review saved, and saves once more. The rest of :class:`Store` is the store's."""

    def __init__(self, inner: Store, secrets: Sequence[str] = (), scope: str = "") -> None:
        self.inner = inner
        self.scope = scope  # the pull request's findings: read with what the review needs
        self.secrets = list(secrets)  # what the lifecycle's save is scrubbed of, like the review's
        self.loaded = Memory.of()
        self.saved: Memory | None = None

    @property
    def kind(self) -> str:
        return self.inner.kind

    @property
    def keeps(self) -> bool:
        return self.inner.keeps

    @property
    def ledger(self) -> Ledger | None:  # e.g. the Redis store's shared ledger
        return self.inner.ledger

    @property
    def line(self) -> str | None:
        """The ``comment`` store's payload line (``None`` for the other stores)."""
        return self.inner.line

    @property
    def borrowed(self) -> Borrowed | None:
        return self.inner.borrowed

    @property
    def reviews_off(self) -> str:
        return self.inner.reviews_off

    def load(self, limits: Limits | None = None, wanted: Wanted | None = None) -> Memory:
        if self.scope:
            wanted = (wanted or Wanted()) | Wanted.of(findings=[self.scope])
        self.loaded = self.inner.load(limits, wanted)
        return self.loaded

    def save(self, memory: Memory) -> None:
        self.saved = memory
        self.inner.save(memory)

    def record(self) -> Memory:
        """The record as the review left it, with the findings' states as they were loaded
        (a review's save keeps routes and chunks only)."""
        base = self.saved if self.saved is not None else self.loaded
        return base.model_copy(update={"findings": dict(self.loaded.findings)})

    def save_line(self, memory: Memory) -> str | None:
        """Save ``memory`` (a store that keeps nothing keeps nothing); the payload line."""
        if self.keeps:
            self.save(scrub(memory, self.secrets))
        return self.line


def state_store(
    reader: StickyReader,
    event: PullRequestEvent,
    inputs: ActionInputs,
    timeout: float | None = None,
    memory: MemoryPolicy | None = None,
) -> Store:
    """The store the ``state`` input names (its calls bounded by ``timeout``, the policy's
    ``[state] timeout_s``; a Redis keeps the review memory in our sticky comment,
    :class:`~relay_review.state.SplitStore`); ``comment`` reads our sticky comment
    only (found by marker and author, through the run's ``reader``, whose author the publisher
    reuses), when the review asks for it, and the route memory of the newest sticky comment
    (marker and author again) of the repository's other pull requests updated within
    ``memory``'s route horizon (:func:`~relay_review.pipeline.route_memory.route_horizon`): one
    listing of the repository's newest comments, under the same token's read permission."""
    if inputs.state != "comment":  # a Redis keeps the review memory in our comment
        return open_store(inputs.state, reader.body, timeout=timeout)

    def others() -> list[tuple[str, str | None]]:
        horizon = route_horizon(memory or MemoryPolicy()) + CLOCK_SKEW_S
        since = datetime.fromtimestamp(time.time() - horizon, UTC)
        found = recent_stickies(reader.repo, reader.author(), since=since, exclude=event.number)
        return [(f"#{number}", body) for number, body in found]

    return open_store("comment", reader.body, read_others=others)


def log_review(report: RunReport, secrets: Secrets) -> None:
    """The verdict in the log: counts as workflow text, model texts as untrusted lines,
    scrubbed of the run's secrets (a reply may write back a key the diff holds; the chat call
    scrubs only its own route's)."""
    v = report.verdict
    say(
        f"decision: {v.decision}; {len(v.findings)} verified, "
        f"{len(v.unverified)} unverified findings; "
        f"{len(report.attempts)} attempts; {report.elapsed_s} s"
    )
    served = report.served_by
    untrusted = [f"served by: {served.agent_id if served else 'no route'}"]
    if v.why:
        untrusted.append(f"why: {v.why}")
    if v.summary:
        untrusted.append(f"summary: {v.summary}")
    for f in v.findings:
        untrusted.append(f"{f.severity} {f.path}:{f.line} ({f.side}): {f.message}")
    actions.log_untrusted(secrets.redact("\n".join(untrusted)))


# --------------------------------------------------------------------------------------------
# exit code


@dataclass(frozen=True)
class Finished:
    """A run that reached publishing: what its exit code depends on."""

    report: RunReport
    inputs: ActionInputs
    published: Published


def exit_code(outcome: Finished | Exception) -> int:
    """Every exit code of the action (the table in the module docstring), from how the run
    ended: a published run, a :class:`Stop` (skipped), or the error that escaped a stage.

    Published: 0 done; 1 not posted (GitHub failed or rate-limited), no verdict with
    ``on-unavailable: fail``, or ``fail-on`` triggered. A moved head is not a failure: a newer
    run owns it. Errors: 2 for the configuration (inputs, policy, event payload, a pinned
    policy ref that is wrong), 1 for GitHub failing and for a bug."""
    if isinstance(outcome, Stop):
        return outcome.code
    if isinstance(outcome, UsageError | EventError):
        return EXIT_CONFIG
    if isinstance(outcome, PolicyRefError):
        return EXIT_CONFIG if outcome.status in CONFIG_STATUSES else EXIT_FAILED
    if isinstance(outcome, Exception):  # GitHub failed (or did not answer), or a bug
        return EXIT_FAILED
    report, inputs, published = outcome.report, outcome.inputs, outcome.published
    decision = report.decision
    if published.not_posted == NotPosted.HEAD_MOVED:
        return EXIT_OK
    if published.not_posted in (NotPosted.FAILED, NotPosted.RATE_LIMITED):
        return EXIT_FAILED
    if decision == Decision.UNAVAILABLE:
        return EXIT_FAILED if inputs.on_unavailable == "fail" else EXIT_OK
    if inputs.fail_on == "request_changes" and decision == Decision.REQUEST_CHANGES:
        return EXIT_FAILED
    if inputs.fail_on == "high" and any(f.severity == "high" for f in report.verdict.findings):
        return EXIT_FAILED
    return EXIT_OK


def failure(exc: Exception, secrets: Secrets) -> tuple[str, str]:
    """The error annotation's message and title for an error that escaped a stage; a bug's
    traceback goes to the (masked) log first. Call it while handling ``exc``."""
    if isinstance(exc, UsageError | EventError):
        return str(exc), "configuration"
    if isinstance(exc, PolicyRefError):
        return f"policy not loaded, refusing to run: {exc}", "policy"
    if isinstance(exc, GitHubEdgeError):  # GitHubConnectionError too: GitHub did not answer
        return f"GitHub API: {exc}", "GitHub"
    actions.log_untrusted(secrets.redact(traceback.format_exc()))
    return f"internal error: {type(exc).__name__}: {exc}", "internal error"
