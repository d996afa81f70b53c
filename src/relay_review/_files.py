"""Writing files the run leaves behind (reports, discovery output) safely and atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a new file created exclusively beside it, then
    ``os.replace``: readers never see half a file, and no symlink is followed.

    The temporary name is random and opened with ``O_CREAT | O_EXCL`` (``mkstemp``), so a symlink
    planted at a guessable temporary name cannot redirect the write; ``os.replace`` swaps the
    directory entry, so a symlink at ``path`` itself is replaced, never written through.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)  # mkstemp makes 0600; reports are not secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
