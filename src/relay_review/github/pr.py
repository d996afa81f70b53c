"""The pull request through the API: its files (no checkout), its current head SHA, and the
head versions of changed files (read through the contents API, for context around hunks)."""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from github.Repository import Repository

from relay_review._text import scrub_text
from relay_review.github.errors import GitHubEdgeError, github_errors

#: GitHub lists at most 3,000 files of a pull request.
MAX_FILES = 3000


@dataclass(frozen=True)
class PullFile:
    """One changed file as the pull request files API lists it, the fields the diff index reads
    (:meth:`relay_review.review.diff.DiffIndex.from_api_files`). Values are as GitHub sent them
    (the API's JSON is input: the index reads every field defensively); ``patch`` and
    ``previous_filename`` are ``None`` when GitHub omits them (binary or very large files;
    files not renamed)."""

    filename: str | None
    status: str | None
    previous_filename: str | None = None
    patch: str | None = None
    additions: int | None = None
    deletions: int | None = None
    changes: int | None = None


def list_files(repo: Repository, number: int, limit: int = MAX_FILES) -> list[PullFile]:
    """The PR's changed files, 100 per page, at most ``limit`` (GitHub stops at 3,000).

    Compare the count with the PR's ``changed_files`` to see a cut.
    """
    files: list[PullFile] = []
    with github_errors(f"cannot list the files of {repo.full_name}#{number}"):
        for item in repo.get_pull(number).get_files():
            if len(files) >= limit:
                break
            raw = item.raw_data
            files.append(
                PullFile(
                    filename=raw.get("filename"),
                    status=raw.get("status"),
                    previous_filename=raw.get("previous_filename"),
                    patch=raw.get("patch"),
                    additions=raw.get("additions"),
                    deletions=raw.get("deletions"),
                    changes=raw.get("changes"),
                )
            )
    return files


def head_sha(repo: Repository, number: int) -> str:
    """The PR's head SHA as GitHub sees it now (a fresh request every call)."""
    with github_errors(f"cannot read {repo.full_name}#{number}"):
        return repo.get_pull(number).complete().head.sha


def head_moved(repo: Repository, number: int, expected_sha: str) -> bool:
    """True when the PR's head is no longer ``expected_sha`` (a newer run owns the comment)."""
    return head_sha(repo, number).lower() != expected_sha.lower()


#: Most head files read for context in one run, and the largest one read (bytes).
MAX_CONTEXT_FILES = 50
MAX_CONTEXT_FILE_BYTES = 256_000


@dataclass
class FetchedFiles:
    """Head versions of files (path -> lines) and why any could not be read."""

    files: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def head_files(
    repo: Repository,
    paths: Sequence[str],
    sha: str,
    *,
    deadline: float,
    limit: int = MAX_CONTEXT_FILES,
    max_bytes: int = MAX_CONTEXT_FILE_BYTES,
) -> FetchedFiles:
    """The text of ``paths`` at commit ``sha`` through the contents API (read only: nothing is
    checked out or run), for context around hunks. Bounded: at most ``limit`` files, each at
    most ``max_bytes``, no request started after ``deadline`` (``time.monotonic()``). Never
    raises for GitHub's answers: the first failure ends the reading (the rest would likely fail
    the same way) and is reported in ``problems``; binary files are left out."""
    out = FetchedFiles()
    if len(paths) > limit:
        out.problems.append(f"{len(paths)} files changed; context read for the first {limit}")
    for path in paths[:limit]:
        if time.monotonic() >= deadline:
            out.problems.append("out of time for reading head files")
            break
        where = f"{path}@{sha[:12]}"
        try:
            with github_errors(f"cannot read {where}"):
                content = repo.get_contents(path, ref=sha)
        except GitHubEdgeError as exc:
            out.problems.append(str(exc))
            break
        if isinstance(content, list) or content.type != "file":
            continue
        if (content.size or 0) > max_bytes or content.encoding != "base64":
            out.problems.append(f"{where} is over {max_bytes:,} bytes")
            continue
        try:
            raw = base64.b64decode(re.sub(r"\s", "", content.content or ""), validate=True)
        except (binascii.Error, ValueError):
            out.problems.append(f"{where}: undecodable content")
            continue
        if b"\0" in raw[:8192]:
            continue  # binary
        text = scrub_text(raw.decode("utf-8", errors="replace")).lstrip("\ufeff")
        out.files[path] = [line.rstrip("\r") for line in text.split("\n")]
    return out
