"""Renderings of a run for people, from typed records only (pure: no I/O, no clock).

One module per concern: :mod:`.terminal` (plain text and aligned columns), :mod:`.markdown`
(hostile text made inert for Markdown), :mod:`.routes` (the selection and readiness table, the
attempt timeline), :mod:`.suggestions` (line comments and suggestion blocks), :mod:`.sections`
(the sticky comment's parts) and :mod:`.comment` (the parts fitted to GitHub's size limit; also
the step summary's body), :mod:`.text_review` (a review as plain text). Callers import the
names below from :mod:`relay_review.render`; each is loaded from its module on first use, so a
text table (``catalog``, ``chat``) does not load the comment's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_review._lazy import lazy_names

if TYPE_CHECKING:
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

#: public name -> the module that defines it
_HOME = {
    "ATTEMPT_HEADER": "relay_review.render.routes",
    "COMMENT_LIMIT": "relay_review.render.comment",
    "READINESS_HEADER": "relay_review.render.routes",
    "TEXT_WIDTH": "relay_review.render.terminal",
    "TRUNCATION_ORDER": "relay_review.render.comment",
    "align": "relay_review.render.terminal",
    "attempt_rows": "relay_review.render.routes",
    "attempt_timeline": "relay_review.render.routes",
    "catalog_table": "relay_review.render.routes",
    "comment_markdown": "relay_review.render.comment",
    "comment_sections": "relay_review.render.sections",
    "line_comment_body": "relay_review.render.suggestions",
    "md_code": "relay_review.render.markdown",
    "md_table": "relay_review.render.markdown",
    "md_text": "relay_review.render.markdown",
    "no_model_line": "relay_review.render.routes",
    "plain": "relay_review.render.terminal",
    "plural": "relay_review.render.terminal",
    "quota_line": "relay_review.render.sections",
    "readiness_rows": "relay_review.render.routes",
    "readiness_table": "relay_review.render.routes",
    "reused_heads": "relay_review.render.routes",
    "review_text": "relay_review.render.text_review",
    "route_summary": "relay_review.render.sections",
    "suggestion_block": "relay_review.render.suggestions",
    "suggestion_diff": "relay_review.render.suggestions",
    "wrap_cell": "relay_review.render.terminal",
}


__getattr__ = lazy_names(__name__, _HOME)


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
