"""The fault fleet: a local OpenAI-compatible server whose model names script faults.

Operators use it to see how their deadlines behave before trusting a free pool; the tests and the
benchmark use it to exercise every outcome over real sockets. One asyncio HTTP/1.1 server on
``127.0.0.1`` (never another address) serves several *accounts* under one port::

    GET  /<account>/v1/models             {object: "list", data: [{id, object, created, owned_by}]}
    POST /<account>/v1/chat/completions   streaming (SSE, chunked) or plain JSON

Every response carries ``Connection: close``; streams use chunked transfer encoding, everything
else ``Content-Length``. It is written on :func:`asyncio.start_server` rather than a web framework
on purpose: the faults it scripts live below a framework's surface (headers sent and then
silence, a body cut mid-chunk, a reset socket, a stall before any byte), and the project takes
no server dependency for a test and drill tool. Every request is recorded
(:attr:`FaultFleet.requests`) so callers can count probes and the tokens they asked for.

Behaviour scheme
================

A model's behaviour is a *script*, written in the model id's last ``/`` segment (so ``a/stall``
and ``b/stall`` are two stalled models) or given explicitly per model id::

    script := step (">" step)*            steps run in order; the last one repeats forever
    step   := kind ["@" arg ("," arg)*] ["*" N]   "*N": this step serves N requests (default 1)
    arg    := number                      the kind's main parameter (below)
            | name "=" number             delay, gap, n, retry_after
            | flag                        stall, rst, leak, nim, date, meta, noheader

========================  ============  ==========================================================
kind                      main param    what the server does (``delay`` always waits before it)
========================  ============  ==========================================================
``healthy``               delay         the reply, streamed in word pieces, ``[DONE]``; honours
                                        ``max_tokens`` (cut to that many pieces, ``length``)
``stall``                 delay         reads the request, never answers (until the client leaves)
``headers-stall``         delay         200 headers, then nothing
``cut``                   n (2)         ``n`` content chunks, then closes without finish/[DONE]
                                        (``rst``: abort the socket instead of a clean close)
``drip``                  gap (0.2)     ``n`` (10) content chunks, ``gap`` seconds before each
``keepalive``             gap (0.2)     ``n`` (3) ``: OPENROUTER PROCESSING`` comments ``gap``
                                        apart, then the reply
``error-body``            delay         200 ``application/json`` ``{"error": {...}}``
``sse-error``             delay         one chunk, then an error event (``error`` object and
                                        ``finish_reason: "error"``), then ``[DONE]``
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
                                        ``noheader``: no hint at all)
========================  ============  ==========================================================

``leak`` makes the reply or error message echo the ``Authorization`` header it received (for
tests proving the key never reaches an Outcome): error statuses, ``error-body``, ``sse-error``,
``garbage`` (inside the unparsable data) and every kind that streams the reply text.

Examples: ``healthy@0.3``, ``drip@0.2,n=20``, ``429@5,date``, ``500@stall``,
``healthy@0.1>stall`` (the first request is answered, later ones stall: a probe that passes and
a serve that hangs), ``500@leak``.

Replies: a behaviour's ``reply`` (a string or ``Callable[[dict], str]`` receiving the request
JSON), else the fleet's ``reply``, else ``"OK"``.

Running it::

    async with FaultFleet({"nim": ["healthy@0.2", "stall"]}) as fleet: ...   # in this loop
    with FaultFleet({...}) as fleet: ...                                    # background thread
    python -m relay_review.drill --serve --config fleet.json [--port N]      # its own process
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import http
import itertools
import json
import logging
import re
import signal
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "KINDS",
    "Account",
    "Behaviour",
    "FaultFleet",
    "RecordedRequest",
    "load_config",
    "main",
    "parse_script",
]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
KEEPALIVE_COMMENT = b": OPENROUTER PROCESSING\n\n"
_CREATED = 1_700_000_000
_MAX_REQUEST_BODY = 32 * 1024 * 1024

Reply = str | Callable[[dict], str]
RetryStyle = Literal["header", "date", "meta", "noheader"]

#: kind -> name of its main (positional) parameter. Numeric status kinds are handled apart.
KINDS: dict[str, str] = {
    "healthy": "delay",
    "stall": "delay",
    "headers-stall": "delay",
    "cut": "n",
    "drip": "gap",
    "keepalive": "gap",
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
_DEFAULT_GAP = {"drip": 0.2, "keepalive": 0.2}
_FLAGS = {"stall", "rst", "leak", "nim", "date", "meta", "noheader"}
_STEP_RE = re.compile(r"^(?P<kind>[a-z0-9-]+)(?:@(?P<args>[^*]*))?(?:\*(?P<times>\d+))?$")


# --------------------------------------------------------------------------- behaviour scripts


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
            if name not in ("delay", "gap", "n", "retry_after") or not _is_number(value):
                raise ValueError(f"bad parameter {arg!r} in {spec!r}")
            values[name] = int(float(value)) if name == "n" else float(value)
        times = int(match["times"]) if match["times"] else None
        steps.append(Behaviour(kind=kind, reply=reply, times=times, **values))
    return tuple(steps)


def _set_flag(values: dict[str, Any], flag: str) -> None:
    if flag in ("date", "meta", "noheader"):
        values["retry_style"] = flag
    elif flag == "stall":
        values["stall_body"] = True
    else:
        values[flag] = True


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _script_of(model_id: str, given: str | Behaviour | Sequence[Behaviour] | None) -> Script:
    if given is None:
        return parse_script(model_id.rsplit("/", 1)[-1])
    if isinstance(given, str):
        return parse_script(given)
    if isinstance(given, Behaviour):
        return (given,)
    return tuple(given)


@dataclass
class Account:
    """One credential account of the fleet: its models and, optionally, the key it expects."""

    models: Mapping[str, str | Behaviour | Sequence[Behaviour] | None] | Sequence[str]
    api_key: str | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fleet received (the key itself is never stored)."""

    account: str | None
    method: str
    path: str
    model: str | None = None
    stream: bool | None = None
    max_tokens: int | None = None
    authorized: bool = True
    at: float = field(default_factory=time.monotonic)
    body: dict | None = None

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")


