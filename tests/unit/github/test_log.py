"""The action's log (:mod:`relay_review.github.log`): the store's warnings are annotations (a
Redis that is down showed only as a plain log line, invisible in the checks UI), escaped like
every workflow command, and every other record stays a plain line."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from relay_review.github.log import log_to_stdout


@pytest.fixture
def stdout(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    root = logging.getLogger()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    before, level = root.handlers[:], root.level
    root.handlers, root.level = [handler], logging.INFO
    log_to_stdout()
    try:
        yield out
    finally:
        root.handlers, root.level = before, level


def test_a_store_warning_is_one_annotation_with_the_servers_text_escaped(
    stdout: io.StringIO,
) -> None:
    # a server's error text, quoted in the warning: it must not start a command of its own
    hostile = "ERR boom\n::error::forged%0A"
    logging.getLogger("relay_review.state").warning(
        "state redis://h:6379/0 unavailable (%s)", hostile
    )
    (line,) = stdout.getvalue().splitlines()
    assert line.startswith("::warning title=relay-review%3A memory store::state redis://h:6379/0")
    # one line: the newline flattened (as in every record), the % escaped
    assert line.endswith(" unavailable (ERR boom\\n::error::forged%250A)")


def test_other_records_stay_plain_lines(stdout: io.StringIO) -> None:
    logging.getLogger("relay_review.state").info("state loaded")
    logging.getLogger("relay_review.failover").warning("attempt failed")
    assert stdout.getvalue().splitlines() == [
        "INFO relay_review.state: state loaded",
        "WARNING relay_review.failover: attempt failed",
    ]
