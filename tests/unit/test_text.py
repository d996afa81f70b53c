"""Issue 20, part 5: invisible and format characters. One predicate
(:func:`relay_review._text.invisible_class`) refuses a committable suggestion holding any of
them and makes the comment show each one as a visible ``<U+XXXX>`` escape."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest

from relay_review._text import find_invisible, invisible_class, show_invisible
from relay_review.records import RunReport
from relay_review.records.finding import Finding
from relay_review.render import comment_markdown, md_code, md_text, suggestion_diff
from relay_review.review.diff import DiffIndex
from relay_review.review.reply import parse_reply
from relay_review.review.suggestions import suggestion_problem
from relay_review.review.verdict import validate

PATCH = "@@ -1,2 +1,2 @@\n def f(a, b):\n-    return a/b\n+    return a / b\n"
LINE = "    return a / b"

#: One or more characters of each class, as the issue lists them.
CLASSES = {
    "bidirectional control": ["\u200e", "\u200f", "\u061c", "\u202e", "\u2066", "\u2069"],
    "zero-width character": ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"],
    "tag character": ["\U000e0001", "\U000e0041", "\U000e007f", "\U000e0000"],
    "variation selector": ["\ufe0f", "\ufe00", "\U000e0100", "\u180b"],
    "Hangul filler": ["\u115f", "\u1160", "\u3164", "\uffa0"],
    "format character": ["\u00ad", "\u180e", "\u2061", "\u0600", "\ufff9", "\U0001d173"],
    "default-ignorable character": ["\u034f", "\u17b4", "\u2065", "\ufff0", "\U000e0080"],
    "line or paragraph separator": ["\u2028", "\u2029"],
    "control character": ["\x00", "\x1b", "\x7f", "\x85", "\r"],
}
SAMPLES = [(name, ch) for name, chars in CLASSES.items() for ch in chars]


def index() -> DiffIndex:
    return DiffIndex.from_api_files([{"filename": "calc.py", "status": "modified", "patch": PATCH}])


def with_suggestion(suggestion: str) -> Finding:
    return Finding(
        path="calc.py",
        line=2,
        quote=LINE,
        severity="medium",
        message="guard b",
        suggestion=suggestion,
    )


@pytest.mark.parametrize(("name", "ch"), SAMPLES, ids=[f"U+{ord(c):04X}" for _, c in SAMPLES])
def test_each_class_is_named_refused_and_shown(name: str, ch: str) -> None:
    assert invisible_class(ch) == name
    fix = f"    return a / b if b else{ch} 0"
    problem = suggestion_problem(with_suggestion(fix), index())
    assert problem is not None and f"U+{ord(ch):04X}" in problem and name in problem
    (kept,), _ = validate(
        parse_reply(json.dumps({"findings": [with_suggestion(fix).model_dump()]})), index()
    )
    assert kept.suggestion is None and kept.replaces == ()  # the finding stays, not the fix
    escape = f"U+{ord(ch):04X}"
    for out in (md_text(f"x{ch}y"), md_code(f"x{ch}y"), suggestion_diff([f"a{ch}"], "b")):
        if ch not in "\r":  # CR becomes a space / is dropped before escaping, by design
            assert escape in out
        assert ch not in out


def test_ordinary_text_is_untouched() -> None:
    for ch in "aZ09 \t\n~é中ж😀\u00a0\u3000ـ":
        assert invisible_class(ch) is None, hex(ord(ch))
    text = "naïve café — 中文 😀 tab\tend"
    assert show_invisible(text) == text and find_invisible(text) is None
    fix = "    return a / b if b else 0  # 中文 é"
    assert suggestion_problem(with_suggestion(fix), index()) is None


def test_every_format_and_default_ignorable_code_point_is_covered() -> None:
    """Every general-category Cf code point, and Unicode's Default_Ignorable_Code_Point ranges
    (DerivedCoreProperties.txt), are invisible to the predicate."""
    default_ignorable = [
        (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
        (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
        (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
        (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
        (0xE0000, 0xE0FFF),
    ]  # fmt: skip
    for first, last in default_ignorable:
        for cp in range(first, last + 1):
            assert invisible_class(chr(cp)) is not None, hex(cp)
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) == "Cf":
            assert invisible_class(chr(cp)) is not None, hex(cp)


def test_the_comment_shows_a_hidden_character_of_the_changed_line() -> None:
    """A PR line holding U+200E (invisible in GitHub's own diff) and a quote with a tag
    character: the sticky comment's diff and quote show both as escapes."""
    report = {
        "decision": "comment",
        "summary": "s",
        "findings": [
            {
                "path": "calc.py",
                "line": 2,
                "side": "RIGHT",
                "quote": "return a\U000e0041 / b",
                "severity": "medium",
                "message": "m\u200b",
                "suggestion": "    return a / b if b else 0",
                "end_line": 2,
                "replaces": ["    return a\u200e / b"],
            }
        ],
        "unverified": [],
        "files": [{"path": "calc.py", "status": "reviewed", "reason": ""}],
        "catalog": {"selected": []},
        "readiness": [],
        "attempts": [],
    }
    body = comment_markdown(RunReport.from_json(report))
    assert "- " + "    return a<U+200E> / b" in body
    assert "<U+E0041>" in body and "m&lt;U+200B&gt;" in body
    assert not any(ch in body for ch in ("\u200e", "\U000e0041"))
