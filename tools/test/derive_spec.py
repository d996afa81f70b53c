#!/usr/bin/env python3
"""Derive the GitHub OpenAPI copy that Prism serves in relay-review's tests.

Reads GitHub's official description (``@octokit/openapi``, ``generated/api.github.com.json``) and
writes a copy that:

* keeps only the operations relay-review calls (:data:`OPERATIONS`; Prism starts in ~2 s instead
  of ~18 s, and any other call is answered 404/405, so an unplanned request shows up at once);
* keeps only the ``components`` entries those operations reference (``--keep-all-components`` to
  keep them all);
* rewrites every ``https://api.github.com`` (and ``http://``) to the mock's base URL, because
  PyGithub follows the absolute ``url`` fields of responses and asserts their host;
* lists ``application/json`` first in every response (Prism answers ``Accept: */*`` with the
  first media type and cannot serialize some of GitHub's vendor types);
* drops example ``Link`` response headers (they point at api.github.com and would make PyGithub
  paginate off the mock);
* adds a few extra named examples (key prefix ``relay-``, see :func:`add_test_examples`) so tests
  can ask Prism for them with ``Prefer: example=<key>``. Each is a copy of GitHub's own example
  with only the fields a test needs changed. GitHub's own examples stay first, so they remain
  Prism's default answers. Request validation is untouched: it is GitHub's spec throughout.

Standard library only. Usage::

    python tools/test/derive_spec.py --base-url http://127.0.0.1:4010 [--out PATH]
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
DEFAULT_OUT = HERE / "generated" / "github.json"
GITHUB_API = "https://api.github.com"
#: Both schemes occur (schema ``example`` values use ``http://api.github.com``).
GITHUB_API_SPELLINGS = (GITHUB_API, "http://api.github.com")

#: Every (path, method) relay-review calls, and the PyGithub call that makes it.
OPERATIONS: dict[str, tuple[str, ...]] = {
    # Github.get_user().login: who the token is (403 for installation tokens such as GITHUB_TOKEN).
    "/user": ("get",),
    # Repository completion (private flag, default branch) when a caller reads repo attributes.
    "/repos/{owner}/{repo}": ("get",),
    # Repository.get_commit(ref): branch, tag or SHA -> full commit SHA.
    "/repos/{owner}/{repo}/commits/{ref}": ("get",),
    # Repository.compare(base, head): does the pinned commit descend from the minimum ref?
    "/repos/{owner}/{repo}/compare/{basehead}": ("get",),
    # Repository.get_contents(path, ref=sha): the policy file at an exact commit.
    "/repos/{owner}/{repo}/contents/{path}": ("get",),
    # PullRequest completion: the head SHA, re-read before posting.
    "/repos/{owner}/{repo}/pulls/{pull_number}": ("get",),
    # PullRequest.get_files(): the diff, 100 per page.
    "/repos/{owner}/{repo}/pulls/{pull_number}/files": ("get",),
    # PullRequest.create_review(event="COMMENT", comments=[...]).
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews": ("post",),
    # PullRequest.create_review_comment(): one line comment at a time, after a 422 for the batch.
    "/repos/{owner}/{repo}/pulls/{pull_number}/comments": ("post",),
    # Issue.get_comments() / Issue.create_comment(): find or create the sticky comment.
    "/repos/{owner}/{repo}/issues/{issue_number}/comments": ("get", "post"),
    # Repository.get_issues_comments(sort="updated", direction="desc", since=...).get_page(0):
    # the newest sticky comments of the repository's other pull requests (route memory).
    "/repos/{owner}/{repo}/issues/comments": ("get",),
    # IssueComment.edit(): update the sticky comment in place.
    # delete: IssueComment.delete(), when two runs' sticky comments converge
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": ("get", "patch", "delete"),
}

#: Must equal ``relay_review.github.comment.MARKER`` (a test pins it).
STICKY_MARKER = "<!-- relay-review:sticky -->"

#: The body of the ``relay-policy`` contents example.
TEST_POLICY = '# relay-review policy served by the test mock\n[catalog]\npool = "free"\nlimit = 4\n'


def _walk_refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            _walk_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _walk_refs(value, found)


def _resolve(spec: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise ValueError(f"external $ref not supported: {ref}")
    node: Any = spec
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def trim_components(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``components`` subset reachable (transitively) from ``paths``."""
    seen: set[str] = set()
    todo: set[str] = set()
    _walk_refs(spec["paths"], todo)
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _walk_refs(_resolve(spec, ref), todo)
    kept: dict[str, dict[str, Any]] = {}
    for ref in seen:
        _, _, section, name = ref.split("/", 3)
        kept.setdefault(section, {})[name] = spec["components"][section][name]
    return {section: dict(sorted(items.items())) for section, items in sorted(kept.items())}


