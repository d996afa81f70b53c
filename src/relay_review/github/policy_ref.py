"""The policy file, read at an exact commit: pinned in an orchestrator repository, or the
reviewed repository's own at the commit the workflow runs from (its default branch).

Every failure fails closed with a :class:`PolicyRefError` that names the repository, the ref and
what GitHub answered. The one tolerated absence is the reviewed repository's own policy file:
:func:`read_base_policy` returns ``None`` and the caller uses built-in defaults.

Why the default branch and not the pull request's base: the author of a pull request chooses its
base (and may retarget it to an old or author-pushed branch), so a policy read there could point
the org's key at any URL. Under ``pull_request_target`` and ``issue_comment`` GitHub runs the
workflow from the default branch (``GITHUB_SHA``); :func:`workflow_commit` takes that commit only
when ``GITHUB_REF`` names the event's ``repository.default_branch``, else asks GitHub for the
default branch's tip.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Literal

from github import Github
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict

from relay_review.github.errors import PolicyRefError, github_errors
from relay_review.records import PolicySource

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
#: ``compare(min, resolved).status`` values meaning "resolved descends from min".
DESCENDS = frozenset({"ahead", "identical"})


class PolicyText(BaseModel):
    """A policy file's text and its provenance."""

    model_config = ConfigDict(frozen=True)

    text: str
    source: PolicySource


def resolve_ref(repo: Repository, ref: str) -> str:
    """Resolve a branch, tag or SHA in ``repo`` to the full 40-hex commit SHA.

    A full SHA is still looked up (it must exist) and must come back unchanged.
    """
    ref = ref.strip()
    if not ref:
        raise PolicyRefError(f"{repo.full_name}: empty ref")
    with github_errors(f"cannot resolve ref {ref!r} in {repo.full_name}", PolicyRefError):
        # complete(): on a lazy client the SHA would otherwise be read back from the URL.
        sha = repo.get_commit(ref).complete().sha
    sha = (sha or "").lower()
    if not FULL_SHA.match(sha):
        raise PolicyRefError(
            f"resolving {ref!r} in {repo.full_name} gave {sha!r}, not a commit SHA"
        )
    if FULL_SHA.match(ref.lower()) and sha != ref.lower():
        raise PolicyRefError(f"{repo.full_name}: asked for commit {ref}, GitHub answered {sha}")
    return sha


def check_descends(repo: Repository, min_sha: str, sha: str) -> str:
    """Require ``sha`` to descend from ``min_sha`` (compare status ``ahead`` or ``identical``).

    Returns the status; raises :class:`PolicyRefError` naming both SHAs otherwise.
    """
    with github_errors(f"cannot compare {min_sha}...{sha} in {repo.full_name}", PolicyRefError):
        status = repo.compare(min_sha, sha).status
    if status not in DESCENDS:
        raise PolicyRefError(
            f"{repo.full_name}: the pinned commit {sha} does not descend from the minimum "
            f"{min_sha} (compare status {status!r}); refusing an older or unrelated policy"
        )
    return status


