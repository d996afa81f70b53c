"""``relay-review run``: the GitHub Action's entrypoint (everything comes from the environment).

A thin face: it masks the secrets it can see, runs :func:`relay_review.pipeline.action.run`
(the stages, in order) and maps what escapes it to an exit code and an error annotation.

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
import os
import traceback
from collections.abc import Mapping

from relay_review.action_inputs import secret_values
from relay_review.errors import UsageError
from relay_review.github import actions
from relay_review.github.errors import EventError, GitHubEdgeError, PolicyRefError
from relay_review.github.log import Secrets, log_to_stdout
from relay_review.models import Decision
from relay_review.pipeline import action
from relay_review.pipeline.action import EXIT_CONFIG, EXIT_FAILED, Stop
from relay_review.pipeline.policy import inline_key_envs
from relay_review.pipeline.publish import set_skip_outputs

#: Statuses of a policy-ref failure that mean "the configuration is wrong" (exit 2), not "GitHub
#: failed" (exit 1). ``None`` = refused by relay-review (ancestry, not a file, not UTF-8).
CONFIG_STATUSES = frozenset({None, 404, 422})


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


def run(args: argparse.Namespace) -> int:
    """``relay-review run``: see the module docstring for stages and exit codes."""
    return run_action(os.environ)


def run_action(env: Mapping[str, str]) -> int:
    """Run the action over ``env`` (``os.environ`` in production); returns the exit code."""
    env = dict(env)
    log_to_stdout()
    secrets = Secrets()
    secrets.add(secret_values(env))
    secrets.add(env.get(name, "") for name in inline_key_envs(env.get("INPUT_POLICY")))
    try:
        return action.run(env, secrets)
    except Stop as stop:
        return stop.code
    except (UsageError, EventError) as exc:
        return _fail(env, secrets, str(exc), "configuration", EXIT_CONFIG)
    except PolicyRefError as exc:
        code = EXIT_CONFIG if exc.status in CONFIG_STATUSES else EXIT_FAILED
        return _fail(env, secrets, f"policy not loaded, refusing to run: {exc}", "policy", code)
    except GitHubEdgeError as exc:  # GitHubConnectionError too: GitHub did not answer
        return _fail(env, secrets, f"GitHub API: {exc}", "GitHub", EXIT_FAILED)
    except Exception as exc:  # a bug: say what, and keep the traceback in the (masked) log
        actions.log_untrusted(secrets.redact(traceback.format_exc()))
        message = f"internal error: {type(exc).__name__}: {exc}"
        return _fail(env, secrets, message, "internal error", EXIT_FAILED)


def _fail(env: Mapping[str, str], secrets: Secrets, message: str, title: str, code: int) -> int:
    """An error annotation (scrubbed), ``decision=error`` outputs, and ``code``."""
    actions.error(secrets.redact(message), title=f"relay-review: {title}")
    set_skip_outputs(env, Decision.ERROR)
    return code
