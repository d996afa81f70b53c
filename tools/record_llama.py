"""Record tests/cassettes/llama/ from a real llama-server with Gemma 3 270M (tools/llama_server.py).

Each cassette is one request relay-review really sends for the bundled sample diff (the same
prompt, schema and request fields as the review), recorded by vcrpy; ``GET /v1/models`` is
recorded for ``meta.n_ctx``. What the model answered is printed, so the cassettes table in
tests/cassettes/README.md can say what each one holds. Re-record with:

    python tools/llama_server.py build && python tools/record_llama.py [NAME ...]

(The machine they were recorded on was shared: 3-13 tokens/s, so the first-byte bound is long.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import vcr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import llama_server  # noqa: E402

from relay_review.drill.review import sample_diff  # noqa: E402
from relay_review.providers.chat.call import chat_call  # noqa: E402
from relay_review.records import Deadlines  # noqa: E402
from relay_review.review.chunks import plan_chunks  # noqa: E402
from relay_review.review.diff import DiffIndex  # noqa: E402
from relay_review.review.prompt import build_messages  # noqa: E402
from relay_review.review.reply_schema import findings_cap, reply_schema, response_format  # noqa: E402

OUT = ROOT / "tests" / "cassettes" / "llama"
PORT = 8089
DEADLINES = Deadlines(connect=5, first_byte=400, idle=120, attempt=600, first_token=400)
TITLE = "Export reports as a tarball"


def review_request() -> tuple[list[dict], dict[str, Any], int]:
    """The sample diff's one chunk: messages, schema, findings cap."""
    index = DiffIndex.from_diff(sample_diff())
    [chunk] = plan_chunks(index, 2000).chunks
    cap = findings_cap(sum(1 for _ in chunk.index.locations()), 1024)
    prompt = build_messages(chunk, title=TITLE, max_findings=cap)
    return prompt.messages, reply_schema(cap, len(chunk.paths)), cap


async def record(name: str, messages: list[dict], fields: dict[str, Any], max_tokens: int) -> None:
    path = OUT / f"{name}.yaml"
    path.unlink(missing_ok=True)
    rec = vcr.VCR(record_mode="all", filter_headers=["authorization"])
    with rec.use_cassette(str(path)):
        async with httpx.AsyncClient() as client:
            outcome = await chat_call(
                client,
                base_url=f"http://127.0.0.1:{PORT}/v1",
                api_key=None,
                model=llama_server.MODEL_ALIAS,
                messages=messages,
                deadlines=DEADLINES,
                max_tokens=max_tokens,
                extra_body=fields,
            )
    content = (outcome.content or "")[:600].replace("\n", "\\n")
    print(f"{name}: {outcome.kind} {outcome.http_status} {outcome.finish_reason} {outcome.detail}")
    print(f"    {content}")


def listing() -> None:
    path = OUT / "listing.yaml"
    path.unlink(missing_ok=True)
    with vcr.VCR(record_mode="all").use_cassette(str(path)):
        body = httpx.get(f"http://127.0.0.1:{PORT}/v1/models", timeout=10).json()
    print("listing: n_ctx", [m.get("meta", {}).get("n_ctx") for m in body.get("data", [])])


async def main(only: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    pid = None if llama_server.health(PORT) else llama_server.start(PORT)
    messages, schema, _ = review_request()
    strict = {"temperature": 0.2, "response_format": response_format("json_schema", schema)}
    loose = {"temperature": 0.2}
    big = [dict(m) for m in messages]
    big[-1]["content"] = big[-1]["content"] * 6  # past the server's -c 4096
    jobs: dict[str, tuple[list[dict], dict[str, Any], int]] = {
        "review_json_schema_1": (messages, strict, 1024),
        "review_json_schema_2": (messages, strict, 1024),
        "review_json_schema_3": (messages, strict, 1024),
        "review_json_object": (
            messages,
            {"temperature": 0.2, "response_format": response_format("json_object", schema)},
            512,
        ),
        "review_prompt_only": (messages, loose, 256),
        "review_cut_at_max_tokens": (messages, strict, 90),
        "context_too_long": (big, strict, 1024),
    }
    try:
        if not only or "listing" in only:
            listing()
        for name, (msgs, fields, max_tokens) in jobs.items():
            if not only or name in only:
                await record(name, msgs, fields, max_tokens)
    finally:
        if pid is not None:
            llama_server.stop(pid)
    print(json.dumps({"recorded": sorted(p.name for p in OUT.glob("*.yaml"))}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
