"""The edge to GitHub: the event, the PR's files, the pinned policy, the sticky comment, the
review, and the Actions runner's files and commands. PyGithub underneath; nothing here retries a
write blindly (see :mod:`relay_review.github.client`).

The names below load on first use (PEP 562): a command that imports
:mod:`relay_review.github.actions` for an input name must not load PyGithub (~0.1 s of start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_review._lazy import lazy_names

if TYPE_CHECKING:
    from relay_review.github.client import make_github, make_retry
    from relay_review.github.comment import (
        DEFAULT_AUTHOR,
        MARKER,
        MAX_BODY_CHARS,
        StickyResult,
        find_sticky,
        resolve_author,
        token_login,
        upsert_sticky,
    )
    from relay_review.github.errors import EventError, GitHubEdgeError, PolicyRefError
    from relay_review.github.event import (
        NotPullRequestEvent,
        PullRequestEvent,
        load_event,
        parse_event,
    )
    from relay_review.github.policy_ref import (
        PolicySource,
        PolicyText,
        check_descends,
        load_pinned_policy,
        read_base_policy,
        read_file_at,
        resolve_ref,
    )
    from relay_review.github.pr import head_moved, head_sha, list_files
    from relay_review.github.review import LineComment, ReviewResult, post_review

#: public name -> the submodule that defines it
_HOME = {
    "DEFAULT_AUTHOR": "relay_review.github.comment",
    "EventError": "relay_review.github.errors",
    "GitHubEdgeError": "relay_review.github.errors",
    "LineComment": "relay_review.github.review",
    "MARKER": "relay_review.github.comment",
    "MAX_BODY_CHARS": "relay_review.github.comment",
    "NotPullRequestEvent": "relay_review.github.event",
    "PolicyRefError": "relay_review.github.errors",
    "PolicySource": "relay_review.github.policy_ref",
    "PolicyText": "relay_review.github.policy_ref",
    "PullRequestEvent": "relay_review.github.event",
    "ReviewResult": "relay_review.github.review",
    "StickyResult": "relay_review.github.comment",
    "check_descends": "relay_review.github.policy_ref",
    "find_sticky": "relay_review.github.comment",
    "head_moved": "relay_review.github.pr",
    "head_sha": "relay_review.github.pr",
    "list_files": "relay_review.github.pr",
    "load_event": "relay_review.github.event",
    "load_pinned_policy": "relay_review.github.policy_ref",
    "make_github": "relay_review.github.client",
    "make_retry": "relay_review.github.client",
    "parse_event": "relay_review.github.event",
    "post_review": "relay_review.github.review",
    "read_base_policy": "relay_review.github.policy_ref",
    "read_file_at": "relay_review.github.policy_ref",
    "resolve_author": "relay_review.github.comment",
    "resolve_ref": "relay_review.github.policy_ref",
    "token_login": "relay_review.github.comment",
    "upsert_sticky": "relay_review.github.comment",
}


__getattr__ = lazy_names(__name__, _HOME)


__all__ = [
    "DEFAULT_AUTHOR",
    "MARKER",
    "MAX_BODY_CHARS",
    "EventError",
    "GitHubEdgeError",
    "LineComment",
    "NotPullRequestEvent",
    "PolicyRefError",
    "PolicySource",
    "PolicyText",
    "PullRequestEvent",
    "ReviewResult",
    "StickyResult",
    "check_descends",
    "find_sticky",
    "head_moved",
    "head_sha",
    "list_files",
    "load_event",
    "load_pinned_policy",
    "make_github",
    "make_retry",
    "parse_event",
    "post_review",
    "read_base_policy",
    "read_file_at",
    "resolve_author",
    "resolve_ref",
    "token_login",
    "upsert_sticky",
]
