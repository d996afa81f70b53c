"""Reply parsing, citation validation, the computed decision and the merge of findings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from relay_review.records.finding import MAX_MESSAGE_CHARS, MAX_PATH_CHARS, Finding
from relay_review.review.chunks import plan_chunks
from relay_review.review.citations import citation_problem, points_at_shown_code, quote_matches
from relay_review.review.decision import decide, merge_findings
from relay_review.review.diff import DiffIndex
from relay_review.review.reply import (
    MAX_SUMMARY_CHARS,
    ModelReply,
    VerdictParseError,
    extract_json,
    parse_reply,
    parse_reply_parts,
)
from relay_review.review.verdict import validate

DATA = Path(__file__).resolve().parents[2] / "data" / "review"
VERSION = "requests/__version__.py"


@pytest.fixture(scope="module")
def index() -> DiffIndex:
    return DiffIndex.from_diff((DATA / "requests-2.31.0-to-2.34.2.diff").read_bytes())


def finding(**kw) -> Finding:
    base = {
        "path": VERSION,
        "line": 8,
        "side": "RIGHT",
        "quote": '__version__ = "2.34.2"',
        "severity": "medium",
        "message": "version bump without changelog",
    }
    return Finding(**{**base, **kw})


def reply_json(*findings: dict, **extra) -> str:
    return json.dumps({"summary": "s", "findings": list(findings), **extra})


# -- extraction and parsing ---------------------------------------------------------------------


def test_extract_from_fence_and_prose() -> None:
    text = 'Here is my review:\n```json\n{"summary": "ok", "findings": []}\n```\nThanks!'
    assert extract_json(text) == {"summary": "ok", "findings": []}


def test_extract_skips_non_json_braces_and_strings_with_braces() -> None:
    text = (
        "Use {curly} braces like {this}. "
        '{"summary": "a } brace { inside \\" a string", "findings": []} trailing {junk'
    )
    assert extract_json(text)["summary"] == 'a } brace { inside " a string'


def test_extract_prefers_reply_shaped_object() -> None:
    text = 'Example input: {"x": 1}. Reply: {"summary": "real", "findings": []}'
    assert extract_json(text)["summary"] == "real"
    with pytest.raises(VerdictParseError):  # issue 22: an object that is no reply is none
        extract_json('{"x": 1} and {"y": 2}')
    wrapped = '{"review": {"summary": "inner", "findings": []}}'
    assert extract_json(wrapped)["summary"] == "inner"


def test_think_block_is_ignored() -> None:
    text = '<think>maybe {"summary": "draft", "findings": []}</think>{"summary": "final"}'
    assert parse_reply(text).summary == "final"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "no json here",
        '{"findings": {"not": "a list"}}',
        '{"unrelated": true}',
        "[" * 50_000,
        "{" * 50_000,
        '{"a":' * 50_000,
    ],
)
def test_malformed_replies_raise(text: str) -> None:
    with pytest.raises(VerdictParseError):
        parse_reply(text)


def test_hostile_brace_flood_is_bounded() -> None:
    text = '{"s": "' + "{" * 200_000
    started = time.monotonic()
    with pytest.raises(VerdictParseError):
        parse_reply(text)
    assert time.monotonic() - started < 30  # generous: guards against quadratic blow-ups only


def test_lenient_fields_and_ignored_decision() -> None:
    reply = parse_reply(
        reply_json(
            {
                "path": VERSION,
                "line": "8",
                "side": " right ",
                "quote": None,
                "severity": "Critical",
                "message": "x" * (MAX_MESSAGE_CHARS + 50),
                "confidence": 0.3,
            },
            decision="approve",
            verdict="LGTM",
        )
    )
    f = reply.findings[0]
    assert (f.line, f.side, f.severity, f.quote) == (8, "RIGHT", "high", "")
    assert len(f.message) == MAX_MESSAGE_CHARS and f.message.endswith("…")
    assert not hasattr(reply, "decision")
    assert "decision" not in reply.model_dump()


def test_missing_findings_means_none() -> None:
    assert parse_reply('{"summary": "nothing to report"}').findings == []


# -- citation validation ------------------------------------------------------------------------


def test_correct_citation_is_verified(index: DiffIndex) -> None:
    ok = [
        finding(),
        finding(quote='  __version__="2.34.2"  '),  # whitespace-insensitive
        finding(quote='+ __version__ = "2.34.2"'),  # copied diff marker tolerated
        finding(line=8, side="LEFT", quote='__version__ = "2.31.0"'),
    ]
    verified, rejected = validate(ModelReply(summary="s", findings=ok), index)
    assert verified == ok and rejected == []


def test_line_outside_the_diff_is_rejected_with_nearest_lines(index: DiffIndex) -> None:
    reply = ModelReply(summary="s", findings=[finding(line=13, quote="whatever")])
    verified, rejected = validate(reply, index)
    assert verified == []
    (rej,) = rejected
    assert rej.position == 1
    assert rej.reason == (
        f"line 13 of {VERSION} (RIGHT) is not a changed line; nearest changed lines: 9, 12"
    )
    assert index.lines(VERSION, "RIGHT") == [8, 9, 12]


def test_wrong_quote_is_not_verified(index: DiffIndex) -> None:
    cases = {
        "__version__ = '2.34.2'": "quote does not match",
        '__version__ = "2.34"': "quote does not match",  # partial quotes do not count
        "": "quote is empty",
        "   ": "quote is empty",
    }
    for quote, expected in cases.items():
        verified, rejected = validate(ModelReply(findings=[finding(quote=quote)]), index)
        assert verified == []
        assert rejected[0].reason.startswith(expected)
        assert 'reads `__version__ = "2.34.2"`' in rejected[0].reason


def test_wrong_side_wrong_path_and_empty_message(index: DiffIndex) -> None:
    reasons = [
        r.reason
        for r in validate(
            ModelReply(
                findings=[
                    finding(path="requests/certs.py", line=16, side="RIGHT", quote="x"),
                    finding(path="requests/__version.py"),
                    finding(path="nothing/here.c"),
                    finding(message="  "),
                    finding(path="requests/py.typed", line=1),
                ]
            ),
            index,
        )[1]
    ]
    assert reasons[0] == (
        "line 16 of requests/certs.py (RIGHT) is not a changed line; nearest changed lines: 15;"
        " line 16 (LEFT) is one: did you mean side LEFT?"
    )
    assert reasons[1] == (
        "requests/__version.py is not a file in this diff; did you mean requests/__version__.py?"
    )
    assert reasons[2] == "nothing/here.c is not a file in this diff"
    assert reasons[3] == "message is empty"
    assert reasons[4] == "requests/py.typed has no reviewable lines (no changed lines)"


def test_side_without_lines_points_to_the_other_side() -> None:
    diff = "--- a/gone.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
    index = DiffIndex.from_diff(diff)
    (rej,) = validate(ModelReply(findings=[finding(path="gone.py", line=1)]), index)[1]
    assert rej.reason == "gone.py has no RIGHT (added) lines; its LEFT lines nearest to 1: 1, 2"


def test_blank_line_cannot_be_cited() -> None:
    index = DiffIndex.from_diff("--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n a\n+\n")
    (rej,) = validate(ModelReply(findings=[finding(path="x.py", line=2, quote="")]), index)[1]
    assert (
        rej.reason == "line 2 of x.py (RIGHT) is blank and cannot be cited; cite a non-blank line"
    )


def test_renamed_old_path_is_redirected() -> None:
    diff = (
        "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n"
        "--- a/old.py\n+++ b/new.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    index = DiffIndex.from_diff(diff)
    (rej,) = validate(ModelReply(findings=[finding(path="old.py", line=1, quote="b")]), index)[1]
    assert rej.reason.endswith("it was renamed or copied to new.py: cite that path")


def test_findings_over_the_cap_are_rejected(index: DiffIndex) -> None:
    reply = ModelReply(findings=[finding(message=f"note {i}") for i in range(5)])
    verified, rejected = validate(reply, index, max_findings=3)
    assert len(verified) == 3
    assert [r.position for r in rejected] == [4, 5]
    assert all(r.reason == "over the limit of 3 findings per reply" for r in rejected)


def test_a_finding_repeated_word_for_word_is_taken_once_and_not_capped(index: DiffIndex) -> None:
    """A model that writes the same finding 30 times: one finding, nothing over the cap (the
    copies would be listed as unverified, make the review partial and cost a repair round)."""
    reply = ModelReply(findings=[finding()] * 30 + [finding(message="another note")])
    verified, rejected = validate(reply, index, max_findings=3)
    assert [f.message for f in verified] == ["version bump without changelog", "another note"]
    assert rejected == []


def test_chunk_index_only_accepts_lines_shown_in_that_chunk() -> None:
    diff = "".join(
        f"diff --git a/f{i}.py b/f{i}.py\n--- a/f{i}.py\n+++ b/f{i}.py\n"
        f"@@ -1 +1,60 @@\n" + " keep\n" + "".join(f"+line {i}.{k} {'w' * 30}\n" for k in range(59))
        for i in range(4)
    )
    index = DiffIndex.from_diff(diff)
    plan = plan_chunks(index, 900)
    assert len(plan.chunks) > 1
    first = plan.chunks[0]
    elsewhere = next(p for p in index.paths if p not in first.paths)
    f = Finding(
        path=elsewhere,
        line=2,
        quote=index.line(elsewhere, 2),
        severity="high",
        message="m",
    )
    assert validate(ModelReply(findings=[f]), index)[0] == [f]
    verified, rejected = validate(ModelReply(findings=[f]), first.index)
    assert verified == [] and "is not a file in this diff" in rejected[0].reason


def test_quote_matches_rules() -> None:
    assert quote_matches("a  b", "a b")
    assert quote_matches("\ta\nb ", "ab")
    assert not quote_matches("", "")
    assert not quote_matches("a", "ab")
    assert quote_matches("R12 + x = 1", "x = 1")
    assert quote_matches("-x", "x")
    assert quote_matches("+x", "+x")


LONG_A = "exec(__import__('base64').b64decode('" + "QUJD" * 6000 + "'))"
LONG_B = "exec(__import__('base64').b64decode('" + "QUJD" * 5999 + "WFla'))"


def long_index() -> DiffIndex:
    lines = ["import os", LONG_A, LONG_B, "print('" + "x" * 60 + "')"]
    patch = f"@@ -0,0 +1,{len(lines)} @@\n" + "\n".join(f"+{t}" for t in lines)
    return DiffIndex.from_api_files(
        [{"filename": "app/boot.py", "status": "added", "patch": patch}]
    )


def test_excerpt_quotes_verify_long_lines_only_when_unique() -> None:
    index = long_index()

    def check(line: int, quote: str) -> str | None:
        f = Finding(path="app/boot.py", line=line, quote=quote, severity="high", message="m")
        return citation_problem(f, index)

    # abbreviated with an ellipsis, as models do: the pieces occur in order, 40+ characters
    assert check(2, "exec(__import__('base64').b64decode('QUJD…QUJD'))") is None
    assert check(3, "exec(__import__('base64').b64decode('QUJD ... WFla'))") is None
    # the same excerpt fits both long lines: it singles out neither
    for shared in (
        "exec(__import__('base64').b64decode('QUJDQUJD",
        "exec(__import__('base64').b64decode('QUJD…'))",
    ):
        assert "no other changed line holds" in check(2, shared)
    # a quote of a different line never verifies, whole or excerpted
    assert check(2, "print('" + "x" * 60 + "')") is not None
    assert check(4, "exec(__import__('base64').b64decode('QUJDQUJD…'))") is not None
    assert check(2, "…WFla'))") is not None  # too short, and of line 3
    # an excerpt under 40 non-space characters, or of a short line, does not count
    assert check(2, "b64decode('QUJD") is not None
    assert check(1, "import") is not None
    assert check(4, "print('" + "x" * 45) is None  # an excerpt of line 4 (67 characters)
    # the whole line still verifies
    assert check(2, LONG_A) is None


def test_points_at_shown_code_tells_a_misplaced_finding_from_an_invention() -> None:
    index = long_index()
    misplaced = Finding(path="app/boot.py", line=1, quote=LONG_B, severity="high", message="m")
    invented = Finding(path="app/boot.py", line=1, quote="eval(x)", severity="high", message="m")
    assert citation_problem(misplaced, index) is not None
    assert points_at_shown_code(misplaced, index)
    assert not points_at_shown_code(invented, index)


# -- decision and merge -------------------------------------------------------------------------


def test_decision_is_computed_never_taken_from_the_model(index: DiffIndex) -> None:
    text = reply_json(finding(severity="high").model_dump(), decision="approve")
    verified, _ = validate(parse_reply(text), index)
    assert decide(verified) == "request_changes"
    text = reply_json(finding(severity="low").model_dump(), decision="request_changes")
    verified, _ = validate(parse_reply(text), index)
    assert decide(verified) == "comment"
    text = reply_json(decision="request_changes")
    assert decide(validate(parse_reply(text), index)[0]) == "approve"
    assert decide([], allow_approve=False) == "comment"


def test_unverified_findings_never_count(index: DiffIndex) -> None:
    text = reply_json(finding(severity="high", line=99).model_dump())
    verified, rejected = validate(parse_reply(text), index)
    assert verified == [] and len(rejected) == 1
    assert decide(verified) == "approve"


def test_merge_findings_dedupes_and_keeps_highest_severity() -> None:
    a = finding(message="Version bump without changelog.", severity="low")
    b = finding(message="  version  bump without CHANGELOG ", severity="high")
    c = finding(message="Version bump without a changelog entry", severity="medium")
    d = finding(message="Completely different problem on this line")
    e = finding(line=9, quote="__build__ = 0x023402", message="Version bump without changelog.")
    merged = merge_findings([[a, d], [b, e], [c]])
    assert merged == [b, d, e]
    assert merge_findings([]) == []


def test_thinking_blocks_are_stripped_in_linear_time():
    import time

    from relay_review.review.reply import strip_thinking

    assert strip_thinking("a<think>x</think>b<THINKING>y</thinking>c") == "abc"
    assert strip_thinking("keep <think>unclosed") == "keep <think>unclosed"
    start = time.perf_counter()
    strip_thinking("<think>" * 200_000)  # a quadratic scan would take minutes here
    assert time.perf_counter() - start < 5.0


# -- hostile replies ----------------------------------------------------------------------------

MARKER = "<!-- relay-review:sticky -->"


@pytest.mark.parametrize(
    "path",
    [
        "../../requests/__version__.py",
        f"{VERSION}\n| x | y |",
        f"{MARKER}{VERSION}",
        f"/{VERSION}",
        f"./{VERSION}",
        VERSION.upper(),
        f"{VERSION} ",
        "../../etc/passwd",
        "x/" * 5000 + VERSION,
    ],
)
def test_a_path_outside_the_diff_is_never_verified(index: DiffIndex, path: str) -> None:
    """Only a path exactly as the diff names it verifies: no normalisation a model could abuse."""
    verified, rejected = validate(ModelReply(findings=[finding(path=path)]), index)
    assert not verified and len(rejected) == 1
    assert "is not a file in this diff" in rejected[0].reason
    assert len(rejected[0].reason) < 1000  # the model's path is quoted, capped
    assert decide(verified) == "approve"


def test_hostile_texts_are_capped_and_made_encodable() -> None:
    reply = parse_reply(
        json.dumps(
            {
                "summary": "s\ud800" + "x" * 10_000,
                "findings": [
                    {
                        "path": "p\udcff" + "/d" * 5000,
                        "line": 1,
                        "side": "RIGHT",
                        "quote": "q\udcfe",
                        "severity": "high",
                        "message": "m\ud800" + "y" * 10_000,
                    }
                ],
            }
        )
    )
    (f,) = reply.findings
    assert len(reply.summary) == MAX_SUMMARY_CHARS and reply.summary.startswith("s\ufffdx")
    assert len(f.message) == MAX_MESSAGE_CHARS and f.message.startswith("m\ufffdy")
    assert len(f.path) == MAX_PATH_CHARS and f.path.startswith("p\ufffd/d")
    assert f.quote == "q\ufffd"
    json.dumps(reply.model_dump(), ensure_ascii=False).encode("utf-8")  # never raises


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"path": "a", "line": "twelve", "severity": "low", "message": "m"}, "line"),
        ({"path": "a", "line": 1, "severity": "catastrophic", "message": "m"}, "severity"),
        ({"line": 1, "severity": "low", "message": "m"}, "path"),
    ],
)
def test_a_finding_that_fails_the_schema_is_rejected_alone(item: dict, why: str) -> None:
    # issue 22: each finding is validated on its own; the rest of the reply stands
    good = {"path": "a", "line": 2, "severity": "low", "message": "m"}
    parsed = parse_reply_parts(json.dumps({"summary": "x y", "findings": [item, good]}))
    assert [f.line for f in parsed.reply.findings] == [2]
    [bad] = parsed.invalid
    assert bad.position == 1 and why in bad.reason and "does not match the schema" in bad.reason
    assert parsed.positions == [2]


def test_a_reply_cut_inside_its_findings_is_kept_and_marked_cut() -> None:
    parsed = parse_reply_parts('{"summary": "x", "findings": [')
    assert parsed.cut and parsed.reply.summary == "x" and parsed.reply.findings == []
