"""Benchmark: index, chunk and validate a 10,000-line diff. Goal: under 1 s and 100 MB.

Run: ``.venv/bin/python bench/review_scale.py [--lines 10000] [--findings 200] [--repeat 5]``

The diff is synthetic but shaped like a real one: ~150 Python-like files with 1-6 hunks each,
three context lines around each change, replaced/inserted/deleted runs, some new and deleted
files, a rename, a binary file, CRLF and non-ASCII lines. The reply has ``--findings`` findings
(about 75% correct citations, the rest with wrong lines or wrong quotes) wrapped in prose and a
code fence. Timings are the median of ``--repeat`` runs without tracing; memory is the
tracemalloc peak of one more run, plus the process's ru_maxrss (interpreter included).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relay_review.review.chunks import plan_chunks
from relay_review.review.decision import decide, merge_findings
from relay_review.review.diff import DiffIndex
from relay_review.review.prompt import build_messages, build_repair_message, diff_budget
from relay_review.review.reply import parse_reply
from relay_review.review.verdict import validate

GOAL_SECONDS = 1.0
GOAL_MB = 100.0

WORDS = [
    "request", "response", "client", "timeout", "retry", "route", "catalog", "finding",
    "payload", "header", "token", "cursor", "buffer", "session", "config", "window",
]  # fmt: skip


def code_line(rng: random.Random, n: int) -> str:
    w = rng.sample(WORDS, 3)
    indent = " " * (4 * rng.randint(0, 3))
    shapes = [
        f"{indent}{w[0]}_{n} = {w[1]}.get({w[2]!r}, {rng.randint(0, 999)})",
        f"{indent}if {w[0]} is None or len({w[1]}) > {rng.randint(1, 64)}:",
        f'{indent}raise ValueError(f"bad {w[0]}: {{{w[1]}!r}} (expected {w[2]})")',
        f"{indent}return self._{w[0]}({w[1]}, {w[2]}=True)",
        f"{indent}# {w[0]} {w[1]} {w[2]}: naïve café ✓ {n}",
        f"{indent}for {w[0]} in sorted({w[1]}.{w[2]}s, key=lambda x: x.{w[0]}):",
        "",
    ]
    return rng.choice(shapes)


def synthetic_diff(target_lines: int, seed: int = 7) -> bytes:
    """A git-style diff of about ``target_lines`` lines."""
    rng = random.Random(seed)
    out: list[str] = []
    n_file = 0
    while len(out) < target_lines:
        n_file += 1
        path = f"src/pkg{n_file % 9}/module_{n_file}.py"
        kind = rng.random()
        if kind < 0.06:  # new file
            size = rng.randint(20, 120)
            out += [f"diff --git a/{path} b/{path}", "new file mode 100644", "--- /dev/null"]
            out += [f"+++ b/{path}", f"@@ -0,0 +1,{size} @@"]
            out += ["+" + code_line(rng, i) for i in range(size)]
            continue
        if kind < 0.09:  # deleted file
            size = rng.randint(10, 60)
            out += [f"diff --git a/{path} b/{path}", "deleted file mode 100644", f"--- a/{path}"]
            out += ["+++ /dev/null", f"@@ -1,{size} +0,0 @@"]
            out += ["-" + code_line(rng, i) for i in range(size)]
            continue
        if kind < 0.10:
            out += [f"diff --git a/{path}.png b/{path}.png", "index 1111111..2222222 100644"]
            out += [f"Binary files a/{path}.png and b/{path}.png differ"]
            continue
        old_path = f"src/old/module_{n_file}.py" if kind < 0.13 else path
        out.append(f"diff --git a/{old_path} b/{path}")
        if old_path != path:
            out += ["similarity index 91%", f"rename from {old_path}", f"rename to {path}"]
        out += [f"--- a/{old_path}", f"+++ b/{path}"]
        crlf = "\r" if kind > 0.97 else ""
        old_no = new_no = 1
        for _ in range(rng.randint(1, 6)):
            gap = rng.randint(5, 80)
            old_no += gap
            new_no += gap
            removed = rng.randint(0, 8)
            added = rng.randint(0 if removed else 1, 10)
            body = [" " + code_line(rng, k) + crlf for k in range(3)]
            body += ["-" + code_line(rng, k) + crlf for k in range(removed)]
            body += ["+" + code_line(rng, k) + crlf for k in range(added)]
            body += [" " + code_line(rng, k) + crlf for k in range(3)]
            out.append(f"@@ -{old_no},{removed + 6} +{new_no},{added + 6} @@ def f():")
            out += body
            old_no += removed + 6
            new_no += added + 6
    return ("\n".join(out) + "\n").encode("utf-8")


def synthetic_reply(index: DiffIndex, findings: int, seed: int = 11) -> str:
    rng = random.Random(seed)
    locations = [loc for loc in index.locations() if loc[3].strip()]
    items = []
    for i in range(findings):
        path, side, line, text = rng.choice(locations)
        roll = rng.random()
        if roll < 0.12:
            line += 1000  # not a changed line
        elif roll < 0.25:
            text = text + " (paraphrased)"  # wrong quote
        items.append(
            {
                "path": path,
                "line": line,
                "side": side,
                "quote": text,
                "severity": rng.choice(["high", "medium", "low"]),
                "message": f"Finding {i}: {rng.choice(WORDS)} is not validated before use.",
            }
        )
    body = json.dumps({"summary": "Synthetic review.", "decision": "approve", "findings": items})
    return f"Here is the review.\n```json\n{body}\n```\nDone."


def run(diff: bytes, findings: int) -> dict[str, float]:
    """One pass of the pure pipeline; returns stage timings in seconds."""
    t: dict[str, float] = {}
    start = time.perf_counter()
    index = DiffIndex.from_diff(diff)
    t["index"] = time.perf_counter() - start

    mark = time.perf_counter()
    plan_small = plan_chunks(index, diff_budget(32_000, 4_096, title="T", body="B"))
    plan_large = plan_chunks(index, diff_budget(128_000, 8_192, title="T", body="B"))
    prompts = [build_messages(c, title="T", body="B") for c in plan_small.chunks]
    t["chunk+prompt"] = time.perf_counter() - mark
    t["chunks_32k"] = len(plan_small.chunks)
    t["chunks_128k"] = len(plan_large.chunks)
    t["prompts"] = len(prompts)

    text = synthetic_reply(index, findings)
    mark = time.perf_counter()
    reply = parse_reply(text)
    verified, rejected = validate(reply, index, max_findings=findings)
    repair = build_repair_message(rejected, max_findings=findings)
    merged = merge_findings([verified, verified[: len(verified) // 2]])
    decision = decide(merged)
    t["parse+validate+merge"] = time.perf_counter() - mark
    t["verified"] = len(verified)
    t["rejected"] = len(rejected)
    t["merged"] = len(merged)
    t["repair_chars"] = len(repair["content"])
    t["total"] = time.perf_counter() - start
    t["decision"] = {"approve": 0, "comment": 1, "request_changes": 2}[decision]
    t["locations"] = len(index)
    t["files"] = len(index.files)
    return t


def measured(fn: Callable[[], dict[str, float]]) -> tuple[dict[str, float], float]:
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--findings", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    diff = synthetic_diff(args.lines)
    n_lines = diff.count(b"\n")
    runs = [run(diff, args.findings) for _ in range(args.repeat)]
    last = runs[-1]
    _, peak_mb = measured(lambda: run(diff, args.findings))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"diff: {n_lines} lines, {len(diff) / 1024:.0f} KiB, {int(last['files'])} files,")
    print(
        f"      {int(last['locations'])} commentable lines; {args.findings} findings in the reply"
    )
    print(
        f"chunks: {int(last['chunks_32k'])} at a 32k context, {int(last['chunks_128k'])} at 128k"
        f" (reply 4k/8k, repair round reserved)"
    )
    print(
        f"verdict: {int(last['verified'])} verified, {int(last['rejected'])} rejected,"
        f" {int(last['merged'])} after merge; repair message {int(last['repair_chars'])} chars"
    )
    print(f"median of {args.repeat} runs:")
    for key in ("index", "chunk+prompt", "parse+validate+merge"):
        print(f"  {key:<22} {med(key) * 1000:8.1f} ms")
    total = med("total")
    print(
        f"  {'total':<22} {total * 1000:8.1f} ms   goal {GOAL_SECONDS:.1f} s"
        f" -> {total / GOAL_SECONDS:.2f} of the goal ({GOAL_SECONDS / total:.1f}x headroom)"
    )
    print(
        f"memory: tracemalloc peak {peak_mb:.1f} MB   goal {GOAL_MB:.0f} MB"
        f" -> {peak_mb / GOAL_MB:.2f} of the goal;"
        f" process ru_maxrss {rss_mb:.1f} MB (interpreter and imports included)"
    )
    ok = total < GOAL_SECONDS and peak_mb < GOAL_MB
    print("result:", "within goal" if ok else "OVER GOAL")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
