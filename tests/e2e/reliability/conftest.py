"""Reliability and security tests (issue 6): each proves one row of ``docs/reliability.md``.

They run ``relay-review run`` end to end through :mod:`action_harness` (Prism for GitHub, the
fault fleet for models).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from action_harness import standard_fleet
from relay_review.drill import FaultFleet


@pytest.fixture(scope="module")
def fleet() -> Iterator[FaultFleet]:
    """The standard fleet (two honest reviewers, a 503 route, a key-echoing 500 route)."""
    with standard_fleet() as running:
        yield running
