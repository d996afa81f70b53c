"""Writing files the run leaves behind (reports, discovery output) safely and atomically."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class NotAFile(OSError):
    """The path to write names something other than a regular file (a device, a FIFO, a
    socket, a directory), which replacing would destroy."""


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a new file created exclusively beside it, then
    ``os.replace``: readers never see half a file, and no symlink is followed.

    The temporary name is random and opened with ``O_CREAT | O_EXCL`` (``mkstemp``), so a symlink
    planted at a guessable temporary name cannot redirect the write; ``os.replace`` swaps the
    directory entry, so a symlink at ``path`` itself is replaced, never written through.
    :class:`NotAFile` when ``path`` (or what a symlink there points at) exists and is not a
    regular file: ``--out /dev/stdout`` run as root replaced the device node with a file, and a
    FIFO was replaced instead of written to.
    """
    problem = not_a_file(path)
    if problem:
        raise NotAFile(f"{path} {problem}; {WRITE_A_FILE}")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)  # mkstemp makes 0600; reports are not secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: What the messages of :func:`not_a_file`'s refusals advise.
WRITE_A_FILE = "give the path of a file to write"


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file by :func:`atomic_write` (None: it can), as a
    predicate of the path: it ``names no file`` (``''``, ``.``), or what is there (through a
    symlink) ``is a directory`` or ``is not a regular file`` (a device, a FIFO, a socket)."""
    if path.name in ("", ".", ".."):
        return "names no file"
    try:
        found = os.stat(path)
    except OSError:  # nothing there (or a dangling symlink, replaced as any symlink is)
        return None
    if stat.S_ISREG(found.st_mode):
        return None
    return "is a directory" if stat.S_ISDIR(found.st_mode) else "is not a regular file"
