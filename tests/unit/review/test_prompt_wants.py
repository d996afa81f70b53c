"""Reviewing the way the repository wants (issue 16), without I/O: the maintainers' instructions
in the system message (guidelines, path instructions, language), context around hunks within an
exact budget, and suggestions checked against the cited lines and rendered without breaking out
of their fences."""

from __future__ import annotations

import json
import re

import pytest

from relay_review.records import Finding, RunReport, Verdict
from relay_review.render import comment_markdown, line_comment_body, suggestion_diff
from relay_review.review.chunks import plan_chunks
from relay_review.review.diff import DiffIndex
from relay_review.review.prompt import Instructions, build_messages, prompt_overhead_tokens
from relay_review.review.reply import parse_reply
from relay_review.review.suggestions import suggestion_problem
from relay_review.review.tokens import estimate_tokens
from relay_review.review.verdict import validate

GUIDE = "Flag any SQL built with string formatting as high severity."


def one_file_index(patch: str, path: str = "app/db.py") -> DiffIndex:
    return DiffIndex.from_api_files([{"filename": path, "status": "modified", "patch": patch}])


PATCH = (
    "@@ -10,4 +10,6 @@ def load(name):\n"
    "     conn = connect()\n"
    "-    rows = conn.run('select 1')\n"
    "+    query = 'select * from t where n = %s' % name\n"
    "+    rows = conn.run(query)\n"
    "+    return rows\n"
    "     conn.close()\n"
    "     log(name)"
)


# --- instructions in the system message ------------------------------------------------------


def test_guidelines_sit_in_the_system_message_outside_every_fence() -> None:
    instructions = Instructions(guidelines=GUIDE, guidelines_source=".github/relay-review.md@abc")
    chunk = plan_chunks(one_file_index(PATCH), 2000).chunks[0]
    prompt = build_messages(chunk, title="t", body=GUIDE, instructions=instructions)
    system, user = (m["content"] for m in prompt.messages)
    assert GUIDE in system and "REPOSITORY GUIDELINES (.github/relay-review.md@abc" in system
    assert "UNTRUSTED" not in system.split("REPOSITORY GUIDELINES", 1)[1]
    # the same text in the PR body stays fenced as data in the user message
    body = user.split(f"<<<UNTRUSTED-PR-BODY-{prompt.token}>>>", 1)[1]
    assert body.split(f"<<<END-UNTRUSTED-PR-BODY-{prompt.token}>>>", 1)[0].strip() == GUIDE


def test_path_instructions_go_only_with_chunks_they_match() -> None:
    instructions = Instructions(paths=(("app/**", "Check every query."), ("docs/*", "Spelling.")))
    chunk = plan_chunks(one_file_index(PATCH), 2000).chunks[0]
    system = build_messages(chunk, instructions=instructions).messages[0]["content"]
    assert "files matching app/**: Check every query." in system
    assert "Spelling." not in system


def test_language_reaches_the_prompt_and_overhead_counts_everything() -> None:
    bare = prompt_overhead_tokens("t", "b")
    instructions = Instructions(guidelines=GUIDE, paths=(("x", "y" * 300),), language="Korean")
    system = build_messages("diff", instructions=instructions).messages[0]["content"]
    assert 'Write "summary" and every "message" in Korean' in system
    assert "copy" in system and '"quote"' in system  # quotes are never translated
    more = prompt_overhead_tokens("t", "b", instructions=instructions)
    assert more - bare >= estimate_tokens(GUIDE) + estimate_tokens("y" * 300)


def test_a_reply_in_another_language_verifies_the_same() -> None:
    index = one_file_index(PATCH)
    quote = "query = 'select * from t where n = %s' % name"
    reply = parse_reply(
        json.dumps(
            {
                "summary": "이름을 SQL에 직접 넣습니다.",
                "findings": [
                    {"path": "app/db.py", "line": 11, "side": "RIGHT", "quote": quote,
                     "severity": "high", "message": "SQL 인젝션: 이름이 쿼리에 포맷됩니다."},
                    {"path": "app/db.py", "line": 11, "side": "RIGHT", "quote": "쿼리",
                     "severity": "low", "message": "번역된 인용은 검증되지 않습니다."},
                ],
            }
        )
    )  # fmt: skip
    verified, rejected = validate(reply, index)
    assert [f.message for f in verified] == ["SQL 인젝션: 이름이 쿼리에 포맷됩니다."]
    assert len(rejected) == 1 and "quote does not match" in rejected[0].reason


