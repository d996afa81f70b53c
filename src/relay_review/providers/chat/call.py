"""One chat call with deadlines: ``POST {base}/chat/completions`` streamed, returned as an Outcome.

The edge between relay-review and an OpenAI-compatible provider: one request with
``stream: true``, its server-sent events parsed with httpx-sse, every wait bounded by a named
deadline (:class:`~relay_review.records.Deadlines`). The call never retries and never raises for
network or HTTP trouble; retrying and switching routes is ``routing/failover.py``'s job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
from httpx_sse import EventSource

from relay_review.providers.body import read_capped
from relay_review.providers.chat.status import (
    DETAIL_MAX,
    classify_http_error,
    hinted,
    loads,
    numeric_code,
    short,
)
from relay_review.providers.chat.stream import StreamState
from relay_review.providers.chat.timeouts import Arrived, timeout_detail
from relay_review.providers.hints import read_rate_hint
from relay_review.records import ChatMessage, Deadlines, Outcome, OutcomeKind, Phase, Usage
from relay_review.redact import MIN_SECRET_CHARS, redact
from relay_review.routing import progress

#: Most bytes read from an error body (only its message is kept).
ERROR_BODY_MAX = 64 * 1024
#: Most bytes accepted for a non-streamed (plain JSON) reply.
JSON_BODY_MAX = 8 * 1024 * 1024
#: Most bytes of a streamed reply, counted after its content-encoding is undone (a gzip bomb,
#: or a ``data:`` line that never ends, cannot fill memory: the SSE parser buffers a line until
#: its newline). Far above any reply ``max_tokens`` allows, with the SSE framing of every delta.
SSE_BODY_MAX = 32 * 1024 * 1024
#: A stream line that starts with anything but ``:`` (an SSE comment) or a line break.
_DATA_LINE = re.compile(rb"[\r\n][^:\r\n]")
#: Keys shorter than this are not scrubbed from outcomes (real provider keys are far longer;
#: scrubbing a two-letter test key would mangle every reply that contains those two letters).
MIN_SCRUB_KEY = MIN_SECRET_CHARS


async def chat_call(
    client: httpx.AsyncClient,
    *,
    base_url: str,
    api_key: str | None,
    model: str,
    messages: list[ChatMessage],
    deadlines: Deadlines,
    max_tokens: int | None = None,
    extra_body: dict | None = None,
    temperature: float | None = None,
    on_first_byte: Callable[[], None] | None = None,
    on_alive: Callable[[], None] | None = None,
) -> Outcome:
    """Send one streamed chat completion and return what it came to, within ``deadlines``.

    ``max_tokens`` and ``temperature`` are sent when given (every relay-review request gives
    both: a reply is bounded in tokens as well as in time).

    ``extra_body`` is merged into the request body (provider routing, temperature, ...) but
    cannot override ``model``, ``messages`` or ``stream``. The ``Authorization: Bearer`` header
    is sent only when ``api_key`` is given; the key never appears in the returned Outcome.
    ``on_first_byte`` is called once, when the reply's first byte that is not a keep-alive
    arrives (hedged routing's signal that the route answers): for a stream, the first line
    that is not an SSE comment (OpenRouter's ``: OPENROUTER PROCESSING`` and LiteLLM's
    ``: ping`` are sent while the model has not started, so they do not hold the hedge back);
    for any other body (an error, one JSON completion), its first byte. ``on_alive`` is called
    once, when a 2xx stream's first byte arrives, keep-alive comments included (the route took
    the request and its stream flows: hedged routing waits longer for such a route's answer).
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

    call = _Call(deadlines, on_first_byte, on_alive)
    try:
        async with asyncio.timeout_at(call.loop_start + deadlines.attempt):
            outcome = await call.exchange_until_first_token(client, url, headers, body)
    except TimeoutError:
        outcome = call.timed_out(Phase.ATTEMPT)
    return _scrub(outcome, api_key)


class _Call:
    """State of one call: clocks, the phase timer, what has arrived so far.

    The bounds it enforces:

    ``connect``
        TCP/TLS connect (httpx's connect timeout; also reported when the first-byte or attempt
        bound strikes while the connection is still being set up).
    ``first_byte``
        From the start of the call to the response headers *and* the first body byte. Any byte
        counts: OpenRouter's ``: OPENROUTER PROCESSING`` keep-alive comments are bytes, not
        tokens. For an error status the headers end this phase; the error body is then read
        under ``idle``.
    ``idle``
        The longest silent gap between two body chunks once the body is flowing.
    ``first_token``
        From the start of the call to the first content or reasoning delta (``content``,
        ``reasoning``, ``reasoning_content``). SSE comments (``: ping``) keep ``first_byte`` and
        ``idle`` satisfied but are not tokens: a route that only pings is cut here. It ends with
        the first token, an error status, or a reply that is not a stream; in effect it is never
        longer than ``attempt`` (the policy refuses ``first_token > attempt``).
    ``attempt``
        The whole call, end to end (an ``asyncio`` timeout around everything).
    """

    def __init__(
        self,
        deadlines: Deadlines,
        on_first_byte: Callable[[], None] | None = None,
        on_alive: Callable[[], None] | None = None,
    ) -> None:
        self.deadlines = deadlines
        self.on_first_byte = on_first_byte
        self.on_alive = on_alive
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
        self.answer_at: float | None = None  # see :meth:`_answering`
        self.bytes_seen = 0
        #: a decoded stream line that is not an SSE comment arrived (see :meth:`on_decoded`)
        self.data_seen = False
        #: the reply is a 2xx stream, whose first bytes may be keep-alive comments
        self.streaming = False
        self._line_start = True
        self.error_body = bytearray()
        self.stream = StreamState()

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
        else:
            self.streaming = True

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
            if not self.streaming:
                self._answering()
            elif self.on_alive is not None:
                self.on_alive()
        self.bytes_seen += size
        self._arm(Phase.IDLE)

    def on_decoded(self, chunk: bytes) -> None:
        """Called for every decoded stream chunk until a line that is not an SSE comment (``:``)
        starts: bytes of an event not finished are no keep-alive (a timeout's detail)."""
        if self.data_seen or not chunk:
            return
        if _DATA_LINE.search(b"\n" + chunk if self._line_start else chunk):
            self.data_seen = True
            self._answering()
        self._line_start = chunk[-1:] in (b"\n", b"\r")

    def _answering(self) -> None:
        """The route has started its answer: its time kept and hedged routing told, once."""
        if self.answer_at is not None:
            return
        self.answer_at = time.monotonic()
        if self.on_first_byte is not None:
            self.on_first_byte()

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
            await read_capped(watched, ERROR_BODY_MAX, self.error_body)
            return self._error_outcome(bytes(self.error_body))
        content_type = _content_type(response)
        if content_type == "text/event-stream":
            return await self._read_sse(watched)
        return await self._read_plain(watched, content_type)

    async def _read_sse(self, response: httpx.Response) -> Outcome:
        try:
            decoded = _decoded_capped(response, SSE_BODY_MAX, self.on_decoded)
            return await self._read_events(decoded)
        except _TooLarge:
            return self._bad_reply(f"stream larger than {SSE_BODY_MAX} bytes (decoded)")

    async def _read_events(self, response: httpx.Response) -> Outcome:
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
        code = numeric_code(error)
        if code == 429:
            hint = read_rate_hint({}, {"error": error})
            outcome = self._outcome(OutcomeKind.RATE_LIMITED, detail=short(f"mid-stream {problem}"))
            return hinted(outcome, hint, None)
        if code is not None and (code == 408 or 500 <= code <= 599):
            return self._outcome(OutcomeKind.SERVER_ERROR, detail=short(f"mid-stream {problem}"))
        return self._bad_reply(problem)

    async def _read_plain(self, response: httpx.Response, content_type: str) -> Outcome:
        """A server that ignored ``stream: true`` and sent one JSON completion."""
        raw = bytearray()
        if not await read_capped(response, JSON_BODY_MAX, raw):
            return self._bad_reply(f"reply larger than {JSON_BODY_MAX} bytes")
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return self._bad_reply("empty body")
        payload = loads(text)
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
            OutcomeKind.OK,
            content=content,
            finish_reason=st.finish_reason,
            usage=Usage.of(st.usage),
        )

    def timed_out(self, phase: Phase) -> Outcome:
        """The phase or attempt timer struck; say where, or keep a reply that was complete."""
        if self.status is not None and not 200 <= self.status < 300:
            # The status already tells what happened; the stalled body only loses the message.
            return self._error_outcome(bytes(self.error_body), stalled=True)
        if self.stream.finish_reason not in (None, "error") and "".join(self.stream.parts).strip():
            done = self._finish()
            return done.model_copy(
                update={"detail": "stream stalled after finish_reason; reply kept"}
            )
        phase, detail = timeout_detail(
            phase,
            self.arrived(),
            connecting=self.connecting,
            bytes_seen=self.bytes_seen,
            deadlines=self.deadlines,
        )
        return self._outcome(OutcomeKind.TIMEOUT, phase=phase, detail=detail)

    def arrived(self) -> Arrived:
        """How far the reply had come (for a timeout's detail)."""
        if self.bytes_seen:
            if self.events_seen:
                return Arrived.EVENTS
            return Arrived.PARTIAL if self.data_seen else Arrived.KEEPALIVE
        return Arrived.NOTHING if self.headers_at is None else Arrived.HEADERS

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
            detail=short(detail, DETAIL_MAX + 30),
        )

    def _bad_reply(self, reason: str) -> Outcome:
        return self._outcome(OutcomeKind.BAD_REPLY, detail=short(reason))

    def _outcome(self, kind: OutcomeKind, **fields: Any) -> Outcome:
        now = time.monotonic()
        first = self.first_byte_at
        if first is None and self.status is not None and not 200 <= self.status < 300:
            first = self.headers_at
        return Outcome(
            kind=kind,
            http_status=self.status,
            first_byte_s=None if first is None else round(first - self.start, 4),
            answer_s=None if self.answer_at is None else round(self.answer_at - self.start, 4),
            elapsed_s=round(now - self.start, 4),
            **fields,
        )


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


