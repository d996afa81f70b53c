"""The exception hierarchy (small on purpose: outcomes of calls are values, not exceptions)."""


class RelayReviewError(Exception):
    """Base of every error relay-review raises on purpose."""


class UsageError(RelayReviewError):
    """Bad input, named for the user (file, key or flag and what is allowed). The CLI exits 2."""
