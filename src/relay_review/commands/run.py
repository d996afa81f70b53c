"""``relay-review run``: the GitHub Action's entrypoint (everything comes from the environment).

A thin face: :func:`relay_review.pipeline.action.main` runs the stages in order, masks and
scrubs the secrets it can see, and decides the exit code (0 done or skipped, 1 no verdict with
``on-unavailable: fail``, ``fail-on`` triggered or a runtime failure, 2 bad configuration; the
full table is in :mod:`relay_review.pipeline.action`).

GitHub calls: the client is rebuilt with the policy's ``github.timeout`` (each connect and read)
once the policy is known; rate-limit waits are bounded by ``github.max_wait`` (all together) and
the run's deadline.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from relay_review.pipeline import action


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
    return action.main(env)
