"""The fleet's HTTP/1.1 wire: read one request, write one response (or a scripted part of one).

Written on asyncio streams rather than a server framework because the faults live below a
framework's surface: headers sent and then silence, a body cut mid-chunk, a reset socket.
"""

from __future__ import annotations

import asyncio
import http
import json
from collections.abc import Mapping
from typing import Any

MAX_REQUEST_BODY = 32 * 1024 * 1024


class Conn:
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
            await self.json(400, error_body(400, "malformed request line"))
            return None
        method, target, _version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self.json(411, error_body(411, "chunked request bodies are not supported"))
            return None
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REQUEST_BODY:
            await self.json(400, error_body(400, "bad Content-Length"))
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
        reason = phrase(status)
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


def phrase(status: int) -> str:
    """The standard reason phrase of ``status`` ("" for a status Python does not know)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def error_body(status: int, message: str, metadata: dict | None = None) -> dict:
    """An OpenRouter-style error payload ``{"error": {code, message[, metadata]}}``."""
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return {"error": error}


def loads(raw: bytes) -> Any:
    """The JSON in ``raw``, or None when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return None
