"""One chat request played to its behaviour: the replies and the faults of the fleet's models.

Each behaviour kind of :mod:`relay_review.drill.script` is one method here (``healthy`` ->
``_healthy``, ``headers-stall`` -> ``_headers_stall``); error statuses share one.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import re
import time
import urllib.parse
from typing import Any

from relay_review.drill._wire import Conn, error_body, phrase
from relay_review.drill.script import Behaviour, Reply

KEEPALIVE_COMMENT = b": OPENROUTER PROCESSING\n\n"
#: What a moderation refusal says it flagged (never the request's text itself).
TRIGGER_EXCERPT = "flagged words"
PING_COMMENT = b": ping\n\n"


class Exchange:
    """Plays one behaviour for one chat request.

    ``reply`` is the fleet's reply, used when the behaviour carries none; ``id`` names the
    completion.
    """

    def __init__(
        self,
        conn: Conn,
        behaviour: Behaviour,
        body: dict,
        model: str,
        auth: str,
        *,
        id: str,
        reply: Reply | None = None,
    ) -> None:
        self.conn = conn
        self.b = behaviour
        self.body = body
        self.model = model
        self.auth = auth
        self.stream = bool(body.get("stream"))
        self.id = id
        self.reply = behaviour.reply if behaviour.reply is not None else reply

    async def run(self) -> None:
        b = self.b
        if b.delay > 0:
            await asyncio.sleep(b.delay)
        if b.only_if is not None and b.only_if not in _messages_text(self.body):
            await self._healthy()
            return
        if b.over is not None and len(_messages_text(self.body)) <= b.over:
            await self._healthy()
            return
        if b.status is not None and b.refusal is not None:
            await self._refusal(b.status, b.refusal)
            return
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
        message = STATUS_MESSAGES.get(status) or phrase(status) or f"HTTP {status}"
        if status == 429 and b.retry_style in _PROVIDER_429:
            await self.conn.json(429, _PROVIDER_429[b.retry_style](b.retry_after or 0.0))
            return
        if status == 413 and b.retry_style == "groq":
            await self.conn.json(413, _groq_413(b.n or 6000, self._estimated_tokens()))
            return
        if status == 429 and b.retry_after is not None:
            wait = b.retry_after
            if b.retry_style == "header":
                extra["Retry-After"] = f"{wait:g}"
            elif b.retry_style == "litellm":
                extra["llm_provider-retry-after"] = f"{wait:g}"
            elif b.retry_style == "date":
                extra["Retry-After"] = email.utils.formatdate(time.time() + wait, usegmt=True)
            elif b.retry_style in ("meta", "daily"):
                reset_ms = int((time.time() + wait) * 1000)
                metadata["headers"] = {
                    "X-RateLimit-Limit": "50" if b.retry_style == "daily" else "20",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset_ms),
                }
                if b.retry_style == "daily":
                    message = "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock"
        if b.kind == "context":
            message = (
                "This endpoint's maximum context length is 8192 tokens. "
                "However, you requested about 9000 tokens. Please reduce the length."
            )
        message = self._leaked(message)
        if b.nim:
            payload: dict[str, Any] = {
                "status": status,
                "title": phrase(status),
                "detail": message,
            }
        else:
            payload = error_body(status, message, metadata or None)
        if b.stall_body:
            data = json.dumps(payload).encode()
            await self.conn.head(status, "application/json", length=len(data), extra=extra)
            await self.conn.hold()
            return
        await self.conn.json(status, payload, extra)

    def _estimated_tokens(self) -> int:
        """The request's tokens as a tier counts them: its messages (about 4 characters a token)
        and its ``max_tokens``."""
        max_tokens = self.body.get("max_tokens")
        reserved = max_tokens if isinstance(max_tokens, int) else 0
        return len(_messages_text(self.body)) // 4 + reserved

    async def _refusal(self, status: int, refusal: str) -> None:
        """A refusal about the request's content, in the shape ``refusal`` names."""
        if refusal == "waf":
            page = (
                b"<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body>"
                b"<h1>Access denied</h1><p>The request was blocked by the web application "
                b"firewall. Reference: drill-waf-0001</p></body></html>"
            )
            await self.conn.head(status, "text/html; charset=utf-8", length=len(page))
            await self.conn.send(page)
            return
        if refusal == "moderation":  # OpenRouter's moderation error (its documented shape)
            metadata = {
                "reasons": ["violence"],
                "flagged_input": "…" + TRIGGER_EXCERPT + "…",
                "provider_name": "OpenAI",
                "model_slug": self.model,
            }
            message = f"{self.model} requires moderation on OpenAI. Your input was flagged."
            await self.conn.json(status, error_body(status, message, metadata))
            return
        message = (
            "content filter: the prompt was filtered due to triggering the content management "
            "policy"
        )
        await self.conn.json(status, error_body(status, message))

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
        """``message``, echoing the Authorization header it received when ``leak`` is set: as
        it came and, when it carried a key, encoded three ways (see :mod:`..script`)."""
        if not self.b.leak:
            return message
        key = self.auth.removeprefix("Bearer ")
        if not key:
            return f"{message} (received {self.auth!r})"
        basic = base64.b64encode(f"user:{key}".encode()).decode()
        header = base64.urlsafe_b64encode(self.auth.encode()).decode()
        quoted = urllib.parse.quote(key, safe="")
        return (
            f"{message} (received {self.auth!r}, i.e. Basic {basic}, {header} in URL-safe "
            f"base64, ?key={quoted} in a URL)"
        )

    async def _error_body(self) -> None:
        message = self._leaked("Upstream error: provider returned an invalid response")
        await self.conn.json(200, error_body(502, message))

    # ---- replies ------------------------------------------------------------------------------

    def _text(self) -> str:
        reply = self.reply
        if reply is None:
            return self._leaked("OK")
        return self._leaked(reply(self.body) if callable(reply) else reply)

    def _pieces(self) -> tuple[list[str], str]:
        pieces = re.findall(r"\s*\S+", self._text()) or []
        limit = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        if isinstance(limit, int) and limit > 0 and len(pieces) > limit:
            return pieces[:limit], "length"
        return pieces, "stop"

    async def _healthy(self) -> None:
        pieces, finish = self._pieces()
        await self._reply(pieces, finish, gap=self.b.gap)  # gap: 0 unless the script sets one

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
            if self.b.reasoning:
                await self._event(self._chunk({"role": "assistant", "reasoning": f"step {i}. "}))
            else:
                await self.conn.chunk(KEEPALIVE_COMMENT)
        await asyncio.sleep(self.b.gap)
        await self._stream_body(pieces, finish)

    async def _pings(self) -> None:
        await self.conn.head(200, "text/event-stream", length=None)
        while True:
            await self.conn.chunk(PING_COMMENT)
            await asyncio.sleep(self.b.gap)

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
        code = self.b.code if self.b.code is not None else 502
        text = "Provider disconnected unexpectedly"
        if code == 429:
            text = "Rate limit reached for requests."
            if self.b.retry_after is not None:
                text += f" Please try again in {self.b.retry_after:g}s."
        error = {"code": code, "message": self._leaked(text)}
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


