"""Repository paths in a review: the exclusion globs (and their defaults), and a path as it is
shown to a model (control and line-separator characters escaped, so a hostile file name cannot
forge a line of the chunk format).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

#: Default exclusion globs: lock files, minified/generated output, vendored dependencies.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    "*.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "Cargo.lock",
    "go.sum",
    "*.min.js",
    "*.min.css",
    "*.generated.*",
    "vendor/**",
    "third_party/**",
    "node_modules/**",
    "dist/**",
)

_UNSAFE_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def show_path(path: str) -> str:
    """A path as rendered in chunk headers: control and line-separator characters escaped."""
    return _UNSAFE_PATH_CHARS.sub(lambda m: f"\\x{ord(m.group(0)):02x}", path)


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> tuple[re.Pattern[str], bool]:
    """Compile a glob. Returns (regex, match_basename_only)."""
    basename_only = "/" not in pattern
    anchored = pattern.startswith("/")
    pat = pattern.lstrip("/")
    out: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pat.find("]", i + 2 if pat[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    if not basename_only and not anchored:
        body = "(?:.*/)?" + body
    return re.compile(body + r"\Z", re.DOTALL), basename_only


def glob_match(path: str, pattern: str) -> bool:
    """Match a repository path against an exclusion glob.

    Rules: a pattern without ``/`` matches the file name at any depth (``*.lock``); a pattern with
    ``/`` matches the whole path, at any depth unless it starts with ``/`` (``vendor/**`` matches
    ``vendor/a.go`` and ``web/vendor/b.js``; ``/vendor/**`` only the first). ``*`` and ``?`` stay
    within one path segment, ``**`` spans segments, ``[...]`` is a character class. Case-sensitive.
    """
    regex, basename_only = _glob_regex(pattern)
    target = path.rsplit("/", 1)[-1] if basename_only else path
    return regex.match(target) is not None


def excluded_by(path: str, patterns: Iterable[str]) -> str | None:
    """The first of ``patterns`` that excludes ``path``, or ``None``."""
    for pattern in patterns:
        if pattern and glob_match(path, pattern):
            return pattern
    return None
