"""Renderings of a run for people, from typed records only (pure: no I/O, no clock).

One module per concern: :mod:`.terminal` (plain text and aligned columns), :mod:`.markdown`
(hostile text made inert for Markdown), :mod:`.routes` (the selection and readiness table, the
attempt timeline), :mod:`.suggestions` (line comments and suggestion blocks), :mod:`.sections`
(the sticky comment's parts) and :mod:`.comment` (the parts fitted to GitHub's size limit; also
the step summary's body), :mod:`.text_review` (a review as plain text). Callers import the
names below from :mod:`relay_review.render`.
"""

from __future__ import annotations

from relay_review.render.comment import COMMENT_LIMIT, TRUNCATION_ORDER, comment_markdown
from relay_review.render.markdown import md_code, md_table, md_text
from relay_review.render.routes import (
    ATTEMPT_HEADER,
    READINESS_HEADER,
    attempt_rows,
    attempt_timeline,
    catalog_table,
    no_model_line,
    readiness_rows,
    readiness_table,
    reused_heads,
)
from relay_review.render.sections import comment_sections, quota_line, route_summary
from relay_review.render.suggestions import line_comment_body, suggestion_block, suggestion_diff
from relay_review.render.terminal import TEXT_WIDTH, align, plain, plural, wrap_cell
from relay_review.render.text_review import review_text

__all__ = [
    "ATTEMPT_HEADER",
    "COMMENT_LIMIT",
    "READINESS_HEADER",
    "TEXT_WIDTH",
    "TRUNCATION_ORDER",
    "align",
    "attempt_rows",
    "attempt_timeline",
    "catalog_table",
    "comment_markdown",
    "comment_sections",
    "line_comment_body",
    "md_code",
    "md_table",
    "md_text",
    "no_model_line",
    "plain",
    "plural",
    "quota_line",
    "readiness_rows",
    "readiness_table",
    "reused_heads",
    "review_text",
    "route_summary",
    "suggestion_block",
    "suggestion_diff",
    "wrap_cell",
]
