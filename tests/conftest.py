"""Shared test setup: the GitHub API mock fixtures, its npm tools installed on demand, and the
``integration`` mark on every test that starts a subprocess or a socket server.

``python -m pytest -m "not integration"`` runs the fast core alone (pure functions, no I/O).
A test is integration when it sits under ``tests/reliability/`` (end-to-end runs), when its
module says so (``pytestmark = pytest.mark.integration``), when it is marked itself, or when it
uses one of :data:`INTEGRATION_FIXTURES` (directly or through another fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["github_mock"]

#: Fixtures that start a server or a subprocess: the GitHub mock (Prism), fault fleets, a git repo.
INTEGRATION_FIXTURES = frozenset(
    {"github_mock", "github_mock_server", "fleet", "mixed_fleet", "repo"}
)
RELIABILITY = Path(__file__).parent / "reliability"


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller installed the tools before starting workers
    import github_mock  # registered above as a plugin (so its asserts are rewritten)

    github_mock.ensure_node_tools()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if RELIABILITY in item.path.parents or fixtures & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
