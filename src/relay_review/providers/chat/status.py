"""What a provider's error reply means: its HTTP status, body and headers as an Outcome.

The table failover decides over (:func:`classify_http_error`), the test for a refusal of the
request's content (:func:`content_refusal`: ends the route for this run only), and reading the
message out of an error body, which a mid-stream error event shares (:mod:`.call`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from relay_review.providers.hints import error_payload, read_rate_hint, reset_at
from relay_review.records import Outcome, OutcomeKind

#: Longest ``detail`` text (characters); error bodies can be whole HTML pages.
DETAIL_MAX = 200

_CONTEXT_RE = re.compile(
    r"context[ _-]?(length|window|size|limit)|maximum context|too many tokens|"
    r"prompt is too long|input is too long|too long for the context|reduce the length",
    re.IGNORECASE,
)
_WS_RE = re.compile(r"\s+")


def classify_http_error(
    status: int, headers: Mapping[str, str], body: bytes | str, *, now: datetime | None = None
) -> Outcome:
    """Classify a non-2xx reply from its status, headers and (possibly partial) body.

    Pure: no I/O, no clock unless ``now`` is omitted (then only for HTTP-date/epoch
    ``Retry-After`` forms). Timing fields are left for the caller to fill in. A refusal of the
    request's content (:func:`content_refusal`) is flagged ``content_refusal``.

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
                            ``daily_quota`` / ``quota_exhausted``
                            (:mod:`relay_review.providers.hints`)
    other 4xx               ``bad_request``
    5xx                     ``server_error``
    1xx/3xx                 ``bad_reply`` (redirects are not followed)
    ======================  ==============================================================
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    payload = error_payload(loads(text))
    message = error_message(payload, text)
    detail = short(f"HTTP {status}: {message}" if message else f"HTTP {status}")
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
            # GET /models refuses the key too (routing.accounts.account_wide); otherwise it ends
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
        detail = short(
            f"HTTP {status}: unexpected status" + (f" -> {location}" if location else "")
        )
    if refusal:
        what = " (an HTML page: a gateway or WAF)" if html else " (moderation)" if moderated else ""
        shown = _html_title(text) if html else message
        detail = short(f"HTTP {status} refused the content{what}: {shown}")
    outcome = Outcome(kind=kind, http_status=status, detail=detail, content_refusal=refusal)
    return hinted(outcome, hint, now)


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
    (:mod:`relay_review.pipeline.route_memory`).
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


def hinted(outcome: Outcome, hint: Any, now: datetime | None) -> Outcome:
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
        update["detail"] = short(f"daily quota used up: {outcome.detail}")
    return outcome.model_copy(update=update)


def numeric_code(error: dict) -> int | None:
    """An error object's numeric ``code`` (or ``status``), e.g. 429 or ``"502"``."""
    for key in ("code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return None


def loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def error_message(payload: Any, text: str) -> str:
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


def short(text: str, limit: int = DETAIL_MAX) -> str:
    text = _WS_RE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
