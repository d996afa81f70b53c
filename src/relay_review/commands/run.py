"""``relay-review run``: the GitHub Action's entrypoint (everything comes from the environment).

Stages, each in its own log group: inputs and masking -> event -> policy -> discovery -> catalog
-> pull request files -> review -> publish (sticky comment, optional line comments) -> step
summary, outputs and the JSON report file.

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

GitHub calls: the client is rebuilt with the policy's ``github.timeout`` (each connect and read)
once the policy is known; rate-limit waits are bounded by ``github.max_wait`` (all together) and
the run's deadline.

Secrets: the token input and every variable named ``*API_KEY*`` are masked (``::add-mask::``)
before anything else is written; key variables named by the policy are masked as soon as the
policy is read. Every text that leaves the process (comment, review, summary, report file,
outputs, error annotations) is also scrubbed of those values.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
import tomllib
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay_review import __version__, pipeline
from relay_review._files import atomic_write
from relay_review.action_inputs import ActionInputs, read_action_inputs, secret_values
from relay_review.errors import UsageError
from relay_review.github import actions
from relay_review.github.client import DEFAULT_API_URL, WaitBudget, make_github
from relay_review.github.comment import (
    HEAD_LINE_CHARS,
    MARKER,
    MAX_BODY_CHARS,
    resolve_author,
    upsert_sticky,
)
from relay_review.github.errors import (
    EventError,
    GitHubEdgeError,
    GitHubRateLimited,
    PolicyRefError,
)
from relay_review.github.event import NotPullRequestEvent, PullRequestEvent, load_event
from relay_review.github.policy_ref import PolicySource, load_pinned_policy, read_base_policy
from relay_review.github.pr import head_sha, list_files
from relay_review.github.review import LineComment, post_review
from relay_review.models import Catalog
from relay_review.providers.discovery import DiscoveryResult, discover, write_report
from relay_review.redact import redact, redact_data, usable_secrets
from relay_review.render import catalog_table, comment_markdown, md_code, md_text
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import (
    CatalogInputError,
    build_catalog,
    parse_discovery,
    parse_zdr_feed,
)
from relay_review.settings import (
    Account,
    Layer,
    Policy,
    key_conventions,
    merge_layers,
    parse_toml,
    resolve_accounts,
    resolve_require_zdr,
)

log = logging.getLogger("relay_review.run")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
REPORT_NAME = "relay-review-report.json"
INLINE_SOURCE = "input `policy`"
INPUT_SOURCE = "action inputs"
REDACTED = "***"
#: Statuses of a policy-ref failure that mean "the configuration is wrong" (exit 2), not "GitHub
#: failed" (exit 1). ``None`` = refused by relay-review (ancestry, not a file, not UTF-8).
CONFIG_STATUSES = frozenset({None, 404, 422})
PERMISSION_STATUSES = frozenset({401, 403})


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``run`` (no options: the action passes everything as environment variables)."""
    sub.add_parser(
        "run",
        help="the GitHub Action: review the pull request of GITHUB_EVENT_PATH (env INPUT_*)",
        description="Review the pull request of the triggering event and post one sticky "
        "comment. Reads INPUT_* (hyphens kept), GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, "
        "GITHUB_API_URL, GITHUB_SERVER_URL, GITHUB_WORKSPACE, GITHUB_OUTPUT, "
        "GITHUB_STEP_SUMMARY and provider keys from the environment. Exit 0 done or skipped, "
        "1 no verdict (on-unavailable: fail), fail-on triggered or a runtime failure, "
        "2 bad configuration.",
    )


# --------------------------------------------------------------------------------------------
# secrets and log hygiene


