"""A finding's fingerprint: stable when lines above it move, different when its cited text or
kind changes; and the review report carries it."""

from __future__ import annotations

from relay_review.pipeline.review import with_fingerprints
from relay_review.records import Finding
from relay_review.review.diff import DiffIndex
from relay_review.review.fingerprint import (
    content_hash,
    finding_fingerprint,
    fingerprint,
    normalise,
    still_cited,
)

BUG = "query = \"SELECT * FROM t WHERE n = '%s'\" % name"


def diff(lines_above: int = 0, bug: str = BUG, indent: str = "    ") -> DiffIndex:
    """A one-file diff adding ``lines_above`` lines, then the buggy line and one more."""
    added = [f"+x{i} = {i}" for i in range(lines_above)] + [f"+{indent}{bug}", "+rows = run(q)"]
    text = (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        f"@@ -1,1 +1,{len(added) + 1} @@\n ctx = 1\n" + "\n".join(added) + "\n"
    )
    return DiffIndex.from_diff(text)


def test_moved_lines_keep_the_fingerprint() -> None:
    before = finding_fingerprint(diff(0), "app.py", 2, "high")
    after = finding_fingerprint(diff(5), "app.py", 7, "high")  # five lines added above
    assert before is not None
    assert before == after


def test_whitespace_changes_keep_the_fingerprint() -> None:
    a = finding_fingerprint(diff(0, indent="    "), "app.py", 2, "high")
    b = finding_fingerprint(diff(0, indent="\t  "), "app.py", 2, "high")
    c = finding_fingerprint(diff(0, bug=BUG.replace(" = ", "   =  ")), "app.py", 2, "high")
    assert a == b == c
    assert normalise("  a \t b  ") == "a b"


def test_changed_cited_line_changes_the_fingerprint() -> None:
    before = finding_fingerprint(diff(0), "app.py", 2, "high")
    fixed = finding_fingerprint(diff(0, bug="query = 'SELECT ...'  # bound"), "app.py", 2, "high")
    assert before is not None and fixed is not None
    assert before[0] != fixed[0]
    assert before[1] != fixed[1]


def test_kind_and_path_are_part_of_the_identity() -> None:
    lines = [BUG]
    assert fingerprint("app.py", lines, "high") != fingerprint("app.py", lines, "low")
    assert fingerprint("app.py", lines, "high") != fingerprint("lib.py", lines, "high")
    assert fingerprint("app.py", lines, "HIGH") == fingerprint("app.py", lines, "high")
    assert fingerprint("app.py", lines, "high").startswith("f1-")


def test_a_range_covers_every_cited_line() -> None:
    one = finding_fingerprint(diff(0), "app.py", 2, "high")
    two = finding_fingerprint(diff(0), "app.py", 2, "high", end_line=3)
    assert one is not None and two is not None
    assert one != two
    assert two[1].endswith(":2")


def test_a_line_outside_the_diff_has_no_fingerprint() -> None:
    assert finding_fingerprint(diff(0), "app.py", 99, "high") is None
    assert finding_fingerprint(diff(0), "other.py", 2, "high") is None


def test_still_cited_finds_moved_lines_and_misses_changed_ones() -> None:
    cited = content_hash([BUG])
    assert still_cited(diff(0), "app.py", cited) == 2
    assert still_cited(diff(4), "app.py", cited) == 6
    assert still_cited(diff(0, bug="safe()"), "app.py", cited) is None
    assert still_cited(diff(0), "gone.py", cited) is None
    for junk in ("", "abc", "abc:0", "abc:-1", "abc:9999999"):
        assert still_cited(diff(0), "app.py", junk) is None


def test_the_report_carries_the_fingerprint() -> None:
    index = diff(3)
    found = with_fingerprints(
        [
            Finding(path="app.py", line=5, severity="high", message="SQL injection"),
            Finding(path="app.py", line=77, severity="low", message="not in the diff"),
        ],
        index,
    )
    expected = finding_fingerprint(index, "app.py", 5, "high")
    assert expected is not None
    assert (found[0].fingerprint, found[0].cited) == expected
    assert found[1].fingerprint is None
    assert found[0].model_dump(mode="json")["fingerprint"] == expected[0]