def _drop_link_headers(node: Any) -> None:
    """Remove ``Link`` from every response's ``headers`` (examples point at api.github.com)."""
    if isinstance(node, dict):
        headers = node.get("headers")
        if isinstance(headers, dict):
            for name in [n for n in headers if n.lower() == "link"]:
                del headers[name]
        for value in node.values():
            _drop_link_headers(value)
    elif isinstance(node, list):
        for value in node:
            _drop_link_headers(value)


def _json_first(node: Any) -> None:
    """Put ``application/json`` first in every ``content`` map.

    Prism answers ``Accept: */*`` (what PyGithub sends) with the first media type, and cannot
    serialize some of GitHub's vendor types (the contents API lists
    ``application/vnd.github.object`` first: Prism answers 500). GitHub itself answers JSON.
    """
    if isinstance(node, dict):
        content = node.get("content")
        if isinstance(content, dict) and "application/json" in content:
            node["content"] = {"application/json": content["application/json"]} | content
        for value in node.values():
            _json_first(value)
    elif isinstance(node, list):
        for value in node:
            _json_first(value)


def _rewrite(node: Any, base_url: str) -> Any:
    if isinstance(node, str):
        for spelling in GITHUB_API_SPELLINGS:
            node = node.replace(spelling, base_url)
        return node
    if isinstance(node, dict):
        return {key: _rewrite(value, base_url) for key, value in node.items()}
    if isinstance(node, list):
        return [_rewrite(value, base_url) for value in node]
    return node


def _media(spec: dict[str, Any], path: str, method: str, status: str) -> dict[str, Any]:
    """The ``content`` map (media type -> media object) of one response."""
    response = spec["paths"][path][method]["responses"][status]
    if "$ref" in response:
        response = _resolve(spec, response["$ref"])
    return response["content"]


def _example_value(spec: dict[str, Any], media: dict[str, Any], key: str) -> Any:
    example = media["examples"][key]
    if "$ref" in example:
        example = _resolve(spec, example["$ref"])
    return copy.deepcopy(example["value"])


def _add_example(media: dict[str, Any], key: str, summary: str, value: Any) -> None:
    media["examples"][key] = {"summary": f"relay-review test: {summary}", "value": value}


def _user(template: dict[str, Any], login: str, user_id: int, kind: str) -> dict[str, Any]:
    user = copy.deepcopy(template)
    in_url = urllib.parse.quote(login, safe="")
    for key, value in list(user.items()):
        if isinstance(value, str):
            user[key] = value.replace("/octocat", "/" + in_url)
    user.update(login=login, id=user_id, type=kind, node_id=f"TEST_{user_id}", site_admin=False)
    return user


