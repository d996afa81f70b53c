"""Benchmark: context around changes on the real diffs under ``tests/data/review/``.

Run: ``.venv/bin/python bench/context.py [--context 20] [--budgets 2000,6000,24000]``

For each diff and chunk budget it prints the chunks without and with context (they must hold the
same changed lines), the context lines added per hunk (mean, median, max of the hunks that got
any room) and the tokens per chunk (mean and max, never over the budget).

Head files are reconstructed from the diffs: every line a diff shows of the new file (context
and added lines) is put at its number; the lines in between, which a diff does not show, are
filled with a stand-in line of typical code length, so token counts stay realistic. The
contents API would give the real lines; only their text differs, not the budgeting.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relay_review.review.chunks import plan_chunks
from relay_review.review.diff import DiffIndex

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "review"
#: A stand-in for a head-file line the diff does not show (about 40 characters, like code).
FILLER = "    value = compute(item, options)  # line {n}"


def reconstruct(index: DiffIndex) -> dict[str, list[str]]:
    """Head files from the diff: shown new-file lines in place, stand-ins in between."""
    heads: dict[str, list[str]] = {}
    for f in index.files:
        if f.skip_reason or f.status in ("deleted", "added"):
            continue
        known = {
            ln.new: ln.text
            for hunk in f.hunks
            for ln in hunk.lines
            if ln.kind != "-" and ln.new is not None
        }
        if not known:
            continue
        last = max(known) + 40  # some lines after the last hunk too
        heads[f.path] = [known.get(n, FILLER.format(n=n)) for n in range(1, last + 1)]
    return heads


def describe(name: str, index: DiffIndex, budget: int, context: int) -> str:
    heads = reconstruct(index)
    bare = plan_chunks(index, budget)
    wide = plan_chunks(index, budget, head_files=heads, context_lines=context)
    same = [list(c.index.locations()) for c in bare.chunks] == [
        list(c.index.locations()) for c in wide.chunks
    ]
    original = {
        _key(f.path, h): sum(1 for ln in h.lines if ln.kind == " ")
        for f in index.files
        for h in f.hunks
    }
    added = [
        sum(1 for ln in h.lines if ln.kind == " ") - original.get(_key(f.path, h), 0)
        for c in wide.chunks
        for f in c.files
        for h in f.hunks
    ]
    got = [a for a in added if a]
    tokens = [c.tokens for c in wide.chunks]
    tokens_bare = [c.tokens for c in bare.chunks]
    return (
        f"{name:34} budget {budget:6}  chunks {len(bare.chunks):3} -> {len(wide.chunks):3}"
        f"  same changed lines: {'yes' if same else 'NO'}\n"
        f"{'':34} hunks {len(added):4}, {len(got):4} got context;"
        f" context lines per hunk mean {statistics.fmean(added) if added else 0:5.1f}"
        f" median {statistics.median(added) if added else 0:4.1f} max {max(added, default=0):3}"
        f" (limit {2 * context})\n"
        f"{'':34} tokens per chunk: without context mean {statistics.fmean(tokens_bare):7.0f}"
        f" max {max(tokens_bare):6}; with context mean {statistics.fmean(tokens):7.0f}"
        f" max {max(tokens):6} (budget {budget}: {'ok' if max(tokens) <= budget else 'OVER'})"
    )


def _key(path: str, hunk: object) -> tuple[str, tuple[object, ...]]:
    """A hunk by its first changed line (the same with or without context)."""
    first = next(ln for ln in hunk.lines if ln.kind != " ")  # type: ignore[attr-defined]
    return path, (first.kind, first.old, first.new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--context", type=int, default=20)
    parser.add_argument("--budgets", default="2000,6000,24000")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    print(f"context_lines = {args.context} (at most {args.context} above and below a hunk)")
    for path in sorted(DATA.glob("*.diff")):
        index = DiffIndex.from_diff(path.read_bytes())
        for budget in budgets:
            print(describe(path.name, index, budget, args.context))
        print()


if __name__ == "__main__":
    main()
