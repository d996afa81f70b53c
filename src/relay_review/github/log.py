"""The action's log: secrets masked and scrubbed, progress lines the runner cannot take for a
workflow command, log records on stdout one line each."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

from relay_review.github import actions
from relay_review.redact import redact, redact_data, usable_secrets

REDACTED = "***"


class Secrets:
    """Secret values seen this run: masked in the log once, scrubbed from every text we emit.

    Values shorter than :data:`~relay_review.redact.MIN_SECRET_CHARS` (placeholders such as
    ``EMPTY`` for a local server) are masked but not scrubbed: replacing them everywhere would
    shred the comment marker and the report's keys.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, values: Iterable[str]) -> None:
        """Mask each new non-blank value (each line of a multi-line one) with ``::add-mask::``."""
        for value in values:
            value = value.strip()
            if value and value not in self._values:
                self._values.add(value)
                actions.add_mask(value)

    def _scrubbed(self) -> list[str]:
        lines = {line.strip() for v in self._values for line in v.splitlines()}
        return usable_secrets(self._values | lines)

    def redact(self, text: str) -> str:
        """``text`` with every known secret (whole, or cut at a truncation) replaced by ``***``."""
        return redact(text, self._scrubbed(), REDACTED)

    def redact_data(self, data: Any) -> Any:
        """A copy of JSON-like ``data`` with every string (keys too) redacted."""
        return redact_data(data, self._scrubbed(), REDACTED)


class _OneLine(logging.Filter):
    """Flatten CR/LF in log messages so no record can start a line with ``::`` (a command), and
    break the legacy ``##[name]`` form, which the runner honours anywhere in a line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = actions.break_legacy_commands(message.replace("\r", "\\r").replace("\n", "\\n"))
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def log_to_stdout() -> None:
    """One ordered stream: log records go to stdout, beside the workflow commands."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setStream(sys.stdout)
            handler.addFilter(_OneLine())


def say(text: str) -> None:
    """A progress line outside any stop-commands block. It may quote provider text (model ids,
    error messages), so it is made inert: one line the runner cannot take for a command."""
    sys.stdout.write(actions.inert_line(text) + "\n")
    sys.stdout.flush()
