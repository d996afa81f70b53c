"""Moved to :mod:`relay_review.records` (issue 21). This alias keeps branches written against the
old name importable while they are merged; nothing in ``src/`` imports it, and it goes once they
are in."""

from relay_review.records import *  # noqa: F403
