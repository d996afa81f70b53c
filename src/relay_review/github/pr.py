"""The pull request through the API: its files (no checkout) and its current head SHA."""

from __future__ import annotations

from typing import Any

from github.Repository import Repository

from relay_review.github.errors import github_errors

#: GitHub lists at most 3,000 files of a pull request.
MAX_FILES = 3000
FILE_KEYS = (
    "filename",
    "status",
    "previous_filename",
    "patch",
    "additions",
    "deletions",
    "changes",
)


def list_files(repo: Repository, number: int, limit: int = MAX_FILES) -> list[dict[str, Any]]:
    """The PR's changed files, 100 per page, at most ``limit`` (GitHub stops at 3,000).

    Each is ``{filename, status, previous_filename, patch, additions, deletions, changes}``;
    ``patch`` and ``previous_filename`` are ``None`` when GitHub omits them (binary or very large
    files; files not renamed). Compare the count with the PR's ``changed_files`` to see a cut.
    """
    files: list[dict[str, Any]] = []
    with github_errors(f"cannot list the files of {repo.full_name}#{number}"):
        for item in repo.get_pull(number).get_files():
            if len(files) >= limit:
                break
            raw = item.raw_data
            files.append({key: raw.get(key) for key in FILE_KEYS})
    return files


def head_sha(repo: Repository, number: int) -> str:
    """The PR's head SHA as GitHub sees it now (a fresh request every call)."""
    with github_errors(f"cannot read {repo.full_name}#{number}"):
        return repo.get_pull(number).complete().head.sha


def head_moved(repo: Repository, number: int, expected_sha: str) -> bool:
    """True when the PR's head is no longer ``expected_sha`` (a newer run owns the comment)."""
    return head_sha(repo, number).lower() != expected_sha.lower()
