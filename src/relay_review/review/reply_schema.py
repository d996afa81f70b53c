"""The reply's JSON Schema and the ``response_format`` forms that carry it in a request.

The schema bounds every string and the findings' count (a looping model stops at the bounds
under structured output; :mod:`.reply` caps the texts again), and is sent in the strongest form
a route takes: OpenAI's ``json_schema``, JSON mode with the schema alongside, or none (then
only the system message states it). A route that refuses one form is asked the next one down.
"""

from __future__ import annotations

from typing import Any

from relay_review.records.finding import MAX_MESSAGE_CHARS
from relay_review.review.suggestions import MAX_SUGGESTION_CHARS
from relay_review.review.verdict import MAX_FINDINGS

#: Bounds of every string the reply schema allows (a looping model stops at them under
#: structured output; the parser caps them again).
SUMMARY_MAX_CHARS = 600
NOTE_MAX_CHARS = 300
QUOTE_MAX_CHARS = 600
PATH_SCHEMA_MAX_CHARS = 1024
#: Estimated output tokens one finding takes (path, quote, message): sets how many fit.
TOKENS_PER_FINDING = 120


def findings_cap(changed_lines: int, max_output_tokens: int, limit: int = MAX_FINDINGS) -> int:
    """How many findings a chunk can hold: no more than its changed lines, than what fits in
    ``max_output_tokens`` (about ``TOKENS_PER_FINDING`` each, after the summary and notes), or
    than ``limit``; at least 1."""
    fits = max(1, (max_output_tokens - 200) // TOKENS_PER_FINDING)
    return max(1, min(limit, changed_lines, fits))


def reply_schema(max_findings: int = MAX_FINDINGS, max_files: int | None = None) -> dict[str, Any]:
    """The reply's JSON Schema: every string bounded (``maxLength``), at most ``max_findings``
    findings and ``max_files`` file notes (``None``: unbounded count)."""
    files: dict[str, Any] = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": PATH_SCHEMA_MAX_CHARS},
                "summary": {"type": "string", "maxLength": NOTE_MAX_CHARS},
            },
            "required": ["path", "summary"],
            "additionalProperties": False,
        },
    }
    if max_files is not None:
        files["maxItems"] = max(1, max_files)
    return {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "minLength": 1, "maxLength": SUMMARY_MAX_CHARS},
            "files": files,
            "findings": {
                "type": "array",
                "maxItems": max_findings,
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "maxLength": PATH_SCHEMA_MAX_CHARS},
                        "line": {"type": "integer", "minimum": 1},
                        "side": {"type": "string", "enum": ["RIGHT", "LEFT"], "maxLength": 5},
                        "quote": {"type": "string", "maxLength": QUOTE_MAX_CHARS},
                        "severity": {
                            "type": "string",
                            "enum": ["high", "medium", "low"],
                            "maxLength": 6,
                        },
                        "message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS},
                        "end_line": {"type": "integer", "minimum": 1},
                        "suggestion": {"type": "string", "maxLength": MAX_SUGGESTION_CHARS},
                    },
                    "required": ["path", "line", "side", "quote", "severity", "message"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["summary", "findings"],
        "additionalProperties": False,
    }


REPLY_SCHEMA: dict[str, Any] = reply_schema()

#: The response forms, strongest first; a route that refuses one is asked the next one down.
RESPONSE_FORMS = ("json_schema", "json_object", "none")


def _without_max_length(node: Any) -> Any:
    """``node`` (a JSON Schema) without its ``maxLength`` keywords."""
    if isinstance(node, dict):
        return {k: _without_max_length(v) for k, v in node.items() if k != "maxLength"}
    if isinstance(node, list):
        return [_without_max_length(v) for v in node]
    return node


def response_format(form: str, schema: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``form`` (``None`` for ``none``).

    ``json_schema``: OpenAI's form (``{"type": "json_schema", "json_schema": {name, schema}}``,
    also llama-server's and vLLM's). ``json_object``: JSON mode, with the schema alongside as
    ``schema`` (llama-cpp-python's and llama-server's form; OpenAI-style servers ignore it),
    without its ``maxLength`` bounds: llama-cpp-python 0.3.36 turns each into nested optional
    rules that llama.cpp's grammar parser refuses, and its server process then exits mid-stream
    (seen by tools/record_llama_cpp_python.py). ``max_tokens`` still bounds the reply.
    """
    schema = REPLY_SCHEMA if schema is None else schema
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "relay_review_verdict", "schema": schema, "strict": False},
        }
    if form == "json_object":
        return {"type": "json_object", "schema": _without_max_length(schema)}
    return None


def next_form(form: str) -> str | None:
    """The response form one step down from ``form`` (``None`` below ``none``)."""
    i = RESPONSE_FORMS.index(form) if form in RESPONSE_FORMS else len(RESPONSE_FORMS) - 1
    return RESPONSE_FORMS[i + 1] if i + 1 < len(RESPONSE_FORMS) else None


#: ``response_format`` for routes that support JSON-schema structured output (OpenAI style).
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "relay_review_verdict", "schema": REPLY_SCHEMA, "strict": False},
}
