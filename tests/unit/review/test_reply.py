"""Issue 22: tolerant extraction, strict validation of model replies.

What small models really write (literal control characters in strings, trailing commas, single
quotes, Python literals, fences, prose, an echoed schema first, thinking tags closed or not, a
reply cut at max_tokens) is read; each finding is validated on its own; and a property test
feeds mutated replies through the parser: no exception but VerdictParseError escapes, and every
finding it accepts still passes the citation check.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay_review.drill.review import sample_diff
from relay_review.review.chunks import plan_chunks
from relay_review.review.citations import citation_problem
from relay_review.review.diff import DiffIndex
from relay_review.review.reply import VerdictParseError, parse_reply_parts, split_thinking
from relay_review.review.reply_schema import REPLY_SCHEMA, response_format
from relay_review.review.verdict import validate_parts

INDEX = DiffIndex.from_diff(sample_diff())
[CHUNK] = plan_chunks(INDEX, 4000).chunks
LOCATIONS = list(CHUNK.index.locations())
SHELL = next(loc for loc in LOCATIONS if "shell=True" in loc[3])


def good_finding() -> dict:
    path, side, line, text = SHELL
    return {
        "path": path,
        "line": line,
        "side": side,
        "quote": text.strip(),
        "severity": "high",
        "message": "shell=True with\targuments:\ncommand injection.",
    }


BASE = {"summary": "Adds an export with a shell injection.", "findings": [good_finding()]}


def parsed(text: str):
    return parse_reply_parts(text)


@pytest.mark.parametrize(
    "text",
    [
        # literal newline and tab inside strings (json.loads refuses them)
        '{"summary": "line one\nline\ttwo", "findings": []}',
        # trailing commas
        '{"summary": "fine words", "findings": [],}',
        # single quotes and Python literals
        "{'summary': 'fine words', 'findings': [], 'decision': None, 'ok': True}",
        # a fence and prose around it
        'Here is my review:\n```json\n{"summary": "fine words", "findings": []}\n```\nBye.',
        # bare keys and a comment
        '{summary: "fine words", // the summary\n findings: []}',
    ],
)
def test_almost_json_is_read(text: str) -> None:
    reply = parsed(text).reply
    assert reply.summary.startswith(("line one", "fine words"))
    assert reply.findings == []


def test_an_echoed_schema_before_the_reply_is_skipped() -> None:
    echo = json.dumps(REPLY_SCHEMA) + "\n" + json.dumps(response_format("json_schema"))
    text = echo + "\nNow the reply:\n" + json.dumps(BASE)
    reply = parsed(text).reply
    assert reply.summary == BASE["summary"] and len(reply.findings) == 1
    with pytest.raises(VerdictParseError):
        parsed(json.dumps(REPLY_SCHEMA))  # the schema alone is no reply


def test_thinking_never_beats_the_answer_closed_or_not() -> None:
    draft = '{"summary": "draft words", "findings": []}'
    final = json.dumps(BASE)
    assert parsed(f"<think>{draft}</think>{final}").reply.summary == BASE["summary"]
    assert parsed(f"{final}<think>{draft}").reply.summary == BASE["summary"]  # unclosed after
    # an unclosed tag with nothing outside: the last object inside it is the answer, cut (an
    # unfinished thought: partial, never approve; a helper's audit); closed, it is not cut
    text = f"<thinking>first {draft} then {final}"
    assert parsed(text).reply.summary == BASE["summary"] and parsed(text).cut
    assert not parsed(f"<think>first {draft} then {final}</think>").cut
    assert not parsed(f"<think>x</think>{final}").cut
    assert split_thinking("a<think>b</think>c<think>d") == ("ac", "b\nd")


def test_a_later_objects_findings_are_read_too() -> None:
    """A draft that flags nothing and a correction that flags the injection (or the other way
    round): the model's finding is never lost to the other object."""
    clean = json.dumps({"summary": "Looks good to me, nothing to flag.", "findings": []})
    final = json.dumps(BASE)
    for text in (f"{clean}\nWait, correction:\n{final}", f"{final}\n{clean}"):
        p = parsed(text)
        assert len(p.reply.findings) == 1, text
        verified, rejected = validate_parts(p, CHUNK.index)
        assert len(verified) == 1 and not rejected


