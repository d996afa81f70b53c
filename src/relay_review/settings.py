"""The policy file (``relay-review.toml``) and the accounts it and the environment define.

The policy is read with :mod:`tomllib` and validated by strict pydantic models that forbid unknown
keys, so a typo fails loudly instead of being ignored. Every bad value fails with one
:class:`~relay_review.errors.UsageError` naming the file, the key path and what is allowed::

    relay-review.toml: catalog.pool = 'cheap' is not allowed; use free or auto

Every source of configuration is a :class:`Layer` merged by :func:`merge_layers`, the one place
a Policy is assembled: the policy file, the inline policy, command-line flags and action inputs
(the last two through :func:`check_override` as they are read, so a bad flag or input is refused
in the file's words before any work). Rules across keys are checked on the merged whole.

Accounts come from two places: ``[[accounts]]`` tables in the policy, and key variables found in
the environment by convention (see :func:`env_accounts`). A policy account wins over an
environment account of the same name. Key *values* are never read into these records: an
:class:`Account` only names the variable that holds its key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic.fields import FieldInfo

from relay_review.errors import UsageError
from relay_review.models import Account, Deadlines, KindName, Pricing
from relay_review.providers.kinds import (
    ENV_FAMILIES,
    KINDS,
    MODELS_DEV_URL,
    OPENROUTER_ZDR_URL,
    account_url_env,
    default_key_env,
    env_family_for,
    family_key_env,
    family_url_env,
    fill_base_url,
)

DEFAULT_POLICY_FILE = "relay-review.toml"
INLINE_SOURCE = "inline policy"


def _word_for_bool(value: Any) -> Any:
    """Let ``require_zdr = true`` (a TOML boolean) mean the same as ``"true"``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


RequireZdr = Annotated[Literal["auto", "true", "false"], BeforeValidator(_word_for_bool)]


def _opt(default: Any, allowed: str, **constraints: Any) -> Any:
    """A policy field whose error message says ``use <allowed>``."""
    return Field(default, json_schema_extra={"allowed": allowed}, **constraints)


_URL = r"^https?://[^\s/]+\S*$"
_SECONDS = {"gt": 0, "allow_inf_nan": False}


class _Section(BaseModel):
    """Base of every policy table: strict types, unknown keys rejected, immutable."""

    model_config = ConfigDict(defer_build=True, strict=True, extra="forbid", frozen=True)


class CatalogPolicy(_Section):
    """``[catalog]``: which routes are eligible and how many the catalog selects."""

    pool: Literal["free", "auto"] = "free"
    limit: int = _opt(12, "a whole number >= 1", ge=1)
    account_cap: int = _opt(8, "a whole number >= 1", ge=1)
    require_zdr: RequireZdr = "auto"
    #: Routes whose published uptime (percent, OpenRouter's endpoints listing) is below this
    #: are served and probed last within their tier; 0 turns the prior off.
    min_uptime: float = _opt(90.0, "a percent from 0 to 100", ge=0, le=100, allow_inf_nan=False)


class AccountPolicy(_Section):
    """One ``[[accounts]]`` table as written; :func:`resolve_accounts` fills in the defaults."""

    name: str = _opt(
        ...,
        "lower-case letters, digits, '_', '-' or '.', starting with a letter or digit",
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        max_length=64,
    )
    kind: KindName
    base_url: str | None = _opt(None, "an http:// or https:// URL", pattern=_URL)
    api_key_env: str | None = _opt(
        None, "an environment variable name like MY_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"
    )
    pricing: Pricing | None = None
    models_dev_provider: str | None = _opt(
        None, "a Models.dev provider id like nvidia", pattern=r"^[A-Za-z0-9_.-]+$"
    )
    rpm: int | None = _opt(
        None, "a whole number >= 1 (requests per minute the account allows)", ge=1, le=100_000
    )
    rpd: int | None = _opt(
        None, "a whole number >= 1 (requests per day the account allows)", ge=1, le=10_000_000
    )
    #: How the review asks this account's routes for JSON (``auto``: what the kind documents,
    #: else ``json_schema``, stepping down once on a refusal that names ``response_format``).
    response_format: Literal["auto", "json_schema", "json_object", "none"] = _opt(
        "auto", '"auto", "json_schema", "json_object" or "none"'
    )