# --- context around changes -------------------------------------------------------------------

HEAD = [f"    step({i})" for i in range(1, 61)]
HEAD[9:15] = [
    "    conn = connect()",
    "    query = 'select * from t where n = %s' % name",
    "    rows = conn.run(query)",
    "    return rows",
    "    conn.close()",
    "    log(name)",
]


def test_context_lines_come_from_the_head_file_and_are_never_citable() -> None:
    plan = plan_chunks(one_file_index(PATCH), 2000, head_files={"app/db.py": HEAD}, context_lines=5)
    (chunk,) = plan.chunks
    assert chunk.context == 10  # five above, five below
    assert "@@ -5,14 +5,16 @@ def load(name):" in chunk.text
    assert "C 5       step(5)" in chunk.text and "C 20       step(20)" in chunk.text
    assert "step(4)" not in chunk.text and "step(21)" not in chunk.text
    assert chunk.index.line("app/db.py", 5, "RIGHT") is None
    assert chunk.index.lines("app/db.py", "RIGHT") == [11, 12, 13]


@pytest.mark.parametrize("budget", [256, 300, 350, 420, 600])
def test_budget_stays_exact_and_context_goes_before_changed_lines(budget: int) -> None:
    patches = [PATCH.replace("app/db.py", "x") for _ in range(3)]
    entries = [
        {"filename": f"f{i}.py", "status": "modified", "patch": p} for i, p in enumerate(patches)
    ]
    index = DiffIndex.from_api_files(entries)
    heads = {f"f{i}.py": HEAD for i in range(3)}
    bare = plan_chunks(index, budget)
    wide = plan_chunks(index, budget, head_files=heads, context_lines=20)
    # the same changed lines in the same chunks: context never displaces a changed line
    assert [c.paths for c in wide.chunks] == [c.paths for c in bare.chunks]
    assert [list(c.index.locations()) for c in wide.chunks] == [
        list(c.index.locations()) for c in bare.chunks
    ]
    for chunk in wide.chunks:
        assert chunk.tokens == estimate_tokens(chunk.text) <= budget


def test_a_stale_head_file_lends_no_context() -> None:
    stale = [*HEAD]
    stale[11] = "    rows = something_else()"
    plan = plan_chunks(
        one_file_index(PATCH), 2000, head_files={"app/db.py": stale}, context_lines=5
    )
    assert plan.chunks[0].context == 0


def test_neighbouring_hunks_share_the_lines_between_them() -> None:
    head = [f"line {i}" for i in range(1, 41)]
    head[9], head[19] = "new 10", "new 20"
    patch = (
        "@@ -9,3 +9,3 @@\n line 9\n-old 10\n+new 10\n line 11\n"
        "@@ -19,3 +19,3 @@\n line 19\n-old 20\n+new 20\n line 21"
    )
    chunk = plan_chunks(
        one_file_index(patch), 4000, head_files={"app/db.py": head}, context_lines=20
    )
    shown = [int(m) for m in re.findall(r"^C (\d+) ", chunk.chunks[0].text, re.MULTILINE)]
    assert len(shown) == len(set(shown)) == 40 - 2  # every line once; the two changed ones as R


# --- suggestions ------------------------------------------------------------------------------


def finding(line: int = 11, **extra: object) -> Finding:
    quote = {11: "query = 'select * from t where n = %s' % name", 12: "rows = conn.run(query)"}
    return Finding.model_validate(
        {"path": "app/db.py", "line": line, "side": "RIGHT", "quote": quote.get(line, ""),
         "severity": "high", "message": "SQL injection.", **extra}
    )  # fmt: skip


FIX = "    rows = conn.run('select * from t where n = %s', (name,))"


