"""A GitHub GraphQL mock for tests: every query is validated against GitHub's published schema
(``@octokit/graphql-schema``'s ``schema.json``, built with graphql-core) and *executed* by
graphql-core over a scripted state: review threads, their comments, 👎 reactions, resolutions.

Two ways in:

* through the REST mock (``tests/support/github_mock.py``): ``github_mock.graphql`` is a fresh
  :class:`GraphQLMock` per test, answering ``POST /graphql`` at the mock's URL (where PyGithub
  and ``relay-review run`` send GraphQL), beside Prism for REST;
* on its own: :func:`serve` starts a small HTTP server (started and stopped by the test), for
  the GitHub edge's unit tests without Prism.

A document the schema rejects is answered as GitHub does (HTTP 200 with ``errors``) **and**
recorded in :attr:`GraphQLMock.problems`, which fails the test at teardown (the REST mock's
``assert_clean``), so a query GitHub would refuse can never pass the suite.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from missing_tool import missing_tool

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_JSON = (
    ROOT / "tools" / "test" / "node_modules" / "@octokit" / "graphql-schema" / "schema.json"
)
#: The GraphQL form of ``github-actions[bot]``: a bare login with ``__typename: Bot``.
BOT = ("Bot", "github-actions")


@cache
def schema() -> Any:
    """GitHub's published schema (skips the test when it is not installed; fails under CI)."""
    from graphql import build_client_schema

    if not SCHEMA_JSON.exists():
        message = "@octokit/graphql-schema is not installed: run `npm ci` in tools/test"
        missing_tool(message)
    data = json.loads(SCHEMA_JSON.read_text(encoding="utf-8"))
    return build_client_schema(data.get("data", data))


def schema_errors(document: str) -> list[str]:
    """Why GitHub's schema rejects ``document`` (empty: it is valid)."""
    from graphql import GraphQLError, parse, validate

    try:
        ast = parse(document)
    except GraphQLError as exc:
        return [f"syntax: {exc.message}"]
    return [e.message for e in validate(schema(), ast)]


@dataclass
class Comment:
    node_id: str
    database_id: int
    body: str
    author: tuple[str, str]  # (typename, login)
    association: str = "NONE"
    thumbs_down: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Thread:
    node_id: str
    path: str
    line: int | None
    comments: list[Comment] = field(default_factory=list)
    resolved_by: tuple[str, str] | None = None
    #: ``diffSide``: the side of the diff the thread was placed on (a review comment's ``side``)
    side: str = "RIGHT"

    @property
    def resolved(self) -> bool:
        return self.resolved_by is not None


@dataclass
class Request:
    query: str
    variables: dict[str, Any]
    errors: list[str]
    token: str = ""