class DiscoveryPolicy(_Section):
    """``[discovery]``: the bound and endpoints of model-list discovery (URLs overridable)."""

    timeout: float = _opt(15.0, "a number of seconds > 0", **_SECONDS)
    models_dev_url: str = _opt(MODELS_DEV_URL, "an http:// or https:// URL", pattern=_URL)
    zdr_url: str = _opt(OPENROUTER_ZDR_URL, "an http:// or https:// URL", pattern=_URL)
    #: Read OpenRouter's published endpoint uptime and key facts (listings, no completion).
    health: bool = True


class PreflightPolicy(_Section):
    """``[preflight]``: how many routes are probed before serving, and how long a probe may take.

    ``mode``: ``hedged`` (the real request goes first to the best-ranked route, its own probe;
    the other routes are probed only when it has not produced a first byte within the hedge
    delay) or ``eager`` (up to ``probe_budget`` routes probed before anything serves). The hedge
    delay is 3 x the first byte route memory remembers of the route (at least 0.25 s), never more
    than ``hedge_delay_max``, which is also the delay when memory knows none
    (:func:`relay_review.routing.board.hedge_delay`).
    """

    probe_budget: int = _opt(6, "a whole number >= 0", ge=0)
    probe_timeout: float = _opt(10.0, "a number of seconds > 0", **_SECONDS)
    mode: Literal["hedged", "eager"] = _opt("hedged", '"hedged" or "eager"')
    hedge_delay_max: float = _opt(0.5, "a number of seconds > 0", **_SECONDS)


#: ``serving.first_token`` when unset (it is then also at most ``serving.attempt``).
FIRST_TOKEN_DEFAULT = 60.0


class ServingPolicy(_Section):
    """``[serving]``: the named deadlines (seconds) of every chat call and of the whole run.

    ``first_token`` (call start -> first content or reasoning delta) lies inside ``attempt``:
    set explicitly it must be at most ``attempt``; unset it is 60 s or ``attempt`` if shorter.
    """

    connect: float = _opt(5.0, "a number of seconds > 0", **_SECONDS)
    first_byte: float = _opt(20.0, "a number of seconds > 0", **_SECONDS)
    first_token: float | None = _opt(None, "a number of seconds > 0", **_SECONDS)
    idle: float = _opt(30.0, "a number of seconds > 0", **_SECONDS)
    attempt: float = _opt(180.0, "a number of seconds > 0", **_SECONDS)
    deadline: float = _opt(600.0, "a number of seconds > 0", **_SECONDS)

    @property
    def first_token_bound(self) -> float:
        """The first_token bound in effect (the default capped by ``attempt``)."""
        if self.first_token is not None:
            return self.first_token
        return min(FIRST_TOKEN_DEFAULT, self.attempt)

    def deadlines(self) -> Deadlines:
        """The per-call bounds as the record the chat client takes."""
        return Deadlines(
            connect=self.connect,
            first_byte=self.first_byte,
            idle=self.idle,
            attempt=self.attempt,
            first_token=self.first_token_bound,
        )


class PathInstructions(_Section):
    """One ``[[review.paths]]`` table: maintainers' instructions for the files a glob matches."""

    glob: str = _opt(..., 'a glob string like "src/api/**"', min_length=1, max_length=500)
    instructions: str = _opt(
        ..., "a string of at most 2000 characters", min_length=1, max_length=2000
    )


class ReviewPolicy(_Section):
    """``[review]``: what is reviewed and how long the model's answer may be."""

    exclude: list[str] = _opt([], 'a list of glob strings like ["*.lock", "dist/**"]')
    default_excludes: bool = _opt(True, "true or false (skip lock, generated and vendored files)")
    trusted_excludes: list[str] = _opt(
        [],
        'a list of glob strings like ["*.lock", "go.sum"] (excluded files they match may still'
        " approve)",
    )
    max_line_chars: int = _opt(
        4000,
        "a whole number from 200 to 1000000 (a file with a longer changed line is not reviewed)",
        ge=200,
        le=1_000_000,
    )
    max_output_tokens: int = _opt(4096, "a whole number >= 1", ge=1)
    #: Sampling temperature sent with every request (low: the same diff, the same review).
    temperature: float = _opt(0.2, "a number from 0 to 2", ge=0, le=2, allow_inf_nan=False)
    context_tokens: int = _opt(
        32768, "a whole number >= 2048 (context window assumed when discovery gives none)", ge=2048
    )
    chunk_tokens: int | None = _opt(
        None,
        "a whole number >= 256 (most diff tokens in one request; default: fit the context)",
        ge=256,
    )
    concurrency: int = _opt(3, "a whole number from 1 to 16 (chunks reviewed at once)", ge=1, le=16)
    max_chunks: int = _opt(20, "a whole number >= 1 (more chunks are listed as not reviewed)", ge=1)
    allow_approve: bool = _opt(True, "true or false (false: no findings gives 'comment')")
    guidelines: str | None = _opt(
        None,
        "a relative path inside the reviewed repository like .github/relay-review.md (read on"
        " the default branch)",
        pattern=r"^[^/\x00-\x1f\x7f\\][^\x00-\x1f\x7f\\]{0,1023}$",
    )

    @field_validator("guidelines")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and any(p in ("", ".", "..") for p in value.split("/")):
            raise ValueError("not a relative path inside the repository")
        return value

    paths: list[PathInstructions] = _opt([], "[[review.paths]] tables with glob and instructions")
    language: str | None = _opt(
        None,
        "a language name like Korean, Deutsch or pt-BR (letters, spaces, '-', at most 40)",
        pattern=r"^[^\W\d_](?:[^\W\d_]| |-){0,39}$",
    )
    context_lines: int = _opt(
        20,
        "a whole number from 0 to 200 (head-file lines shown around each hunk, budget allowing)",
        ge=0,
        le=200,
    )


