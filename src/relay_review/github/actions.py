"""Talk to the GitHub Actions runner: workflow commands, files, inputs.

Workflow commands are lines on stdout (``::name key=value::message``); their data and
properties are escaped so a message cannot end the command early or start another. Text that
came from the pull request or a model goes through :func:`stop_commands`, which makes the
runner ignore commands until a random token ends the block; :func:`log_untrusted` also caps it.

The runner (``actions/runner``, ``ActionCommandManager``) splits output at CR, LF and CRLF and
treats a line as a command when it starts with ``::name`` after leading whitespace, or when it
holds the legacy ``##[name]`` form *anywhere*: text we did not write must never share a line
with the start of the output outside a stop-commands block.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TextIO

#: GitHub's cap for one step's summary file.
SUMMARY_LIMIT_BYTES = 1024 * 1024
SUMMARY_TRUNCATED_NOTE = "\n\n_(step summary truncated: GitHub keeps at most 1 MiB per step)_\n"
#: Longest line :func:`log_untrusted` writes; the rest of a longer line is left out, counted.
UNTRUSTED_LINE_MAX_CHARS = 2000
#: Most characters one :func:`log_untrusted` block writes; further lines are left out, counted.
UNTRUSTED_BLOCK_MAX_CHARS = 100_000
_RUNNER_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _encodable(text: str) -> str:
    """``text`` as it can be written as UTF-8 (a lone surrogate becomes ``?``)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def escape_data(value: str) -> str:
    """Escape a command's message: ``%``, CR, LF."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a command property value: ``%``, CR, LF, ``:`` and ``,``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


_LEADING_COMMAND = re.compile(r"^(\s*)::")


def break_legacy_commands(text: str) -> str:
    """``text`` with every legacy ``##[`` command start broken by a U+200B (the runner honours
    that form anywhere in a line)."""
    return text.replace("##[", "#\u200b#[")


def inert_line(text: str) -> str:
    """``text`` as one log line the runner cannot take for a command, for lines written
    outside a :func:`stop_commands` block: CR/LF become spaces, a ``::`` that starts the line
    (after whitespace, which the runner trims) and every legacy ``##[`` get a U+200B inside
    (not whitespace to the runner), and lone surrogates become ``?``."""
    line = break_legacy_commands(text.replace("\r", " ").replace("\n", " "))
    return _encodable(_LEADING_COMMAND.sub("\\1\u200b::", line))


def _emit(line: str, stream: TextIO | None = None) -> None:
    out = stream if stream is not None else sys.stdout
    out.write(_encodable(line) + "\n")
    out.flush()


def command(
    name: str, message: str = "", stream: TextIO | None = None, **properties: object
) -> None:
    """Write ``::name k=v,...::message``; ``None`` properties are left out."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None
    )
    _emit(f"::{name}{' ' + props if props else ''}::{escape_data(message)}", stream)


def add_mask(value: str, stream: TextIO | None = None) -> None:
    """Mask ``value`` in the rest of the log; each line of a multi-line secret on its own."""
    for line in value.splitlines() or [value]:
        if line.strip():
            command("add-mask", line, stream)


@contextmanager
def group(name: str, stream: TextIO | None = None) -> Iterator[None]:
    """Fold the log lines written inside the block under ``name``."""
    command("group", name, stream)
    try:
        yield
    finally:
        command("endgroup", "", stream)


class Annotation(Protocol):
    """``error`` / ``warning`` / ``notice``: an annotation, optionally on ``file``:``line``."""

    def __call__(
        self,
        message: str,
        *,
        title: str | None = None,
        file: str | None = None,
        line: int | None = None,
        end_line: int | None = None,
        col: int | None = None,
        stream: TextIO | None = None,
    ) -> None: ...


def _annotation(kind: str) -> Annotation:
    def annotate(
        message: str,
        *,
        title: str | None = None,
        file: str | None = None,
        line: int | None = None,
        end_line: int | None = None,
        col: int | None = None,
        stream: TextIO | None = None,
    ) -> None:
        command(kind, message, stream, title=title, file=file, line=line, endLine=end_line, col=col)

    annotate.__name__ = annotate.__qualname__ = kind
    annotate.__doc__ = (
        f"A{'n' if kind[0] in 'aeiou' else ''} {kind} annotation (optionally on ``file``:``line``)."
    )
    return annotate