def read_file_at(repo: Repository, path: str, sha: str) -> str | None:
    """The UTF-8 text of ``path`` at commit ``sha``; ``None`` if GitHub answers 404.

    A directory, a submodule, a file too large for the contents API, bad base64 or bad UTF-8
    raise :class:`PolicyRefError`.
    """
    where = f"{repo.full_name}:{path}@{sha[:12]}"
    try:
        with github_errors(f"cannot read {where}", PolicyRefError):
            content = repo.get_contents(path, ref=sha)
    except PolicyRefError as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(content, list):
        raise PolicyRefError(f"{where} is a directory, not a policy file")
    if content.type != "file":
        raise PolicyRefError(f"{where} is a {content.type}, not a file")
    if content.encoding != "base64":
        raise PolicyRefError(
            f"{where}: the contents API sent no content (encoding {content.encoding!r}; too large?)"
        )
    try:
        raw = base64.b64decode(re.sub(r"\s", "", content.content or ""), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PolicyRefError(f"{where}: undecodable content ({exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyRefError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def load_pinned_policy(
    gh: Github, repo_full_name: str, ref: str, path: str, min_ref: str | None = None
) -> PolicyText:
    """Resolve ``ref``, verify it descends from ``min_ref`` (if given), read ``path`` at that SHA.

    A missing file at a pinned ref is an error (the workflow asked for it explicitly).
    """
    repo = gh.get_repo(repo_full_name)
    sha = resolve_ref(repo, ref)
    min_sha = None
    if min_ref:
        min_sha = resolve_ref(repo, min_ref)
        check_descends(repo, min_sha, sha)
    text = read_file_at(repo, path, sha)
    if text is None:
        raise PolicyRefError(
            f"{repo_full_name}: no policy file {path!r} at {sha} (resolved from {ref})", status=404
        )
    source = PolicySource(
        kind="pinned",
        repo=repo_full_name,
        sha=sha,
        path=path,
        ref=ref,
        min_ref=min_ref,
        min_sha=min_sha,
    )
    return PolicyText(text=text, source=source)


#: Events whose workflow GitHub runs from the default branch (``GITHUB_SHA`` is its tip).
DEFAULT_BRANCH_EVENTS = frozenset({"pull_request_target", "issue_comment"})


def workflow_commit(
    gh: Github,
    repo_full_name: str,
    default_branch: str | None,
    *,
    event_name: str,
    github_sha: str = "",
    github_ref: str = "",
) -> str:
    """The commit trusted files (policy, guidelines) are read at: the default branch's.

    ``GITHUB_SHA`` when the event runs from the default branch (``pull_request_target``,
    ``issue_comment``) and ``GITHUB_REF`` is ``refs/heads/<default_branch>``; otherwise (a
    ``pull_request`` run, whose ``GITHUB_SHA`` is the author's merge commit, or a server that ran
    the workflow elsewhere) the default branch's tip as GitHub resolves it. Never the pull
    request's base. No default branch in the event fails closed.
    """
    if not default_branch:
        raise PolicyRefError(
            f"the event names no repository.default_branch of {repo_full_name}; refusing to "
            "guess where the policy lives"
        )
    sha = github_sha.strip().lower()
    if (
        event_name in DEFAULT_BRANCH_EVENTS
        and FULL_SHA.match(sha)
        and github_ref.strip() == f"refs/heads/{default_branch}"
    ):
        return sha
    return resolve_ref(gh.get_repo(repo_full_name), default_branch)


def read_base_policy(
    gh: Github,
    repo_full_name: str,
    path: str,
    base_sha: str,
    base_ref: str = "",
    *,
    kind: Literal["base", "default"] = "base",
) -> PolicyText | None:
    """The reviewed repository's policy file at commit ``base_sha`` (never the head): the
    action passes the default branch's commit (``kind="default"``, :func:`workflow_commit`).

    ``None`` when the file does not exist there (use built-in defaults); any other failure raises.
    """
    if not FULL_SHA.match(base_sha.lower()):
        raise PolicyRefError(f"base SHA {base_sha!r} of {repo_full_name} is not a full commit SHA")
    repo = gh.get_repo(repo_full_name)
    text = read_file_at(repo, path, base_sha.lower())
    if text is None:
        return None
    source = PolicySource(
        kind=kind, repo=repo_full_name, sha=base_sha.lower(), path=path, ref=base_ref or base_sha
    )
    return PolicyText(text=text, source=source)


#: The guidelines file read when the policy names none (documented in the README).
CONVENTIONAL_GUIDELINES = ".github/relay-review.md"
#: Most characters of guidelines placed in the prompt (the rest is cut, and the cut is said).
MAX_GUIDELINES_CHARS = 8000


class Guidelines(BaseModel):
    """The maintainers' review guidelines, read at the default branch's commit."""

    model_config = ConfigDict(frozen=True)

    text: str
    path: str
    sha: str
    #: Characters of the file before the cap (``len(text)`` when it was not cut).
    chars: int

    def render(self) -> str:
        """``<path>@<sha12>``, as the comment's footer shows it."""
        return f"{self.path}@{self.sha[:12]}"

    @property
    def truncated(self) -> bool:
        return self.chars > len(self.text)


def read_guidelines(
    gh: Github,
    repo_full_name: str,
    path: str,
    base_sha: str,
    *,
    limit: int = MAX_GUIDELINES_CHARS,
) -> Guidelines | None:
    """The guidelines file ``path`` at commit ``base_sha`` (the action passes the default
    branch's, :func:`workflow_commit`; never the head or a base the pull request's author
    chose), cut to ``limit`` characters; ``None`` when it is absent.

    Failures other than absence raise :class:`PolicyRefError` (the caller decides whether to go
    on without guidelines).
    """
    sha = base_sha.lower()
    if not FULL_SHA.match(sha):
        raise PolicyRefError(f"base SHA {base_sha!r} of {repo_full_name} is not a full commit SHA")
    text = read_file_at(gh.get_repo(repo_full_name), path, sha)
    if text is None:
        return None
    text = text.lstrip("\ufeff")
    return Guidelines(text=text[:limit], path=path, sha=sha, chars=len(text))
