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


#: Loggers whose warnings are annotations in the action: the store's (a Redis that is down or
#: refuses us costs memory and the shared ledger, which a plain log line hid from the checks UI).
ANNOTATED_LOGGERS = ("relay_review.state",)
#: Their annotations' title in the checks UI.
ANNOTATION_TITLE = "relay-review: memory store"


class _Annotated(logging.Filter):
    """A warning (or worse) of :data:`ANNOTATED_LOGGERS` becomes a ``::warning::`` annotation on
    the handler's stream instead of a plain line (escaped by
    :func:`~relay_review.github.actions.command`: the text may quote a server's error)."""

    def __init__(self, handler: logging.StreamHandler[Any]) -> None:
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not any(
            record.name == name or record.name.startswith(name + ".") for name in ANNOTATED_LOGGERS
        ):
            return True
        actions.warning(record.getMessage(), title=ANNOTATION_TITLE, stream=self.handler.stream)
        return False


def log_to_stdout() -> None:
    """One ordered stream: log records go to stdout, beside the workflow commands; the store's
    warnings are annotations (:class:`_Annotated`)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setStream(sys.stdout)
            handler.addFilter(_OneLine())
            handler.addFilter(_Annotated(handler))


def say(text: str) -> None:
    """A progress line outside any stop-commands block. It may quote provider text (model ids,
    error messages), so it is made inert: one line the runner cannot take for a command."""
    sys.stdout.write(actions.inert_line(text) + "\n")
    sys.stdout.flush()