def _groq_429(wait: float) -> dict:
    """Groq's documented 429 body: the wait only in the message."""
    return {
        "error": {
            "message": "Rate limit reached for model `llama-3.1-8b-instant` on requests per day "
            f"(RPD): Limit 14400, Used 14400, Requested 1. Please try again in {wait:g}s.",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }


def _groq_413(limit: int, requested: int) -> dict:
    """Groq's 413 above a tier's tokens-per-minute limit (the body Groq's users report)."""
    return {
        "error": {
            "message": "Request too large for model `llama-3.1-8b-instant` in organization "
            "`org_01drill` service tier `on_demand` on tokens per minute (TPM): "
            f"Limit {limit}, Requested {requested}, please reduce your message size and try "
            "again. Visit https://console.groq.com/docs/rate-limits for more information.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }


def _gemini_429(wait: float) -> list:
    """Gemini's OpenAI-compatible 429: a one-item list, RESOURCE_EXHAUSTED, a PerDay quota."""
    return [
        {
            "error": {
                "code": 429,
                "message": f"You exceeded your current quota. Please retry in {wait:g}s.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": "generativelanguage.googleapis.com/"
                                "generate_content_free_tier_requests",
                                "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            }
                        ],
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{wait:g}s",
                    },
                ],
            }
        }
    ]


def _cloudflare_429(wait: float) -> dict:
    """Cloudflare Workers AI's daily-allocation 429 (resets 00:00 UTC; ``wait`` unused)."""
    return {
        "success": False,
        "errors": [
            {
                "code": 4006,
                "message": "you have used up your daily free allocation of 10,000 neurons, "
                "please upgrade to Cloudflare's Workers Paid plan if you would like to continue "
                "usage.",
            }
        ],
        "messages": [],
        "result": None,
    }


_PROVIDER_429 = {"groq": _groq_429, "gemini": _gemini_429, "cloudflare": _cloudflare_429}


def _messages_text(body: dict) -> str:
    """Every message's text content of a chat request, joined."""
    messages = body.get("messages")
    parts: list[str] = []
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p["text"]) for p in content if isinstance(p, dict) and "text" in p]
    return "\n".join(parts)


STATUS_MESSAGES = {
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
