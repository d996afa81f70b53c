"""The action's inputs (``INPUT_<NAME>`` variables) read into one validated, immutable model.

The runner passes input ``foo-bar`` as ``INPUT_FOO-BAR`` (upper-cased, hyphen kept) and does not
enforce ``required: true``, so every input is checked here. An empty value means "not given" (the
default applies). Every bad input fails with one :class:`~relay_review.errors.UsageError` that
names it and says what is allowed::

    input `limit`: 'abc' is not a whole number

Inputs that mirror policy keys (``pool``, ``limit``, ``deadline``, ...; :data:`POLICY_INPUTS`)
override the policy: their text is read here, their values are checked by the policy's own rules
(:func:`relay_review.config.layers.check_override`), and they become the last layer of the policy
(:meth:`ActionInputs.policy_overrides`, merged by :func:`relay_review.config.layers.merge_layers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from relay_review.config.layers import (
    DEFAULT_POLICY_PATH,
    OverrideError,
    check_override,
    parse_toml,
    validate_policy_data,
)
from relay_review.config.secrets import secret_values as secret_values  # the action's, here
from relay_review.errors import UsageError
from relay_review.github.actions import input_env_name
from relay_review.state import check_state_url

DEFAULT_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
#: GitHub's ``author_association`` values (webhook and REST schemas).
ASSOCIATIONS = frozenset(
    {
        "COLLABORATOR",
        "CONTRIBUTOR",
        "FIRST_TIMER",
        "FIRST_TIME_CONTRIBUTOR",
        "MANNEQUIN",
        "MEMBER",
        "NONE",
        "OWNER",
    }
)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_REPO = re.compile(r"^[A-Za-z0-9-]+/[A-Za-z0-9._-]+$")
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+/@-]*$")
#: How errors in the ``policy`` input name it (the same source name ``relay-review run`` uses).
INLINE_POLICY = "input `policy`"
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\[bot\])?$")
_SPLIT = re.compile(r"[,\n]")

#: Inputs that override a policy key -> that key (:meth:`ActionInputs.policy_overrides`).
POLICY_INPUTS: dict[str, str] = {
    "pool": "catalog.pool",
    "limit": "catalog.limit",
    "account-cap": "catalog.account_cap",
    "require-zdr": "catalog.require_zdr",
    "deadline": "serving.deadline",
    "first-byte-timeout": "serving.first_byte",
    "probe-budget": "preflight.probe_budget",
    "exclude": "review.exclude",
    "language": "review.language",
    "inline-min-severity": "github.inline_min_severity",
    "max-inline-comments": "github.max_inline",
}
#: The comment that asks for a review on ``issue_comment`` (input ``trigger``).
DEFAULT_TRIGGER = "/relay-review"
_TRIGGER = re.compile(r"^/[A-Za-z0-9][A-Za-z0-9_.-]{0,48}$")


class ActionInputs(BaseModel):
    """Every input of ``action.yml``, validated; ``None`` = not given (the policy decides)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    github_token: SecretStr
    policy: str | None = None
    orchestrator_repo: str | None = None
    orchestrator_ref: str | None = None
    orchestrator_path: str = DEFAULT_POLICY_PATH
    orchestrator_min_ref: str | None = None
    pool: Literal["free", "auto"] | None = None
    limit: int | None = None
    account_cap: int | None = None
    require_zdr: Literal["auto", "true", "false"] | None = None
    deadline: float | None = None
    first_byte_timeout: float | None = None
    probe_budget: int | None = None
    exclude: tuple[str, ...] | None = None
    language: str | None = None
    inline_min_severity: str | None = None
    max_inline_comments: int | None = None
    trigger: str = DEFAULT_TRIGGER
    review_drafts: bool = False
    author_associations: frozenset[str] = DEFAULT_ASSOCIATIONS
    fail_on: Literal["never", "request_changes", "high"] = "never"
    on_unavailable: Literal["fail", "pass"] = "fail"
    inline_comments: bool = False
    comment_author: str | None = None
    state: str = "comment"

    def policy_overrides(self) -> dict[str, Any]:
        """The inputs that override policy keys, as a policy-shaped mapping (unset ones left out).

        :func:`relay_review.config.layers.merge_layers` lays it over the policy as the last layer;
        a ``deadline`` there also lowers a longer ``serving.attempt`` from the layers below, so a
        short run deadline given as an input never conflicts with the policy's per-attempt bound.
        """
        table: dict[str, dict[str, Any]] = {}
        for name, key in POLICY_INPUTS.items():
            value = getattr(self, PARSERS[name][0])
            if value is not None:
                section, policy_key = key.split(".")
                table.setdefault(section, {})[policy_key] = (
                    list(value) if isinstance(value, tuple) else value
                )
        return table


