"""402 (no credits), 404 (no endpoints) and 413 (request too large for the tier) end a route for
the run at once, with the reason in the readiness table (issue 25), through ``relay-review chat``
on the fault fleet at the default (hedged) policy; the fleet's call log is the evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relay_review.config import Policy
from relay_review.drill.fleet import RecordedRequest
from relay_review.drill.review import drill_reply, sample_diff
from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for
from relay_review.pipeline.review import review as run_review
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import build_catalog, parse_discovery
from tests.e2e.test_hedged_preflight import PROBE_TOKENS, chat, route

pytestmark = pytest.mark.integration

MODEL = "deepseek-ai/deepseek-v4-flash"
INDEX = DiffIndex.from_diff(sample_diff())


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("402", "no credits"),
        ("404", "no endpoints for this model"),
        ("413", "request too large for this route"),
    ],
)
def test_the_route_is_dropped_for_the_run_with_the_reason(
    script: str, why: str, tmp_path: Path
) -> None:
    # the faulty route ranks first, so it gets the real request (hedged: no probe before it)
    scenario = Scenario(
        "drop", "a faulty route first", {"nim_a": {MODEL: script}, "nim_b": {MODEL: "healthy@0.05"}}
    )
    with fleet_for(scenario) as fleet:
        report, sent = chat(fleet, scenario, tmp_path)
    faulty = f"nim_a/{MODEL}"
    assert report["served_by"]["agent_id"] == f"nim_b/{MODEL}"
    assert [route(r) for r in sent].count(faulty) == 1  # never retried
    row = next(r for r in report["readiness"] if r["agent_id"] == faulty)
    assert row["status"] == "rejected" and row["http_status"] == int(script)
    assert row["detail"].startswith(f"dropped for this run: {why}"), row


#: Characters of messages above which the fleet's size-limited routes refuse a request: the
#: sample diff's whole prompt holds about 6,400, each part re-planned from it at most 6,100.
OVER = 6200
GROQ_LIMIT = 5000  # below what the whole prompt plus max_tokens (4096) asks


async def test_a_groq_413_re_plans_the_chunk_for_the_route_that_can_take_it() -> None:
    """Groq's 413 ("... on tokens per minute (TPM): Limit 5000, Requested 5698 ...") ends its
    route for the run; the other route refused the whole chunk as past its context window (a
    400), and takes the re-planned smaller parts: the review completes. Before, Groq's limit
    was not read and the 413 route was re-admitted and asked the parts too."""
    groq, window = f"nim_a/{MODEL}", "nim_b/vendor/reviewer"
    report, requests = await review_413_then_window(INDEX, GROQ_LIMIT, OVER)
    sent = [(route(r), r) for r in requests]
    full = [r for who, r in sent if who == groq]
    assert len(full) == 1  # one full-size request, and never asked again for this run
    assert full[0].max_tokens == Policy().review.max_output_tokens  # the real request, no probe
    serves = [r for who, r in sent if who == window and r.max_tokens != PROBE_TOKENS]
    assert len(serves) >= 3, serves  # the whole chunk (refused), then its parts
    assert all(len(text(r)) <= OVER for r in serves[1:])
    assert report["decision"] == "request_changes", report["attempts"]
    assert report["served_by"]["agent_id"] == window
    assert all(c["served_by"]["agent_id"] == window for c in report["chunks"])
    row = next(r for r in report["readiness"] if r["agent_id"] == groq)
    assert row["status"] == "rejected" and row["http_status"] == 413
    assert "Limit 5000" in row["detail"], row


async def review_413_then_window(
    index: DiffIndex, limit: int, over: int
) -> tuple[dict[str, Any], list[RecordedRequest]]:
    """Review ``index`` at the default policy over two routes: ``nim_a`` answers Groq's 413
    naming ``limit`` to a request over ``over`` characters, ``nim_b`` a 400 naming its
    8,192-token context window to one; (the report's JSON, the chat requests sent)."""
    scenario = Scenario(
        "groq-413",
        "a Groq tier limit first, a small context window next",
        {
            "nim_a": {MODEL: f"413@groq,n={limit},over={over}"},
            "nim_b": {"vendor/reviewer": f"context@over={over}"},
        },
        healthy=None,
    )
    async with fleet_for(scenario, reply=drill_reply) as fleet:
        catalog = build_catalog(parse_discovery(discovery_for(scenario, fleet)))
        report = await run_review(index, catalog, Policy(), drill_environ(scenario))
        return report.to_json(), [r for r in fleet.requests if r.is_chat]


def text(request: RecordedRequest) -> str:
    """Every message's content of a recorded chat request, joined as the fleet counts it."""
    return "\n".join(str(m.get("content", "")) for m in (request.body or {}).get("messages", []))


def wide_diff(files: int = 12, lines: int = 30) -> DiffIndex:
    """``files`` new files of ``lines`` lines: one chunk at the default policy (~5,900 tokens)."""
    return DiffIndex.from_diff(
        "".join(
            f"diff --git a/pkg/m{i}.py b/pkg/m{i}.py\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/pkg/m{i}.py\n@@ -0,0 +1,{lines} @@\n"
            + "".join(
                f"+def f_{i}_{j}(v):  return v * {j} + {i}  # some padding\n" for j in range(lines)
            )
            for i in range(files)
        )
    )


@pytest.mark.parametrize("limit", [300, 6000])
async def test_a_re_plan_costs_at_most_max_chunks_requests(limit: int) -> None:
    """A 413 naming a tiny tier limit (a faulty provider's, or a small tier's) and a route whose
    400 names its 8,192-token window, at the default policy: the chunk is re-planned for the
    window that can take it (the 413's route is out for the run) and never into more parts than
    ``review.max_chunks``. Before, the reply's room was reserved twice (the repair round) and
    the parts fell to 256 tokens: the 12-file pull request cost 51 requests, a free OpenRouter
    account's whole day."""
    # over: characters; the whole chunk is refused, the parts are not
    report, requests = await review_413_then_window(wide_diff(), limit, over=9000)
    sent = [route(r) for r in requests]
    assert sent.count(f"nim_a/{MODEL}") == 1
    assert len(sent) <= Policy().review.max_chunks + 1, len(sent)  # the whole chunk, then parts
    assert report["decision"] != "unavailable", report["attempts"][:3]
