"""The policy schema (``relay-review.toml``): one strict, immutable pydantic model per table.

Unknown keys are rejected and types are strict, so a typo fails loudly instead of being ignored;
each field declares what it allows in words (``_opt``), which :mod:`.explain` puts in the error.
Models build on first use (``defer_build``), not at import, to keep start-up short
(``bench/startup.py``). The sections' default instances are made without a validator of their
own (``model_construct``: the same object, every field at its default; defaults are not
validated in either way, and a test checks they pass the rules), so only :class:`Policy`'s is
built, on the first policy validated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from relay_review.config.explain import show
from relay_review.errors import UsageError
from relay_review.kinds import MODELS_DEV_URL, OPENROUTER_ZDR_URL
from relay_review.records import Deadlines, KindName, Pricing


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
#: The longest a bound (seconds: a timeout, a hedge delay, the run's deadline) may be: a day,
#: longer than any job runs (GitHub's hosted ones stop at 6 h). More is a typo, not a setting.
MAX_BOUND_S = 86_400
#: The longest a memory lifetime (``[memory]``, seconds) may be: ten years, which keeps every
#: time memory stores in the range it accepts back (a longer one was written and then dropped).
MAX_LIFETIME_S = 10 * 365 * 86_400
_SECONDS = {"gt": 0, "le": MAX_BOUND_S, "allow_inf_nan": False}
_BOUND = f"a number of seconds > 0, at most {MAX_BOUND_S} (a day)"
_LIFETIME = {"gt": 0, "le": MAX_LIFETIME_S, "allow_inf_nan": False}
_LIFE = f"a number of seconds > 0, at most {MAX_LIFETIME_S} (ten years)"


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

    timeout: float = _opt(15.0, _BOUND, **_SECONDS)
    models_dev_url: str = _opt(MODELS_DEV_URL, "an http:// or https:// URL", pattern=_URL)
    zdr_url: str = _opt(OPENROUTER_ZDR_URL, "an http:// or https:// URL", pattern=_URL)
    #: Read OpenRouter's published endpoint uptime and key facts (listings, no completion).
    health: bool = True


class PreflightPolicy(_Section):
    """``[preflight]``: how many routes are probed before serving, and how long a probe may take.

    ``mode``: ``hedged`` (the real request goes first to the best-ranked route, its own probe;
    the other routes are probed only when it has not produced a first byte of its answer (not a
    keep-alive comment) within the hedge delay, or failed: then every other route with a key
    once, whatever ``probe_budget`` is, unless it is 0, which means no probes) or ``eager`` (up
    to ``probe_budget`` routes probed before anything serves; the ``preflight`` command probes
    so in either mode). The hedge delay is a multiple of the first byte route memory remembers
    of the route (with a floor), never more than ``hedge_delay_max``, which is also the delay
    when memory knows none (:func:`relay_review.routing.board.hedge_delay`). A first route whose
    stream flows within that delay (a 2xx stream's first byte, keep-alive comments included:
    OpenRouter sends them while the model reads a long prompt) is waited on for its answer up to
    ``hedge_answer_max`` (at least ``hedge_delay_max``; shorter when memory knows when its answer
    began) before the others are probed: a slow answer on a good day costs no probe.
    """

    probe_budget: int = _opt(6, "a whole number >= 0", ge=0)
    probe_timeout: float = _opt(10.0, _BOUND, **_SECONDS)
    mode: Literal["hedged", "eager"] = _opt("hedged", '"hedged" or "eager"')
    hedge_delay_max: float = _opt(0.5, _BOUND, **_SECONDS)
    hedge_answer_max: float = _opt(5.0, _BOUND, **_SECONDS)


#: ``serving.first_token`` when unset (it is then also at most ``serving.attempt``).
FIRST_TOKEN_DEFAULT = 60.0


class ServingPolicy(_Section):
    """``[serving]``: the named deadlines (seconds) of every chat call and of the whole run.

    ``first_token`` (call start -> first content or reasoning delta) lies inside ``attempt``:
    set explicitly it must be at most ``attempt``; unset it is 60 s or ``attempt`` if shorter.
    """

    connect: float = _opt(5.0, _BOUND, **_SECONDS)
    first_byte: float = _opt(20.0, _BOUND, **_SECONDS)
    first_token: float | None = _opt(None, _BOUND, **_SECONDS)
    idle: float = _opt(30.0, _BOUND, **_SECONDS)
    attempt: float = _opt(180.0, _BOUND, **_SECONDS)
    deadline: float = _opt(600.0, _BOUND, **_SECONDS)

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
    #: Repair requests one chunk may cost over all the routes it is asked on (failover included).
    repair_rounds: int = _opt(
        1, "a whole number from 0 to 10 (repair requests one chunk may cost)", ge=0, le=10
    )
    concurrency: int = _opt(3, "a whole number from 1 to 16 (chunks reviewed at once)", ge=1, le=16)
    max_chunks: int = _opt(20, "a whole number >= 1 (more chunks are listed as not reviewed)", ge=1)
    allow_approve: bool = _opt(True, "true or false (false: no findings gives 'comment')")
    guidelines: str | None = _opt(
        None,
        "a relative path inside the reviewed repository like .github/relay-review.md (read on"
        " the default branch)",
        pattern=r"^[^/\x00-\x1f\x7f\\][^\x00-\x1f\x7f\\]*$",
        max_length=1024,  # not {0,1023} in the pattern: the same rule, a much smaller regex
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
        pattern=r"^[^\W\d_](?:[^\W\d_]| |-)*$",
        max_length=40,  # not {0,39} in the pattern: the same rule, 40 ms less to build (Unicode)
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
        gt=0,
        le=300,
        allow_inf_nan=False,
    )
    write_interval: float = _opt(
        1.0,
        "a number of seconds >= 0 and at most 10 (the pause between two GitHub writes; "
        "GitHub asks for at least 1 s between requests that create content)",
        ge=0,
        le=10,
        allow_inf_nan=False,
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

    proven: float = _opt(3600.0, _LIFE, **_LIFETIME)
    dead: float = _opt(86400.0, _LIFE, **_LIFETIME)
    rate_limited: float = _opt(300.0, _LIFE, **_LIFETIME)
    timeout: float = _opt(300.0, _LIFE, **_LIFETIME)
    timeout_max: float = _opt(3600.0, _LIFE, **_LIFETIME)
    server_error: float = _opt(60.0, _LIFE, **_LIFETIME)
    review: float = _opt(14 * 86400.0, _LIFE, **_LIFETIME)
    #: A finding's state across pushes (first seen, fixed, dismissed), by fingerprint.
    findings: float = _opt(90 * 86400.0, _LIFE, **_LIFETIME)


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

    catalog: CatalogPolicy = CatalogPolicy.model_construct()
    accounts: list[AccountPolicy] = _opt([], "[[accounts]] tables")
    discovery: DiscoveryPolicy = DiscoveryPolicy.model_construct()
    preflight: PreflightPolicy = PreflightPolicy.model_construct()
    serving: ServingPolicy = ServingPolicy.model_construct()
    review: ReviewPolicy = ReviewPolicy.model_construct()
    github: GitHubPolicy = GitHubPolicy.model_construct()
    memory: MemoryPolicy = MemoryPolicy.model_construct()
    state: StatePolicy = StatePolicy.model_construct()


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
    raise UsageError(f"require_zdr = {show(setting)} is not allowed; use auto, true or false")
