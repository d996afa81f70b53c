"""Issue 20, part 4: an excerpt of the cited line is about shown code (never approve, never
cached as clean), while a quote of another line, or an empty one, still proves nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cli_harness import run_cli
from relay_review.drill import FaultFleet
from relay_review.records.finding import Finding
from relay_review.review.citations import citation_problem, excerpt_of, points_at_shown_code
from relay_review.review.diff import DiffIndex

LINE = "    return a / b  # divisor checked by caller"
OTHER = "    total = sum(values)"
PATCH = f"@@ -1,1 +1,4 @@\n def div(a, b):\n+{LINE}\n+{OTHER}\n+\n"


def index() -> DiffIndex:
    return DiffIndex.from_api_files([{"filename": "calc.py", "status": "modified", "patch": PATCH}])


def finding(quote: str, line: int = 2, side: str = "RIGHT", path: str = "calc.py") -> Finding:
    return Finding(path=path, line=line, side=side, quote=quote, severity="high", message="m")


@pytest.mark.parametrize(
    "quote",
    [
        "return a / b",  # the code part, as the issue has it
        "a / b",
        "b",  # any length
        "# divisor checked by caller",
        "return   a/b",  # whitespace normalised
        "\treturn a /\n b ",
        "+ return a / b",  # a copied diff marker
        "R2 + return a / b",
    ],
)
def test_an_excerpt_of_the_cited_line_points_at_shown_code(quote: str) -> None:
    f = finding(quote)
    assert citation_problem(f, index()) is not None  # too short to verify on its own ...
    assert points_at_shown_code(f, index())  # ... but about the shown line: no approve


@pytest.mark.parametrize(
    ("quote", "line", "side", "path"),
    [
        ("", 2, "RIGHT", "calc.py"),  # an empty quote
        ("   ", 2, "RIGHT", "calc.py"),
        ("return a // b", 2, "RIGHT", "calc.py"),  # not a contiguous piece of the line
        ("b / a", 2, "RIGHT", "calc.py"),
        ("return a / b", 2, "LEFT", "calc.py"),  # no such shown line on that side
        ("return a / b", 9, "RIGHT", "calc.py"),  # not a changed line
        ("return a / b", 2, "RIGHT", "other.py"),  # not a file of the diff
        ("total = sum", 2, "RIGHT", "calc.py"),  # a piece of another line
    ],
)
def test_no_excerpt_of_the_cited_line_is_not_shown_code(
    quote: str, line: int, side: str, path: str
) -> None:
    assert not points_at_shown_code(finding(quote, line, side, path), index())


def test_a_quote_of_a_different_line_never_verifies() -> None:
    whole_other = finding(OTHER.strip())  # line 3's text, cited at line 2
    assert citation_problem(whole_other, index()) is not None
    assert points_at_shown_code(whole_other, index())  # misplaced (as before), still unverified
    assert citation_problem(finding(LINE.strip()), index()) is None  # the whole line verifies
    assert citation_problem(finding(LINE.strip(), line=3), index()) is not None


def test_excerpt_of() -> None:
    assert excerpt_of("a/b", LINE) and excerpt_of(" return a / b ", LINE)
    assert not excerpt_of("", LINE) and not excerpt_of("x", "") and not excerpt_of("a//b", LINE)


# --- through the CLI: decision and the review cache -------------------------------------------

DIFF = (
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n"
    f"@@ -1,2 +1,3 @@\n def div(a, b):\n+{LINE}\n     pass\n"
)
KEY = "sk-excerpt-test-0123456789abcdef"
_ADDED = re.compile(r"^R (\d+) \+ ", re.MULTILINE)


def excerpt_reply(request: dict) -> str:
    """A reviewer citing the exact location, quoting only the code part of the line."""
    user = "\n".join(m.get("content", "") for m in request["messages"] if m["role"] == "user")
    m = _ADDED.search(user)
    line = int(m.group(1)) if m else 2
    finding = {
        "path": "calc.py",
        "line": line,
        "side": "RIGHT",
        "quote": "return a / b",
        "severity": "high",
        "message": "Division by zero when b is 0; the comment is no check.",
    }
    return json.dumps({"summary": "One finding.", "findings": [finding]})


@pytest.mark.integration
def test_an_excerpt_finding_never_approves_and_is_not_cached(tmp_path: Path) -> None:
    accounts = {"acme": {"models": {"vendor/reviewer": "healthy"}, "api_key": KEY}}
    with FaultFleet(accounts, reply=excerpt_reply) as fleet:
        route = {
            "account": "acme",
            "provider": "openai_compatible",
            "model": "vendor/reviewer",
            "base_url": fleet.base_url("acme"),
            "api_key_env": "EXCERPT_TEST_KEY",
            "prompt_price_per_1k": 0.0,
            "completion_price_per_1k": 0.0,
        }
        discovery = tmp_path / "discovery.json"
        discovery.write_text(json.dumps({"routes": [route]}))
        policy = tmp_path / "policy.toml"
        policy.write_text("[serving]\nattempt = 30\ndeadline = 30\n")
        state = tmp_path / "state.json"
        args = ["review", "--diff", "-"]
        args += ["--discovery", str(discovery), "--policy", str(policy)]
        args += ["--state", f"file:{state}"]
        runs = []
        for _ in range(2):
            before = len(fleet.chat_requests())
            proc = run_cli(  # cli.main, in this process (tests/support/cli_harness.py)
                *args, stdin=DIFF, env={**os.environ, "EXCERPT_TEST_KEY": KEY}
            )
            assert proc.returncode == 0, proc.stderr
            runs.append((json.loads(proc.stdout), len(fleet.chat_requests()) - before))
    for report, requests in runs:
        assert report["decision"] != "approve"
        assert report["unverified"] and "could not be verified" in report["partial"]
        assert requests >= 1  # not cached as clean: the second run asks the model again
    assert runs[1][0]["memory"]["reused_chunks"] == 0


KEY_LINE = 'API_KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"  # committed by mistake'
KEY_PATCH = f"@@ -1,1 +1,2 @@\n import os\n+{KEY_LINE}\n"


@pytest.mark.parametrize(
    "quote",
    [
        'API_KEY = "***"  # committed by mistake',  # the reply quoted the key: scrubbed to ***
        'API_KEY = "***"',
        "***",
    ],
)
def test_a_quote_of_a_scrubbed_secret_points_at_shown_code(quote: str) -> None:
    """A model that flags a committed key quotes it; the run scrubs its own secrets from the
    reply before parsing, so the quote no longer equals the line. It must still block approve."""
    idx = DiffIndex.from_api_files(
        [{"filename": "cfg.py", "status": "modified", "patch": KEY_PATCH}]
    )
    f = Finding(path="cfg.py", line=2, side="RIGHT", quote=quote, severity="high", message="key")
    assert points_at_shown_code(f, idx)


def test_a_scrubbed_quote_of_other_text_does_not_point_at_the_line() -> None:
    idx = DiffIndex.from_api_files(
        [{"filename": "cfg.py", "status": "modified", "patch": KEY_PATCH}]
    )
    f = Finding(
        path="cfg.py", line=2, side="RIGHT", quote='TOKEN = "***"', severity="high", message="k"
    )
    assert not points_at_shown_code(f, idx)