error = _annotation("error")
warning = _annotation("warning")
notice = _annotation("notice")


@contextmanager
def stop_commands(stream: TextIO | None = None) -> Iterator[str]:
    """Suspend workflow commands for the block; yields the random resume token.

    Anything written inside (PR text, model output) cannot forge ``::add-mask::``,
    ``::error::`` and the like: the runner ignores commands until ``::<token>::``.
    """
    token = secrets.token_hex(16)
    _emit(f"::stop-commands::{token}", stream)
    try:
        yield token
    finally:
        _emit(f"::{token}::", stream)


def capped_lines(
    text: str,
    line_max: int = UNTRUSTED_LINE_MAX_CHARS,
    block_max: int = UNTRUSTED_BLOCK_MAX_CHARS,
) -> list[str]:
    """``text`` split where the runner splits lines, each line and the whole capped (what was
    left out is counted in the last kept line or in a closing line)."""
    lines = _RUNNER_LINE_BREAK.split(text[:-1] if text.endswith("\n") else text)
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if len(line) > line_max:
            line = f"{line[:line_max]}… ({len(line) - line_max} more characters not shown)"
        if used + len(line) > block_max:
            out.append(f"… ({len(lines) - i} more lines not shown)")
            break
        out.append(line)
        used += len(line) + 1
    return out


def log_untrusted(text: str, stream: TextIO | None = None) -> None:
    """Write untrusted ``text`` to the log inside a :func:`stop_commands` block, capped by
    :data:`UNTRUSTED_LINE_MAX_CHARS` per line and :data:`UNTRUSTED_BLOCK_MAX_CHARS` in all."""
    out = stream if stream is not None else sys.stdout
    with stop_commands(stream):
        out.write(_encodable("\n".join(capped_lines(text))) + "\n")
        out.flush()


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def set_output(name: str, value: str, env: Mapping[str, str] | None = None) -> bool:
    """Append ``name`` to the ``GITHUB_OUTPUT`` file (always the ``name<<DELIM`` form).

    The delimiter is random and checked against the value, so a value cannot end the block and
    forge other outputs. Returns False (nothing written) outside Actions.
    """
    path = _env(env).get("GITHUB_OUTPUT")
    if not path:
        return False
    if not name or "\n" in name or "\r" in name or "<<" in name:
        raise ValueError(f"bad output name: {name!r}")
    delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    while delimiter in value:  # pragma: no cover - 128 random bits
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return True


def append_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append Markdown to ``GITHUB_STEP_SUMMARY``, keeping the file within 1 MiB.

    When the text does not fit, it is cut at a UTF-8 boundary and a note says so. Returns False
    outside Actions.
    """
    path = _env(env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    target = Path(path)
    used = target.stat().st_size if target.exists() else 0
    data = markdown.encode("utf-8")
    room = SUMMARY_LIMIT_BYTES - used
    if len(data) > room:
        note = SUMMARY_TRUNCATED_NOTE.encode("utf-8")
        keep = max(0, room - len(note))
        data = data[:keep].decode("utf-8", errors="ignore").encode("utf-8") + (
            note if room >= len(note) else b""
        )
    with open(target, "ab") as fh:
        fh.write(data)
    return True


def input_env_name(name: str) -> str:
    """``foo-bar`` -> ``INPUT_FOO-BAR`` (upper-cased, hyphens kept, spaces to ``_``)."""
    return "INPUT_" + name.replace(" ", "_").upper()


def get_input(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The action input ``name``, stripped; ``None`` when unset or empty.

    The runner does not enforce ``required: true``: validate the result in code.
    """
    value = _env(env).get(input_env_name(name))
    if value is None:
        return None
    value = value.strip()
    return value or None


def read_inputs(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every ``INPUT_*`` variable as ``{input-name-lowercase: value}`` (values not stripped)."""
    return {
        key[len("INPUT_") :].lower(): value
        for key, value in _env(env).items()
        if key.startswith("INPUT_")
    }
