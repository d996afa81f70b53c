"""Chunking: every file accounted for, every chunk under budget, exclusion globs, splits."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay_review.review.chunks import MIN_CHUNK_TOKENS, ChunkPlan, plan_chunks
from relay_review.review.diff import DiffIndex
from relay_review.review.paths import DEFAULT_EXCLUDES, excluded_by, glob_match
from relay_review.review.prompt import diff_budget
from relay_review.review.tokens import estimate_tokens, line_tokens

DATA = Path(__file__).resolve().parents[2] / "data" / "review"


def new_file(path: str, lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def modified_file(path: str, hunks: int, size: int, width: int = 40) -> str:
    """A file with ``hunks`` hunks, each replacing ``size`` lines, 10 lines apart."""
    out = [f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"]
    for h in range(hunks):
        start = 1 + h * (size + 10)
        out.append(f"@@ -{start},{size + 1} +{start},{size + 1} @@ def f{h}():\n")
        out.append(f" context {h}\n")
        out.extend(f"-old {h}.{i} {'x' * width}\n" for i in range(size))
        out.extend(f"+new {h}.{i} {'y' * width}\n" for i in range(size))
    return "".join(out)


def check_plan(index: DiffIndex, plan: ChunkPlan) -> None:
    """Invariants: each file reported once, in order; chunks within budget; no line lost or
    duplicated; reviewed files' lines all in chunks; skipped files' lines in none."""
    assert [f.path for f in plan.files] == index.paths
    for report in plan.files:
        assert report.status in ("reviewed", "skipped")
        if report.status == "skipped":
            assert report.reason
    for chunk in plan.chunks:
        assert chunk.tokens <= plan.budget_tokens
        assert chunk.tokens == estimate_tokens(chunk.text)
        assert chunk.total == len(plan.chunks)
    shown = [loc for chunk in plan.chunks for loc in chunk.index.locations()]
    assert len(shown) == len(set(shown))
    reviewed = {f.path for f in plan.files if f.status == "reviewed"}
    expected = [loc for loc in index.locations() if loc[0] in reviewed]
    assert sorted(shown) == sorted(expected)
    for f in plan.files:
        if f.status == "reviewed":
            assert any(f.path in c.paths for c in plan.chunks)


def test_real_fixture_in_one_chunk() -> None:
    index = DiffIndex.from_diff((DATA / "requests-2.31.0-to-2.34.2.diff").read_bytes())
    plan = plan_chunks(index, 20_000)
    check_plan(index, plan)
    assert len(plan.chunks) == 1
    text = plan.chunks[0].text
    assert "### FILE requests/__version__.py [modified]" in text
    assert 'R 8 + __version__ = "2.34.2"' in text
    assert 'L 8 - __version__ = "2.31.0"' in text
    assert 'C 7   __url__ = "https://requests.readthedocs.io"' in text
    assert {f.path: f.reason for f in plan.skipped} == {"requests/py.typed": "no changed lines"}


def test_render_format_rename_and_no_eol() -> None:
    diff = (
        "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n"
        "--- a/old.py\n+++ b/new.py\n@@ -3,2 +3,2 @@ def g():\n keep\n-gone\n+here\n"
        "\\ No newline at end of file\n"
        "diff --git a/dead.py b/dead.py\ndeleted file mode 100644\n--- a/dead.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-bye\n"
    )
    plan = plan_chunks(DiffIndex.from_diff(diff), 1000)
    assert plan.chunks[0].text == (
        "### FILE new.py [renamed from old.py]\n"
        "@@ -3,2 +3,2 @@ def g():\n"
        "C 3   keep\n"
        "L 4 - gone\n"
        "R 4 + here\n"
        "\\ no newline at end of file\n"
        "\n"
        "### FILE dead.py [deleted]\n"
        "@@ -1,1 +0,0 @@\n"
        "L 1 - bye"
    )
    no_deleted = plan_chunks(DiffIndex.from_diff(diff), 1000, include_deleted=False)
    assert no_deleted.files[1].status == "skipped"
    assert "deleted" in no_deleted.files[1].reason


def test_control_characters_in_paths_cannot_forge_lines() -> None:
    index = DiffIndex.from_api_files(
        [{"filename": "a\nR 1 + evil.py", "status": "added", "patch": "@@ -0,0 +1 @@\n+x"}]
    )
    text = plan_chunks(index, 1000).chunks[0].text
    assert text.split("\n")[0] == "### FILE a\\x0aR 1 + evil.py [added]"


def test_packing_respects_budget_and_order() -> None:
    diff = "".join(modified_file(f"src/m{i}.py", hunks=2, size=5) for i in range(30))
    index = DiffIndex.from_diff(diff)
    plan = plan_chunks(index, 800)
    check_plan(index, plan)
    assert len(plan.chunks) > 3
    order = [p for c in plan.chunks for p in c.paths]
    assert order == index.paths  # each file whole, in diff order
    assert all(f.reason is None for f in plan.files)


def test_huge_file_split_by_hunk_then_by_line() -> None:
    diff = modified_file("big.py", hunks=6, size=30) + new_file(
        "huge.py", [f"line {i} {'z' * 60}" for i in range(400)]
    )
    index = DiffIndex.from_diff(diff)
    plan = plan_chunks(index, 1200)
    check_plan(index, plan)
    big = [c for c in plan.chunks if "big.py" in c.paths]
    huge = [c for c in plan.chunks if "huge.py" in c.paths]
    assert len(big) > 1 and len(huge) > 1
    assert f"### FILE huge.py [added] (part 1/{len(huge)})" in huge[0].text
    assert f"(part {len(huge)}/{len(huge)})" in huge[-1].text
    assert "@@ (hunk continued) @@" in huge[1].text
    report = {f.path: f for f in plan.files}
    assert report["huge.py"].status == "reviewed"
    assert report["huge.py"].reason.startswith(f"reviewed in {len(huge)} parts")
    # Line numbers survive the split: the first line of part 2 is the next new-file line.
    last_of_first = huge[0].index.lines("huge.py")[-1]
    assert huge[1].index.lines("huge.py")[0] == last_of_first + 1


def test_line_longer_than_any_chunk_is_skipped_with_reason() -> None:
    diff = new_file("app.min.mjs", ["x" * 5000]) + new_file("ok.py", ["fine"])
    index = DiffIndex.from_diff(diff)
    plan = plan_chunks(index, 500)
    check_plan(index, plan)
    skipped = plan.files[0]
    assert skipped.status == "skipped"
    assert skipped.reason.startswith("too large for any chunk: line 1 (RIGHT) alone needs")
    assert plan.files[1].status == "reviewed"


def test_max_chunks_skips_whole_files_beyond_the_limit() -> None:
    diff = "".join(modified_file(f"f{i}.py", hunks=1, size=20) for i in range(10))
    diff += modified_file("split.py", hunks=8, size=20)
    index = DiffIndex.from_diff(diff)
    full = plan_chunks(index, 900)
    assert len(full.chunks) > 4
    plan = plan_chunks(index, 900, max_chunks=3)
    check_plan(index, plan)
    assert len(plan.chunks) <= 3
    skipped = [f for f in plan.files if f.status == "skipped"]
    assert skipped and all("more than 3 chunks" in f.reason for f in skipped)
    assert "split.py" in {f.path for f in skipped}
    assert all("split.py" not in c.paths for c in plan.chunks)


def test_exclusions_are_reported() -> None:
    paths = [
        "package-lock.json",
        "web/yarn.lock",
        "Cargo.lock",
        "go.sum",
        "static/app.min.js",
        "vendor/github.com/x/y.go",
        "web/node_modules/left-pad/index.js",
        "dist/bundle.js",
        "api/client.generated.ts",
        "third_party/zlib/inflate.c",
        "src/main.py",
    ]
    diff = "".join(new_file(p, ["x = 1"]) for p in paths)
    index = DiffIndex.from_diff(diff)
    plan = plan_chunks(index, 1000)
    check_plan(index, plan)
    status = {f.path: (f.status, f.reason) for f in plan.files}
    assert status["src/main.py"] == ("reviewed", None)
    assert status["vendor/github.com/x/y.go"] == (
        "skipped",
        "excluded by a default pattern 'vendor/**'",
    )
    assert status["web/yarn.lock"] == ("skipped", "excluded by a default pattern '*.lock'")
    assert sum(1 for s, _ in status.values() if s == "skipped") == len(paths) - 1
    everything = plan_chunks(index, 1000, exclude=())
    assert all(f.status == "reviewed" for f in everything.files)


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("a/b/c.lock", "*.lock", True),
        ("c.lock.py", "*.lock", False),
        ("vendor/a.go", "vendor/**", True),
        ("web/vendor/a.js", "vendor/**", True),
        ("web/vendor/a.js", "/vendor/**", False),
        ("vendor/a.go", "/vendor/**", True),
        ("vendors/a.go", "vendor/**", False),
        ("docs/a.md", "docs/*.md", True),
        ("docs/x/a.md", "docs/*.md", False),
        ("tests/x/test_a.py", "tests/**/test_*.py", True),
        ("tests/test_a.py", "tests/**/test_*.py", True),
        ("a.generated.ts", "*.generated.*", True),
        ("file1.txt", "file[0-9].txt", True),
        ("filea.txt", "file[!0-9].txt", True),
        ("file1.txt", "file[!0-9].txt", False),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_semantics(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


def test_default_excludes_exported() -> None:
    assert "package-lock.json" in DEFAULT_EXCLUDES and "vendor/**" in DEFAULT_EXCLUDES
    assert excluded_by("poetry.lock", DEFAULT_EXCLUDES) == "*.lock"
    assert excluded_by("src/app.py", DEFAULT_EXCLUDES) is None


def test_token_estimate_is_conservative() -> None:
    assert line_tokens("") == 1
    assert line_tokens("abc") == 2
    assert line_tokens("abcd") == 3
    assert line_tokens("é") == 3
    assert estimate_tokens("ab\ncd") == 4
    assert estimate_tokens("") == 0


def test_budget_minimum_and_diff_budget() -> None:
    index = DiffIndex.from_diff(new_file("a.py", ["x"]))
    with pytest.raises(ValueError, match="below the minimum"):
        plan_chunks(index, MIN_CHUNK_TOKENS - 1)
    with_repair = diff_budget(32_000, 4_000, title="t", body="b")
    without = diff_budget(32_000, 4_000, title="t", body="b", repair_round=False)
    assert 0 < with_repair < without < 32_000 - 4_000
    assert diff_budget(4_000, 2_000) < MIN_CHUNK_TOKENS


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(
        st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=5),
        min_size=1,
        max_size=12,
    ),
    budget=st.integers(min_value=MIN_CHUNK_TOKENS, max_value=3000),
    width=st.integers(min_value=0, max_value=120),
)
def test_property_no_file_lost_and_budget_kept(
    sizes: list[list[int]], budget: int, width: int
) -> None:
    parts = []
    for i, hunks in enumerate(sizes):
        out = [f"diff --git a/f{i}.py b/f{i}.py\n--- a/f{i}.py\n+++ b/f{i}.py\n"]
        start = 1
        for h, size in enumerate(hunks):
            out.append(f"@@ -{start},{size} +{start},{size} @@\n")
            out.extend(f"-o{h}.{k}{'é' * (width // 10)}{'q' * width}\n" for k in range(size))
            out.extend(f"+n{h}.{k}{'q' * width}\n" for k in range(size))
            start += size + 5
        parts.append("".join(out))
    index = DiffIndex.from_diff("".join(parts))
    check_plan(index, plan_chunks(index, budget))
