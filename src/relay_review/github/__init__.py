"""The edge to GitHub: the event, the PR's files, the pinned policy, the sticky comment, the
review, and the Actions runner's files and commands. PyGithub underneath; nothing here retries a
write blindly (see :mod:`relay_review.github.client`)."""

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
from relay_review.github.event import NotPullRequestEvent, PullRequestEvent, load_event, parse_event
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
