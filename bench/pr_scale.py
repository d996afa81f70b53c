"""Benchmark: the largest pull request GitHub will describe — 3,000 files, a 20 MB diff.

Goal (the documented memory budget, docs/reliability.md): the whole review of such a PR stays
under **512 MB** peak RSS and inside the run deadline. This benchmark measures the part of
``relay-review run`` that grows with the PR — from the files API's answer to the posted comment:
index the 3,000 patches, plan the chunks, prompt and review them over a local fleet (an honest
reviewer, ``healthy`` routes), validate the verdicts, render the comment, serialise the report —
and prints time, the tracemalloc peak and the process's peak RSS, each with its ratio to the goal.
``tests/e2e/reliability/test_resource_bounds.py`` runs the same PR end to end through
``relay-review run`` (Prism for GitHub) and asserts the budget on the subprocess's peak RSS.

Run: ``.venv/bin/python bench/pr_scale.py [--files 3000] [--mb 20] [--deadline 120]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relay_review.config import validate_policy_data
from relay_review.drill.review import drill_reply
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for
from relay_review.github.comment import MARKER, MAX_BODY_CHARS
from relay_review.pipeline.review import review as run_review
from relay_review.render import comment_markdown
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import build_catalog, parse_discovery

BUDGET_MB = 512.0
WORDS = ["request", "client", "timeout", "route", "catalog", "payload", "cursor", "session"]


def big_pr_files(n_files: int = 3000, total_mb: float = 20.0, seed: int = 5) -> list[dict]:
    """``n_files`` files-API entries whose patches add up to about ``total_mb`` MB.

    Most files are modified (a few hunks of context, removals and additions); every 50th is a
    binary (no patch), every 20th is new. Entries carry exactly the keys the API returns that
    relay-review reads.
    """
    rng = random.Random(seed)
    per_file = int(total_mb * 2**20 / n_files)
    files = []
    for i in range(n_files):
        path = f"src/pkg{i % 40}/module_{i:04d}.py"
        if i % 50 == 49:
            files.append(_entry(path, "added", None, 0, 0))
            continue
        lines: list[str] = []
        size = adds = dels = 0
        start = 1
        new_file = i % 20 == 0
        while size < per_file:
            body = _hunk(rng, new_file)
            a = sum(1 for line in body if line[0] == "+")
            d = sum(1 for line in body if line[0] == "-")
            ctx = len(body) - a - d
            old_start = 0 if new_file else start
            header = f"@@ -{old_start},{ctx + d} +{start},{ctx + a} @@ def f{len(lines)}():"
            lines += [header, *body]
            size += sum(len(line) + 1 for line in body) + len(header) + 1
            adds, dels = adds + a, dels + d
            start += ctx + a + rng.randint(5, 40)
            if new_file:
                break
        status = "added" if new_file else "modified"
        files.append(_entry(path, status, "\n".join(lines), adds, dels))
    return files


def _hunk(rng: random.Random, new_file: bool) -> list[str]:
    if new_file:  # one hunk of pure additions, as large as a per-file share
        return ["+" + _code(rng, k) for k in range(rng.randint(100, 180))]
    body = [" " + _code(rng, k) for k in range(3)]
    body += ["-" + _code(rng, k) for k in range(rng.randint(0, 6))]
    body += ["+" + _code(rng, k) for k in range(rng.randint(1, 12))]
    return body + [" " + _code(rng, k) for k in range(3)]


def _code(rng: random.Random, n: int) -> str:
    a, b, c = rng.sample(WORDS, 3)
    return f"{' ' * 4 * rng.randint(0, 3)}{a}_{n} = {b}.get({c!r}, {rng.randint(0, 9999)})"


def _entry(path: str, status: str, patch: str | None, adds: int, dels: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "filename": path,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
    }
    if patch is not None:
        entry["patch"] = patch
    return entry


async def review_big_pr(files: list[dict], deadline: float) -> dict[str, Any]:
    """Index, chunk and review ``files`` over a local healthy fleet; the run's report."""
    scenario = Scenario(
        "scale",
        "three honest reviewers",
        {"a": {"vendor/reviewer-a": "healthy"}, "b": {"vendor/reviewer-b": "healthy"}},
        healthy=None,
    )
    serving = {"deadline": deadline, "attempt": min(deadline, 60.0)}
    policy = validate_policy_data({"serving": serving}, "bench")
    async with fleet_for(scenario, reply=drill_reply) as fleet:
        catalog = build_catalog(parse_discovery(discovery_for(scenario, fleet)))
        index = DiffIndex.from_api_files(files)
        report = await run_review(
            index, catalog, policy, drill_environ(scenario), title="Scale", body="A huge PR."
        )
    comment = comment_markdown(report, marker=MARKER, limit=MAX_BODY_CHARS)
    report = report.to_json()
    report["_comment_chars"] = len(comment)
    report["_report_bytes"] = len(json.dumps(report))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--deadline", type=float, default=120.0)
    args = parser.parse_args()

    files = big_pr_files(args.files, args.mb)
    patch_mb = sum(len(f.get("patch") or "") for f in files) / 2**20
    lines = sum((f.get("patch") or "").count("\n") + 1 for f in files if f.get("patch"))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pull request: {len(files)} files, {patch_mb:.1f} MB of patches, {lines} patch lines")

    start = time.perf_counter()
    report = asyncio.run(review_big_pr(files, args.deadline))
    elapsed = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    tracemalloc.start()
    traced_report = asyncio.run(review_big_pr(files, args.deadline))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_mb = peak / 2**20

    reviewed = sum(1 for f in report["files"] if f.get("status") == "reviewed")
    print(
        f"review: decision {report['decision']}, {reviewed} files reviewed in "
        f"{len(report.get('chunks') or [])} chunks, {len(report['files']) - reviewed} listed as "
        f"not reviewed; comment {report['_comment_chars']:,} chars, report "
        f"{report['_report_bytes'] / 2**20:.1f} MB"
    )
    ratio = elapsed / args.deadline
    print(f"time:   {elapsed:6.2f} s   (deadline {args.deadline:.0f} s; ratio {ratio:.2f})")
    print(
        f"memory: peak RSS {rss_mb:6.1f} MB (process, inputs included; {rss_before:.0f} MB "
        f"before the review); budget {BUDGET_MB:.0f} MB; ratio {rss_mb / BUDGET_MB:.2f}"
    )
    print(f"        tracemalloc peak of the review alone {peak_mb:6.1f} MB")
    ok = rss_mb <= BUDGET_MB and elapsed <= args.deadline and traced_report["decision"]
    print("goal met" if ok else "GOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
