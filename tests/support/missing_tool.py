"""A tool a test needs is not installed: the test is skipped, naming it, or fails under
``CI=true`` (``.ci/run`` sets it), so a green CI run has run every suite."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing_tool(message: str) -> NoReturn:
    """Skip the test with ``message`` (what is missing and how to get it); fail under CI."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)
