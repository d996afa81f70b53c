"""Shared test setup: the GitHub API mock fixtures, its npm tools installed on demand, and the
``integration`` mark on every test that starts a subprocess or a socket server.

``python -m pytest -m "not integration"`` runs the fast core alone (pure functions, no I/O).
A test is integration when it sits under ``tests/e2e/reliability/`` (end-to-end runs), when its
module says so (``pytestmark = pytest.mark.integration``), when it is marked itself, or when it
uses one of :data:`INTEGRATION_FIXTURES` (directly or through another fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["github_mock", "redis_server", "redis_cluster"]

#: Fixtures that start a server or a subprocess: the GitHub mock (Prism), fault fleets, a git
#: repo, a redis-server.
INTEGRATION_FIXTURES = frozenset(
    {
        "github_mock",
        "github_mock_server",
        "fleet",
        "mixed_fleet",
        "repo",
        "redis_server",
        "redis_cluster",
        "valkey_server",
    }
)
RELIABILITY = Path(__file__).parent / "e2e" / "reliability"


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller installed the tools before starting workers
    import github_mock  # registered above as a plugin (so its asserts are rewritten)

    github_mock.ensure_node_tools()


#: Words every skip of the GitHub mock's tools carries (tests/support/github_mock.py says
#: "run `npm ci`").
MOCK_SKIP_MARK = "npm ci"


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say up front when the GitHub mock's tools are missing (and cannot be installed)."""
    import github_mock

    missing = github_mock.prism_available()
    if missing is None:
        return None
    import shutil

    npm = "npm not found on PATH" if shutil.which("npm") is None else "npm ci did not install it"
    return f"GitHub API mock: NOT AVAILABLE ({missing}; {npm}); its suites will be skipped"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A loud closing line when tests were skipped for want of the GitHub mock (Node/npm):
    a green run without them has not run the fault-matrix and GitHub-fault suites."""
    skipped = [
        r
        for r in terminalreporter.stats.get("skipped", [])
        if MOCK_SKIP_MARK in str(getattr(r, "longrepr", ""))
    ]
    if not skipped:
        return
    terminalreporter.write_sep(
        "!",
        f"{len(skipped)} test{'s' if len(skipped) != 1 else ''} SKIPPED: the GitHub API mock "
        "(Prism, from tools/test) is not installed",
        red=True,
        bold=True,
    )
    terminalreporter.write_line(
        "Install Node.js with npm (the test run then runs `npm ci` in tools/test itself) and run "
        "the tests again; with CI=true (as .ci/run sets) these skips are failures."
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if RELIABILITY in item.path.parents or fixtures & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
