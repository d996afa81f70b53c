"""The GitHub Action's flow, in stage order (each stage in its own log group):

``inputs -> event (gating) -> [pull request, for a trigger comment] -> policy (and guidelines)
-> discovery -> catalog -> pull request files (and head files for context) -> review -> publish
(sticky comment, line comments) -> step summary, outputs, JSON report file``.

On ``issue_comment`` the run goes on only for a comment on a pull request that starts with the
trigger word (input ``trigger``) by a commenter whose association is in ``author-associations``;
anything else is skipped with a notice before any request (no quota spent). The pull request is
then fetched through the API (the payload lacks its head and base) and reviewed at its current
head like a ``pull_request_target`` run.

Discovery's result goes to the catalog in memory. The review's :class:`RunReport` gets the
run's context (policy provenance, pull request, discovery, what GitHub took) and becomes JSON
only when published. :func:`run` returns the exit code; errors are mapped to exit codes by the
command (``commands/run.py``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from relay_review import __version__
from relay_review.action_inputs import ActionInputs, read_action_inputs, secret_values
from relay_review.github import actions
from relay_review.github.client import DEFAULT_API_URL, WaitBudget, make_github
from relay_review.github.comment import recent_stickies, resolve_author, sticky_body
from relay_review.github.errors import GitHubEdgeError, PolicyRefError, github_errors
from relay_review.github.event import (
    CommentCommand,
    NotPullRequestEvent,
    PullRequestEvent,
    event_for_comment,
    load_event,
)
from relay_review.github.log import Secrets, say
from relay_review.github.policy_ref import CONVENTIONAL_GUIDELINES, Guidelines, read_guidelines
from relay_review.github.pr import head_files, list_files
from relay_review.models import Catalog, Decision, NotPosted, RunReport
from relay_review.pipeline.memory import scrub
from relay_review.pipeline.policy import PolicyOrigin, resolve_policy, trusted_commit
from relay_review.pipeline.publish import Lifecycle, Published, finish, publish, skipped
from relay_review.pipeline.review import review
from relay_review.pipeline.routes import published_health, quota_report
from relay_review.providers.discovery import DiscoveryResult, discover
from relay_review.providers.health import PublishedHealth
from relay_review.render import catalog_table
from relay_review.review.chunks import DEFAULT_EXCLUDES, HeadFiles, excluded_by
from relay_review.review.diff import DiffIndex
from relay_review.review.noise import Noise
from relay_review.review.prompt import Instructions
from relay_review.routing.catalog import (
    CatalogInputError,
    build_catalog,
    parse_discovery,
    parse_zdr_feed,
)
from relay_review.settings import (
    Account,
    MemoryPolicy,
    Policy,
    key_conventions,
    resolve_accounts,
    resolve_require_zdr,
)
from relay_review.state import (
    CommentStore,
    Limits,
    Memory,
    Store,
    Wanted,
    findings_scope,
    open_store,
)
from relay_review.state.memory import CLOCK_SKEW_S
from relay_review.state.routes import route_horizon

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


class Stop(Exception):
    """End the run early with an exit code (after the message was logged)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run(env: dict[str, str], secrets: Secrets) -> int:
    """Run the action's stages over ``env``; the exit code. Raises :class:`Stop` for a skipped
    run, and the edges' errors (configuration, policy ref, GitHub) for the command to map."""
    started = time.monotonic()
    with actions.group("relay-review: inputs"):
        inputs = read_action_inputs(env)
        say(f"relay-review {__version__}; inputs read and validated")
    asked = event_stage(env, inputs)
    token = inputs.github_token.get_secret_value()
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    gh = make_github(token, api_url)  # the policy may come from GitHub: default bounds first
    event = asked if isinstance(asked, PullRequestEvent) else commented_pull(gh, env, inputs, asked)
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
        gh = make_github(token, api_url, timeout=policy.github.timeout)
    with actions.group("relay-review: discovery"):
        remaining = policy.serving.deadline - (time.monotonic() - started)
        discovery = discover_routes(policy, accounts, env, remaining)
    with actions.group("relay-review: catalog"):
        require_zdr = resolve_require_zdr(policy.catalog.require_zdr, event.private)
        catalog = build_run_catalog(policy, discovery, require_zdr)
        remaining = policy.serving.deadline - (time.monotonic() - started)
        catalog, health = health_stage(catalog, policy, env, remaining)
        if zdr_line := zdr_blocked_line(catalog, policy.catalog.require_zdr, event.private):
            actions.warning(zdr_line, title="relay-review: no zero-data-retention route")
    repo = gh.get_repo(event.repo_full_name)
    with actions.group("relay-review: pull request files"):
        index, unlisted = files_stage(repo, event)
        remaining = policy.serving.deadline - (time.monotonic() - started)
        heads = context_stage(repo, event, index, policy, remaining)
    with actions.group("relay-review: review"):
        run_secrets = [*secret_values(env), *(env.get(a.api_key_env, "") for a in accounts)]
        store = KeptStore(
            state_store(gh, repo, event, inputs, policy.state.timeout_s, policy.memory),
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
                )
            )
        log_review(report)
    extra = report.model_extra if report.model_extra is not None else {}
    report.quota = quota_report(health, extra.pop("requests_by_account", {}))  # type: ignore[attr-defined]
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
            state_line=store.line(),
            lifecycle=lifecycle,
            noise=Noise(policy.github.inline_min_severity, policy.github.max_inline),
        )
    report.github = published.to_json()
    report.run_elapsed_s = round(time.monotonic() - started, 3)
    report.exit_code = exit_code(report, inputs, published)
    finish(env, report, published, secrets)
    return report.exit_code


