"""Behaviour scripts: how a fault-fleet model id says what the server does to its requests.

Behaviour scheme
================

A model's behaviour is a *script*, written in the model id's last ``/`` segment (so ``a/stall``
and ``b/stall`` are two stalled models) or given explicitly per model id::

    script := step (">" step)*            steps run in order; the last one repeats forever
    step   := kind ["@" arg ("," arg)*] ["*" N]   "*N": this step serves N requests (default 1)
    arg    := number                      the kind's main parameter (below)
            | name "=" number             delay, gap, n, retry_after, code, over
            | flag                        stall, rst, leak, nim, date, meta, noheader, litellm,
                                          daily, groq, gemini, cloudflare, reasoning,
                                          filter, moderation, waf, trigger

========================  ============  ==========================================================
kind                      main param    what the server does (``delay`` always waits before it)
========================  ============  ==========================================================
``healthy``               delay         the reply, streamed in word pieces, ``[DONE]``; honours
                                        ``max_tokens`` (cut to that many pieces, ``length``);
                                        ``gap``: seconds before each piece (default 0)
``stall``                 delay         reads the request, never answers (until the client leaves)
``headers-stall``         delay         200 headers, then nothing
``cut``                   n (2)         ``n`` content chunks, then closes without finish/[DONE]
                                        (``rst``: abort the socket instead of a clean close)
``drip``                  gap (0.2)     ``n`` (10) content chunks, ``gap`` seconds before each
``keepalive``             gap (0.2)     ``n`` (3) ``: OPENROUTER PROCESSING`` comments ``gap``
                                        apart, then the reply (``reasoning``: the first ``n``
                                        events are ``reasoning`` deltas instead of comments)
``pings``                 gap (1)       200 ``text/event-stream``, then only ``: ping`` comments
                                        ``gap`` apart, forever (LiteLLM's keep-alive while its
                                        upstream is silent)
``error-body``            delay         200 ``application/json`` ``{"error": {...}}``
``sse-error``             delay         one chunk, then an error event (``error`` object with
                                        ``code`` (502; ``code=429`` says "Please try again in
                                        <retry_after>s"), ``finish_reason: "error"``), ``[DONE]``
``finish-error``          delay         one chunk, then ``finish_reason: "error"`` (no error object)
``no-finish``             delay         content chunks, then a clean end without finish/[DONE]
``finish-stall``          delay         the whole reply with its finish_reason, then silence
                                        (no ``[DONE]``, connection left open)
``empty``                 delay         ``finish_reason: stop`` with no content
``length-empty``          delay         ``finish_reason: length`` with no content
``garbage``               delay         an event whose data is not JSON
``plain``                 delay         ignores ``stream`` and answers one JSON completion
``close``                 delay         closes the connection without a response
``context``               delay         400 "maximum context length" error
``<4xx|5xx>`` e.g. 404    delay         that status with an OpenRouter-style error body
                                        (``nim``: NVIDIA-style ``{status, title, detail}``;
                                        ``stall``: headers, then the body never comes)
``429``                   retry_after   ``Retry-After: <s>`` (default 30; ``date``: as an
                                        HTTP-date; ``meta``: only OpenRouter's
                                        ``error.metadata.headers.X-RateLimit-Reset``;
                                        ``noheader``: no hint at all; ``litellm``: as
                                        ``llm_provider-retry-after``; ``daily``: OpenRouter's
                                        ``free-models-per-day`` body, remaining 0, reset in
                                        ``retry_after`` s; ``groq``: only "Please try again in
                                        <s>s" in the message; ``gemini``: ``RESOURCE_EXHAUSTED``
                                        with a ``PerDay`` quota id; ``cloudflare``: code 4006)
``413``                   delay         ``groq``: Groq's documented body, "Request too large for
                                        model ... on tokens per minute (TPM): Limit <n> (6000),
                                        Requested <the request's estimated tokens>, ..."
========================  ============  ==========================================================

Content refusals (on an error status kind): ``filter`` answers the status with a content-filter
message (``{"error": {"code": 400, "message": "content filter ..."}}``), ``moderation`` with
OpenRouter's moderation body (``error.metadata.reasons``, ``flagged_input``), ``waf`` with an
HTML page (``text/html``, as a gateway's web application firewall sends). ``trigger`` makes any
step apply only to a request whose messages hold :data:`TRIGGER`; other requests are answered
``healthy`` (so one model refuses a diff with trigger text and reviews a clean one), e.g.
``400@filter,trigger``, ``403@moderation,trigger``, ``403@waf,trigger``. ``over=N`` likewise
makes a step apply only to a request whose messages hold more than ``N`` characters (a size
limit: ``413@groq,over=1500`` refuses the whole diff and answers its smaller parts).

``leak`` makes the reply or error message echo the ``Authorization`` header it received (for
tests proving the key never reaches an Outcome): error statuses, ``error-body``, ``sse-error``,
``garbage`` (inside the unparsable data) and every kind that streams the reply text. The key is
echoed encoded too, as servers that print what they received do: in base64 as a ``Basic``
credential (``user:<key>``), the whole header in URL-safe base64, and percent-encoded.

Examples: ``healthy@0.3``, ``drip@0.2,n=20``, ``429@5,date``, ``500@stall``,
``healthy@0.1>stall`` (the first request is answered, later ones stall: a probe that passes and
a serve that hangs), ``500@leak``.

Replies: a behaviour's ``reply`` (a string or ``Callable[[dict], str]`` receiving the request
JSON), else the fleet's ``reply``, else ``"OK"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["KINDS", "TRIGGER", "Behaviour", "Reply", "Script", "parse_script", "script_of"]

#: The text a ``trigger`` step looks for in a request's messages (see the module docs).
TRIGGER = "drill-trigger-text"

Reply = str | Callable[[dict], str]
RetryStyle = Literal[
    "header", "date", "meta", "noheader", "litellm", "daily", "groq", "gemini", "cloudflare"
]

#: kind -> name of its main (positional) parameter. Numeric status kinds are handled apart.
KINDS: dict[str, str] = {
    "healthy": "delay",
    "stall": "delay",
    "headers-stall": "delay",
    "cut": "n",
    "drip": "gap",
    "keepalive": "gap",
    "pings": "gap",
    "error-body": "delay",
    "sse-error": "delay",
    "finish-error": "delay",
    "no-finish": "delay",
    "finish-stall": "delay",
    "empty": "delay",
    "length-empty": "delay",
    "garbage": "delay",
    "plain": "delay",
    "close": "delay",
    "context": "delay",
}
_DEFAULT_N = {"cut": 2, "drip": 10, "keepalive": 3}
_DEFAULT_GAP = {"drip": 0.2, "keepalive": 0.2, "pings": 1.0}
_RETRY_STYLES = {"date", "meta", "noheader", "litellm", "daily", "groq", "gemini", "cloudflare"}
_REFUSALS = {"filter", "moderation", "waf"}
_FLAGS = {"stall", "rst", "leak", "nim", "reasoning", "trigger", *_REFUSALS, *_RETRY_STYLES}
_PARAMS = ("delay", "gap", "n", "retry_after", "code", "over")
_STEP_RE = re.compile(r"^(?P<kind>[a-z0-9-]+)(?:@(?P<args>[^*]*))?(?:\*(?P<times>\d+))?$")


@dataclass(frozen=True)
class Behaviour:
    """One scripted behaviour of a model (see the module docstring for the scheme)."""

    kind: str
    delay: float = 0.0
    gap: float = 0.0
    n: int = 0
    retry_after: float | None = None
    retry_style: RetryStyle = "header"
    stall_body: bool = False
    rst: bool = False
    leak: bool = False
    nim: bool = False
    reasoning: bool = False
    #: A content refusal's body (error status kinds): ``filter``, ``moderation`` or ``waf``.
    refusal: Literal["filter", "moderation", "waf"] | None = None
    #: Applies only to requests whose messages hold this text (others are answered healthy).
    only_if: str | None = None
    #: Applies only to requests whose messages hold more than this many characters.
    over: int | None = None
    code: int | None = None
    reply: Reply | None = None
    times: int | None = None

    @property
    def status(self) -> int | None:
        """The HTTP error status this behaviour answers with, if it is an error status kind."""
        if self.kind.isdigit():
            return int(self.kind)
        return 400 if self.kind == "context" else None

    def __post_init__(self) -> None:
        if self.kind not in KINDS and not (self.kind.isdigit() and 400 <= int(self.kind) <= 599):
            raise ValueError(
                f"unknown fault kind {self.kind!r} (known: {', '.join(KINDS)}, 4xx/5xx)"
            )


Script = tuple[Behaviour, ...]


def parse_script(spec: str, *, reply: Reply | None = None) -> Script:
    """Parse a behaviour script such as ``"healthy@0.3"`` or ``"healthy*2>stall"``.

    Raises ValueError naming the bad part.
    """
    steps = []
    for raw in spec.strip().split(">"):
        match = _STEP_RE.match(raw.strip())
        if not match:
            raise ValueError(f"bad behaviour step {raw!r} in {spec!r}")
        kind = match["kind"]
        main = "retry_after" if kind == "429" else KINDS.get(kind, "delay")
        values: dict[str, Any] = {}
        if kind in _DEFAULT_N:
            values["n"] = _DEFAULT_N[kind]
        if kind in _DEFAULT_GAP:
            values["gap"] = _DEFAULT_GAP[kind]
        if kind == "429":
            values["retry_after"] = 30.0
        for arg in filter(None, (a.strip() for a in (match["args"] or "").split(","))):
            name, eq, value = arg.partition("=")
            if not eq and _is_number(arg):
                name, value = main, arg
            elif not eq:
                if arg not in _FLAGS:
                    raise ValueError(f"unknown flag {arg!r} in {spec!r} (flags: {sorted(_FLAGS)})")
                _set_flag(values, arg)
                continue
            if name not in _PARAMS or not _is_number(value):
                raise ValueError(f"bad parameter {arg!r} in {spec!r}")
            values[name] = int(float(value)) if name in ("n", "code", "over") else float(value)
        times = int(match["times"]) if match["times"] else None
        steps.append(Behaviour(kind=kind, reply=reply, times=times, **values))
    return tuple(steps)


def _set_flag(values: dict[str, Any], flag: str) -> None:
    if flag in _RETRY_STYLES:
        values["retry_style"] = flag
    elif flag == "stall":
        values["stall_body"] = True
    elif flag in _REFUSALS:
        values["refusal"] = flag
    elif flag == "trigger":
        values["only_if"] = TRIGGER
    else:
        values[flag] = True


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def script_of(model_id: str, given: str | Behaviour | Sequence[Behaviour] | None) -> Script:
    """A model's script: as ``given``, else written in the model id's last ``/`` segment."""
    if given is None:
        return parse_script(model_id.rsplit("/", 1)[-1])
    if isinstance(given, str):
        return parse_script(given)
    if isinstance(given, Behaviour):
        return (given,)
    return tuple(given)