def test_a_cut_reply_keeps_its_complete_findings_and_says_so() -> None:
    full = json.dumps({**BASE, "findings": [good_finding(), good_finding()]})
    cut_at = full.rindex('"message"')  # inside the second finding
    p = parsed(full[:cut_at])
    assert p.cut and len(p.reply.findings) == 1
    assert not parsed(full).cut


def test_each_finding_is_validated_on_its_own() -> None:
    bad = [
        {**good_finding(), "severity": "security"},
        {**good_finding(), "line": "12-14"},
        "not an object",
    ]
    p = parsed(json.dumps({**BASE, "findings": [*bad, good_finding()]}))
    assert [r.position for r in p.invalid] == [1, 3]
    assert "security" in p.invalid[0].reason
    assert p.positions == [2, 4]
    assert p.reply.findings[0].line == 12  # "12-14" reads as line 12
    verified, rejected = validate_parts(p, CHUNK.index)
    assert len(verified) == 1 and [r.position for r in rejected] == [1, 2, 3]


def test_hostile_nesting_and_length_stay_bounded() -> None:
    for text in ("[" * 50_000, "{" * 50_000, '{"a":' * 50_000, "{'" * 100_000):
        with pytest.raises(VerdictParseError):
            parsed(text)


# ---------------------------------------------------------------------------------------------
# the property: mutated replies


def _mutations() -> st.SearchStrategy:
    base = json.dumps({**BASE, "findings": [good_finding(), {**good_finding(), "line": 999}]})
    pretty = json.dumps(BASE, indent=2)

    def cut(s: str, at: int) -> str:
        return s[: at % (len(s) + 1)]

    def insert(s: str, at: int, piece: str) -> str:
        i = at % (len(s) + 1)
        return s[:i] + piece + s[i:]

    def delete(s: str, at: int, n: int) -> str:
        i = at % (len(s) + 1)
        return s[:i] + s[i + n :]

    pieces = st.sampled_from(
        [
            "\n",
            "\t",
            "\x00",
            ",",
            "'",
            '"',
            "}",
            "]",
            "{",
            "[",
            "<think>",
            "</think>",
            "None",
            "```",
            "\\",
            "\\u12",
            "\u2028",
            json.dumps(REPLY_SCHEMA),
            "…",
            "True",
            ":",
        ]
    )
    texts = st.sampled_from([base, pretty, base.replace('"', "'"), base.replace("],", "],,")])
    ops = st.lists(
        st.one_of(
            st.tuples(st.just("cut"), st.integers(0, 5000)),
            st.tuples(st.just("insert"), st.integers(0, 5000), pieces),
            st.tuples(st.just("delete"), st.integers(0, 5000), st.integers(1, 40)),
            st.tuples(
                st.just("wrap"), st.sampled_from(["prose ", "```json\n", "<think>x</think>"])
            ),
        ),
        max_size=6,
    )

    def apply(text: str, steps: list) -> str:
        for step in steps:
            if step[0] == "cut":
                text = cut(text, step[1])
            elif step[0] == "insert":
                text = insert(text, step[1], step[2])
            elif step[0] == "delete":
                text = delete(text, step[1], step[2])
            else:
                text = step[1] + text + "\n```"
        return text

    return st.builds(apply, texts, ops)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_mutated_replies_never_raise_and_accepted_findings_verify(text: str) -> None:
    try:
        p = parse_reply_parts(text)
    except VerdictParseError:
        return
    verified, rejected = validate_parts(p, CHUNK.index)
    for finding in verified:
        assert citation_problem(finding, CHUNK.index) is None
    positions = [r.position for r in rejected]
    assert len(positions) == len(set(positions))
    assert len(verified) + len(rejected) == len(p.reply.findings) + len(p.invalid)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises_anything_else(text: str) -> None:
    try:
        p = parse_reply_parts(text)
    except VerdictParseError:
        return
    verified, _ = validate_parts(p, CHUNK.index)
    assert all(citation_problem(f, CHUNK.index) is None for f in verified)