def add_test_examples(spec: dict[str, Any]) -> None:
    """Add the ``relay-*`` examples (copies of GitHub's, changed only where a test needs it).

    Prism picks an example per media type, so an example is added to each JSON media type of
    the response (the contents API also answers ``application/vnd.github.object``, which Prism
    prefers for ``Accept: */*``).
    """
    # compare: GitHub's only example says "behind"; add the other statuses of the enum.
    compare = _media(spec, "/repos/{owner}/{repo}/compare/{basehead}", "get", "200")
    default = _example_value(spec, compare["application/json"], "default")
    for status, ahead, behind in (("ahead", 1, 0), ("identical", 0, 0), ("diverged", 1, 2)):
        value = copy.deepcopy(default)
        value.update(status=status, ahead_by=ahead, behind_by=behind)
        _add_example(compare["application/json"], f"relay-{status}", status, value)

    # issue comments: GitHub's example is one comment by octocat ("Me too").
    listing = _media(spec, "/repos/{owner}/{repo}/issues/{issue_number}/comments", "get", "200")
    (theirs,) = _example_value(spec, listing["application/json"], "default")

    def comment(comment_id: int, body: str, user: dict[str, Any]) -> dict[str, Any]:
        value = copy.deepcopy(theirs)
        value.update(
            id=comment_id,
            node_id=f"TEST_comment_{comment_id}",
            url=theirs["url"].replace("/comments/1", f"/comments/{comment_id}"),
            html_url=theirs["html_url"].replace("issuecomment-1", f"issuecomment-{comment_id}"),
            body=body,
            user=user,
            author_association="NONE",
        )
        return value

    forged = comment(
        2,
        STICKY_MARKER + "\nForged by someone else.",
        _user(theirs["user"], "mallory", 666, "User"),
    )
    bot = _user(theirs["user"], "github-actions[bot]", 41898282, "Bot")
    own = comment(3, STICKY_MARKER + "\nThe previous review.", bot)
    _add_example(
        listing["application/json"],
        "relay-forged",
        "a marker pasted by another author",
        [theirs, forged],
    )
    _add_example(
        listing["application/json"],
        "relay-sticky",
        "a forged marker, then the action's own comment",
        [theirs, forged, own],
    )

    # contents: GitHub's file examples carry base64 that does not decode; add a valid file.
    contents = _media(spec, "/repos/{owner}/{repo}/contents/{path}", "get", "200")
    raw = TEST_POLICY.encode()
    for media_type, their_key in (
        ("application/json", "response-if-content-is-a-file"),
        ("application/vnd.github.object", "response-if-content-is-a-file-github-object"),
    ):
        value = _example_value(spec, contents[media_type], their_key)
        value.update(
            name="relay-review.toml",
            path=".github/relay-review.toml",
            size=len(raw),
            content=base64.encodebytes(raw).decode(),
        )
        _add_example(contents[media_type], "relay-policy", "a policy file", value)


def derive(source: Path, out: Path, base_url: str, *, keep_all_components: bool = False) -> Path:
    """Write the derived spec for ``base_url`` to ``out`` and return ``out``."""
    base_url = base_url.rstrip("/")
    spec = json.loads(source.read_text(encoding="utf-8"))
    missing = [
        f"{method.upper()} {path}"
        for path, methods in OPERATIONS.items()
        for method in methods
        if method not in spec["paths"].get(path, {})
    ]
    if missing:
        raise SystemExit(f"derive_spec: not in {source.name}: {', '.join(missing)}")
    paths: dict[str, Any] = {}
    for path, methods in OPERATIONS.items():
        item = spec["paths"][path]
        paths[path] = {
            key: value for key, value in item.items() if key in methods or key == "parameters"
        }
    derived: dict[str, Any] = {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": [{"url": GITHUB_API}],
        "paths": paths,
        "components": spec["components"],
    }
    if not keep_all_components:
        derived["components"] = trim_components(derived)
    derived = copy.deepcopy(derived)
    _drop_link_headers(derived["paths"])
    _drop_link_headers(derived["components"].get("responses", {}))
    _json_first(derived)
    add_test_examples(derived)
    derived = _rewrite(derived, base_url)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(derived, separators=(",", ":")), encoding="utf-8")
    tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base-url", required=True, help="the mock's base URL, e.g. http://127.0.0.1:4010"
    )
    parser.add_argument("--source", type=Path, default=SOURCE, help="GitHub's api.github.com.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the copy")
    parser.add_argument("--keep-all-components", action="store_true", help="do not trim components")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"derive_spec: {args.source} is missing: run `npm ci` in {HERE}", file=sys.stderr)
        return 2
    out = derive(args.source, args.out, args.base_url, keep_all_components=args.keep_all_components)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