def test_a_suggestion_for_the_cited_lines_is_kept_with_what_it_replaces() -> None:
    reply = parse_reply(json.dumps({"summary": "", "findings": [
        finding(suggestion=FIX + "\n", end_line=12).model_dump(exclude={"replaces"})
    ]}))  # fmt: skip
    (kept,), _ = validate(reply, one_file_index(PATCH))
    assert kept.suggestion == FIX + "\n" and kept.end_line == 12
    assert kept.replaces == (
        "    query = 'select * from t where n = %s' % name",
        "    rows = conn.run(query)",
    )


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"end_line": 15}, "not added lines shown"),  # 15 is a context line
        ({"end_line": 10}, "before line"),
        ({"side": "LEFT", "line": 11, "quote": "rows = conn.run('select 1')"}, "RIGHT"),
        ({"suggestion": "    query = 'select * from t where n = %s' % name"}, "changes nothing"),
        ({"suggestion": "```python\nx = 1\n```"}, "Markdown fence"),
        ({"suggestion": "R 12 + x = 1"}, "diff markers"),
        ({"suggestion": "x = 1 \u202e# evil"}, "bidirectional"),
        ({"suggestion": "x" * 9000}, "longer than"),
    ],
)
def test_a_suggestion_that_does_not_apply_is_dropped_not_the_finding(
    extra: dict[str, object], why: str
) -> None:
    f = finding(**{"suggestion": FIX, **extra})
    problem = suggestion_problem(f, one_file_index(PATCH))
    assert problem is not None and why in problem
    if f.side == "RIGHT":
        reply = parse_reply(json.dumps({"findings": [f.model_dump(exclude={"replaces"})]}))
        (kept,), rejected = validate(reply, one_file_index(PATCH))
        assert not rejected and kept.suggestion is None and kept.end_line is None
        assert kept.replaces == ()


def test_replaces_cannot_come_from_the_model() -> None:
    reply = parse_reply(json.dumps({"findings": [{**finding().model_dump(), "replaces": ["x"]}]}))
    assert reply.findings[0].replaces == ()


def test_suggestion_fences_are_longer_than_any_backtick_run_inside() -> None:
    sneaky = "x = '```` <!-- relay-review -->'"
    block = suggestion_diff(["x = 1"], sneaky)
    fence = block.split("\n", 1)[0].removesuffix("diff")
    assert fence == "`" * 5 and block.endswith("\n" + fence)
    assert "<!--" not in block  # no hidden comment (a forged sticky marker) in the raw body
    body = line_comment_body(Finding(path="a.py", line=1, severity="high", message="m",
                                     suggestion="a ``` b", replaces=("x",)))  # fmt: skip
    assert "\n````suggestion\na ``` b\n````" in body
    assert "suggestion" not in line_comment_body(
        Finding(path="a.py", line=1, severity="low", message="m")
    )


def report_with(findings: list[Finding]) -> RunReport:
    return RunReport(
        verdict=Verdict(decision="comment", summary="s", findings=findings),
        provenance="inline policy",
        guidelines=".github/relay-review.md@0123456789ab",
    )


def test_sticky_comment_shows_the_suggestion_as_a_diff_and_names_the_guidelines() -> None:
    f = Finding(
        path="app/db.py", line=11, end_line=11, severity="high", message="m",
        suggestion=FIX, replaces=["    query = 'select * from t where n = %s' % name"],
    )  # fmt: skip
    text = comment_markdown(report_with([f]))
    assert "  ```diff\n  -     query = 'select" in text and f"\n  + {FIX}\n  ```\n" in text
    assert "guidelines: `.github/relay-review.md@0123456789ab`" in text


def test_a_hard_cut_never_leaves_a_suggestion_block_open() -> None:
    big = Finding(
        path="a.py", line=1, end_line=1, severity="low", message="m",
        suggestion="\n".join(f"y{i} = {i}" for i in range(40)), replaces=["x"],
    )  # fmt: skip
    for limit in range(700, 1400, 37):
        text = comment_markdown(report_with([big]), limit=limit)
        assert len(text) <= limit
        opened = re.findall(r"^ *(`{3,})diff$", text, re.MULTILINE)
        closed = [ln.strip() for ln in text.splitlines() if re.fullmatch(r" *`{3,}", ln)]
        assert len(opened) == len(closed)
