"""Work run once per test session however many xdist workers need it: the first worker to ask
runs it while the others wait on a file lock in the session's shared temporary folder, then
every worker reads the JSON result back."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], Any]
) -> Any:
    """``compute(folder)`` (a JSON-able result) run once per session under ``name``."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this session's
    results = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not results.exists():
            results.write_text(json.dumps(compute(tmp_path_factory.mktemp(name))))
    return json.loads(results.read_text())