def describe_run(
    report: RunReport,
    env: Mapping[str, str],
    event: PullRequestEvent,
    origin: PolicyOrigin,
    discovery: DiscoveryResult,
    require_zdr: bool,
) -> None:
    """Add what the action knows beyond the review: policy, pull request, discovery, version."""
    report.provenance = origin.provenance
    report.context = {
        "server_url": (env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
        "repo": event.repo_full_name,
        "head_sha": event.head_sha,
        "base_sha": event.base_sha,
    }
    report.policy = origin.to_json()
    report.pull_request = {
        "event": event.event_name,
        "action": event.action,
        "repo": event.repo_full_name,
        "number": event.number,
        "head_sha": event.head_sha,
        "base_sha": event.base_sha,
        "private": event.private,
    }
    report.require_zdr = require_zdr
    report.discovery = {
        "accounts": [vars(a) for a in discovery.accounts],
        "errors": discovery.errors,
    }
    report.relay_review_version = __version__


# --------------------------------------------------------------------------------------------
# stages


class KeptStore:
    """The run's store, keeping the record it loaded and the last one saved: publishing adds
    the findings' states across pushes (:class:`~relay_review.pipeline.publish.Lifecycle`) to the
    record the review saved, and saves once more. Anything else goes to the store itself."""

    def __init__(self, inner: Store, secrets: Sequence[str] = (), scope: str = "") -> None:
        self.inner = inner
        self.scope = scope  # the pull request's findings: read with what the review needs
        self.secrets = list(secrets)  # what the lifecycle's save is scrubbed of, like the review's
        self.kind = inner.kind
        self.loaded = Memory()
        self.saved: Memory | None = None

    def __getattr__(self, name: str) -> Any:  # e.g. the Redis store's shared ledger
        return getattr(self.inner, name)

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

    def line(self) -> str | None:
        """The ``comment`` store's payload line (``None`` for the other stores)."""
        return self.inner.line if isinstance(self.inner, CommentStore) else None

    def save_line(self, memory: Memory) -> str | None:
        """Save ``memory`` (a store that keeps nothing keeps nothing); the payload line."""
        if self.kind != "none":
            self.save(scrub(memory, self.secrets))
        return self.line()


def state_store(
    gh: Any,
    repo: Any,
    event: PullRequestEvent,
    inputs: ActionInputs,
    timeout: float | None = None,
    memory: MemoryPolicy | None = None,
) -> Store:
    """The store the ``state`` input names (its calls bounded by ``timeout``, the policy's
    ``[state] timeout_s``); ``comment`` reads our sticky comment only (found by marker and
    author), when the review asks for it, and the route memory of the newest sticky comment
    (marker and author again) of the repository's other pull requests updated within
    ``memory``'s route horizon (:func:`~relay_review.state.routes.route_horizon`): one
    listing of the repository's newest comments, under the same token's read permission."""
    if inputs.state != "comment":
        return open_store(inputs.state, timeout=timeout)
    author = functools.cache(lambda: resolve_author(gh, inputs.comment_author))

    def others() -> list[tuple[str, str | None]]:
        horizon = route_horizon(memory or MemoryPolicy()) + CLOCK_SKEW_S
        since = datetime.fromtimestamp(time.time() - horizon, UTC)
        found = recent_stickies(repo, author(), since=since, exclude=event.number)
        return [(f"#{number}", body) for number, body in found]

    return open_store(
        "comment", lambda: sticky_body(repo, event.number, author()), read_others=others
    )


def event_stage(env: Mapping[str, str], inputs: ActionInputs) -> PullRequestEvent | CommentCommand:
    with actions.group("relay-review: event"):
        event = load_event(env)
        if isinstance(event, NotPullRequestEvent):
            raise skip(env, f"nothing to review: {event.reason}")
        if isinstance(event, CommentCommand):
            return comment_gate(env, inputs, event)
        say(f"{event.event_name} ({event.action}) on {event.repo_full_name}#{event.number}")
        open_pull_request(env, inputs, event)
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
    gh: Any, env: Mapping[str, str], inputs: ActionInputs, asked: CommentCommand
) -> PullRequestEvent:
    """The pull request a trigger comment asks to review, fetched through the API at its
    current head (state and drafts gated like a pull request event; the commenter's
    association was checked, not the pull request author's)."""
    with actions.group("relay-review: pull request"):
        where = f"{asked.repo_full_name}#{asked.number}"
        with github_errors(f"cannot read the pull request {where}"):
            raw = gh.get_repo(asked.repo_full_name).get_pull(asked.number).raw_data
        event = event_for_comment(asked, raw)
        open_pull_request(env, inputs, event)
        return event


