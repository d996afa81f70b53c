"""Accumulating a chat reply: streamed chunks (or one plain completion) in the OpenAI format,
first choice only, into content, finish reason and usage, bounded in size.

Pure: it is fed parsed JSON by :mod:`.call` and says when the reply has gone bad.
"""

from __future__ import annotations

from typing import Any

from relay_review.providers.chat.status import error_message

#: A streamed reply longer than this is a bad reply (a misbehaving server cannot fill memory).
MAX_CONTENT_CHARS = 2_000_000
#: Delta fields that carry a reasoning model's thinking: tokens for the first_token bound.
REASONING_KEYS = ("reasoning", "reasoning_content")


class StreamState:
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
            return "error event: " + (error_message(chunk, "") or "unspecified")
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
            return "error body: " + (error_message(payload, "") or "unspecified")
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


def _first_choices(chunk: dict) -> list[dict]:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0]
