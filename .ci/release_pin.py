"""Point action.yml at a prebuilt image by digest (the release workflow's last build step).

    python .ci/release_pin.py action.yml docker://ghcr.io/owner/relay-review@sha256:<64 hex>

Replaces the one line ``  image: Dockerfile`` under ``runs:`` with the image reference, so the
released action is pulled by the runner (``docker://`` images are pulled, never built) instead
of built from the Dockerfile at the start of every job. Only a digest is accepted: a tag could
be re-pushed, a digest names exactly the bytes the provenance attestation signs. The Dockerfile
stays in the repository; forks and local builds keep ``image: Dockerfile``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: ``docker://`` + a registry path (lower-case, as registries require) + ``@sha256:`` digest.
REF = re.compile(
    r"docker://[a-z0-9]+(?:[._:-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+@sha256:[0-9a-f]{64}"
)
SOURCE_LINE = "  image: Dockerfile"


def pin(action_yml: str, ref: str) -> str:
    """``action_yml`` with ``runs.image`` set to ``ref``; ValueError when either is not as
    expected (a bad reference, or not exactly one ``image: Dockerfile`` line)."""
    if not REF.fullmatch(ref):
        raise ValueError(f"not a docker://REGISTRY/NAME@sha256:<64 hex> reference: {ref!r}")
    lines = action_yml.split("\n")
    hits = [i for i, line in enumerate(lines) if line.rstrip() == SOURCE_LINE]
    if len(hits) != 1:
        raise ValueError(f"expected exactly one {SOURCE_LINE.strip()!r} line, found {len(hits)}")
    lines[hits[0]] = f"  image: {ref}"
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    path, ref = Path(argv[0]), argv[1]
    try:
        path.write_text(pin(path.read_text(encoding="utf-8"), ref), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"release_pin: {path}: {exc}", file=sys.stderr)
        return 2
    print(f"release_pin: {path}: runs.image = {ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
