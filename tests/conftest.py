"""Shared test setup: the GitHub API mock fixtures, and its npm tools installed on demand."""

pytest_plugins = ["github_mock"]


def pytest_sessionstart(session):
    import github_mock  # registered above as a plugin (so its asserts are rewritten)

    github_mock.ensure_node_tools()