class GitHubPolicy(_Section):
    """``[github]``: the bounds of every GitHub API call (the edge that posts the verdict)."""

    timeout: float = _opt(
        30.0,
        "a number of seconds > 0 and at most 300 (a GitHub connect or read)",
        le=300,
        **_SECONDS,
    )
    max_wait: float = _opt(
        60.0,
        "a number of seconds >= 0 and at most 600 (longest wait GitHub's rate limit may ask)",
        ge=0,
        le=600,
        allow_inf_nan=False,
    )
    single_comments: int = _opt(
        10,
        "a whole number from 0 to 100 (line comments posted one by one when GitHub refuses "
        "the review with 422)",
        ge=0,
        le=100,
    )
    #: Noise controls (issue 26): which verified findings become inline comments; every one is
    #: in the sticky comment all the same.
    inline_min_severity: Literal["low", "medium", "high"] = _opt(
        "medium",
        "low, medium or high (the lowest severity posted as an inline comment)",
    )
    max_inline: int = _opt(
        10,
        "a whole number from 0 to 100 (most inline comments one run posts; the rest stay in "
        "the sticky comment)",
        ge=0,
        le=100,
    )


class MemoryPolicy(_Section):
    """``[memory]``: how long each remembered outcome counts in later runs (seconds).

    ``proven``: a route that served is served first, unprobed. ``dead``: 404, unknown model, a
    400 model error, or (for the whole account) 401/403/402. ``rate_limited``: a 429 without a
    Retry-After (with one: until it ends). ``timeout``: the first cooldown of a silent route,
    doubled on each repeat up to ``timeout_max``. ``server_error``: a 5xx or refused connection.
    ``review``: a reviewed file's verified findings are reused while its content is unchanged.
    ``findings``: a finding's state across pushes (first seen, fixed, dismissed).
    """

    proven: float = _opt(3600.0, "a number of seconds > 0", **_SECONDS)
    dead: float = _opt(86400.0, "a number of seconds > 0", **_SECONDS)
    rate_limited: float = _opt(300.0, "a number of seconds > 0", **_SECONDS)
    timeout: float = _opt(300.0, "a number of seconds > 0", **_SECONDS)
    timeout_max: float = _opt(3600.0, "a number of seconds > 0", **_SECONDS)
    server_error: float = _opt(60.0, "a number of seconds > 0", **_SECONDS)
    review: float = _opt(14 * 86400.0, "a number of seconds > 0", **_SECONDS)
    #: A finding's state across pushes (first seen, fixed, dismissed), by fingerprint.
    findings: float = _opt(90 * 86400.0, "a number of seconds > 0", **_SECONDS)


class StatePolicy(_Section):
    """``[state]``: the shared store (Redis). ``timeout_s``: the longest one Redis connect, reply
    or quota-ledger call may take before the run goes on without it (raise it for a Redis
    far away: a hosted one in another region is 150 ms or more per round trip)."""

    timeout_s: float = _opt(
        1.0, "a number of seconds > 0, at most 30", gt=0, le=30, allow_inf_nan=False
    )
    #: The share of each window of an account's budget one run sends on its own once the
    #: shared ledger is lost or never reached (at least one request per window): ``n`` runs
    #: without it send at most ``n`` times this share. 1: a whole window each (no bound).
    offline_share: float = _opt(0.25, "a number from 0 to 1", ge=0, le=1, allow_inf_nan=False)


