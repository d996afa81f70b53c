"""The fault fleet: a local OpenAI-compatible server whose model names script faults.

Operators use it to see how their deadlines behave before trusting a free pool; the tests and the
benchmark use it to exercise every outcome over real sockets. One asyncio HTTP/1.1 server on
``127.0.0.1`` (never another address) serves several *accounts* under one port::

    GET  /<account>/v1/models             {object: "list", data: [{id, object, created, owned_by}]}
    POST /<account>/v1/chat/completions   streaming (SSE, chunked) or plain JSON
    GET  /<account>/v1/models/<id>/endpoints   OpenRouter's documented endpoints listing, with
                                          the account's ``uptime`` for the model (default 100)
    GET  /<account>/v1/key                OpenRouter's documented key reply ``{data: key_info}``
                                          (404 when the account has no ``key_info``)

Every response carries ``Connection: close``; streams use chunked transfer encoding, everything
else ``Content-Length``. It is written on :func:`asyncio.start_server` rather than a web framework
on purpose: the faults it scripts live below a framework's surface (headers sent and then
silence, a body cut mid-chunk, a reset socket, a stall before any byte), and the project takes
no server dependency for a test and drill tool. Every request is recorded
(:attr:`FaultFleet.requests`) so callers can count probes and the tokens they asked for.

The behaviour scheme (what a model id makes the server do) is :mod:`relay_review.drill.script`;
playing one behaviour to one request is ``_exchange``; the HTTP/1.1 wire is ``_wire``.

Running it::

    async with FaultFleet({"nim": ["healthy@0.2", "stall"]}) as fleet: ...   # in this loop
    with FaultFleet({...}) as fleet: ...                                    # background thread
    python -m relay_review.drill --serve --config fleet.json [--port N]      # its own process
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import threading
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay_review.drill._exchange import Exchange
from relay_review.drill._wire import Conn, error_body, loads
from relay_review.drill.script import Behaviour, Reply, Script, script_of

__all__ = ["HOST", "Account", "FaultFleet", "RecordedRequest", "load_config"]

log = logging.getLogger("relay_review.drill")

HOST = "127.0.0.1"
_CREATED = 1_700_000_000


@dataclass
class Account:
    """One credential account of the fleet: its models and, optionally, the key it expects."""

    models: Mapping[str, str | Behaviour | Sequence[Behaviour] | None] | Sequence[str]
    api_key: str | None = None
    #: model id -> the uptime (percent) its endpoints listing publishes (default 100)
    uptime: Mapping[str, Any] | None = None
    #: what ``GET /key`` answers under ``data`` (OpenRouter's shape); None: 404
    key_info: Mapping[str, Any] | None = None


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
        self._health: dict[str, Account] = {}
        for name, spec in accounts.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"account name {name!r} must be a single URL path segment")
            account = spec if isinstance(spec, Account) else account_of(spec)
            models = account.models
            pairs = models.items() if isinstance(models, Mapping) else ((m, None) for m in models)
            scripts = {mid: script_of(mid, given) for mid, given in pairs}
            self._accounts[name] = (account.api_key, scripts)
            self._health[name] = account
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
        conn = Conn(reader, writer)
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
                    await conn.json(500, error_body(500, "fault fleet handler failed"))
        finally:
            self._tasks.discard(task)
            if conn.abort:
                writer.transport.abort()
            else:
                writer.close()

    async def _serve(self, conn: Conn) -> None:
        request = await conn.read_request()
        if request is None:
            return
        method, path, headers, raw = request
        if await self._serve_health(conn, method, path, headers):
            return
        match = re.fullmatch(r"/([^/]+)/v1/(models|chat/completions)/?", path)
        account_name = match.group(1) if match else None
        if not match or account_name not in self._accounts:
            self._record(RecordedRequest(account_name, method, path))
            await conn.json(404, error_body(404, f"no such endpoint: {method} {path}"))
            return
        expected_key, scripts = self._accounts[account_name]
        auth = headers.get("authorization", "")
        authorized = expected_key is None or auth == f"Bearer {expected_key}"
        endpoint = match.group(2)

        if endpoint == "models":
            self._record(RecordedRequest(account_name, method, path, authorized=authorized))
            if method != "GET":
                await conn.json(405, error_body(405, "use GET"))
            elif not authorized:
                await conn.json(401, error_body(401, "invalid api key"))
            else:
                data = [
                    {"id": mid, "object": "model", "created": _CREATED, "owned_by": account_name}
                    for mid in scripts
                ]
                await conn.json(200, {"object": "list", "data": data})
            return

        body = loads(raw)
        if method != "POST" or not isinstance(body, dict):
            self._record(RecordedRequest(account_name, method, path, authorized=authorized))
            await conn.json(400, error_body(400, "expected a POST with a JSON object body"))
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
            await conn.json(401, error_body(401, "invalid api key"))
            return
        if not isinstance(model, str) or model not in scripts:
            await conn.json(404, error_body(404, f"No endpoints found for {model}."))
            return
        behaviour = self._next_step(account_name, model, scripts[model])
        exchange = Exchange(
            conn, behaviour, body, model, auth, id=self._next_id(), reply=self.reply
        )
        await exchange.run()

    async def _serve_health(
        self, conn: Conn, method: str, path: str, headers: Mapping[str, str]
    ) -> bool:
        """OpenRouter's two health listings (endpoints of a model, the key); False for any
        other path."""
        match = re.fullmatch(r"/([^/]+)/v1/(?:models/(.+)/endpoints|(key))/?", path)
        if not match or match.group(1) not in self._accounts:
            return False
        name, model = match.group(1), match.group(2)
        expected_key, scripts = self._accounts[name]
        authorized = (
            expected_key is None or headers.get("authorization") == f"Bearer {expected_key}"
        )
        self._record(RecordedRequest(name, method, path, model=model, authorized=authorized))
        account = self._health[name]
        if method != "GET":
            await conn.json(405, error_body(405, "use GET"))
        elif not authorized:
            await conn.json(401, error_body(401, "invalid api key"))
        elif model is None:
            if account.key_info is None:
                await conn.json(404, error_body(404, f"no such endpoint: {method} {path}"))
            else:
                await conn.json(200, {"data": dict(account.key_info)})
        elif model not in scripts:
            await conn.json(404, error_body(404, f"No endpoints found for {model}."))
        else:
            uptime = (account.uptime or {}).get(model, 100.0)
            await conn.json(200, endpoints_listing(model, uptime))
        return True

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

    def _next_id(self) -> str:
        return f"chatcmpl-drill-{next(self._ids)}"


def endpoints_listing(model: str, uptime: Any) -> dict[str, Any]:
    """OpenRouter's documented ``GET /models/{author}/{slug}/endpoints`` reply for ``model``
    (one endpoint, free, publishing ``uptime`` for its last 5 and 30 minutes and last day)."""
    return {
        "data": {
            "id": model,
            "name": model,
            "created": _CREATED,
            "description": "a fault fleet model",
            "architecture": {
                "tokenizer": "Other",
                "instruct_type": None,
                "modality": "text->text",
                "input_modalities": ["text"],
                "output_modalities": ["text"],
            },
            "endpoints": [
                {
                    "name": f"Fleet | {model}",
                    "model_name": model,
                    "context_length": 131072,
                    "pricing": {"prompt": "0", "completion": "0", "request": "0", "image": "0"},
                    "provider_name": "Fleet",
                    "tag": "fleet",
                    "quantization": "fp8",
                    "max_completion_tokens": None,
                    "max_prompt_tokens": None,
                    "supported_parameters": ["max_tokens", "temperature"],
                    "status": 0,
                    "uptime_last_5m": uptime,
                    "uptime_last_30m": uptime,
                    "uptime_last_1d": uptime,
                    "supports_implicit_caching": False,
                    "latency_last_30m": {"p50": 0.4, "p75": 0.5, "p90": 0.7, "p99": 1.2},
                    "throughput_last_30m": {"p50": 40.0, "p75": 35.0, "p90": 30.0, "p99": 20.0},
                }
            ],
        }
    }


_ACCOUNT_KEYS = {"models", "api_key", "uptime", "key_info"}


def account_of(spec: Sequence[str] | Mapping[str, Any]) -> Account:
    """``["m1", ...]``, ``{"id": spec, ...}`` or ``{"models": ..., "api_key": ..., "uptime":
    {id: percent}, "key_info": {...}}``."""
    if isinstance(spec, Mapping) and "models" in spec:
        unknown = set(spec) - _ACCOUNT_KEYS
        if unknown:
            allowed = ", ".join(sorted(_ACCOUNT_KEYS))
            raise ValueError(f"unknown account keys {sorted(unknown)} (allowed: {allowed})")
        return Account(
            models=spec["models"],
            api_key=spec.get("api_key"),
            uptime=spec.get("uptime"),
            key_info=spec.get("key_info"),
        )
    if isinstance(spec, str):
        raise ValueError("an account's models must be a list or a table, not a string")
    return Account(models=spec)


def load_config(path: Path) -> dict[str, Any]:
    """Read a fleet config file (``.toml`` or JSON)::

    {"reply": "OK", "accounts": {"nim": {"api_key": "k", "models": ["healthy@0.2", "a/stall"]},
                                 "or": {"models": {"meta/llama-3.1-8b": "429@5"}}}}
    """
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    return json.loads(text)