class _TooLarge(Exception):
    """A streamed body went past :data:`SSE_BODY_MAX` decoded bytes."""


class _Capped(httpx.AsyncByteStream):
    """A body's decoded bytes, raising :class:`_TooLarge` past ``cap`` in all."""

    def __init__(
        self, response: httpx.Response, cap: int, on_chunk: Callable[[bytes], None]
    ) -> None:
        self._response = response
        self._cap = cap
        self._on_chunk = on_chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async with contextlib.aclosing(self._response.aiter_bytes()) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                seen += len(chunk)
                if seen > self._cap:
                    raise _TooLarge
                self._on_chunk(chunk)
                yield chunk


def _decoded_capped(
    response: httpx.Response, cap: int, on_chunk: Callable[[bytes], None]
) -> httpx.Response:
    """``response`` with its content-encoding undone and at most ``cap`` bytes of body, each
    decoded chunk shown to ``on_chunk``."""
    headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-encoding"]
    return httpx.Response(
        response.status_code,
        headers=headers,
        stream=_Capped(response, cap, on_chunk),
        request=response.request,
    )


def _content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return short(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _scrub(outcome: Outcome, api_key: str | None) -> Outcome:
    """Remove the key wherever a server echoed it (detail, content, finish_reason; the usage
    record holds counts only)."""
    if not api_key or len(api_key.strip()) < MIN_SCRUB_KEY:
        return outcome
    update: dict[str, Any] = {}
    for name in ("detail", "content", "finish_reason"):
        value = getattr(outcome, name)
        if isinstance(value, str) and (clean := redact(value, [api_key])) != value:
            update[name] = clean
    return outcome.model_copy(update=update) if update else outcome
