"""What a run's memory is scrubbed of before the store keeps it."""

from __future__ import annotations

from relay_review.pipeline.memory import RunMemory
from relay_review.state import NullStore
from relay_review.state.seal import KEY_ENV


def test_the_state_key_is_among_what_the_store_record_is_scrubbed_of() -> None:
    """A model may quote a key the diff holds; the command line's state key (which signs the
    review cache in a shared Redis) is scrubbed from the record like the providers' keys (a
    helper's audit: only the catalog's keys were)."""
    key = "state-key-canary-0123456789abcdef"
    run = RunMemory.load(NullStore(), environ={KEY_ENV: key, "OTHER": "x" * 20})
    assert run.secrets == [key]