# --------------------------------------------------------------------------------------------
# one parser per kind of input; each raises ValueError with the "is not ..." part of the message


def _text(value: str) -> str:
    return value


def _token(value: str) -> str:
    # A token travels in an HTTP header, which holds ASCII only: a pasted curly quote would
    # fail at the first GitHub request, after discovery and preflight had spent provider quota.
    if not value.isascii() or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(
            "is not allowed; use one token of ASCII characters without spaces or line breaks"
        )
    return value


def _policy(value: str) -> str:
    """The inline policy, checked on its own before any request (errors name the input); rules
    across keys wait for the merged policy (a pinned file may set the other key)."""
    validate_policy_data(parse_toml(value, INLINE_POLICY), INLINE_POLICY, layer=True)
    return value


def _whole(value: str) -> int:
    if not re.fullmatch(r"[+]?\d+", value):
        raise ValueError("is not a whole number")
    return int(value)


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError("is not a number of seconds") from None


def _word(value: str) -> str:
    return value.lower()


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        word = value.lower()
        if word not in allowed:
            raise ValueError(f"is not allowed; use {_one_of(allowed)}")
        return word

    return parse


def _policy_key(name: str, read: Callable[[str], Any]) -> Callable[[str], Any]:
    """Input ``name`` overrides a policy key (:data:`POLICY_INPUTS`): read the text, then let the
    policy's own rules (:func:`~relay_review.config.layers.check_override`) say if it is allowed."""
    key = POLICY_INPUTS[name]

    def parse(value: str) -> Any:
        try:
            return check_override(key, read(value))
        except OverrideError as exc:
            raise ValueError(f"is not allowed; use {exc.allowed}") from None

    return parse


def _bool(value: str) -> bool:
    word = value.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError("is not allowed; use true or false")


def _repo(value: str) -> str:
    if not _REPO.fullmatch(value) or value.split("/")[1] in (".", ".."):
        raise ValueError("is not allowed; use owner/repo")
    return value


def _ref(value: str) -> str:
    """A branch, tag or SHA: git's ref rules, and no character a shell would act on.

    relay-review never hands a ref to a shell (refs go to the API in URL paths, escaped), but a
    ref like ``main;curl x|sh`` is a mistake or an attack either way: refuse it by name.
    """
    if (
        len(value) > 255
        or not _REF.fullmatch(value)
        or any(bad in value for bad in ("..", "//", "/.", "@{"))
        or value.endswith((".lock", "/", "."))
    ):
        raise ValueError(
            "is not allowed; use a branch, tag or commit SHA (letters, digits and . _ - + / @)"
        )
    return value


def _path(value: str) -> str:
    parts = value.split("/")
    if (
        value.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or "\\" in value
        or not value.isprintable()  # a newline or other control character
        or len(value) > 1024
    ):
        raise ValueError(
            f"is not allowed; use a relative path inside the repository like {DEFAULT_POLICY_PATH}"
        )
    return value


def _globs(value: str) -> list[str]:
    globs = [item.strip() for item in _SPLIT.split(value) if item.strip()]
    for glob in globs:
        if len(glob) > 500 or not glob.isprintable():
            raise ValueError(
                f"has a pattern that is not allowed ({glob[:40]!r}); use printable glob "
                "patterns of at most 500 characters, separated by commas or new lines"
            )
    return globs


def _trigger(value: str) -> str:
    if not _TRIGGER.fullmatch(value):
        raise ValueError(
            "is not allowed; use a slash command like /relay-review (a '/', then letters, "
            "digits, '.', '_' or '-'; at most 50 characters)"
        )
    return value


