"""Validation errors in the user's words: one sentence naming the source, the key path, the
value and what is allowed::

    relay-review.toml: catalog.pool = 'cheap' is not allowed; use free or auto

What a key allows is read from its field: the ``allowed`` words the schema declares on it, else
its ``Literal`` choices. A user's value is quoted short, on one line; a key the user made up is
quoted too, so the message itself cannot carry their text into a log or comment unbounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


def explain(exc: ValidationError, source: str, model: type[BaseModel]) -> str:
    """One sentence for the first error of validating ``model``: source, key path, value, what
    is allowed."""
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    path = _key_path(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        known = ", ".join(parent.model_fields) if parent else ""
        where = f"[{_key_path(loc[:-1])}]" if loc[:-1] else "the policy"
        return f"{source}: {path} is not a known key; keys allowed in {where}: {known}"
    if kind == "missing":
        return f"{source}: {path} is required; use {allowed(model, loc, error)}"
    value = show(error.get("input"))
    return f"{source}: {path} = {value} is not allowed; use {allowed(model, loc, error)}"


def _key_path(loc: tuple[Any, ...]) -> str:
    """``('accounts', 1, 'kind')`` -> ``accounts[1].kind``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part)
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                name = show(name)  # a user's unknown key: quoted, one line, capped
            out += f".{name}" if out else name
    return out


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class under ``model`` that holds the keys at ``loc`` (None: not a table)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            if get_origin(current) is not list:
                return None
            current = get_args(current)[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None
            current = field.annotation
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> FieldInfo | None:
    """The field declaration at ``loc`` (ignoring trailing list indexes), if there is one."""
    while loc and isinstance(loc[-1], int):
        loc = loc[:-1]
    if not loc:
        return None
    parent = _model_at(model, loc[:-1])
    return parent.model_fields.get(loc[-1]) if parent else None


def _unwrap(annotation: Any) -> Any:
    """Strip ``X | None`` and ``Annotated[X, ...]`` down to X."""
    while True:
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Annotated:
            annotation = args[0]
        elif args and type(None) in args and origin is not Literal:
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def allowed(model: type[BaseModel], loc: tuple[Any, ...], error: Mapping[str, Any]) -> str:
    """What the key at ``loc`` of ``model`` accepts, in words."""
    field = _field_at(model, loc)
    if field is not None:
        extra = field.json_schema_extra
        allowed = extra.get("allowed") if isinstance(extra, dict) else None
        if isinstance(allowed, str):
            return allowed
        annotation = _unwrap(field.annotation)
        if get_origin(annotation) is Literal:
            return _one_of(get_args(annotation))
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return f"a [{_key_path(loc)}] table"
    if error.get("type") == "literal_error" and "expected" in error.get("ctx", {}):
        return _one_of(re.findall(r"'([^']*)'", error["ctx"]["expected"]))
    return "a value of the documented type"


def _one_of(values: tuple[Any, ...] | list[Any]) -> str:
    """``('a', 'b', 'c')`` -> ``a, b or c``."""
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def show(value: Any) -> str:
    """A short, single-line rendering of a user's value for an error message."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        text = str(int(value))  # 30.0 as 30; 1e308 stays 1e+308, not 309 digits
    elif isinstance(value, dict):
        text = "a table"
    elif isinstance(value, list):
        text = "an array"
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
