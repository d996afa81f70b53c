"""Issue 22: one review of the sample diff by a real model on a real llama-server.

llama-server (built by ``tools/llama_server.py`` from the llama.cpp vendored in the
llama-cpp-python 0.3.36 sdist) serves Gemma 3 270M Q4_K_M; relay-review discovers it (its
``meta.n_ctx``), asks with ``response_format = "json_schema"`` and reviews the bundled sample
diff. A 270M model writes mostly junk: the test asserts the invariants, whatever it writes: no
``approve`` on a reply without evidence, every kept finding cites a shown changed line, and the
run ends within its bounds. Skipped unless the binary is built; ``.ci/run`` builds it (about 12
to 25 minutes the first time, cached after) and runs this file on its own
(``RELAY_REVIEW_LLAMA_LIVE=1``; the main test run sets it to 0 so the review is not run twice).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import llama_server

from relay_review.config import (
    AccountPolicy,
    Policy,
    PreflightPolicy,
    ReviewPolicy,
    ServingPolicy,
)
from relay_review.drill.review import sample_diff
from relay_review.pipeline.review import review as run_review
from relay_review.providers.discovery import discover
from relay_review.records import Account, Finding
from relay_review.review.citations import citation_problem, points_at_shown_code
from relay_review.review.diff import DiffIndex
from relay_review.review.evidence import has_word, loops
from relay_review.routing.catalog import build_catalog

pytestmark = [
    pytest.mark.llama_live,
    pytest.mark.integration,
    pytest.mark.skipif(
        not llama_server.available() or os.environ.get("RELAY_REVIEW_LLAMA_LIVE") == "0",
        reason="llama-server is not built (python tools/llama_server.py build), or"
        " RELAY_REVIEW_LLAMA_LIVE=0",
    ),
    pytest.mark.timeout(900),
]

INDEX = DiffIndex.from_diff(sample_diff())
KEY_ENV = "LLAMA_LOCAL_KEY"
DEADLINE = 420.0
#: What the whole test may take past the run deadline (server start, discovery, teardown).
SLACK = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_one_real_review_keeps_the_invariants(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    pid = llama_server.start(port, log=tmp_path / "llama-server.log", context=8192)
    try:
        account = Account(
            name="llama",
            kind="openai_compatible",
            base_url=base,
            api_key_env=KEY_ENV,
            pricing="declared-free",
        )
        environ = {KEY_ENV: "local-key-not-a-secret-0000"}

        class Bounds:
            timeout = 10.0
            models_dev_url = "http://127.0.0.1:9/api.json"
            zdr_url = "http://127.0.0.1:9/zdr"

        found = await discover([account], environ, Bounds())
        [route] = found.routes
        assert route.context_length == 8192  # meta.n_ctx: the -c it was started with
        catalog = build_catalog(found.routes)
        policy = Policy(
            accounts=[
                AccountPolicy(
                    name="llama",
                    kind="openai_compatible",
                    base_url=base,
                    api_key_env=KEY_ENV,
                    response_format="json_schema",
                )
            ],
            preflight=PreflightPolicy(probe_budget=0),
            serving=ServingPolicy(
                first_byte=240.0, first_token=240.0, idle=60.0, attempt=300.0, deadline=DEADLINE
            ),
            review=ReviewPolicy(max_output_tokens=384, concurrency=1),
        )
        report = (await run_review(INDEX, catalog, policy, environ)).to_json()
    finally:
        llama_server.stop(pid)
    elapsed = time.monotonic() - started
    print(
        f"live review: decision={report['decision']} elapsed={report['elapsed_s']}s"
        f" attempts={[(a['purpose'], a['outcome'], a['elapsed_s']) for a in report['attempts']]}"
    )
    # bounded: the run ends within its deadline, the whole test within a little more
    assert report["elapsed_s"] <= DEADLINE + 5
    assert elapsed <= DEADLINE + SLACK
    assert all(a["elapsed_s"] <= 300 + 5 for a in report["attempts"])
    # every kept finding passes the pipeline's own citation check against the diff it was
    # shown (its line is a shown changed line and its quote is that line's text)
    for f in report["findings"]:
        assert citation_problem(Finding.model_validate(f), INDEX) is None, f
    # no approve without evidence: an approval rests on summaries that are words, not loops,
    # on a whole review, and on no dropped finding that still points at shown changed code
    if report["decision"] == "approve":
        assert report["summary"] and has_word(report["summary"]) and not loops(report["summary"])
        assert not report.get("partial"), report["partial"]
        dropped = [Finding.model_validate(u) for u in report["unverified"]]
        assert not [u for u in dropped if points_at_shown_code(u, INDEX)], report["unverified"]
    assert report["decision"] in {"approve", "comment", "request_changes", "unavailable"}