class Policy(_Section):
    """The whole policy file: one validated object, every section with its defaults."""

    catalog: CatalogPolicy = CatalogPolicy()
    accounts: list[AccountPolicy] = _opt([], "[[accounts]] tables")
    discovery: DiscoveryPolicy = DiscoveryPolicy()
    preflight: PreflightPolicy = PreflightPolicy()
    serving: ServingPolicy = ServingPolicy()
    review: ReviewPolicy = ReviewPolicy()
    github: GitHubPolicy = GitHubPolicy()
    memory: MemoryPolicy = MemoryPolicy()
    state: StatePolicy = StatePolicy()


# --------------------------------------------------------------------------------------------
# loading


@dataclass(frozen=True)
class Layer:
    """One source of policy values, laid over the sources before it.

    ``source`` names it in error messages (a file path, ``input `policy```, ``command line``).
    ``caps_attempt``: a deadline set here lowers the ``serving.attempt`` (and an inherited
    ``serving.first_token``) it inherits from the layers below (one attempt never outlasts the
    run), unless this layer sets the attempt too;
    flags and action inputs work this way, so ``--deadline 5`` alone needs no policy edit while
    ``--attempt-timeout 900 --deadline 5`` is refused like the same two keys in a file.
    """

    source: str
    data: Mapping[str, Any]
    caps_attempt: bool = False


def file_layer(path: str | Path) -> Layer:
    """The policy file at ``path`` as a layer (read and parsed; validated when merged)."""
    source = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{source}: policy file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{source}: cannot read the policy file ({exc})") from None
    return Layer(source, parse_toml(raw, source))


def load_policy(
    path: str | Path | None = None, text: str | None = None, *, text_source: str = INLINE_SOURCE
) -> Policy:
    """Read the policy file (if any), lay inline TOML over it (if any); see :func:`merge_layers`."""
    layers = [file_layer(path)] if path is not None else []
    if text is not None:
        layers.append(Layer(text_source, parse_toml(text, text_source)))
    return merge_layers(layers)


