"""Benchmark: reuse per file at the DEFAULT policy (issue 24), through a local fault fleet.

For each diff — ten small files, and the real ``requests-2.31.0-to-2.34.2.diff`` under
``tests/data/review/`` — three runs share the action's default store (the sticky comment's
payload, 16 KB at most): the diff, the same diff again, then the diff with one line added to one
file. Prints, per run: chunks sent, model requests (probes apart), the files and the diff tokens
those requests carried (estimated as the chunks are), files reused, whether the decision,
findings, summary and suggestions match the first run, and the payload's size. The baseline is
what a chunk-keyed cache re-sends for the one-line change at the default size: the whole diff.

    python bench/reuse.py

Goal: the same diff again sends 0 requests with an identical review; one line added sends only
that file (ratio of tokens sent to the whole diff's far below 1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relay_review.config import Policy
from relay_review.drill import FaultFleet
from relay_review.drill.review import drill_reply
from relay_review.pipeline.review import review
from relay_review.review.diff import DiffIndex
from relay_review.review.tokens import estimate_tokens
from relay_review.routing.catalog import build_catalog, parse_discovery
from relay_review.state import CommentStore

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "review"
KEY = "sk-bench-reuse-0123456789abcdef"
_FILE = re.compile(r"^### FILE (\S+)", re.MULTILINE)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def ten_files() -> str:
    out = []
    for i in range(10):
        name = f"pkg/mod_{i}.py"
        line = "DEBUG = True" if i % 3 == 0 else f"value_{i} = compute({i})"
        out.append(
            f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
            f"@@ -1,2 +1,3 @@\n import os\n+{line}\n tail = 2\n"
        )
    return "".join(out)


def one_line_more(diff: str, nth_file: int) -> tuple[str, str]:
    """``diff`` with one added line at the top of the first hunk of its ``nth_file``-th file
    (the hunk's new count grown by one); and that file's path."""
    starts = [m.start() for m in re.finditer(r"^diff --git ", diff, re.MULTILINE)]
    at = starts[nth_file]
    end = starts[nth_file + 1] if nth_file + 1 < len(starts) else len(diff)
    part = diff[at:end]
    path = re.search(r"^\+\+\+ b/(\S+)", part, re.MULTILINE)
    hunk = _HUNK.search(part)
    assert path and hunk
    old_s, old_n, new_s, new_n = hunk.groups()
    header = f"@@ -{old_s},{old_n or 1} +{new_s},{int(new_n or 1) + 1} @@"
    line_end = part.index("\n", hunk.start())
    rest = part[hunk.end() : line_end]
    changed = part[: hunk.start()] + header + rest + "\n+# one more line" + part[line_end:]
    return diff[:at] + changed + diff[end:], path.group(1)


def catalog(fleet: FaultFleet) -> Any:
    route = {
        "account": "acme",
        "provider": "openai_compatible",
        "model": "vendor/reviewer",
        "base_url": fleet.base_url("acme"),
        "api_key_env": "BENCH_REUSE_KEY",
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
    }
    return build_catalog(parse_discovery({"routes": [route]}))


async def three_runs(name: str, diff: str, nth_file: int) -> None:
    changed_diff, changed = one_line_more(diff, nth_file)
    whole = sum(1 for f in DiffIndex.from_diff(diff).files if f.hunks)
    payload: list[str | None] = [None]
    servers = {"acme": {"models": {"vendor/reviewer": "healthy"}, "api_key": KEY}}
    first: dict[str, Any] = {}
    print(f"\n{name}: {whole} files; one line added to {changed} in the third run")
    print(
        "run        chunks requests files  tokens reused same  payload_B  (tokens: user messages)"
    )
    async with FaultFleet(servers, reply=drill_reply) as fleet:
        for label, text, head in (
            ("first", diff, "a" * 40),
            ("again", diff, "a" * 40),
            ("one-line", changed_diff, "b" * 40),
        ):
            store = CommentStore(lambda: f"<!-- relay-review:sticky -->\n{payload[0] or ''}\n")
            start = len(fleet.requests)
            report = (
                await review(
                    DiffIndex.from_diff(text),
                    catalog(fleet),
                    Policy(),
                    {"BENCH_REUSE_KEY": KEY},
                    title="bench",
                    store=store,
                    head_sha=head,
                    repo="org/bench",
                )
            ).to_json()
            payload[0] = store.line
            sent = [
                r
                for r in fleet.requests[start:]
                if r.is_chat and "### FILE" in json.dumps(r.body or {})
            ]
            user = [m["content"] for r in sent for m in r.body["messages"] if m["role"] == "user"]
            files = {p for u in user for p in _FILE.findall(u)}
            tokens = sum(estimate_tokens(u) for u in user)
            if not first:
                first = report
                first["tokens"] = tokens
            same = all(
                report[k] == first[k] for k in ("decision", "findings", "summary", "partial")
            )
            fresh = sum(1 for c in report["chunks"] if not c["reused"])
            print(
                f"{label:<10} {fresh:>6} {len(sent):>8} {len(files):>5} {tokens:>7} "
                f"{report['memory']['reused_files']:>6} {same!s:<5} {len(payload[0] or ''):>9}"
            )
            if label == "one-line":
                ratio = tokens / first["tokens"] if first["tokens"] else 0.0
                print(
                    f"one-line change: {tokens} prompt tokens sent vs {first['tokens']} for the"
                    f" whole diff (a chunk-keyed cache at the default size): ratio {ratio:.2f};"
                    f" files sent: {sorted(files)}; why the others were not reused:"
                    f" {report['memory']['not_reused']!r}"
                )


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(three_runs("ten small files", ten_files(), 3))
    real = (DATA / "requests-2.31.0-to-2.34.2.diff").read_text(encoding="utf-8")
    asyncio.run(three_runs("requests-2.31.0-to-2.34.2.diff", real, 2))


if __name__ == "__main__":
    main()