# --------------------------------------------------------------------------- the server


class FaultFleet:
    """A local fleet of OpenAI-compatible accounts with scripted faults, on one 127.0.0.1 port."""

    def __init__(
        self,
        accounts: Mapping[str, Account | Sequence[str] | Mapping[str, Any]],
        *,
        reply: Reply | None = None,
        port: int = 0,
    ) -> None:
        self._accounts: dict[str, tuple[str | None, dict[str, Script]]] = {}
        for name, spec in accounts.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"account name {name!r} must be a single URL path segment")
            account = spec if isinstance(spec, Account) else _account_of(spec)
            models = account.models
            pairs = models.items() if isinstance(models, Mapping) else ((m, None) for m in models)
            scripts = {mid: _script_of(mid, given) for mid, given in pairs}
            self._accounts[name] = (account.api_key, scripts)
        self.reply = reply
        self._port = port
        self._requests: list[RecordedRequest] = []
        self._served: dict[tuple[str, str], int] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._closing = False
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, port: int = 0) -> FaultFleet:
        """Build from a config mapping ``{"accounts": {...}, "reply": "..."}`` (see load_config)."""
        accounts = config.get("accounts")
        if not isinstance(accounts, Mapping) or not accounts:
            raise ValueError("fleet config needs a non-empty 'accounts' table")
        reply = config.get("reply")
        if reply is not None and not isinstance(reply, str):
            raise ValueError("fleet config 'reply' must be a string")
        return cls(accounts, reply=reply, port=port)

    # ---- addresses and records ---------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fleet is not running")
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def base_url(self, account: str) -> str:
        """The OpenAI-style base URL of one account: ``http://127.0.0.1:PORT/<account>/v1``."""
        if account not in self._accounts:
            raise KeyError(account)
        return f"{self.root_url}/{account}/v1"

    @property
    def accounts(self) -> dict[str, list[str]]:
        """Account name -> its model ids, in configuration order."""
        return {name: list(scripts) for name, (_, scripts) in self._accounts.items()}

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        return list(self._requests)

    def chat_requests(
        self, account: str | None = None, model: str | None = None
    ) -> list[RecordedRequest]:
        """Chat-completion requests, optionally for one account and/or model."""
        return [
            r
            for r in self._requests
            if r.is_chat
            and (account is None or r.account == account)
            and (model is None or r.model == model)
        ]

    # ---- lifecycle in the caller's loop --------------------------------------------------------

    async def start(self) -> FaultFleet:
        """Start listening on 127.0.0.1 (port 0 picks a free one)."""
        self._closing = False
        self._server = await asyncio.start_server(self._handle, HOST, self._port)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        """Stop listening and end every connection, stalled ones included."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> FaultFleet:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- lifecycle in a background thread ------------------------------------------------------

    def start_in_thread(self, timeout: float = 10.0) -> FaultFleet:
        """Run the fleet on its own event loop in a daemon thread (for synchronous callers)."""
        if self._thread is not None:
            raise RuntimeError("the fleet already runs in a thread")
        ready = threading.Event()
        failure: list[BaseException] = []

        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            try:
                await self.start()
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            try:
                await self._stop_event.wait()
            finally:
                await self.aclose()

        self._thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
        self._thread.name = "fault-fleet"
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("the fault fleet did not start in time")
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop a fleet started with :meth:`start_in_thread` and wait for its thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stop_event is not None:
            with contextlib.suppress(RuntimeError):  # loop already gone
                self._loop.call_soon_threadsafe(self._stop_event.set)
        thread.join(timeout)

    def __enter__(self) -> FaultFleet:
        return self.start_in_thread()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- HTTP -----------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:  # accepted just before aclose(); nobody would cancel this one
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = _Conn(reader, writer)
        try:
            await self._serve(conn)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # the fleet is stopping; only aclose() cancels these tasks
        except Exception:
            log.exception("fault fleet: handler failed")
            with contextlib.suppress(Exception):
                if not conn.head_sent:
                    await conn.json(500, _error_body(500, "fault fleet handler failed"))
        finally:
            self._tasks.discard(task)
            if conn.abort:
                writer.transport.abort()
            else:
                writer.close()

    async def _serve(self, conn: _Conn) -> None:
        request = await conn.read_request()
        if request is None:
            return
        method, path, headers, raw = request
        match = re.fullmatch(r"/([^/]+)/v1/(models|chat/completions)/?", path)
        account_name = match.group(1) if match else None
        if not match or account_name not in self._accounts:
            self._record(RecordedRequest(account_name, method, path))
            await conn.json(404, _error_body(404, f"no such endpoint: {method} {path}"))
            return
        expected_key, scripts = self._accounts[account_name]
        auth = headers.get("authorization", "")
        authorized = expected_key is None or auth == f"Bearer {expected_key}"
        endpoint = match.group(2)

        if endpoint == "models":
            self._record(RecordedRequest(account_name, method, path, authorized=authorized))
            if method != "GET":
                await conn.json(405, _error_body(405, "use GET"))
            elif not authorized:
                await conn.json(401, _error_body(401, "invalid api key"))
            else:
                data = [
                    {"id": mid, "object": "model", "created": _CREATED, "owned_by": account_name}
                    for mid in scripts
                ]
                await conn.json(200, {"object": "list", "data": data})
            return

        body = _loads(raw)
        if method != "POST" or not isinstance(body, dict):
            self._record(RecordedRequest(account_name, method, path, authorized=authorized))
            await conn.json(400, _error_body(400, "expected a POST with a JSON object body"))
            return
        model = body.get("model")
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        self._record(
            RecordedRequest(
                account_name,
                method,
                path,
                model=model if isinstance(model, str) else None,
                stream=bool(body.get("stream")),
                max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                authorized=authorized,
                body=body,
            )
        )
        if not authorized:
            await conn.json(401, _error_body(401, "invalid api key"))
            return
        if not isinstance(model, str) or model not in scripts:
            await conn.json(404, _error_body(404, f"No endpoints found for {model}."))
            return
        behaviour = self._next_step(account_name, model, scripts[model])
        await _Exchange(self, conn, behaviour, body, model, auth).run()

    def _record(self, request: RecordedRequest) -> None:
        self._requests.append(request)
        log.debug(
            "fault fleet: %s %s model=%s stream=%s max_tokens=%s",
            request.method,
            request.path,
            request.model,
            request.stream,
            request.max_tokens,
        )

    def _next_step(self, account: str, model: str, script: Script) -> Behaviour:
        key = (account, model)
        index = self._served.get(key, 0)
        self._served[key] = index + 1
        for step in script[:-1]:
            times = 1 if step.times is None else step.times
            if index < times:
                return step
            index -= times
        return script[-1]

    def _reply_text(self, behaviour: Behaviour, body: dict) -> str:
        reply = behaviour.reply if behaviour.reply is not None else self.reply
        if reply is None:
            return "OK"
        return reply(body) if callable(reply) else reply

    def _next_id(self) -> str:
        return f"chatcmpl-drill-{next(self._ids)}"


class _Conn:
    """One HTTP/1.1 connection: read one request, write one response, then close."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.head_sent = False
        self.abort = False

    async def read_request(self) -> tuple[str, str, dict[str, str], bytes] | None:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self.json(400, _error_body(400, "malformed request line"))
            return None
        method, target, _version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self.json(411, _error_body(411, "chunked request bodies are not supported"))
            return None
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_REQUEST_BODY:
            await self.json(400, _error_body(400, "bad Content-Length"))
            return None
        raw = await self.reader.readexactly(length) if length else b""
        return method, target.split("?", 1)[0], headers, raw

    async def head(
        self,
        status: int,
        content_type: str,
        *,
        length: int | None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        reason = _phrase(status)
        lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}"]
        lines.append(
            "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
        )
        lines += ["Connection: close", "Cache-Control: no-cache", "Server: relay-review-drill"]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        self.head_sent = True
        await self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        await self.send(b"%x\r\n%s\r\n" % (len(data), data))

    async def end_chunks(self) -> None:
        await self.send(b"0\r\n\r\n")

    async def json(self, status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        await self.head(status, "application/json", length=len(data), extra=extra)
        await self.send(data)

    async def hold(self) -> None:
        """Say nothing more until the client goes away (or the fleet stops)."""
        while await self.reader.read(65536):
            pass


class _Exchange:
    """Plays one behaviour for one chat request."""

    def __init__(
        self,
        fleet: FaultFleet,
        conn: _Conn,
        behaviour: Behaviour,
        body: dict,
        model: str,
        auth: str,
    ) -> None:
        self.fleet = fleet
        self.conn = conn
        self.b = behaviour
        self.body = body
        self.model = model
        self.auth = auth
        self.stream = bool(body.get("stream"))
        self.id = fleet._next_id()

    async def run(self) -> None:
        b = self.b
        if b.delay > 0:
            await asyncio.sleep(b.delay)
        if b.status is not None:
            await self._error_status(b.status)
            return
        handler = getattr(self, "_" + b.kind.replace("-", "_"))
        await handler()

    # ---- error statuses and non-replies ------------------------------------------------------

    async def _error_status(self, status: int) -> None:
        b = self.b
        extra: dict[str, str] = {}
        metadata: dict[str, Any] = {}
        if status == 429 and b.retry_after is not None:
            wait = b.retry_after
            if b.retry_style == "header":
                extra["Retry-After"] = f"{wait:g}"
            elif b.retry_style == "date":
                extra["Retry-After"] = email.utils.formatdate(time.time() + wait, usegmt=True)
            elif b.retry_style == "meta":
                reset_ms = int((time.time() + wait) * 1000)
                metadata["headers"] = {
                    "X-RateLimit-Limit": "20",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset_ms),
                }
        message = _STATUS_MESSAGES.get(status) or _phrase(status) or f"HTTP {status}"
        if b.kind == "context":
            message = (
                "This endpoint's maximum context length is 8192 tokens. "
                "However, you requested about 9000 tokens. Please reduce the length."
            )
        message = self._leaked(message)
        if b.nim:
            payload: dict[str, Any] = {
                "status": status,
                "title": _phrase(status),
                "detail": message,
            }
        else:
            payload = _error_body(status, message, metadata or None)
        if b.stall_body:
            data = json.dumps(payload).encode()
            await self.conn.head(status, "application/json", length=len(data), extra=extra)
            await self.conn.hold()
            return
        await self.conn.json(status, payload, extra)

    async def _stall(self) -> None:
        await self.conn.hold()

    async def _close(self) -> None:
        return

    async def _headers_stall(self) -> None:
        if self.stream:
            await self.conn.head(200, "text/event-stream", length=None)
        else:
            await self.conn.head(200, "application/json", length=1000)
        await self.conn.hold()

    def _leaked(self, message: str) -> str:
        """``message``, echoing the Authorization header it received when ``leak`` is set."""
        return f"{message} (received {self.auth!r})" if self.b.leak else message

    async def _error_body(self) -> None:
        message = self._leaked("Upstream error: provider returned an invalid response")
        await self.conn.json(200, _error_body(502, message))

    # ---- replies ------------------------------------------------------------------------------

    def _text(self) -> str:
        return self._leaked(self.fleet._reply_text(self.b, self.body))

    def _pieces(self) -> tuple[list[str], str]:
        pieces = re.findall(r"\s*\S+", self._text()) or []
        limit = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        if isinstance(limit, int) and limit > 0 and len(pieces) > limit:
            return pieces[:limit], "length"
        return pieces, "stop"

    async def _healthy(self) -> None:
        pieces, finish = self._pieces()
        await self._reply(pieces, finish)

    async def _plain(self) -> None:
        pieces, finish = self._pieces()
        await self.conn.json(200, self._completion("".join(pieces), finish, len(pieces)))

    async def _drip(self) -> None:
        text = self._text()
        n = max(1, self.b.n)
        pieces = [text[len(text) * i // n : len(text) * (i + 1) // n] for i in range(n)]
        await self._reply(pieces, "stop", gap=self.b.gap)

    async def _keepalive(self) -> None:
        pieces, finish = self._pieces()
        if not self.stream:
            await asyncio.sleep(self.b.gap * self.b.n)
            await self.conn.json(200, self._completion("".join(pieces), finish, len(pieces)))
            return
        await self.conn.head(200, "text/event-stream", length=None)
        for i in range(self.b.n):
            if i:
                await asyncio.sleep(self.b.gap)
            await self.conn.chunk(KEEPALIVE_COMMENT)
        await asyncio.sleep(self.b.gap)
        await self._stream_body(pieces, finish)

    async def _cut(self) -> None:
        pieces = ([*re.findall(r"\s*\S+", self._text()), *[" ..."] * self.b.n])[: self.b.n]
        if not self.stream:
            data = json.dumps(self._completion("".join(pieces), "stop", len(pieces))).encode()
            await self.conn.head(200, "application/json", length=len(data))
            await self.conn.send(data[: len(data) // 2])
        else:
            await self.conn.head(200, "text/event-stream", length=None)
            await self._event(self._chunk({"role": "assistant", "content": ""}))
            for piece in pieces:
                await self._event(self._chunk({"content": piece}))
        self.conn.abort = self.b.rst

    async def _sse_error(self) -> None:
        error = {"code": 502, "message": self._leaked("Provider disconnected unexpectedly")}
        if not self.stream:
            payload = self._completion("", "error", 0)
            payload["error"] = error
            await self.conn.json(200, payload)
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._event(self._chunk({"role": "assistant", "content": "Partial"}))
        await self._event({**self._chunk({"content": ""}, finish="error"), "error": error})
        await self._done()

    async def _finish_error(self) -> None:
        if not self.stream:
            await self.conn.json(200, self._completion("Partial", "error", 1))
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._event(self._chunk({"role": "assistant", "content": "Partial"}))
        await self._event(self._chunk({}, finish="error"))
        await self._done()

    async def _no_finish(self) -> None:
        pieces, _ = self._pieces()
        if not self.stream:
            payload = self._completion("".join(pieces), "stop", len(pieces))
            payload["choices"][0]["finish_reason"] = None
            await self.conn.json(200, payload)
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._event(self._chunk({"role": "assistant", "content": ""}))
        for piece in pieces:
            await self._event(self._chunk({"content": piece}))
        await self.conn.end_chunks()

    async def _finish_stall(self) -> None:
        pieces, finish = self._pieces()
        if not self.stream:
            await self._headers_stall()
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._event(self._chunk({"role": "assistant", "content": ""}))
        for piece in pieces:
            await self._event(self._chunk({"content": piece}))
        await self._event({**self._chunk({}, finish=finish), "usage": self._usage(len(pieces))})
        await self.conn.hold()

    async def _empty(self) -> None:
        await self._reply([], "stop")

    async def _length_empty(self) -> None:
        await self._reply([], "length")

    async def _garbage(self) -> None:
        data = self._leaked('{"choices": [ not json').encode()
        if not self.stream:
            await self.conn.head(200, "application/json", length=len(data))
            await self.conn.send(data)
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._event(self._chunk({"role": "assistant", "content": ""}))
        await self.conn.chunk(b"data: " + data + b"\n\n")
        await self._done()

    # ---- wire format --------------------------------------------------------------------------

    async def _reply(self, pieces: list[str], finish: str, *, gap: float = 0.0) -> None:
        if not self.stream:
            if gap:
                await asyncio.sleep(gap * len(pieces))
            await self.conn.json(200, self._completion("".join(pieces), finish, len(pieces)))
            return
        await self.conn.head(200, "text/event-stream", length=None)
        await self._stream_body(pieces, finish, gap=gap)

    async def _stream_body(self, pieces: list[str], finish: str, *, gap: float = 0.0) -> None:
        await self._event(self._chunk({"role": "assistant", "content": ""}))
        for piece in pieces:
            if gap:
                await asyncio.sleep(gap)
            await self._event(self._chunk({"content": piece}))
        final = self._chunk({}, finish=finish)
        final["usage"] = self._usage(len(pieces))
        await self._event(final)
        await self._done()

    async def _event(self, payload: dict) -> None:
        await self.conn.chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    async def _done(self) -> None:
        await self.conn.chunk(b"data: [DONE]\n\n")
        await self.conn.end_chunks()

    def _chunk(self, delta: dict, *, finish: str | None = None) -> dict:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _completion(self, content: str, finish: str, pieces: int) -> dict:
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": self._usage(pieces),
        }

    def _usage(self, completion_tokens: int) -> dict:
        messages = self.body.get("messages")
        prompt = sum(
            len(str(m.get("content", "")).split()) for m in messages or [] if isinstance(m, dict)
        )
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        }


_STATUS_MESSAGES = {
    400: "Invalid request: unsupported parameter",
    401: "No auth credentials found",
    402: "Insufficient credits. Add more using https://openrouter.ai/credits",
    403: "Forbidden",
    404: "No endpoints found for this model.",
    408: "Request timed out upstream",
    413: "Request entity too large",
    429: "Rate limit exceeded: free-models-per-min.",
    500: "Internal Server Error",
    502: "Provider returned error",
    503: "No instances available",
}


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def _error_body(status: int, message: str, metadata: dict | None = None) -> dict:
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return {"error": error}


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _account_of(spec: Sequence[str] | Mapping[str, Any]) -> Account:
    """``["m1", ...]``, ``{"id": spec, ...}`` or ``{"models": ..., "api_key": ...}``."""
    if isinstance(spec, Mapping) and "models" in spec:
        unknown = set(spec) - {"models", "api_key"}
        if unknown:
            raise ValueError(f"unknown account keys {sorted(unknown)} (allowed: models, api_key)")
        return Account(models=spec["models"], api_key=spec.get("api_key"))
    if isinstance(spec, str):
        raise ValueError("an account's models must be a list or a table, not a string")
    return Account(models=spec)


# --------------------------------------------------------------------------- standalone process


def load_config(path: Path) -> dict[str, Any]:
    """Read a fleet config file (``.toml`` or JSON)::

    {"reply": "OK", "accounts": {"nim": {"api_key": "k", "models": ["healthy@0.2", "a/stall"]},
                                 "or": {"models": {"meta/llama-3.1-8b": "429@5"}}}}
    """
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    return json.loads(text)


async def _serve_forever(fleet: FaultFleet) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with fleet:
        ready = {
            "port": fleet.port,
            "url": fleet.root_url,
            "accounts": {name: fleet.base_url(name) for name in fleet.accounts},
        }
        print(json.dumps(ready), flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m relay_review.drill --serve --config FILE [--port N]``.

    Prints one JSON line ``{"port", "url", "accounts": {name: base_url}}`` once listening, then
    serves until SIGTERM/SIGINT.
    """
    parser = argparse.ArgumentParser(
        prog="python -m relay_review.drill", description="Serve the fault fleet on 127.0.0.1."
    )
    parser.add_argument("--serve", action="store_true", required=True, help="run the server")
    parser.add_argument("--config", type=Path, required=True, help="fleet config (.json/.toml)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        fleet = FaultFleet.from_config(load_config(args.config), port=args.port)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"drill: bad config {args.config}: {exc}", file=sys.stderr)
        return 2
    asyncio.run(_serve_forever(fleet))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