def merge_layers(layers: Sequence[Layer]) -> Policy:
    """The one way every source becomes a Policy: files, inline TOML, flags, action inputs.

    Each layer is validated on its own first, so an error names the layer it came from; then the
    layers are merged in order (tables key by key, ``accounts`` replaced wholesale) and the
    merged whole is validated again, rules across keys included; its errors name every layer
    (``a.toml + command line: ...``). No layers: the built-in defaults.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        validate_policy_data(layer.data, layer.source, layer=True)
        merged = merge_policy_data(merged, layer.data)
        serving = layer.data.get("serving") or {}
        if layer.caps_attempt and "deadline" in serving and "attempt" not in serving:
            merged = _cap_attempt(
                merged, serving["deadline"], first_token="first_token" not in serving
            )
    return validate_policy_data(
        merged, " + ".join(layer.source for layer in layers) or "built-in defaults"
    )


def _cap_attempt(data: dict[str, Any], deadline: float, *, first_token: bool) -> dict[str, Any]:
    """Lower ``serving.attempt`` (set below, or the default) to ``deadline`` when it is longer,
    and (``first_token``: this layer does not set it) an inherited ``serving.first_token`` too."""
    serving = dict(data.get("serving") or {})
    attempt = serving.get("attempt", ServingPolicy.model_fields["attempt"].default)
    if isinstance(attempt, int | float) and attempt > deadline:
        serving["attempt"] = deadline
    inherited = serving.get("first_token")
    if first_token and isinstance(inherited, int | float) and inherited > deadline:
        serving["first_token"] = deadline
    return {**data, "serving": serving}


class OverrideError(ValueError):
    """A single override value the policy refuses; ``allowed`` says what it accepts in words."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        super().__init__(f"{key} = {_show(value)} is not allowed; use {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def check_override(key: str, value: Any) -> Any:
    """Check one value for the policy key ``key`` (``catalog.limit``) by the policy's own rules.

    Flags and action inputs call this as they are read, so a bad one is refused before any work
    with the same words a policy file gets; returns the value as the policy holds it.
    """
    section, name = key.split(".")
    try:
        policy = Policy.model_validate({section: {name: value}})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise OverrideError(key, value, _allowed(tuple(error["loc"]), error)) from None
    return getattr(getattr(policy, section), name)


def parse_policy(text: str, source: str = INLINE_SOURCE) -> Policy:
    """Validate a policy given as TOML text; ``source`` names it in error messages."""
    return validate_policy_data(parse_toml(text, source), source)


def merge_policy_data(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Lay ``override`` over ``base``: tables merge key by key, other values (lists too) replace."""
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_policy_data(old, value)
        else:
            merged[key] = value
    return merged


def validate_policy_data(data: Mapping[str, Any], source: str, *, layer: bool = False) -> Policy:
    """Validate parsed TOML as a :class:`Policy`; the first problem becomes one UsageError.

    ``layer``: ``data`` is one layer of several (a pinned file, the inline policy): every key
    and value is checked, but rules across keys (``serving.attempt <= serving.deadline``) wait
    for the merged policy, where another layer may set the other key.
    """
    try:
        policy = Policy.model_validate(dict(data))
    except ValidationError as exc:
        raise UsageError(_explain(exc, source)) from None
    if not layer:
        _check_consistency(policy, source)
    return policy


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML, turning a syntax error into a UsageError that names the source."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{source}: not valid TOML: {exc}") from None


def _check_consistency(policy: Policy, source: str) -> None:
    """Rules that span keys: unique account names, a base URL where the kind has none, deadlines."""
    seen: dict[str, int] = {}
    for index, account in enumerate(policy.accounts):
        if account.name in seen:
            raise UsageError(
                f"{source}: accounts[{index}].name = {_show(account.name)} is not allowed; "
                f"use a name no other account has (accounts[{seen[account.name]}] has it)"
            )
        seen[account.name] = index
        if account.base_url is None and KINDS[account.kind].base_url is None:
            raise UsageError(
                f"{source}: accounts[{index}].base_url is required for kind {account.kind}; "
                "use an http:// or https:// URL"
            )
    serving = policy.serving
    if serving.attempt > serving.deadline:
        raise UsageError(
            f"{source}: serving.attempt = {_show(serving.attempt)} is not allowed; use a number "
            f"of seconds > 0 and at most serving.deadline ({_show(serving.deadline)})"
        )
    if serving.first_token is not None and serving.first_token > serving.attempt:
        raise UsageError(
            f"{source}: serving.first_token = {_show(serving.first_token)} is not allowed; use a "
            f"number of seconds > 0 and at most serving.attempt ({_show(serving.attempt)})"
        )


# --------------------------------------------------------------------------------------------
# error messages


def _explain(exc: ValidationError, source: str) -> str:
    """One sentence for the first validation error: file, key path, value, what is allowed."""
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    path = _key_path(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = ", ".join(parent.model_fields) if parent else ""
        where = f"[{_key_path(loc[:-1])}]" if loc[:-1] else "the policy"
        return f"{source}: {path} is not a known key; keys allowed in {where}: {known}"
    if kind == "missing":
        return f"{source}: {path} is required; use {_allowed(loc, error)}"
    value = _show(error.get("input"))
    return f"{source}: {path} = {value} is not allowed; use {_allowed(loc, error)}"


def _key_path(loc: tuple[Any, ...]) -> str:
    """``('accounts', 1, 'kind')`` -> ``accounts[1].kind``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part)
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                name = _show(name)  # a user's unknown key: quoted, one line, capped
            out += f".{name}" if out else name
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The policy model class that holds the keys at ``loc`` (None if ``loc`` is not a table)."""
    current: Any = Policy
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


def _field_at(loc: tuple[Any, ...]) -> FieldInfo | None:
    """The field declaration at ``loc`` (ignoring trailing list indexes), if there is one."""
    while loc and isinstance(loc[-1], int):
        loc = loc[:-1]
    if not loc:
        return None
    parent = _model_at(loc[:-1])
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


def _allowed(loc: tuple[Any, ...], error: Mapping[str, Any]) -> str:
    """What the key at ``loc`` accepts, in words."""
    field = _field_at(loc)
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


def _show(value: Any) -> str:
    """A short, single-line rendering of a user's value for an error message."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    elif isinstance(value, dict):
        text = "a table"
    elif isinstance(value, list):
        text = "an array"
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------------------------
# decisions and accounts


def resolve_require_zdr(setting: str | bool, repo_private: bool | None) -> bool:
    """Whether only zero-data-retention routes may serve.

    ``auto`` means "true for private repositories". When visibility is unknown (``None``) it
    resolves to true: sending a possibly private diff only to no-retention endpoints is the
    safe side of not knowing.
    """
    word = _word_for_bool(setting)
    if word == "true":
        return True
    if word == "false":
        return False
    if word == "auto":
        return True if repo_private is None else bool(repo_private)
    raise UsageError(f"require_zdr = {_show(setting)} is not allowed; use auto, true or false")


_SUFFIX = re.compile(r"^[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*$")


def env_accounts(environ: Mapping[str, str]) -> list[Account]:
    """Accounts found from key variables by convention; only variables with a non-empty value.

    ``OPENROUTER_API_KEY`` -> ``openrouter``; ``OPENROUTER_API_KEY_<SUFFIX>`` ->
    ``openrouter_<suffix lower-cased>``; likewise ``NVIDIA_NIM_API_KEY`` (``nvidia_nim``),
    ``OPENCODE_API_KEY`` (``opencode``), ``OPENCODE_GO_API_KEY`` (``opencode_go``, the
    OpenCode Go endpoint), ``GROQ_API_KEY``, ``CEREBRAS_API_KEY``, ``GEMINI_API_KEY``,
    ``MISTRAL_API_KEY``, ``SAMBANOVA_API_KEY``, ``HF_TOKEN`` (``huggingface``) and
    ``CLOUDFLARE_API_TOKEN`` (``cloudflare``; ``CLOUDFLARE_ACCOUNT_ID`` with the same suffix fills
    its base URL). Should two variables yield one name (``OPENCODE_API_KEY_GO`` and
    ``OPENCODE_GO_API_KEY``), the more specific family (``OPENCODE_GO_...``) wins.
    """
    found: dict[str, tuple[int, Account]] = {}
    for variable in sorted(environ):
        if not environ[variable].strip():
            continue
        for family in ENV_FAMILIES:
            if variable == family.key_env:
                name = family.account
            elif variable.startswith(family.key_env + "_") and _SUFFIX.match(
                variable[len(family.key_env) + 1 :]
            ):
                name = f"{family.account}_{variable[len(family.key_env) + 1 :].lower()}"
            else:
                continue
            account = Account(
                name=name,
                kind=family.kind,
                base_url=fill_base_url(family.base_url, family_url_env(family, name), environ),
                api_key_env=variable,
                pricing=KINDS[family.kind].pricing,
                models_dev_provider=family.models_dev_provider,
                source="env",
            )
            specificity = len(family.account)
            if name not in found or found[name][0] < specificity:
                found[name] = (specificity, account)
    return [found[name][1] for name in sorted(found)]


def policy_account(declared: AccountPolicy) -> Account:
    """Fill a declared account's unset fields from its kind and its name's key convention."""
    kind = KINDS[declared.kind]
    family = env_family_for(declared.name, declared.kind)
    base_url = declared.base_url or (family.base_url if family else kind.base_url)
    if base_url is None:  # validation requires base_url for kinds without one
        raise UsageError(f"account {declared.name}: base_url is required for kind {declared.kind}")
    if declared.api_key_env:
        key_env = declared.api_key_env
    elif family:
        key_env = family_key_env(family, declared.name)
    else:
        key_env = default_key_env(declared.name, declared.kind)
    models_dev = declared.models_dev_provider or (
        family.models_dev_provider if family else kind.models_dev_provider
    )
    return Account(
        name=declared.name,
        kind=declared.kind,
        base_url=base_url.rstrip("/"),
        api_key_env=key_env,
        pricing=declared.pricing or kind.pricing,
        models_dev_provider=models_dev,
        source="policy",
    )


def resolve_accounts(policy: Policy, environ: Mapping[str, str]) -> list[Account]:
    """Every account, sorted by name: the policy's, plus the environment's not shadowed by them.

    Policy accounts are listed whether or not their key is set (discovery skips keyless ones);
    environment accounts exist only when their variable is non-empty.
    """
    accounts = {acc.name: acc for acc in env_accounts(environ)}
    for decl in policy.accounts:
        account = policy_account(decl)
        filled = fill_base_url(account.base_url, account_url_env(decl.name, decl.kind), environ)
        if filled != account.base_url:
            account = account.model_copy(update={"base_url": filled})
        accounts[decl.name] = account
    return [accounts[name] for name in sorted(accounts)]


def key_conventions() -> list[str]:
    """The key variables searched by convention, for messages: ``OPENROUTER_API_KEY[_<SUFFIX>]``."""
    return [f"{family.key_env}[_<SUFFIX>]" for family in ENV_FAMILIES]
