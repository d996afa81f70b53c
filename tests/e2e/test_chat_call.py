"""chat_call against the fault fleet over real sockets: every outcome kind and its time bound.

Bounds are small so the suite is fast; each assertion on elapsed time is an upper limit with
generous slack for a noisy machine (plus a lower limit where the bound must have been waited out).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from relay_review._http import parse_retry_after
from relay_review.drill import FaultFleet
from relay_review.providers.chat.call import chat_call
from relay_review.providers.chat.status import classify_http_error
from relay_review.records import Deadlines, Outcome, OutcomeKind, Phase

pytestmark = pytest.mark.integration  # every test here starts a server or a subprocess

SLACK = 0.75
KEY = "sk-drill-0123456789abcdef"
REPLY = "The patch looks fine to me"
D = Deadlines(connect=0.5, first_byte=0.4, idle=0.3, attempt=1.0)
MESSAGES = [{"role": "user", "content": "review this"}]

MODELS = [
    "healthy@0.1",
    "healthy",
    "healthy@1.5",
    "plain",
    "stall",
    "headers-stall",
    "cut@3",
    "cut@2,rst",
    "error-body",
    "sse-error",
    "sse-error@code=400",
    "finish-error",
    "no-finish",
    "finish-stall",
    "empty",
    "length-empty",
    "garbage",
    "close",
    "context",
    "400",
    "401",
    "402",
    "403",
    "404",
    "404@nim",
    "408",
    "413",
    "422",
    "429@7",
    "429@7,date",
    "429@7,meta",
    "429@7,noheader",
    "500",
    "502",
    "503",
    "500@stall",
    "drip@0.05,n=5",
    "drip@0.15,n=20",
    "drip@0.8,n=3",
    "keepalive@0.2,n=4",
    "keepalive@0.8,n=2",
    "keepalive@0.1,n=100",
    "healthy@leak",
    "401@leak",
    "500@leak",
    "404@leak,nim",
    "429@leak,noheader",
    "context@leak",
    "error-body@leak",
    "sse-error@leak",
    "garbage@leak",
]
#: Behaviours that echo the Authorization header into the outcome's detail.
LEAKS_IN_DETAIL = [m for m in MODELS if "leak" in m and not m.startswith("healthy")]


@pytest.fixture(scope="module")
def fleet() -> Iterator[FaultFleet]:
    accounts = {
        "keyed": {"models": MODELS, "api_key": KEY},
        "open": {"models": ["healthy@leak", "healthy"]},
    }
    with FaultFleet(accounts, reply=REPLY) as running:
        yield running


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


async def call(
    client: httpx.AsyncClient,
    fleet: FaultFleet,
    model: str,
    *,
    deadlines: Deadlines = D,
    account: str = "keyed",
    api_key: str | None = KEY,
    **kwargs: object,
) -> Outcome:
    return await chat_call(
        client,
        base_url=fleet.base_url(account),
        api_key=api_key,
        model=model,
        messages=MESSAGES,
        deadlines=deadlines,
        **kwargs,  # type: ignore[arg-type]
    )


def assert_within(outcome: Outcome, bound: float, *, at_least: float = 0.0) -> None:
    assert at_least <= outcome.elapsed_s < bound + SLACK, outcome


# --------------------------------------------------------------------------- ok


async def test_healthy_stream_is_ok(client: httpx.AsyncClient, fleet: FaultFleet) -> None:
    out = await call(client, fleet, "healthy@0.1", max_tokens=16)
    assert out.kind is OutcomeKind.OK and out.ok
    assert out.content == REPLY
    assert out.finish_reason == "stop"
    assert out.usage and out.usage.completion_tokens == len(REPLY.split())
    assert out.http_status == 200
    assert out.phase is None
    assert out.first_byte_s is not None and 0.1 <= out.first_byte_s <= out.elapsed_s
    assert_within(out, 0.1)


async def test_max_tokens_cut_is_ok_with_length(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "healthy", max_tokens=2)
    assert out.kind is OutcomeKind.OK
    assert out.content == "The patch"
    assert out.finish_reason == "length"


async def test_server_ignoring_stream_plain_json_is_ok(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "plain")
    assert out.kind is OutcomeKind.OK
    assert out.content == REPLY
    assert out.finish_reason == "stop"
    assert out.usage is not None
    assert out.first_byte_s is not None


async def test_slow_drip_under_every_bound_is_ok(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "drip@0.05,n=5")
    assert out.kind is OutcomeKind.OK
    assert out.content == REPLY
    assert_within(out, 0.25, at_least=0.2)


async def test_keepalive_comments_count_as_first_byte(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    # 4 comments 0.2 s apart, then the reply: ~0.8 s in all, twice the first-byte bound.
    out = await call(client, fleet, "keepalive@0.2,n=4")
    assert out.kind is OutcomeKind.OK, out
    assert out.content == REPLY
    assert out.first_byte_s is not None and out.first_byte_s < D.first_byte
    assert out.elapsed_s > D.first_byte
    assert_within(out, 0.8)


async def test_the_answer_starts_after_the_keepalives_and_the_hedge_is_told_then(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    """Keep-alive comments are the first byte, not the answer: ``answer_s`` (what hedged
    preflight waits for and route memory keeps) is when the first event came, and the
    ``on_first_byte`` hook is told then, once."""
    told: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    out = await call(
        client, fleet, "keepalive@0.2,n=4", on_first_byte=lambda: told.append(loop.time() - start)
    )
    assert out.kind is OutcomeKind.OK, out
    assert out.first_byte_s is not None and out.first_byte_s < 0.15
    assert out.answer_s is not None and 0.75 <= out.answer_s <= out.elapsed_s
    assert len(told) == 1 and told[0] >= 0.75


async def test_on_alive_is_told_once_at_the_first_keepalive(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    """The stream flows from its first comment (hedged preflight then waits up to
    ``hedge_answer_max`` for the answer): ``on_alive`` once, long before ``on_first_byte``."""
    alive: list[float] = []
    answered: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    out = await call(
        client,
        fleet,
        "keepalive@0.2,n=4",
        on_alive=lambda: alive.append(loop.time() - start),
        on_first_byte=lambda: answered.append(loop.time() - start),
    )
    assert out.kind is OutcomeKind.OK, out
    assert len(alive) == 1 and len(answered) == 1 and alive[0] < 0.7 <= answered[0]


async def test_an_error_body_is_the_answer_from_its_first_byte(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    told: list[int] = []
    alive: list[int] = []
    out = await call(
        client, fleet, "503", on_first_byte=lambda: told.append(1), on_alive=lambda: alive.append(1)
    )
    assert out.kind is not OutcomeKind.OK and out.answer_s is not None
    assert told == [1] and alive == []  # an error is no stream that flows


async def test_reply_complete_then_silence_is_kept(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "finish-stall")
    assert out.kind is OutcomeKind.OK
    assert out.content == REPLY
    assert out.finish_reason == "stop"
    assert "stalled after finish_reason" in out.detail
    assert_within(out, D.idle, at_least=D.idle)


# --------------------------------------------------------------------------- timeouts


async def test_silent_stall_times_out_at_first_byte(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "stall")
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.TIMEOUT, Phase.FIRST_BYTE, None)
    assert out.first_byte_s is None
    assert_within(out, D.first_byte, at_least=D.first_byte)


async def test_slow_headers_time_out_at_first_byte(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "healthy@1.5")
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.FIRST_BYTE)
    assert_within(out, D.first_byte, at_least=D.first_byte)


async def test_headers_then_stall_times_out_at_first_byte(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "headers-stall")
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.TIMEOUT, Phase.FIRST_BYTE, 200)
    assert out.first_byte_s is None
    assert "headers but no body byte" in out.detail
    assert_within(out, D.first_byte, at_least=D.first_byte)


async def test_gap_longer_than_idle_times_out_at_idle(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "drip@0.8,n=3")
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.TIMEOUT, Phase.IDLE, 200)
    assert out.first_byte_s is not None and out.first_byte_s < D.first_byte
    assert_within(out, D.idle, at_least=D.idle)


async def test_keepalive_gap_longer_than_idle_times_out_at_idle(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "keepalive@0.8,n=2")
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.IDLE)
    assert out.first_byte_s is not None
    assert_within(out, D.idle, at_least=D.idle)


async def test_drip_under_idle_but_over_attempt_times_out_at_attempt(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    # 20 pieces 0.15 s apart: every gap is under idle (0.3 s); the whole is ~3 s > attempt.
    out = await call(client, fleet, "drip@0.15,n=20")
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.ATTEMPT)
    assert out.content is None
    assert_within(out, D.attempt, at_least=D.attempt)


async def test_endless_keepalive_times_out_at_attempt(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "keepalive@0.1,n=100")
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.ATTEMPT)
    assert_within(out, D.attempt, at_least=D.attempt)


async def test_attempt_shorter_than_first_byte_wins(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    tight = Deadlines(connect=0.5, first_byte=5, idle=5, attempt=0.4)
    out = await call(client, fleet, "stall", deadlines=tight)
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.ATTEMPT)
    assert_within(out, 0.4, at_least=0.4)


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops new SYNs, so connect hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


async def _call_port(client: httpx.AsyncClient, port: int, deadlines: Deadlines) -> Outcome:
    return await chat_call(
        client,
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=KEY,
        model="m",
        messages=MESSAGES,
        deadlines=deadlines,
    )


async def test_connect_timeout(client: httpx.AsyncClient, full_backlog: int) -> None:
    deadlines = Deadlines(connect=0.3, first_byte=2, idle=2, attempt=3)
    out = await _call_port(client, full_backlog, deadlines)
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.TIMEOUT, Phase.CONNECT, None)
    assert_within(out, 0.3, at_least=0.3)


async def test_first_byte_bound_striking_while_connecting_says_connect(
    client: httpx.AsyncClient, full_backlog: int
) -> None:
    deadlines = Deadlines(connect=3, first_byte=0.3, idle=2, attempt=3)
    out = await _call_port(client, full_backlog, deadlines)
    assert (out.kind, out.phase) == (OutcomeKind.TIMEOUT, Phase.CONNECT)
    assert "first_byte bound" in out.detail
    assert_within(out, 0.3, at_least=0.3)


async def test_closed_port_is_connection_error(client: httpx.AsyncClient) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    out = await _call_port(client, port, D)
    assert (out.kind, out.phase, out.http_status) == (OutcomeKind.CONNECTION_ERROR, None, None)
    assert_within(out, D.connect)


async def test_close_without_response_is_connection_error(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "close")
    assert (out.kind, out.http_status) == (OutcomeKind.CONNECTION_ERROR, None)
    assert_within(out, 0.1)


# --------------------------------------------------------------------------- bad replies


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("cut@3", "stream cut"),
        ("cut@2,rst", "stream cut"),
        ("error-body", "error body: Upstream error"),
        ("sse-error@code=400", "error event: Provider disconnected"),
        ("finish-error", "finish_reason error"),
        ("no-finish", "without finish_reason or [DONE]"),
        ("empty", "empty reply"),
        ("length-empty", "finish_reason length with no content"),
        ("garbage", "unparsable event"),
    ],
)
async def test_bad_replies(
    client: httpx.AsyncClient, fleet: FaultFleet, model: str, reason: str
) -> None:
    out = await call(client, fleet, model)
    assert (out.kind, out.http_status, out.phase) == (OutcomeKind.BAD_REPLY, 200, None), out
    assert reason in out.detail
    assert out.content is None
    assert out.first_byte_s is not None
    assert_within(out, 0.1)


# --------------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize(
    ("model", "kind", "status"),
    [
        ("400", OutcomeKind.BAD_REQUEST, 400),
        ("422", OutcomeKind.BAD_REQUEST, 422),
        ("context", OutcomeKind.CONTEXT_TOO_LONG, 400),
        ("413", OutcomeKind.CONTEXT_TOO_LONG, 413),
        ("401", OutcomeKind.AUTH_FAILED, 401),
        ("403", OutcomeKind.AUTH_FAILED, 403),
        ("402", OutcomeKind.PAYMENT_REQUIRED, 402),
        ("404", OutcomeKind.NOT_FOUND, 404),
        ("404@nim", OutcomeKind.NOT_FOUND, 404),
        ("no-such-model", OutcomeKind.NOT_FOUND, 404),
        ("408", OutcomeKind.SERVER_ERROR, 408),
        ("500", OutcomeKind.SERVER_ERROR, 500),
        ("502", OutcomeKind.SERVER_ERROR, 502),
        ("503", OutcomeKind.SERVER_ERROR, 503),
        ("429@7,noheader", OutcomeKind.RATE_LIMITED, 429),
    ],
)
async def test_error_statuses(
    client: httpx.AsyncClient, fleet: FaultFleet, model: str, kind: OutcomeKind, status: int
) -> None:
    out = await call(client, fleet, model)
    assert (out.kind, out.http_status, out.phase, out.retry_after) == (kind, status, None, None)
    assert out.detail.startswith(f"HTTP {status}")
    assert out.first_byte_s is not None
    assert_within(out, 0.1)


async def test_nim_style_error_detail(client: httpx.AsyncClient, fleet: FaultFleet) -> None:
    out = await call(client, fleet, "404@nim")
    assert out.detail == "HTTP 404: No endpoints found for this model."


async def test_wrong_key_is_auth_failed(client: httpx.AsyncClient, fleet: FaultFleet) -> None:
    out = await call(client, fleet, "healthy", api_key="sk-wrong-key-000000000")
    assert (out.kind, out.http_status) == (OutcomeKind.AUTH_FAILED, 401)
    missing = await call(client, fleet, "healthy", api_key=None)
    assert (missing.kind, missing.http_status) == (OutcomeKind.AUTH_FAILED, 401)


@pytest.mark.parametrize(
    ("model", "low", "high"),
    [("429@7", 7.0, 7.0), ("429@7,date", 5.0, 7.0), ("429@7,meta", 6.0, 7.0)],
)
async def test_rate_limited_carries_retry_after(
    client: httpx.AsyncClient, fleet: FaultFleet, model: str, low: float, high: float
) -> None:
    out = await call(client, fleet, model)
    assert (out.kind, out.http_status, out.phase) == (OutcomeKind.RATE_LIMITED, 429, None)
    assert out.retry_after is not None and low <= out.retry_after <= high
    assert_within(out, 0.1)


async def test_error_body_that_stalls_is_bounded_by_idle(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "500@stall")
    assert (out.kind, out.http_status) == (OutcomeKind.SERVER_ERROR, 500)
    assert "error body stalled" in out.detail
    assert_within(out, D.idle, at_least=D.idle)


async def test_error_body_that_stalls_is_bounded_by_attempt(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    deadlines = Deadlines(connect=0.5, first_byte=0.5, idle=30, attempt=0.6)
    out = await call(client, fleet, "500@stall", deadlines=deadlines)
    assert (out.kind, out.http_status) == (OutcomeKind.SERVER_ERROR, 500)
    assert_within(out, 0.6, at_least=0.6)


# --------------------------------------------------------------------------- the request


async def test_request_shape(client: httpx.AsyncClient, fleet: FaultFleet) -> None:
    before = len(fleet.chat_requests("keyed", "healthy"))
    out = await call(
        client,
        fleet,
        "healthy",
        max_tokens=12,
        extra_body={"temperature": 0, "stream": False, "model": "other", "provider": {"zdr": 1}},
    )
    assert out.ok
    seen = fleet.chat_requests("keyed", "healthy")[before:]
    assert len(seen) == 1
    request = seen[0]
    assert (request.stream, request.max_tokens, request.authorized) == (True, 12, True)
    assert request.body is not None
    assert request.body["temperature"] == 0
    assert request.body["provider"] == {"zdr": 1}
    assert request.body["messages"] == MESSAGES


async def test_no_authorization_header_without_key(
    client: httpx.AsyncClient, fleet: FaultFleet
) -> None:
    out = await call(client, fleet, "healthy@leak", account="open", api_key=None)
    assert out.ok
    assert out.content == f"{REPLY} (received '')"


# --------------------------------------------------------------------------- secrets


async def test_api_key_never_in_an_outcome(client: httpx.AsyncClient, fleet: FaultFleet) -> None:
    # Bounds short enough that the stalls end soon, long enough that ~30 concurrent honest replies
    # arrive on a loaded machine (parallel test workers on two cores).
    quick = Deadlines(connect=1.0, first_byte=1.0, idle=1.0, attempt=2.0)
    models = [m for m in MODELS if "stall" not in m and not m.startswith(("drip", "keepalive"))]
    outcomes = await asyncio.gather(
        *(call(client, fleet, m, deadlines=quick) for m in [*models, "stall", "500@stall"])
    )
    echoed = {m: o for m, o in zip([*models, "stall", "500@stall"], outcomes, strict=True)}
    # The leak behaviours did echo it, and it was scrubbed.
    assert "Bearer ***" in (echoed["healthy@leak"].content or "")
    for model in LEAKS_IN_DETAIL:
        assert "Bearer ***" in echoed[model].detail, (model, echoed[model].detail)
    # ... and so was its echo in base64 (the fleet echoes "Basic base64(user:KEY)" too)
    basic = base64.b64encode(f"user:{KEY}".encode()).decode()
    assert "Basic dXNlcjp***" in echoed["healthy@leak"].content  # "user:" is "dXNlcjp..."
    for model, outcome in echoed.items():
        dumped = outcome.model_dump_json() + repr(outcome)
        assert KEY not in dumped, model
        assert KEY[-12:] not in dumped, model
        assert basic[8:-4] not in dumped, model


# --------------------------------------------------------------------------- pure classification


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", 5.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("Thu, 01 Jan 2026 12:00:30 GMT", 30.0),
        ("Thu, 01 Jan 2026 11:00:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_openrouter_metadata_reset_in_epoch_ms() -> None:
    reset = int((NOW.timestamp() + 42) * 1000)
    body = {"error": {"code": 429, "message": "Rate limit exceeded", "metadata": {}}}
    body["error"]["metadata"] = {"headers": {"X-RateLimit-Reset": str(reset)}}
    out = classify_http_error(429, {}, httpx.Response(429, json=body).content, now=NOW)
    assert out.kind is OutcomeKind.RATE_LIMITED
    assert out.retry_after == pytest.approx(42.0)


def test_retry_after_header_wins_over_metadata() -> None:
    body = b'{"error": {"message": "slow down", "metadata": {"headers": {"Retry-After": "60"}}}}'
    out = classify_http_error(429, {"Retry-After": "3"}, body, now=NOW)
    assert out.retry_after == 3.0
    assert classify_http_error(429, {"retry-after-ms": "1500"}, b"", now=NOW).retry_after == 1.5


def test_moderation_403_is_not_an_account_failure() -> None:
    body = (
        b'{"error": {"code": 403, "message": "Input flagged", '
        b'"metadata": {"reasons": ["harassment"], "flagged_input": "..."}}}'
    )
    out = classify_http_error(403, {}, body)
    assert out.kind is OutcomeKind.BAD_REQUEST
    assert "moderation" in out.detail


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens",
        "prompt is too long: 250000 tokens > 200000 maximum",
        "Input validation error: too many tokens",
    ],
)
def test_context_messages(message: str) -> None:
    body = httpx.Response(400, json={"error": {"message": message}}).content
    assert classify_http_error(400, {}, body).kind is OutcomeKind.CONTEXT_TOO_LONG


def test_context_error_code_alone() -> None:
    body = b'{"error": {"message": "bad", "code": "context_length_exceeded"}}'
    assert classify_http_error(400, {}, body).kind is OutcomeKind.CONTEXT_TOO_LONG


def test_detail_is_short_and_from_html_too() -> None:
    out = classify_http_error(502, {}, b"<html>" + b"x" * 5000 + b"</html>")
    assert out.kind is OutcomeKind.SERVER_ERROR
    assert len(out.detail) <= 200


def test_redirect_is_bad_reply() -> None:
    out = classify_http_error(301, {"location": "https://elsewhere/v1"}, b"")
    assert out.kind is OutcomeKind.BAD_REPLY
    assert "elsewhere" in out.detail


async def test_an_endless_reply_is_cut_off_as_a_bad_reply() -> None:
    from relay_review.providers.chat.stream import MAX_CONTENT_CHARS

    huge = "x" * 65536
    reply = huge * (MAX_CONTENT_CHARS // len(huge) + 2)
    fleet = FaultFleet({"a": {"models": {"m/healthy": "healthy"}}}, reply=reply)
    async with fleet, httpx.AsyncClient() as client:
        outcome = await chat_call(
            client,
            base_url=fleet.base_url("a"),
            api_key=None,
            model="m/healthy",
            messages=[{"role": "user", "content": "x"}],
            deadlines=Deadlines(connect=1, first_byte=5, idle=5, attempt=20),
        )
    assert outcome.kind is OutcomeKind.BAD_REPLY
    assert f"longer than {MAX_CONTENT_CHARS}" in outcome.detail


async def call_through(transport: httpx.MockTransport, deadlines: Deadlines) -> Outcome:
    """One chat call to a provider that ``transport`` plays."""
    async with httpx.AsyncClient(transport=transport) as client:
        return await chat_call(
            client,
            base_url="http://provider.test/v1",
            api_key=None,
            model="m",
            messages=MESSAGES,
            deadlines=deadlines,
        )


def _bomb_transport(encoding: str | None, decoded_mib: int) -> httpx.MockTransport:
    """A 200 ``text/event-stream`` whose body is one ``data:`` line that never ends:
    ``decoded_mib`` MiB once decoded (``encoding``: gzip or deflate, a few hundred KB sent)."""
    import zlib

    async def body() -> AsyncIterator[bytes]:
        wbits = {"gzip": 31, "deflate": 15}.get(encoding or "")
        pack = zlib.compressobj(9, zlib.DEFLATED, wbits) if wbits else None
        block = b"x" * (1 << 20)
        for piece in [b"data: ", *[block] * decoded_mib]:
            yield pack.compress(piece) if pack else piece
        if pack:
            yield pack.flush()

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        if encoding:
            headers["content-encoding"] = encoding
        return httpx.Response(200, headers=headers, content=body())

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", None])
async def test_a_stream_bomb_is_cut_at_its_decoded_size(encoding: str | None) -> None:
    """A content-encoding bomb or a ``data:`` line without end: the reply is a bad reply once
    its decoded bytes pass SSE_BODY_MAX, and memory stays near that bound."""
    import tracemalloc

    from relay_review.providers.chat.call import SSE_BODY_MAX

    transport = _bomb_transport(encoding, decoded_mib=SSE_BODY_MAX // (1 << 20) * 3)
    tracemalloc.start()
    try:
        outcome = await call_through(
            transport, Deadlines(connect=5, first_byte=20, idle=20, attempt=60)
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.kind is OutcomeKind.BAD_REPLY, outcome
    assert f"larger than {SSE_BODY_MAX}" in outcome.detail
    assert peak < 3 * SSE_BODY_MAX, peak


@pytest.mark.parametrize(
    ("pieces", "said"),
    [
        ([b": ping\n\n", b": ping\n\n"], "keep-alive only"),
        ([b": ping\n\n", b'data: {"choices": [{"delta": {"content": "wh'], "no event finished"),
        ([b": ping\n\n: pi", b'ng\n\ndata: {"cho'], "no event finished"),  # split lines
    ],
)
async def test_a_timeout_tells_an_unfinished_event_from_keep_alive(
    pieces: list[bytes], said: str
) -> None:
    """Audit: a route that sent part of a ``data:`` line and then went quiet was said to have
    sent "keep-alive only" (the readiness row misled: those were a reply's bytes)."""

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece
        await asyncio.sleep(30)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    outcome = await call_through(
        httpx.MockTransport(handler),
        Deadlines(connect=5, first_byte=5, idle=5, first_token=0.5, attempt=10),
    )
    assert (outcome.kind, outcome.phase) == (OutcomeKind.TIMEOUT, Phase.FIRST_TOKEN), outcome
    assert said in outcome.detail, outcome.detail