def _associations(value: str) -> frozenset[str]:
    words = {w.strip().upper() for w in re.split(r"[,\s]+", value) if w.strip()}
    unknown = sorted(words - ASSOCIATIONS)
    if unknown:
        raise ValueError(
            f"names unknown association(s) {', '.join(unknown)}; use any of "
            f"{', '.join(sorted(ASSOCIATIONS))}"
        )
    if not words:
        raise ValueError("names no association")
    return frozenset(words)


def _state(value: str) -> str:
    """The ``state`` input: the message says what is wrong and what is allowed, never quoting
    the value (a redis:// URL may hold a password)."""
    return check_state_url(value, action=True)


def _login(value: str) -> str:
    if not _LOGIN.fullmatch(value):
        raise ValueError("is not allowed; use a GitHub login like github-actions[bot]")
    return value


#: input name -> (model field, parser). Order = the order errors are reported in.
PARSERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "github-token": ("github_token", _token),
    "policy": ("policy", _policy),
    "orchestrator-repo": ("orchestrator_repo", _repo),
    "orchestrator-ref": ("orchestrator_ref", _ref),
    "orchestrator-path": ("orchestrator_path", _path),
    "orchestrator-min-ref": ("orchestrator_min_ref", _ref),
    "pool": ("pool", _policy_key("pool", _word)),
    "limit": ("limit", _policy_key("limit", _whole)),
    "account-cap": ("account_cap", _policy_key("account-cap", _whole)),
    "require-zdr": ("require_zdr", _policy_key("require-zdr", _word)),
    "deadline": ("deadline", _policy_key("deadline", _number)),
    "first-byte-timeout": ("first_byte_timeout", _policy_key("first-byte-timeout", _number)),
    "probe-budget": ("probe_budget", _policy_key("probe-budget", _whole)),
    "exclude": ("exclude", _policy_key("exclude", _globs)),
    "language": ("language", _policy_key("language", _text)),
    "inline-min-severity": (
        "inline_min_severity",
        _policy_key("inline-min-severity", _word),
    ),
    "max-inline-comments": ("max_inline_comments", _policy_key("max-inline-comments", _whole)),
    "review-drafts": ("review_drafts", _bool),
    "author-associations": ("author_associations", _associations),
    "fail-on": ("fail_on", _choice("never", "request_changes", "high")),
    "on-unavailable": ("on_unavailable", _choice("fail", "pass")),
    "inline-comments": ("inline_comments", _bool),
    "comment-author": ("comment_author", _login),
    "trigger": ("trigger", _trigger),
    "state": ("state", _state),
}
#: Inputs whose value is shown as "(hidden)" in error messages.
#: Inputs whose value is never echoed: the token, and ``state`` (a redis:// URL may hold a
#: password, and is fed from a secret).
SECRET_INPUTS = frozenset({"github-token", "state"})


def raw_input(name: str, env: Mapping[str, str]) -> str | None:
    """The input's value; ``None`` when unset or blank. ``policy`` keeps its inner whitespace."""
    value = env.get(input_env_name(name))
    if value is None or not value.strip():
        return None
    return value if name == "policy" else value.strip()


def read_action_inputs(env: Mapping[str, str]) -> ActionInputs:
    """Read and validate every input from ``env``; the first bad one raises a UsageError."""
    values: dict[str, Any] = {}
    for name, (field, parse) in PARSERS.items():
        raw = raw_input(name, env)
        if raw is None:
            continue
        try:
            values[field] = parse(raw)
        except UsageError:
            raise  # already names the input (the inline policy)
        except ValueError as exc:
            raise UsageError(f"input `{name}`: {_show(name, raw)} {exc}") from None
    if "github_token" not in values:
        raise UsageError(
            "input `github-token` is required; pass `${{ github.token }}` (the default in "
            "action.yml) or a token that may comment on pull requests"
        )
    repo = values.get("orchestrator_repo")
    if repo and not values.get("orchestrator_ref"):
        raise UsageError(
            "input `orchestrator-ref` is required when `orchestrator-repo` is set; use a branch, "
            "tag or commit SHA of the orchestrator repository"
        )
    if not repo:
        for name in ("orchestrator-ref", "orchestrator-min-ref"):
            if raw_input(name, env) is not None:
                raise UsageError(f"input `{name}` is set but `orchestrator-repo` is not; set both")
    return ActionInputs(**values)


def _show(name: str, raw: str) -> str:
    if name in SECRET_INPUTS:
        return "(hidden)"
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


def _one_of(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
