"""Shared pytest plugins. ``github_mock`` provides the ``github_mock`` fixture (Prism + proxy)."""

pytest_plugins = ["github_mock"]
