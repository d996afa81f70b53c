"""Secrets scrubbed into a typed copy: every text of a record (dict keys included) passed
through a redactor before it is rendered or written, so escaping and cutting cannot hide a key
from a later scrub."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel

T = TypeVar("T")


class Redactor(Protocol):
    """What scrubs a text of the run's secrets (:class:`relay_review.github.log.Secrets`)."""

    def redact(self, text: str) -> str: ...


def scrubbed(value: T, secrets: Redactor) -> T:
    """A copy of ``value`` (a record, or lists, tuples and dicts of them) with every text, dict
    keys included, scrubbed of the secrets; enum values are ours and stay as they are."""
    return cast(T, _scrub(value, secrets.redact))


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, Enum):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, BaseModel):
        update = {name: _scrub(getattr(value, name), redact) for name in type(value).model_fields}
        copy = value.model_copy(update=update)
        # the same fields set as the original (the JSON report leaves unset action keys out)
        object.__setattr__(copy, "__pydantic_fields_set__", set(value.model_fields_set))
        if value.model_extra:
            extra = {redact(k): _scrub(v, redact) for k, v in value.model_extra.items()}
            object.__setattr__(copy, "__pydantic_extra__", extra)
        return copy
    if isinstance(value, dict):
        return {_scrub(k, redact): _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub(v, redact) for v in value)
    return value