class Secrets:
    """Secret values seen this run: masked in the log once, scrubbed from every text we emit.

    Values shorter than :data:`~relay_review.redact.MIN_SECRET_CHARS` (placeholders such as
    ``EMPTY`` for a local server) are masked but not scrubbed: replacing them everywhere would
    shred the comment marker and the report's keys.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, values: Iterable[str]) -> None:
        """Mask each new non-blank value (each line of a multi-line one) with ``::add-mask::``."""
        for value in values:
            value = value.strip()
            if value and value not in self._values:
                self._values.add(value)
                actions.add_mask(value)

    def _scrubbed(self) -> list[str]:
        lines = {line.strip() for v in self._values for line in v.splitlines()}
        return usable_secrets(self._values | lines)

    def redact(self, text: str) -> str:
        """``text`` with every known secret (whole, or cut at a truncation) replaced by ``***``."""
        return redact(text, self._scrubbed(), REDACTED)

    def redact_data(self, data: Any) -> Any:
        """A copy of JSON-like ``data`` with every string (keys too) redacted."""
        return redact_data(data, self._scrubbed(), REDACTED)


def _inline_key_envs(text: str | None) -> list[str]:
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


class _OneLine(logging.Filter):
    """Flatten CR/LF in log messages so no record can start a line with ``::`` (a command), and
    break the legacy ``##[name]`` form, which the runner honours anywhere in a line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = actions.break_legacy_commands(message.replace("\r", "\\r").replace("\n", "\\n"))
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def _log_to_stdout() -> None:
    """One ordered stream: log records go to stdout, beside the workflow commands."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setStream(sys.stdout)
            handler.addFilter(_OneLine())


def say(text: str) -> None:
    """A progress line outside any stop-commands block. It may quote provider text (model ids,
    error messages), so it is made inert: one line the runner cannot take for a command."""
    sys.stdout.write(actions.inert_line(text) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------
# the entry point


class Stop(Exception):
    """End the run early with an exit code (after the message was logged)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run(args: argparse.Namespace) -> int:
    """``relay-review run``: see the module docstring for stages and exit codes."""
    return run_action(os.environ)


def run_action(env: Mapping[str, str]) -> int:
    """Run the action over ``env`` (``os.environ`` in production); returns the exit code."""
    env = dict(env)
    _log_to_stdout()
    secrets = Secrets()
    secrets.add(secret_values(env))
    secrets.add(env.get(name, "") for name in _inline_key_envs(env.get("INPUT_POLICY")))
    try:
        return _run(env, secrets)
    except Stop as stop:
        return stop.code
    except (UsageError, EventError) as exc:
        actions.error(secrets.redact(str(exc)), title="relay-review: configuration")
        _set_skip_outputs(env, "error")
        return EXIT_CONFIG
    except PolicyRefError as exc:
        code = EXIT_CONFIG if exc.status in CONFIG_STATUSES else EXIT_FAILED
        actions.error(
            secrets.redact(f"policy not loaded, refusing to run: {exc}"),
            title="relay-review: policy",
        )
        _set_skip_outputs(env, "error")
        return code
    except GitHubEdgeError as exc:  # GitHubConnectionError too: GitHub did not answer
        actions.error(secrets.redact(f"GitHub API: {exc}"), title="relay-review: GitHub")
        _set_skip_outputs(env, "error")
        return EXIT_FAILED
    except Exception as exc:  # a bug: say what, and keep the traceback in the (masked) log
        actions.log_untrusted(secrets.redact(traceback.format_exc()))
        actions.error(
            secrets.redact(f"internal error: {type(exc).__name__}: {exc}"),
            title="relay-review: internal error",
        )
        _set_skip_outputs(env, "error")
        return EXIT_FAILED


