"""One finding, from the model's reply to the comment: a location, its cited text, what is wrong.

The same record all the way: the reply's parser builds it (model texts are hostile: made
encodable, capped, aliases read), verification adds the checked suggestion's ``replaces``,
the review adds its identity across pushes (``fingerprint``, ``cited``), publishing its
``state`` and ``first_seen``, and memory gives it back on reuse (with its suggestion, checked
again). A finding that did not verify is the same record with its ``reason``; its JSON then
holds the location, the texts and the reason only (no suggestion: an unverified one is not
shown).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from relay_review._text import scrub_text

Severity = Literal["high", "medium", "low"]
Side = Literal["RIGHT", "LEFT"]

MAX_MESSAGE_CHARS = 2000
#: Longer than any path a checkout can hold (Linux ``PATH_MAX``).
MAX_PATH_CHARS = 4096

#: The keys a model's reply may set on a finding (anything else it sends is discarded).
REPLY_KEYS = ("path", "line", "side", "quote", "severity", "message", "end_line", "suggestion")
#: An unverified finding's JSON keys, in order.
UNVERIFIED_KEYS = ("path", "line", "side", "quote", "severity", "message", "reason")

SIDE_ALIASES = {
    "RIGHT": "RIGHT",
    "R": "RIGHT",
    "NEW": "RIGHT",
    "ADDED": "RIGHT",
    "+": "RIGHT",
    "LEFT": "LEFT",
    "L": "LEFT",
    "OLD": "LEFT",
    "REMOVED": "LEFT",
    "DELETED": "LEFT",
    "-": "LEFT",
}
SEVERITY_ALIASES = {
    "high": "high",
    "critical": "high",
    "blocker": "high",
    "severe": "high",
    "major": "high",
    "error": "high",
    "medium": "medium",
    "moderate": "medium",
    "warning": "medium",
    "med": "medium",
    "low": "low",
    "minor": "low",
    "info": "low",
    "nit": "low",
    "trivial": "low",
    "suggestion": "low",
}


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clean_text(value: Any, limit: int | None = None) -> Any:
    """A model-supplied string made encodable and capped; anything else unchanged (the schema
    then refuses it)."""
    if not isinstance(value, str):
        return value
    value = scrub_text(value)
    return value if limit is None else cut(value, limit)


class Finding(BaseModel):
    """One review finding (raw texts; rendering escapes them later)."""

    model_config = ConfigDict(defer_build=True, extra="ignore", frozen=True)

    path: str
    line: int
    side: Side = "RIGHT"
    quote: str = ""
    severity: Severity
    message: str
    #: Last RIGHT line a suggestion replaces (``line`` is the first); ``None``: ``line`` only.
    end_line: int | None = None
    #: Replacement text for the RIGHT lines ``line`` .. ``end_line`` (``None``: no suggestion).
    suggestion: str | None = None
    #: The current text of the lines the suggestion replaces: set only by verification from
    #: the diff (a reply's is discarded: :data:`REPLY_KEYS`).
    replaces: tuple[str, ...] = ()
    #: Its identity across pushes (:mod:`relay_review.review.fingerprint`): path, cited text
    #: and kind, not the line number; ``cited`` is the cited lines' hash (``<hex>:<lines>``).
    fingerprint: str | None = None
    cited: str | None = None
    #: Across pushes (set when published): ``new``, ``open`` (posted before, still there) or
    #: ``dismissed``; and the commit (12 hex digits) it was first seen at.
    state: str | None = None
    first_seen: str | None = None
    #: Why it did not verify (None: it did, or it has not been checked yet).
    reason: str | None = None

    @property
    def verified(self) -> bool:
        return self.reason is None

    def unverified(self, reason: str) -> Finding:
        """This finding as one that did not verify, and why (its suggestion is not kept)."""
        return self.model_copy(
            update={"reason": reason, "end_line": None, "suggestion": None, "replaces": ()}
        )

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.reason is None:
            data.pop("reason", None)
            return data
        return {k: data[k] for k in UNVERIFIED_KEYS if k in data}

    @field_validator("end_line", mode="before")
    @classmethod
    def _end_line(cls, value: Any) -> Any:
        return None if isinstance(value, bool) or not isinstance(value, int) else value

    @field_validator("suggestion", mode="before")
    @classmethod
    def _suggestion(cls, value: Any) -> Any:
        return scrub_text(value) if isinstance(value, str) else None

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return clean_text(value, MAX_PATH_CHARS)

    @field_validator("side", mode="before")
    @classmethod
    def _side(cls, value: Any) -> Any:
        if value is None:
            return "RIGHT"
        if isinstance(value, str):
            return SIDE_ALIASES.get(value.strip().upper(), value)
        return value

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: Any) -> Any:
        if isinstance(value, str):
            return SEVERITY_ALIASES.get(value.strip().lower(), value)
        return value

    @field_validator("quote", mode="before")
    @classmethod
    def _quote(cls, value: Any) -> Any:
        return "" if value is None else clean_text(value)

    @field_validator("message", mode="before")
    @classmethod
    def _message(cls, value: Any) -> Any:
        return "" if value is None else clean_text(value, MAX_MESSAGE_CHARS)
