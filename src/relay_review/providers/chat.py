"""One chat call with deadlines: ``POST {base}/chat/completions`` streamed, returned as an Outcome.

This is the edge between relay-review and an OpenAI-compatible provider. It sends one request
with ``stream: true``, parses the server-sent events with httpx-sse, and bounds every wait by a
named deadline (:class:`~relay_review.records.Deadlines`):

``connect``
    TCP/TLS connect (httpx's connect timeout; also reported when the first-byte or attempt bound
    strikes while the connection is still being set up).
``first_byte``
    From the start of the call to the response headers *and* the first body byte. Any byte
    counts: OpenRouter's ``: OPENROUTER PROCESSING`` keep-alive comments are bytes, not tokens.
    For an error status the headers end this phase; the error body is then read under ``idle``.
``idle``
    The longest silent gap between two body chunks once the body is flowing.
``first_token``
    From the start of the call to the first content or reasoning delta (``content``,
    ``reasoning``, ``reasoning_content``). SSE comments (``: ping``, ``: OPENROUTER PROCESSING``)
    keep ``first_byte`` and ``idle`` satisfied but are not tokens: a route that only pings is cut
    here (a ``timeout`` in phase ``first_token``, detail ``first_token: keep-alive only``). It
    ends with the first token, an error status, or a reply that is not a stream; in effect it is
    never longer than ``attempt`` (the policy refuses ``first_token > attempt``).
``attempt``
    The whole call, end to end (an ``asyncio`` timeout around everything).

The call never retries and never raises for network or HTTP trouble: it returns exactly one
:class:`~relay_review.records.Outcome`. Retrying and switching routes is ``routing/failover.py``'s
job. Classification of an error response is a pure function (:func:`classify_http_error`).

Status mapping (the table failover decides over):

======================  ==============================================================
HTTP status             outcome kind
======================  ==============================================================
2xx                     ``ok``, or ``bad_reply`` when the body says otherwise
400, 422                ``context_too_long`` if the message is about context size,
                        else ``bad_request``
401, 403                ``auth_failed`` (a 403 carrying OpenRouter moderation metadata,
                        or naming content, safety or policy, is ``bad_request``: the
                        input was flagged, the key is fine)
402                     ``payment_required``
404                     ``not_found``
408                     ``server_error`` with ``http_status=408`` (the provider timed out;
                        may recover, like 5xx)
413                     ``context_too_long``
429                     ``rate_limited`` with ``retry_after`` when the reply says when,
                        ``daily_quota`` / ``quota_exhausted`` (:mod:`.hints`)
other 4xx               ``bad_request``
5xx                     ``server_error``
1xx/3xx                 ``bad_reply`` (redirects are not followed)
======================  ==============================================================

Content refusals: a 4xx other than 401, 402, 404, 408, 413 and 429 whose body is a moderation
record, names content, safety or policy, or is an HTML page (a WAF), and every 451, is flagged
``content_refusal`` (:func:`content_refusal`): it ends the route for this run only and memory
never keeps it (an HTML 403 is still ``auth_failed``, so a gateway's key check decides whether
the whole account is out this run).

A mid-stream error (an SSE ``error`` event, or ``finish_reason: "error"`` with an error object)
carrying a code is classified by the same table: 429 is ``rate_limited`` and 5xx/408
``server_error`` (routes may recover, so preflight defers them); without a retryable code it is
a ``bad_reply``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any

import httpx
from httpx_sse import EventSource

from relay_review.providers.hints import error_payload, read_rate_hint, reset_at
from relay_review.records import Deadlines, Outcome, OutcomeKind, Phase
from relay_review.redact import MIN_SECRET_CHARS, redact, redact_data
from relay_review.routing import progress

__all__ = [
    "DOCUMENTED_RESPONSE_FORMS",
    "chat_call",
    "classify_http_error",
    "content_refusal",
    "key_check",
    "refuses_response_format",
]

#: Longest ``detail`` text (characters); error bodies can be whole HTML pages.
DETAIL_MAX = 200
#: Most bytes read from an error body (only its message is kept).
ERROR_BODY_MAX = 64 * 1024
#: Most bytes accepted for a non-streamed (plain JSON) reply.
JSON_BODY_MAX = 8 * 1024 * 1024
#: A streamed reply longer than this is a bad reply (a misbehaving server cannot fill memory).
MAX_CONTENT_CHARS = 2_000_000
#: Keys shorter than this are not scrubbed from outcomes (real provider keys are far longer;
#: scrubbing a two-letter test key would mangle every reply that contains those two letters).
MIN_SCRUB_KEY = MIN_SECRET_CHARS

_CONTEXT_RE = re.compile(
    r"context[ _-]?(length|window|size|limit)|maximum context|too many tokens|"
    r"prompt is too long|input is too long|too long for the context|reduce the length",
    re.IGNORECASE,
)
_WS_RE = re.compile(r"\s+")
#: Delta fields that carry a reasoning model's thinking: tokens for the first_token bound.
REASONING_KEYS = ("reasoning", "reasoning_content")


#: The structured-output form each kind's API reference documents for its chat endpoint
#: (``response_format = "auto"``). OpenRouter: per model, from the listing's
#: ``supported_parameters`` (``listing``). Kinds not named: ``json_schema`` is tried first and a
#: refusal that names ``response_format`` steps down (llama-server and vLLM take
#: ``json_schema``; llama-cpp-python answers it with a 500 and takes ``json_object`` + ``schema``).
DOCUMENTED_RESPONSE_FORMS: dict[str, str] = {
    "openrouter": "listing",
    "groq": "json_object",
    "gemini": "json_schema",
    "mistral": "json_object",
    "cerebras": "json_schema",
    "nvidia_nim": "json_object",
}
_FORM_REFUSAL = re.compile(r"response_format|json_schema|json_object|\bschema\b|grammar", re.I)


def refuses_response_format(status: int | None, detail: str) -> bool:
    """Whether a failed call's answer is a refusal of the ``response_format`` sent: HTTP 400,
    422 or 500 whose text names it (``response_format``, ``json_schema``, a schema, a grammar)."""
    return status in (400, 422, 500) and bool(_FORM_REFUSAL.search(detail or ""))


async def chat_call(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str | None,
    model: str,
    messages: list[dict],
    deadlines: Deadlines,
    max_tokens: int | None = None,
    extra_body: dict | None = None,
    temperature: float | None = None,
    on_first_byte: Callable[[], None] | None = None,
) -> Outcome:
    """Send one streamed chat completion and return what it came to, within ``deadlines``.

    ``max_tokens`` and ``temperature`` are sent when given (every relay-review request gives
    both: a reply is bounded in tokens as well as in time).

    ``extra_body`` is merged into the request body (provider routing, temperature, ...) but
    cannot override ``model``, ``messages`` or ``stream``. The ``Authorization: Bearer`` header
    is sent only when ``api_key`` is given; the key never appears in the returned Outcome.
    ``on_first_byte`` is called once, when the first body byte arrives (hedged routing's signal
    that the route answers).
    """
    body: dict[str, Any] = dict(extra_body or {})
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    body.update(model=model, messages=messages, stream=True)
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    url = base_url.rstrip("/") + "/chat/completions"

    call = _Call(deadlines, on_first_byte)
    try:
        async with asyncio.timeout_at(call.loop_start + deadlines.attempt):
            outcome = await call.exchange_until_first_token(client, url, headers, body)
    except TimeoutError:
        outcome = call.timed_out(Phase.ATTEMPT)
    return _scrub(outcome, api_key)


async def key_check(
    client: httpx.AsyncClient, *, base_url: str, api_key: str | None, deadlines: Deadlines
) -> bool | None:
    """Whether one authenticated ``GET {base_url}/models`` refuses the key (401/403: True).

    A gateway passes an upstream's 401/402/403 through for one model; this call tells a bad
    gateway key (the listing refuses it too) from one bad upstream. False: the listing accepted
    the key; None: no answer within ``deadlines`` (connect, first byte, attempt) or another
    status, so nothing is confirmed.
    """
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    timeout = httpx.Timeout(
        connect=deadlines.connect, read=deadlines.first_byte, write=None, pool=deadlines.connect
    )
    url = base_url.rstrip("/") + "/models"
    try:
        async with asyncio.timeout(min(deadlines.attempt, deadlines.first_byte)):
            async with client.stream("GET", url, headers=headers, timeout=timeout) as response:
                status = response.status_code
    except (TimeoutError, httpx.HTTPError, httpx.InvalidURL):
        return None
    if status in (401, 403):
        return True
    return False if 200 <= status < 300 else None


def classify_http_error(
    status: int, headers: Mapping[str, str], body: bytes | str, *, now: datetime | None = None
) -> Outcome:
    """Classify a non-2xx reply from its status, headers and (possibly partial) body.

    Pure: no I/O, no clock unless ``now`` is omitted (then only for HTTP-date/epoch
    ``Retry-After`` forms). Timing fields are left for the caller to fill in. A refusal of the
    request's content (:func:`content_refusal`) is flagged ``content_refusal``.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    payload = error_payload(_loads(text))
    message = _error_message(payload, text)
    detail = _short(f"HTTP {status}: {message}" if message else f"HTTP {status}")
    metadata = _error_metadata(payload)
    moderated = "reasons" in metadata or "flagged_input" in metadata
    html = _is_html(headers, text)
    refusal = content_refusal(status, headers, text, payload, message)
    hint = None

    if status in (401, 403):
        if status == 403 and refusal and not html:
            kind = OutcomeKind.BAD_REQUEST  # moderation, or a body naming content/safety/policy
        else:
            # An HTML 403 stays an auth failure for this run: it condemns the account only once
            # GET /models refuses the key too (routing.board.account_wide); otherwise it ends
            # this route for this run, a refusal of this request's content.
            kind = OutcomeKind.AUTH_FAILED
    elif status == 402:
        kind = OutcomeKind.PAYMENT_REQUIRED
    elif status == 404:
        kind = OutcomeKind.NOT_FOUND
    elif status == 408 or 500 <= status <= 599:
        kind = OutcomeKind.SERVER_ERROR
    elif status == 413:
        kind = OutcomeKind.CONTEXT_TOO_LONG
    elif status == 429:
        kind = OutcomeKind.RATE_LIMITED
        hint = read_rate_hint(headers, payload, now=now)
    elif 400 <= status <= 499:
        error = payload.get("error") if isinstance(payload, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        about_context = _CONTEXT_RE.search(f"{message} {code if isinstance(code, str) else ''}")
        if status in (400, 422) and about_context and not moderated:
            kind = OutcomeKind.CONTEXT_TOO_LONG
            refusal = False  # "reduce the length of the content": a size, not a refusal
        else:
            kind = OutcomeKind.BAD_REQUEST
    else:
        kind = OutcomeKind.BAD_REPLY
        location = headers.get("location")
        detail = _short(
            f"HTTP {status}: unexpected status" + (f" -> {location}" if location else "")
        )
    if refusal:
        what = " (an HTML page: a gateway or WAF)" if html else " (moderation)" if moderated else ""
        shown = _html_title(text) if html else message
        detail = _short(f"HTTP {status} refused the content{what}: {shown}")
    outcome = Outcome(kind=kind, http_status=status, detail=detail, content_refusal=refusal)
    return _hinted(outcome, hint, now)


#: Statuses that say something about the route or the key whatever the body says: the key
#: refused (401), payment (402), an unknown model (404, even "No endpoints found matching your
#: data policy"), a provider timeout (408), a size limit (413), a rate limit (429).
_ROUTE_FACTS = frozenset({401, 402, 404, 408, 413, 429})
#: A 4xx message or code naming the request's content, safety or policy.
_CONTENT_RE = re.compile(
    r"\bcontent\b(?![ _-]?(?:type|length|encoding)\b)|safety|\bunsafe\b|polic(?:y|ies)|moderat"
    r"|flagged|guardrail|harmful|inappropriate|prohibited|violat|responsible[ _-]?ai|jailbreak"
    r"|prompt[ _-]?(?:shield|attack|injection)|filtered",
    re.IGNORECASE,
)
_HTML_RE = re.compile(r"\s*(?:<!doctype\s+html|<html|<head|<body|<title)", re.IGNORECASE)
_TITLE_RE = re.compile(r"<title[^>]*>([^<]{1,200})", re.IGNORECASE)


def content_refusal(
    status: int, headers: Mapping[str, str], text: str, payload: Any, message: str
) -> bool:
    """Whether a 4xx reply refuses this request's *content* rather than the route or the key.

    True for 451; for any other 4xx but the route facts (401, 402, 404, 408, 413, 429): an
    OpenRouter moderation body (``error.metadata.reasons`` / ``flagged_input``), a message,
    error code or type naming content, safety or policy (a content filter, a guardrail), or an
    HTML page where the provider's JSON error was due (a gateway's or CDN's web application
    firewall, which blocks on what the diff holds). Such a refusal ends the route for this run
    only: memory never marks the route or its account dead for it
    (:mod:`relay_review.state.routes`).
    """
    if not 400 <= status <= 499 or status in _ROUTE_FACTS:
        return False
    if status == 451:
        return True
    metadata = _error_metadata(payload)
    if "reasons" in metadata or "flagged_input" in metadata or _is_html(headers, text):
        return True
    error = payload.get("error") if isinstance(payload, dict) else None
    fields = (error.get("code"), error.get("type")) if isinstance(error, dict) else ()
    named = " ".join([message, *(f for f in fields if isinstance(f, str))])
    return bool(_CONTENT_RE.search(named))


def _is_html(headers: Mapping[str, str], text: str) -> bool:
    """An HTML page (by its content type or its first tag) where a JSON error was due."""
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = ctype.partition(";")[0].strip().lower()
    return mime in ("text/html", "application/xhtml+xml") or bool(_HTML_RE.match(text))


def _html_title(text: str) -> str:
    """An HTML page's ``<title>`` (the rest of a WAF page is noise), else "an HTML page"."""
    m = _TITLE_RE.search(text, 0, 4096)  # a title sits at the top; a hostile page is not scanned
    title = m.group(1).strip() if m else ""
    return title or "an HTML page"


def _hinted(outcome: Outcome, hint: Any, now: datetime | None) -> Outcome:
    """``outcome`` with a rate-limit hint's wait, quota flags and reset time."""
    if hint is None:
        return outcome
    update: dict[str, Any] = {
        "retry_after": hint.retry_after,
        "daily_quota": hint.daily,
        "quota_exhausted": hint.exhausted,
        "reset_at": reset_at(hint.retry_after, now),
    }
    if hint.daily:
        update["detail"] = _short(f"daily quota used up: {outcome.detail}")
    return outcome.model_copy(update=update)


# --------------------------------------------------------------------------- the call itself


class _Call:
    """State of one call: clocks, the phase timer, what has arrived so far."""

    def __init__(
        self, deadlines: Deadlines, on_first_byte: Callable[[], None] | None = None
    ) -> None:
        self.deadlines = deadlines
        self.on_first_byte = on_first_byte
        self.loop = asyncio.get_running_loop()
        self.start = time.monotonic()
        self.loop_start = self.loop.time()
        self.phase = Phase.FIRST_BYTE
        self.timer: asyncio.Timeout | None = None
        self.token_timer: asyncio.Timeout | None = None
        self.events_seen = 0
        self.connecting = False
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self.headers_at: float | None = None
        self.first_byte_at: float | None = None
        self.bytes_seen = 0
        self.error_body = bytearray()
        self.stream = _StreamState()

    # ---- events -----------------------------------------------------------------------------

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpcore trace hook: tells 'still connecting' apart from 'waiting for a reply'."""
        if name == "connection.connect_tcp.started":
            self.connecting = True
        elif name.endswith("send_request_headers.started"):
            self.connecting = False

    def on_headers(self, response: httpx.Response) -> None:
        self.headers_at = time.monotonic()
        self.status = response.status_code
        self.headers = response.headers
        if not 200 <= response.status_code < 300:
            # The status is known: the error body is read under the idle bound.
            self._arm(Phase.IDLE)
            self.token_arrived()
        elif _content_type(response) != "text/event-stream":
            self.token_arrived()  # one JSON completion: the first_token bound does not apply

    def token_arrived(self) -> None:
        """The first content or reasoning delta (or a reply that is not a stream): the
        first_token bound is met."""
        progress.phase(progress.REST)
        timer, self.token_timer = self.token_timer, None
        if timer is not None and not timer.expired():
            timer.reschedule(None)

    def on_chunk(self, size: int) -> None:
        """Called for every raw body chunk, keep-alive comments included."""
        if not size:
            return
        if self.first_byte_at is None:
            self.first_byte_at = time.monotonic()
            progress.phase(progress.FIRST_TOKEN)
            if self.on_first_byte is not None:
                self.on_first_byte()
        self.bytes_seen += size
        self._arm(Phase.IDLE)

    def _arm(self, phase: Phase) -> None:
        self.phase = phase
        timer = self.timer
        if timer is not None and not timer.expired():
            timer.reschedule(self.loop.time() + self.deadlines.idle)

    # ---- the exchange -------------------------------------------------------------------------

    async def exchange_until_first_token(
        self, client: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict
    ) -> Outcome:
        """:meth:`exchange` under the first_token bound (lifted when the first token arrives).

        A first_token bound not shorter than the attempt bound is the attempt bound: only the
        attempt timer runs then, so which of two equal timers strikes first never matters.
        """
        bound = self.deadlines.first_token
        if bound >= self.deadlines.attempt:
            return await self.exchange(client, url, headers, body)
        try:
            async with asyncio.timeout_at(self.loop_start + bound) as timer:
                self.token_timer = timer
                return await self.exchange(client, url, headers, body)
        except TimeoutError:
            return self.timed_out(Phase.FIRST_TOKEN)

    async def exchange(
        self, client: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict
    ) -> Outcome:
        d = self.deadlines
        timeout = httpx.Timeout(connect=d.connect, read=None, write=None, pool=d.connect)
        try:
            async with asyncio.timeout_at(self.loop_start + d.first_byte) as timer:
                self.timer = timer
                async with client.stream(
                    "POST",
                    url,
                    json=body,
                    headers=headers,
                    timeout=timeout,
                    extensions={"trace": self.trace},
                ) as response:
                    self.on_headers(response)
                    return await self._read(response)
        except TimeoutError:
            return self.timed_out(self.phase)
        except httpx.ConnectTimeout:
            return self._outcome(
                OutcomeKind.TIMEOUT,
                phase=Phase.CONNECT,
                detail=f"no connection within {d.connect:g}s",
            )
        except httpx.PoolTimeout:
            return self._outcome(
                OutcomeKind.TIMEOUT,
                phase=Phase.CONNECT,
                detail=f"no free connection in the client pool within {d.connect:g}s",
            )
        except httpx.TimeoutException as exc:  # read/write bounds are off; only a custom client
            return self._outcome(OutcomeKind.TIMEOUT, phase=self.phase, detail=_exc_text(exc))
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return self._transport_failed(exc)

    async def _read(self, response: httpx.Response) -> Outcome:
        watched = httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Watched(response.stream, self.on_chunk),
            request=response.request,
        )
        status = response.status_code
        if not 200 <= status < 300:
            await self._read_capped(watched, ERROR_BODY_MAX, self.error_body)
            return self._error_outcome(bytes(self.error_body))
        content_type = _content_type(response)
        if content_type == "text/event-stream":
            return await self._read_sse(watched)
        return await self._read_plain(watched, content_type)

    async def _read_capped(self, response: httpx.Response, cap: int, into: bytearray) -> bool:
        """Read the body into ``into`` up to ``cap`` bytes; False when it was longer."""
        # httpx types aiter_bytes() as an AsyncIterator; it is an async generator (has aclose)
        async with contextlib.aclosing(response.aiter_bytes()) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                room = cap - len(into)
                into += chunk[:room]
                if len(chunk) > room:
                    return False
        return True

    async def _read_sse(self, response: httpx.Response) -> Outcome:
        st = self.stream
        async with contextlib.aclosing(EventSource(response).aiter_sse()) as events:
            async for event in events:
                data = event.data.strip()
                if not data:
                    continue
                if data == "[DONE]":
                    st.done = True
                    break
                self.events_seen += 1
                try:
                    chunk = json.loads(data)
                except ValueError:
                    return self._bad_reply(f"unparsable event: {data}")
                problem = st.feed(chunk)
                if st.token:
                    self.token_arrived()
                if problem:
                    return self._stream_error(problem)
        return self._finish()

    def _stream_error(self, problem: str) -> Outcome:
        """A bad stream: a mid-stream error event with a retryable code (429, 408, 5xx) is
        classified like that status (the route may recover); anything else is a bad reply."""
        error = self.stream.error
        code = _numeric_code(error)
        if code == 429:
            hint = read_rate_hint({}, {"error": error})
            outcome = self._outcome(
                OutcomeKind.RATE_LIMITED, detail=_short(f"mid-stream {problem}")
            )
            return _hinted(outcome, hint, None)
        if code is not None and (code == 408 or 500 <= code <= 599):
            return self._outcome(OutcomeKind.SERVER_ERROR, detail=_short(f"mid-stream {problem}"))
        return self._bad_reply(problem)

    async def _read_plain(self, response: httpx.Response, content_type: str) -> Outcome:
        """A server that ignored ``stream: true`` and sent one JSON completion."""
        raw = bytearray()
        if not await self._read_capped(response, JSON_BODY_MAX, raw):
            return self._bad_reply(f"reply larger than {JSON_BODY_MAX} bytes")
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return self._bad_reply("empty body")
        payload = _loads(text)
        if not isinstance(payload, dict):
            return self._bad_reply(f"{content_type or 'untyped'} body is not a JSON object: {text}")
        problem = self.stream.feed_completion(payload)
        if problem:
            return self._bad_reply(problem)
        self.stream.done = True
        return self._finish()

    # ---- outcomes -----------------------------------------------------------------------------

    def _finish(self) -> Outcome:
        st = self.stream
        if not st.done and st.finish_reason is None:
            return self._bad_reply("stream ended without finish_reason or [DONE]")
        if st.finish_reason == "error":
            return self._bad_reply("finish_reason error")
        content = "".join(st.parts)
        if not content.strip():
            if st.finish_reason == "length":
                return self._bad_reply("finish_reason length with no content")
            return self._bad_reply("empty reply")
        return self._outcome(
            OutcomeKind.OK, content=content, finish_reason=st.finish_reason, usage=st.usage
        )

    def timed_out(self, phase: Phase) -> Outcome:
        """The phase or attempt timer struck; say where, or keep a reply that was complete."""
        d = self.deadlines
        if self.status is not None and not 200 <= self.status < 300:
            # The status already tells what happened; the stalled body only loses the message.
            return self._error_outcome(bytes(self.error_body), stalled=True)
        if self.stream.finish_reason not in (None, "error") and "".join(self.stream.parts).strip():
            done = self._finish()
            return done.model_copy(
                update={"detail": "stream stalled after finish_reason; reply kept"}
            )
        struck = phase
        if phase is not Phase.IDLE and self.connecting:
            phase = Phase.CONNECT
        if phase is Phase.CONNECT:
            if struck is Phase.ATTEMPT:
                bound, name = d.attempt, d.attempt_name
            elif struck is Phase.FIRST_TOKEN:
                bound, name = d.first_token, "first_token bound"
            else:
                bound, name = d.first_byte, f"{struck.value} bound"
            detail = f"still connecting when the {name} ({_secs(bound)}) struck"
        elif phase is Phase.FIRST_BYTE:
            what = "no headers" if self.headers_at is None else "headers but no body byte"
            detail = f"{what} within {_secs(d.first_byte)}"
        elif phase is Phase.IDLE:
            detail = f"silent for {_secs(d.idle)} after {self.bytes_seen} bytes"
        elif phase is Phase.FIRST_TOKEN:
            bound = d.first_token
            if self.bytes_seen and not self.events_seen:
                detail = (
                    f"first_token: keep-alive only ({self.bytes_seen} bytes of SSE comments, "
                    f"no token within {_secs(bound)})"
                )
            elif self.bytes_seen:
                detail = f"first_token: no content or reasoning delta within {_secs(bound)}"
            else:
                what = "no headers" if self.headers_at is None else "headers but no body byte"
                detail = f"first_token: {what} within {_secs(bound)}"
        else:
            detail = f"no complete reply within the {d.attempt_name} {_secs(d.attempt)}"
            if self.bytes_seen and not self.events_seen and 200 <= (self.status or 0) < 300:
                detail += f" ({self.bytes_seen} bytes received, keep-alive only)"
            elif self.bytes_seen:
                detail += f" ({self.bytes_seen} bytes received)"
            elif self.headers_at is not None:
                detail += " (headers, but no body byte)"
            else:
                detail += " (no headers)"
        return self._outcome(OutcomeKind.TIMEOUT, phase=phase, detail=detail)

    def _transport_failed(self, exc: Exception) -> Outcome:
        text = _exc_text(exc)
        if self.status is None:
            return self._outcome(OutcomeKind.CONNECTION_ERROR, detail=text)
        if not 200 <= self.status < 300:
            return self._error_outcome(bytes(self.error_body), stalled=False, cut=text)
        if self.stream.finish_reason not in (None, "error") and "".join(self.stream.parts).strip():
            return self._finish()
        return self._bad_reply(f"stream cut: {text}")

    def _error_outcome(self, body: bytes, *, stalled: bool = False, cut: str = "") -> Outcome:
        assert self.status is not None
        base = classify_http_error(self.status, self.headers or {}, body)
        detail = base.detail
        if stalled:
            detail += " (error body stalled)"
        elif cut:
            detail += f" (error body cut: {cut})"
        return self._outcome(
            base.kind,
            retry_after=base.retry_after,
            daily_quota=base.daily_quota,
            quota_exhausted=base.quota_exhausted,
            reset_at=base.reset_at,
            content_refusal=base.content_refusal,
            detail=_short(detail, DETAIL_MAX + 30),
        )

    def _bad_reply(self, reason: str) -> Outcome:
        return self._outcome(OutcomeKind.BAD_REPLY, detail=_short(reason))

    def _outcome(self, kind: OutcomeKind, **fields: Any) -> Outcome:
        now = time.monotonic()
        first = self.first_byte_at
        if first is None and self.status is not None and not 200 <= self.status < 300:
            first = self.headers_at
        return Outcome(
            kind=kind,
            http_status=self.status,
            first_byte_s=None if first is None else round(first - self.start, 4),
            elapsed_s=round(now - self.start, 4),
            **fields,
        )


class _StreamState:
    """What the reply said so far (OpenAI chunk format, first choice only)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chars = 0
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.done = False
        self.token = False
        self.error: dict = {}

    def feed(self, chunk: Any) -> str | None:
        """Take one streamed chunk; return a reason when it makes the reply bad."""
        if not isinstance(chunk, dict):
            return f"event is not a JSON object: {chunk!r}"
        if chunk.get("error"):
            error = chunk["error"]
            self.error = error if isinstance(error, dict) else {"message": str(error)}
            return "error event: " + (_error_message(chunk, "") or "unspecified")
        self._usage(chunk)
        for choice in _first_choices(chunk):
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                message = choice.get("message")
                delta = message if isinstance(message, dict) else {}
            self._content(delta.get("content"))
            if self.chars or any(
                isinstance(delta.get(k), str) and delta[k] for k in REASONING_KEYS
            ):
                self.token = True
            if self.chars > MAX_CONTENT_CHARS:
                return f"reply longer than {MAX_CONTENT_CHARS} characters"
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
                if finish == "error":
                    return "finish_reason error"
        return None

    def feed_completion(self, payload: dict) -> str | None:
        """Take a whole (non-streamed) completion; return a reason when it is bad."""
        if payload.get("error"):
            return "error body: " + (_error_message(payload, "") or "unspecified")
        choices = _first_choices(payload)
        if not choices:
            return "reply has no choices"
        self._usage(payload)
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            message = {}
        self._content(message.get("content"))
        finish = choice.get("finish_reason")
        self.finish_reason = finish if isinstance(finish, str) and finish else "stop"
        if self.finish_reason == "error":
            return "finish_reason error"
        return None

    def _content(self, content: Any) -> None:
        texts: list[str] = []
        if isinstance(content, str):
            texts = [content]
        elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            texts = [
                p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        self.parts.extend(texts)
        self.chars += sum(map(len, texts))

    def _usage(self, chunk: dict) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]


class _Watched(httpx.AsyncByteStream):
    """Passes raw body chunks through, reporting each one (arrival resets the idle timer)."""

    def __init__(self, inner: Any, on_chunk: Callable[[int], None]) -> None:
        self._inner = inner
        self._on_chunk = on_chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._on_chunk(len(chunk))
            yield chunk

    async def aclose(self) -> None:
        """Closing belongs to the original response (httpx closes it on leaving ``stream()``)."""


# --------------------------------------------------------------------------- pure helpers


def _content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def _numeric_code(error: dict) -> int | None:
    """An error object's numeric ``code`` (or ``status``), e.g. 429 or ``"502"``."""
    for key in ("code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return None


def _first_choices(chunk: dict) -> list[dict]:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error_message(payload: Any, text: str) -> str:
    """The human message of an error body: OpenAI/OpenRouter ``error.message``, NIM ``detail``."""
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("code") or ""
            provider = (error.get("metadata") or {}).get("provider_name")
            raw = (error.get("metadata") or {}).get("raw")
            message = str(message)
            if isinstance(raw, str) and raw and raw not in message:
                message += f" ({raw})"
            if isinstance(provider, str) and provider:
                message += f" [provider: {provider}]"
            return message
        if isinstance(error, str):
            return error
        errors = payload.get(
            "errors"
        )  # Cloudflare: {"success": false, "errors": [{code, message}]}
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            first = errors[0]
            return str(first.get("message") or first.get("code") or "")
        for key in ("detail", "message", "title"):
            if isinstance(payload.get(key), str):
                return payload[key]
    return text


def _error_metadata(payload: Any) -> dict:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        metadata = payload["error"].get("metadata")
        if isinstance(metadata, dict):
            return metadata
    return {}


def _short(text: str, limit: int = DETAIL_MAX) -> str:
    text = _WS_RE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return _short(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _scrub(outcome: Outcome, api_key: str | None) -> Outcome:
    """Remove the key wherever a server echoed it (detail, content, finish_reason, usage)."""
    if not api_key or len(api_key.strip()) < MIN_SCRUB_KEY:
        return outcome
    update: dict[str, Any] = {}
    for name in ("detail", "content", "finish_reason"):
        value = getattr(outcome, name)
        if isinstance(value, str) and (clean := redact(value, [api_key])) != value:
            update[name] = clean
    if outcome.usage is not None:
        usage = redact_data(outcome.usage, [api_key])
        if usage != outcome.usage:
            update["usage"] = usage
    return outcome.model_copy(update=update) if update else outcome


def _secs(value: float) -> str:
    """A bound for people: ``10s``, ``9.95s`` (a bound cut to the deadline's remainder is not
    shown as ``9.95483s``)."""
    return f"{round(value, 2):g}s"