def _run(env: dict[str, str], secrets: Secrets) -> int:
    started = time.monotonic()
    with actions.group("relay-review: inputs"):
        inputs = read_action_inputs(env)
        say(f"relay-review {__version__}; inputs read and validated")
    event = _event_stage(env, inputs)
    token = inputs.github_token.get_secret_value()
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    gh = make_github(token, api_url)  # the policy may come from GitHub: default bounds first
    with actions.group("relay-review: policy"):
        policy, origin = resolve_policy(gh, inputs, event)
        accounts = resolve_accounts(policy, env)
        secrets.add(env.get(acc.api_key_env, "") for acc in accounts)
        say(f"policy: {origin.provenance}")
        # every later GitHub call is bounded by the policy's own per-request timeout
        gh = make_github(token, api_url, timeout=policy.github.timeout)
    with actions.group("relay-review: discovery"):
        remaining = policy.serving.deadline - (time.monotonic() - started)
        discovery = _discover(policy, accounts, env, remaining)
    with actions.group("relay-review: catalog"):
        require_zdr = resolve_require_zdr(policy.catalog.require_zdr, event.private)
        catalog = _catalog(policy, discovery, require_zdr, _work_dir(env))
    repo = gh.get_repo(event.repo_full_name)
    with actions.group("relay-review: pull request files"):
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
    with actions.group("relay-review: review"):
        with actions.stop_commands():  # attempt lines carry provider error texts
            report = pipeline.run_sync(
                pipeline.review(
                    index,
                    catalog,
                    policy,
                    env,
                    title=event.title,
                    body=event.body,
                    started_at=started,
                    unlisted_files=unlisted,
                )
            )
        _log_review(report)

    report = dict(report)
    if not catalog.selected and report.get("decision") == "unavailable":
        report["why"] = _empty_catalog_why(discovery, catalog, accounts, env, require_zdr)
    report.update(
        provenance=origin.provenance,
        context={
            "server_url": (env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            "repo": event.repo_full_name,
            "head_sha": event.head_sha,
            "base_sha": event.base_sha,
        },
        policy=origin.to_json(),
        pull_request={
            "event": event.event_name,
            "action": event.action,
            "repo": event.repo_full_name,
            "number": event.number,
            "head_sha": event.head_sha,
            "base_sha": event.base_sha,
            "private": event.private,
        },
        require_zdr=require_zdr,
        discovery={"accounts": [vars(a) for a in discovery.accounts], "errors": discovery.errors},
        relay_review_version=__version__,
    )
    with actions.group("relay-review: publish"):
        budget = WaitBudget(
            max_wait=policy.github.max_wait,
            deadline=started + policy.serving.deadline,
            reserve=policy.github.timeout,  # the request after the wait must fit too
        )
        published = _publish(gh, repo, event, inputs, report, secrets, budget)
    report["github"] = published.to_json()
    report["run_elapsed_s"] = round(time.monotonic() - started, 3)
    code = _exit_code(report, inputs, published)
    report["exit_code"] = code
    _finish(env, report, published, secrets)
    return code


# --------------------------------------------------------------------------------------------
# stages


def _event_stage(env: Mapping[str, str], inputs: ActionInputs) -> PullRequestEvent:
    with actions.group("relay-review: event"):
        event = load_event(env)
        if isinstance(event, NotPullRequestEvent):
            raise _skip(env, f"nothing to review: {event.reason}")
        say(f"{event.event_name} ({event.action}) on {event.repo_full_name}#{event.number}")
        say(f"base {event.base_sha} ({event.base_ref}), head {event.head_sha}")
        actions.log_untrusted(
            f"title: {event.title}\nauthor: {event.user_login} ({event.author_association})"
        )
        if event.state != "open":
            raise _skip(env, f"#{event.number} is {event.state}; nothing to review")
        if event.draft and not inputs.review_drafts:
            raise _skip(
                env,
                f"#{event.number} is a draft; skipped (set review-drafts: true to review drafts)",
            )
        if event.author_association.upper() not in inputs.author_associations:
            raise _skip(
                env,
                f"the author's association {event.author_association} is not in "
                f"author-associations ({', '.join(sorted(inputs.author_associations))}); "
                "skipped (widen the input to review such pull requests)",
            )
        return event


def _skip(env: Mapping[str, str], reason: str) -> Stop:
    """A notice, a one-line step summary and ``decision=skipped``; the run then exits 0."""
    actions.notice(f"relay-review: {reason}")
    try:
        actions.append_summary(f"relay-review: {md_text(reason)}\n", env)
    except OSError as exc:
        log.warning("cannot write the step summary: %s", exc)
    _set_skip_outputs(env, "skipped")
    return Stop(EXIT_OK)


def _set_skip_outputs(env: Mapping[str, str], decision: str) -> None:
    """Outputs for a run that produced no verdict: ``decision`` is ``skipped`` or ``error``."""
    try:
        for name, value in (
            ("decision", decision),
            ("served-by", ""),
            ("comment-url", ""),
            ("report-path", ""),
            ("findings", "0"),
        ):
            actions.set_output(name, value, env)
    except OSError as exc:  # never mask the real problem with this one
        log.warning("cannot write GITHUB_OUTPUT: %s", exc)


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


def _work_dir(env: Mapping[str, str]) -> Path:
    """A private directory for intermediate files (under ``RUNNER_TEMP`` when there is one)."""
    parent = env.get("RUNNER_TEMP") or None
    if parent and not Path(parent).is_dir():
        parent = None
    return Path(tempfile.mkdtemp(prefix="relay-review-", dir=parent))


def _discover(
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


def _catalog(
    policy: Policy, discovery: DiscoveryResult, require_zdr: bool, work_dir: Path
) -> Catalog:
    """Write the discovery report and ZDR feed to ``work_dir``, and build the catalog from them."""
    out = work_dir / "discovery.json"
    written = write_report(discovery, out)
    c = policy.catalog
    try:
        routes = parse_discovery(json.loads(out.read_text(encoding="utf-8")))
        zdr_ids: list[str] | None = None
        if written["zdr_feed"]:
            try:
                feed = json.loads((out.parent / written["zdr_feed"]).read_bytes())
                zdr_ids = parse_zdr_feed(feed)
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
    say(f"discovery report: {out}")
    actions.log_untrusted(catalog_table(catalog))  # model ids come from provider listings
    return catalog


def _empty_catalog_why(
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


def _log_review(report: Mapping[str, Any]) -> None:
    served = report.get("served_by")
    say(
        f"decision: {report.get('decision')}; "
        f"{len(report.get('findings') or [])} verified, "
        f"{len(report.get('unverified') or [])} unverified findings; "
        f"{len(report.get('attempts') or [])} attempts; {report.get('elapsed_s')} s"
    )
    untrusted = [f"served by: {served['agent_id'] if served else 'no route'}"]
    if report.get("why"):
        untrusted.append(f"why: {report['why']}")
    if report.get("summary"):
        untrusted.append(f"summary: {report['summary']}")
    for f in report.get("findings") or []:
        untrusted.append(f"{f['severity']} {f['path']}:{f['line']} ({f['side']}): {f['message']}")
    actions.log_untrusted("\n".join(untrusted))


# --------------------------------------------------------------------------------------------
# publishing


@dataclass
class Published:
    """What happened on GitHub."""

    comment_url: str | None = None
    comment_action: str | None = None
    #: Why nothing was posted: ``head_moved`` (or a newer head's run owns the comment),
    #: ``read_only``, ``rate_limited`` or ``failed``.
    not_posted: str | None = None
    detail: str = ""
    current_head: str | None = None
    review: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "comment_url": self.comment_url,
            "comment_action": self.comment_action,
            "not_posted": self.not_posted,
            "detail": self.detail,
            "current_head_sha": self.current_head,
            "review": self.review,
        }


def _publish(
    gh: Any,
    repo: Any,
    event: PullRequestEvent,
    inputs: ActionInputs,
    report: dict[str, Any],
    secrets: Secrets,
    budget: WaitBudget | None = None,
) -> Published:
    """Post the sticky comment (and line comments) unless the head moved; never raises for
    GitHub's answers (the verdict then goes to the step summary). ``budget`` bounds how long a
    GitHub rate limit may make us wait before the one retry."""
    published = Published()
    try:
        current = head_sha(repo, event.number)
    except GitHubEdgeError as exc:  # GitHubConnectionError too: GitHub did not answer
        actions.warning(
            secrets.redact(f"relay-review: could not re-read the head ({exc}); posting anyway")
        )
        current = None
    published.current_head = current
    if current is not None and current.lower() != event.head_sha.lower():
        published.not_posted = "head_moved"
        published.detail = (
            f"the head moved from {event.head_sha} to {current} during the run; posting nothing "
            "for the stale head (a newer run owns the comment)"
        )
        actions.notice(f"relay-review: {published.detail}")
        return published

    # room for the head line that upsert_sticky puts under the marker
    limit = MAX_BODY_CHARS - HEAD_LINE_CHARS
    # Scrubbed before rendering (escaping and cutting could hide a key from a later scrub) and
    # after (the rendered text as a whole).
    clean = secrets.redact_data(report)
    body = secrets.redact(comment_markdown(clean, marker=MARKER, limit=limit))
    try:
        author = resolve_author(gh, inputs.comment_author)
        sticky = upsert_sticky(
            repo, event.number, body, author=author, head_sha=event.head_sha, budget=budget
        )
    except GitHubRateLimited as exc:
        published.not_posted = "rate_limited"
        published.detail = secrets.redact(str(exc))
        actions.error(
            f"relay-review: the comment was not posted: {published.detail}. The verdict is in "
            "the step summary; re-run the job once GitHub's rate limit has passed."
        )
        return published
    except GitHubEdgeError as exc:
        published.detail = secrets.redact(str(exc))
        if exc.status in PERMISSION_STATUSES:
            published.not_posted = "read_only"
            actions.warning(
                f"relay-review: the token cannot comment ({published.detail}); the verdict is "
                "in the step summary. On fork pull requests use pull_request_target with "
                "`permissions: pull-requests: write`."
            )
        else:
            published.not_posted = "failed"
            actions.error(f"relay-review: the comment was not posted: {published.detail}")
        return published
    if sticky.current_head:
        published.current_head = sticky.current_head
    if sticky.action == "stale":
        published.not_posted = "head_moved"
        published.detail = (
            f"a run for the newer head {sticky.current_head} owns the sticky comment; posting "
            f"nothing for the stale head {event.head_sha}"
        )
        if sticky.deleted:
            published.detail += f" (removed the {sticky.deleted} duplicate comment(s) it created)"
        actions.notice(f"relay-review: {published.detail}")
        return published
    published.comment_url = sticky.html_url
    published.comment_action = sticky.action
    say(f"sticky comment {sticky.action} (author {sticky.author}): {sticky.html_url}")
    if sticky.duplicates:
        say(f"{sticky.duplicates} older duplicate sticky comments left alone")
    if sticky.deleted:
        say(f"{sticky.deleted} duplicate sticky comments from a concurrent run deleted")

    findings = clean.get("findings") or []
    if inputs.inline_comments and findings:
        published.review = _post_line_comments(repo, event, findings, secrets)
    return published


def _post_line_comments(
    repo: Any, event: PullRequestEvent, findings: list[Mapping[str, Any]], secrets: Secrets
) -> dict[str, Any]:
    """Verified findings as one ``COMMENT`` review; refused ones are listed, none are lost (they
    are all in the sticky comment)."""
    comments = [
        LineComment(
            path=f["path"],
            line=int(f["line"]),
            side=f.get("side") or "RIGHT",
            body=secrets.redact(
                f"**relay-review · {md_text(f['severity'], 10)}**: {md_text(f['message'], 3000)}"
            ),
        )
        for f in findings
    ]
    summary = f"relay-review: {len(comments)} verified finding(s); the sticky comment has the rest."
    result = post_review(repo, event.number, event.head_sha, summary, comments)
    say(
        f"line comments: {len(result.posted)} posted ({result.mode}), "
        f"{len(result.refused)} refused{'; outcome uncertain' if result.uncertain else ''}"
    )
    for refused in result.refused:
        actions.warning(
            secrets.redact(
                f"relay-review: line comment on {refused.comment.path}:{refused.comment.line} "
                f"refused ({refused.reason}); it stays in the sticky comment"
            )
        )
    return {
        "mode": result.mode,
        "posted": len(result.posted),
        "refused": [
            {"path": r.comment.path, "line": r.comment.line, "reason": secrets.redact(r.reason)}
            for r in result.refused
        ],
        "uncertain": result.uncertain,
        "detail": secrets.redact(result.detail),
    }


# --------------------------------------------------------------------------------------------
# exit code, summary, outputs, report file


def _exit_code(report: Mapping[str, Any], inputs: ActionInputs, published: Published) -> int:
    decision = report.get("decision")
    if published.not_posted == "head_moved":
        return EXIT_OK
    if published.not_posted in ("failed", "rate_limited"):
        return EXIT_FAILED
    if decision == "unavailable":
        return EXIT_FAILED if inputs.on_unavailable == "fail" else EXIT_OK
    if inputs.fail_on == "request_changes" and decision == "request_changes":
        return EXIT_FAILED
    if inputs.fail_on == "high" and any(
        f.get("severity") == "high" for f in report.get("findings") or []
    ):
        return EXIT_FAILED
    return EXIT_OK


def _summary_markdown(report: Mapping[str, Any], published: Published) -> str:
    note = ""
    if published.not_posted == "head_moved":
        note = f"> **Not posted:** {md_text(published.detail)}\n\n"
    elif published.not_posted == "read_only":
        note = (
            "> **Not posted:** the token cannot comment on the pull request "
            f"({md_text(published.detail)}); this step summary holds the verdict.\n\n"
        )
    elif published.not_posted == "rate_limited":
        note = (
            f"> **Not posted:** GitHub's rate limit ({md_text(published.detail)}); this step "
            "summary holds the verdict.\n\n"
        )
    elif published.not_posted == "failed":
        note = f"> **Not posted:** {md_text(published.detail)}\n\n"
    elif published.comment_url:
        note = f"Posted as {md_code(published.comment_url)}.\n\n"
    limit = actions.SUMMARY_LIMIT_BYTES - 4096
    return note + comment_markdown(report, limit=limit)


def _finish(
    env: Mapping[str, str], report: dict[str, Any], published: Published, secrets: Secrets
) -> None:
    """Write the JSON report, the step summary and the outputs (all scrubbed of secrets)."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    report_path = workspace / REPORT_NAME
    clean = secrets.redact_data(report)
    try:
        atomic_write(report_path, (json.dumps(clean, indent=2, allow_nan=False) + "\n").encode())
        say(f"report: {report_path}")
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the report {report_path}: {exc}")
        report_path = None  # type: ignore[assignment]
    try:
        actions.append_summary(secrets.redact(_summary_markdown(clean, published)), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write the step summary: {exc}")
    served = clean.get("served_by") or {}
    outputs = {
        "decision": str(clean.get("decision") or ""),
        "served-by": str(served.get("agent_id") or ""),
        "comment-url": published.comment_url or "",
        # relative to the workspace: the container's /github/workspace is another path outside
        "report-path": os.path.relpath(report_path, workspace) if report_path else "",
        "findings": str(len(clean.get("findings") or [])),
    }
    try:
        for name, value in outputs.items():
            actions.set_output(name, secrets.redact(value), env)
    except OSError as exc:
        actions.warning(f"relay-review: cannot write GITHUB_OUTPUT: {exc}")
