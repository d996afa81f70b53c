"""Which store the command line opens, and where it keeps memory (``pipeline/store.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_review.errors import UsageError
from relay_review.pipeline.store import cli_state_url, store_location


def test_one_file_has_one_location_however_it_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drill's fleet port comes from it: one state file, one port."""
    monkeypatch.chdir(tmp_path)
    where = str(tmp_path.resolve() / "state.json")
    spellings = ["state.json", "./state.json", "file:state.json", f"file:{tmp_path}/state.json"]
    assert {store_location(s) for s in spellings} == {where}
    assert store_location("redis://:pw@host:6379/0") == "redis://:pw@host:6379/0"
    assert store_location("none") is None and store_location(None) is None


def test_the_flag_comes_before_the_environment_which_is_checked() -> None:
    env = {"RELAY_REVIEW_STATE": "env.json"}
    assert cli_state_url("flag.json", env) == "flag.json"
    assert cli_state_url(None, env) == "env.json"
    assert cli_state_url(None, {}) is None
    with pytest.raises(UsageError, match=r"RELAY_REVIEW_STATE \(value hidden\)"):
        cli_state_url(None, {"RELAY_REVIEW_STATE": "valkey://x"})