def open_pull_request(
    env: Mapping[str, str], inputs: ActionInputs, event: PullRequestEvent
) -> None:
    """Log the pull request's base, head, title and author (untrusted), and skip it unless it
    is open and, for a draft, drafts are reviewed."""
    say(f"base {event.base_sha} ({event.base_ref}), head {event.head_sha}")
    actions.log_untrusted(
        f"title: {event.title}\nauthor: {event.user_login} ({event.author_association})"
    )
    if event.state != "open":
        raise skip(env, f"#{event.number} is {event.state}; nothing to review")
    if event.draft and not inputs.review_drafts:
        raise skip(
            env, f"#{event.number} is a draft; skipped (set review-drafts: true to review drafts)"
        )


def guidelines_stage(
    gh: Any, policy: Policy, event: PullRequestEvent, commit: str
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


def context_stage(
    repo: Any, event: PullRequestEvent, index: DiffIndex, policy: Policy, remaining: float
) -> HeadFiles | None:
    """Head versions of the changed files, for context around hunks: read through the contents
    API at the head SHA (never checked out or run), bounded in count, size and time; a failure
    is a warning and the review goes on without context."""
    r = policy.review
    if not r.context_lines:
        return None
    excludes = [*(DEFAULT_EXCLUDES if r.default_excludes else ()), *r.exclude]
    paths = [
        f.path
        for f in index.files
        if f.status in ("modified", "renamed", "copied")
        and not f.skip_reason
        and f.hunks
        and excluded_by(f.path, excludes) is None
    ]
    if not paths:
        return None
    # at most a tenth of what is left of the run, and never more than a minute
    budget = max(0.0, min(remaining / 10, 60.0))
    fetched = head_files(repo, paths, event.head_sha, deadline=time.monotonic() + budget)
    for problem in fetched.problems:
        actions.warning(f"relay-review: context: {problem}; those hunks are shown without it")
    say(f"context: {len(fetched.files)} of {len(paths)} head files read")
    return fetched.files


def skip(env: Mapping[str, str], reason: str) -> Stop:
    """Say why there is nothing to review (notice, step summary, outputs); the run exits 0."""
    skipped(env, reason)
    return Stop(EXIT_OK)


def files_stage(repo: Any, event: PullRequestEvent) -> tuple[DiffIndex, int]:
    """The pull request's files as a diff index, and how many files GitHub did not list."""
    files = list_files(repo, event.number)
    index = DiffIndex.from_api_files(files)
    say(f"{len(files)} files, {len(index)} commentable lines")
    unlisted = max(0, (event.changed_files or 0) - len(files))  # GitHub lists 3,000 at most
    if unlisted:
        actions.warning(
            f"relay-review: the pull request changes {event.changed_files} files; GitHub "
            f"lists {len(files)}: the rest cannot be reviewed (the review is partial)"
        )
    actions.log_untrusted("\n".join(f"  {f['status']}: {f['filename']}" for f in files))
    return index, unlisted


def discover_routes(
    policy: Policy, accounts: list[Account], env: Mapping[str, str], remaining: float
) -> DiscoveryResult:
    """Discovery, bounded by its own timeout and by what is left of the run's deadline."""
    keyed = sum(1 for acc in accounts if env.get(acc.api_key_env, "").strip())
    say(f"accounts: {len(accounts)}, {keyed} with a key; listing their models")
    bounds = policy.discovery
    if remaining < bounds.timeout:
        bounds = bounds.model_copy(update={"timeout": max(remaining, 0.1)})
    result = asyncio.run(discover(accounts, env, bounds))
    lines = []  # provider error texts are untrusted: logged inside a stop-commands block
    for s in result.accounts:
        if s.status == "ok":
            lines.append(f"discovery: {s.account} ({s.kind}): {s.kept} of {s.listed} models kept")
        elif s.status == "skipped":
            lines.append(f"discovery: {s.account} ({s.kind}): skipped ({s.error})")
        else:
            lines.append(f"discovery: {s.account} ({s.kind}): error: {s.error}")
    named = {s.account for s in result.accounts}
    for error in result.errors:
        if error["account"] not in named:
            lines.append(f"discovery: {error['account']}: error: {error['error']}")
    if lines:
        actions.log_untrusted("\n".join(lines))
    return result


def build_run_catalog(policy: Policy, discovery: DiscoveryResult, require_zdr: bool) -> Catalog:
    """The catalog from the discovery result in memory (and its ZDR feed, when fetched)."""
    c = policy.catalog
    try:
        routes = parse_discovery(discovery.report(None))
        zdr_ids: list[str] | None = None
        if discovery.zdr_feed is not None:
            try:
                zdr_ids = parse_zdr_feed(json.loads(discovery.zdr_feed))
            except (ValueError, CatalogInputError) as exc:
                actions.warning(
                    f"relay-review: the ZDR feed is unusable ({exc}); no route counts as ZDR"
                )
        catalog = build_catalog(
            routes,
            zdr_ids,
            limit=c.limit,
            account_cap=c.account_cap,
            pool=c.pool,
            require_zdr=require_zdr,
        )
    except CatalogInputError as exc:  # our own discovery output: a bug, not the user's input
        raise RuntimeError(f"discovery produced an unreadable report: {exc}") from exc
    say(f"catalog: pool={c.pool} limit={c.limit} account_cap={c.account_cap} zdr={require_zdr}")
    actions.log_untrusted(catalog_table(catalog))  # model ids come from provider listings
    return catalog


def health_stage(
    catalog: Catalog, policy: Policy, env: Mapping[str, str], remaining: float
) -> tuple[Catalog, PublishedHealth]:
    """OpenRouter's published uptime as a prior on the catalog's order, and its key facts
    (listings, no completion; one warning when they cannot be read)."""
    problems: list[str] = []
    catalog, health = asyncio.run(
        published_health(catalog, policy, env, remaining=remaining, warn=problems.append)
    )
    if problems:  # the texts name model ids from provider listings: logged as untrusted
        actions.warning(
            "relay-review: OpenRouter's published health could not be read in full; routes "
            "without it keep their place (no prior)",
            title="relay-review: published health unavailable",
        )
        actions.log_untrusted("\n".join(problems))
    if health.uptime:
        low = [
            e.agent_id
            for e in catalog.selected
            if e.uptime is not None and e.uptime < policy.catalog.min_uptime
        ]
        say(
            f"published health: uptime for {len(health.uptime)} routes; {len(low)} below "
            f"min_uptime {policy.catalog.min_uptime:g} % ranked last in their tier"
        )
    return catalog, health


def empty_catalog_why(
    discovery: DiscoveryResult,
    catalog: Catalog,
    accounts: list[Account],
    env: Mapping[str, str],
    require_zdr: bool,
) -> str:
    """Why no route was selected, in one sentence for the comment."""
    if not any(env.get(acc.api_key_env, "").strip() for acc in accounts):
        wanted = key_conventions() + sorted({acc.api_key_env for acc in accounts})
        return "no provider account has a key; set one of " + ", ".join(wanted)
    excluded = catalog.report.excluded
    parts = [f"{reason} {count}" for reason, count in excluded.items()]
    failed = [e["account"] for e in discovery.errors]
    text = f"no route was selected ({catalog.report.total_routes} discovered"
    if parts:
        text += "; excluded: " + ", ".join(parts)
    if failed:
        text += "; discovery failed for " + ", ".join(failed)
    text += ")"
    if require_zdr and excluded.get("not_zdr"):
        text += "; this repository requires zero-data-retention routes (require-zdr)"
    return text


def zdr_blocked_line(catalog: Catalog, setting: str | bool, private: bool | None) -> str | None:
    """One line when ``require-zdr`` alone left the catalog empty: what was required, why, and
    the input that changes it (said before any model is called, so no quota is spent on it)."""
    if catalog.selected or not catalog.report.excluded.get("not_zdr"):
        return None
    if str(setting).lower() != "auto":
        why = "require-zdr is true"
    elif private is None:
        why = "require-zdr is auto and the repository's visibility is unknown"
    else:
        why = "require-zdr is auto and this repository is private"
    n = catalog.report.excluded["not_zdr"]
    return (
        f"no route may review this pull request: {why}, so only zero-data-retention (ZDR) routes "
        f"may see its code, and none of the {n} eligible route{'s' if n != 1 else ''} is ZDR by "
        "its provider's own published list; set the input require-zdr: false to allow routes "
        "that may retain prompts, or add an account whose provider publishes ZDR endpoints "
        "(OpenRouter's ZDR feed)"
    )


def log_review(report: RunReport) -> None:
    """The verdict in the log: counts as workflow text, model texts as untrusted lines."""
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
    actions.log_untrusted("\n".join(untrusted))


# --------------------------------------------------------------------------------------------
# exit code


def exit_code(report: RunReport, inputs: ActionInputs, published: Published) -> int:
    """0 done; 1 not posted (GitHub failed or rate-limited), no verdict with ``on-unavailable:
    fail``, or ``fail-on`` triggered. A moved head is not a failure: a newer run owns it."""
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