class GraphQLMock:
    """The scripted state and the executor. Keyed by ``owner/name`` and pull request number."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, int], list[Thread]] = {}
        self.requests: list[Request] = []
        self.problems: list[str] = []
        #: Who the token is (the author of replies our token posts).
        self.viewer: tuple[str, str] = BOT
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()

    # --- scripting -------------------------------------------------------------------------

    def add_thread(
        self,
        repo: str,
        number: int,
        path: str,
        line: int | None,
        body: str,
        author: tuple[str, str] = BOT,
        association: str = "NONE",
        side: str = "RIGHT",
    ) -> Thread:
        """A new thread whose first comment is ``body`` by ``author`` ((typename, login)), on
        ``side`` of the diff."""
        n = next(self._ids)
        thread = Thread(node_id=f"PRRT_{n}", path=path, line=line, side=side)
        thread.comments.append(self._comment(body, author, association))
        self.threads.setdefault((repo, number), []).append(thread)
        return thread

    def reply(
        self, thread: Thread, body: str, author: tuple[str, str], association: str
    ) -> Comment:
        comment = self._comment(body, author, association)
        thread.comments.append(comment)
        return comment

    def _comment(self, body: str, author: tuple[str, str], association: str) -> Comment:
        n = next(self._ids)
        return Comment(f"PRRC_{n}", n, body, author, association)

    def all_threads(self) -> list[Thread]:
        return [t for ts in self.threads.values() for t in ts]

    def find(self, node_id: str) -> Thread | None:
        return next((t for t in self.all_threads() if t.node_id == node_id), None)

    def mutations(self, name: str, since: int = 0) -> list[Request]:
        """The ``name`` mutations received (from request number ``since`` on)."""
        return [
            r
            for r in self.requests[since:]
            if name in r.query and r.query.lstrip().startswith("mutation")
        ]

    # --- shapes the executor reads ---------------------------------------------------------

    @staticmethod
    def _actor(who: tuple[str, str] | None) -> dict[str, Any] | None:
        return None if who is None else {"__typename": who[0], "login": who[1]}

    def _comment_node(self, c: Comment) -> dict[str, Any]:
        def reactions(_info: Any, content: str | None = None, first: int | None = None, **_: Any):
            users = c.thumbs_down if content in (None, "THUMBS_DOWN") else []
            users = users[: first or 100]
            return {
                "totalCount": len(users),
                "nodes": [{"content": "THUMBS_DOWN", "user": self._actor(u)} for u in users],
            }

        return {
            "id": c.node_id,
            "databaseId": c.database_id,
            "body": c.body,
            "authorAssociation": c.association,
            "author": self._actor(c.author),
            "reactions": reactions,
        }

    def _thread_node(self, t: Thread) -> dict[str, Any]:
        def comments(_info: Any, first: int | None = None, **_: Any) -> dict[str, Any]:
            return {"nodes": [self._comment_node(c) for c in t.comments[: first or 100]]}

        return {
            "id": t.node_id,
            "isResolved": t.resolved,
            "path": t.path,
            "line": t.line,
            "diffSide": t.side,
            "resolvedBy": self._actor(t.resolved_by),
            "comments": comments,
        }

    def _root(self, token: str) -> dict[str, Any]:
        def repository(_info: Any, owner: str, name: str, **_: Any) -> dict[str, Any]:
            repo = f"{owner}/{name}"

            def pull_request(_info: Any, number: int) -> dict[str, Any]:
                def review_threads(
                    _info: Any, first: int | None = None, after: str | None = None, **_: Any
                ) -> dict[str, Any]:
                    threads = self.threads.get((repo, number), [])
                    start = int(after) if after else 0
                    page = threads[start : start + (first or 100)]
                    end = start + len(page)
                    return {
                        "totalCount": len(threads),
                        "pageInfo": {
                            "hasNextPage": end < len(threads),
                            "endCursor": str(end) if page else None,
                            "hasPreviousPage": start > 0,
                            "startCursor": str(start) if page else None,
                        },
                        "nodes": [self._thread_node(t) for t in page],
                    }

                return {"number": number, "reviewThreads": review_threads}

            return {"nameWithOwner": repo, "pullRequest": pull_request}

        def add_reply(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
            thread = self.find(input["pullRequestReviewThreadId"])
            if thread is None:
                raise ValueError("Could not resolve to a node with the global id")
            comment = self.reply(thread, input["body"], self.viewer, "NONE")
            return {"comment": self._comment_node(comment)}

        def resolve(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
            thread = self.find(input["threadId"])
            if thread is None:
                raise ValueError("Could not resolve to a node with the global id")
            thread.resolved_by = self.viewer
            return {"thread": self._thread_node(thread)}

        return {
            "repository": repository,
            "addPullRequestReviewThreadReply": add_reply,
            "resolveReviewThread": resolve,
        }

    # --- answering -------------------------------------------------------------------------

    def execute(
        self, query: str, variables: dict[str, Any] | None, token: str = ""
    ) -> dict[str, Any]:
        """The answer GitHub would give (``data`` and/or ``errors``); schema violations and
        execution errors are recorded as problems."""
        from graphql import graphql_sync

        errors = schema_errors(query)
        with self._lock:
            self.requests.append(Request(query, dict(variables or {}), errors, token))
            if errors:
                self.problems.append(f"GraphQL document rejected by GitHub's schema: {errors}")
                return {"errors": [{"message": m} for m in errors]}
            result = graphql_sync(
                schema(), query, root_value=self._root(token), variable_values=variables
            )
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            messages = [e.message for e in result.errors]
            self.problems.append(f"GraphQL execution errors: {messages}")
            out["errors"] = [{"message": m} for m in messages]
        return out

    def respond(self, exchange: Any) -> tuple[int, Any, dict[str, str]]:
        """A REST-mock responder (``MockGitHub`` routes ``POST /graphql`` here)."""
        body = exchange.body if isinstance(exchange.body, dict) else {}
        query = body.get("query")
        if not isinstance(query, str):
            self.problems.append(f"POST /graphql without a query: {str(body)[:200]}")
            return 400, {"message": "Problems parsing JSON"}, {}
        token = (exchange.headers.get("Authorization") or "").split(" ")[-1]
        return 200, self.execute(query, body.get("variables"), token), {}


@contextlib.contextmanager
def serve(mock: GraphQLMock | None = None) -> Iterator[tuple[str, GraphQLMock]]:
    """Serve ``mock`` on 127.0.0.1 (``POST /graphql``); yields ``(base url, mock)`` and stops
    the server after."""
    mock = mock or GraphQLMock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: TCP_NODELAY, as the GitHub mock's proxy: the body's write must not wait for the
        #: client's delayed ACK of the headers (~40 ms per request with Nagle on).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.partition("?")[0] != "/graphql":
                status, answer = 404, {"message": "Not Found"}
            else:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                exchange = _Exchange(body, dict(self.headers.items()))
                status, answer, _ = mock.respond(exchange)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="graphql-mock", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", mock
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class _Exchange:
    body: Any
    headers: dict[str, str]
