"""Record tests/cassettes/llama_cpp_python/ from a real llama-cpp-python[server] (Gemma 3 270M).

llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) serves the GGUF that
tools/llama_server.py installs and verifies, with ``--chat_format gemma`` (the GGUF ships no chat
template) and ``--n_ctx 4096``. Two cassettes, recorded by vcrpy with the Authorization header
filtered out:

- ``json_schema_500.yaml``: the review request relay-review sends for the bundled sample diff
  with OpenAI's ``json_schema`` form, one call, and the server's answer to it;
- ``review_step_down.yaml``: one whole ``pipeline.review`` of the sample diff against the
  server (``response_format`` auto, so ``json_schema`` first): every request relay-review sent,
  in order (the refused form, the step down to ``json_object`` + ``schema``, any repair round).

llama-cpp-python is not a project dependency (it builds llama.cpp: ~20 min on 2 cores); install
it in a venv of its own and name its Python::

    python -m venv /tmp/lcp-venv
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \\
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \\
      /tmp/lcp-venv/bin/pip install 'llama-cpp-python[server]==0.3.36'
    .venv/bin/python tools/record_llama_cpp_python.py --python /tmp/lcp-venv/bin/python

(AMX off: the CPU of the recording machine advertised AMX that its sandbox did not grant, and
llama.cpp's AMX kernels crash there.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import vcr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import llama_server  # noqa: E402
from record_llama import DEADLINES, review_request  # noqa: E402

from relay_review import pipeline  # noqa: E402
from relay_review.config import Policy, PreflightPolicy, ReviewPolicy, ServingPolicy  # noqa: E402
from relay_review.drill.review import sample_diff  # noqa: E402
from relay_review.providers.chat.call import chat_call  # noqa: E402
from relay_review.review.diff import DiffIndex  # noqa: E402
from relay_review.review.reply_schema import response_format  # noqa: E402
from relay_review.routing.catalog import build_catalog, parse_discovery  # noqa: E402

OUT = ROOT / "tests" / "cassettes" / "llama_cpp_python"
PORT = 8090
START_TIMEOUT_S = 120.0
MAX_TOKENS = 512


def up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(python: str, port: int, log: Path) -> int:
    """Start ``python -m llama_cpp.server`` on 127.0.0.1:port in its own session; its PID."""
    cmd = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(llama_server.model()),
        "--model_alias",
        llama_server.MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "2",
        "--chat_format",
        "gemma",
    ]
    out = open(log, "ab")  # noqa: SIM115 (kept for the child)
    proc = subprocess.Popen(cmd, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode} (see {log})")
        if up(port):
            return proc.pid
        time.sleep(0.5)
    llama_server.stop(proc.pid)
    raise TimeoutError(f"llama_cpp.server not up within {START_TIMEOUT_S:.0f} s")


HEADERS = {
    "json_schema_500": (
        "RECORDED by tools/record_llama_cpp_python.py from llama-cpp-python[server] 0.3.36\n"
        "(python -m llama_cpp.server, Gemma 3 270M Q4_K_M, --chat_format gemma, --n_ctx 4096):\n"
        "the review request of the bundled sample diff with OpenAI's json_schema form. The server\n"
        "types response_format.type as 'text' | 'json_object' and answers the validation error\n"
        "with HTTP 500 and its text (a traceback line of the recording venv included).\n"
    ),
    "review_step_down": (
        "RECORDED by tools/record_llama_cpp_python.py from llama-cpp-python[server] 0.3.36\n"
        "(as json_schema_500.yaml): one pipeline.review of the bundled sample diff, every request\n"
        "in order: json_schema refused with a 500, then json_object + schema (without maxLength).\n"
    ),
}


@contextlib.contextmanager
def cassette(name: str) -> Iterator[None]:
    """Record into ``OUT/name.yaml`` (Authorization filtered), then put its header on top."""
    path = OUT / f"{name}.yaml"
    path.unlink(missing_ok=True)
    with vcr.VCR(record_mode="all", filter_headers=["authorization"]).use_cassette(str(path)):
        yield
    header = "".join(f"# {line}\n" for line in HEADERS[name].splitlines())
    path.write_text(header + path.read_text())


async def record_500(port: int) -> None:
    messages, schema, _ = review_request()
    fields = {"temperature": 0.2, "response_format": response_format("json_schema", schema)}
    with cassette("json_schema_500"):
        async with httpx.AsyncClient() as client:
            outcome = await chat_call(
                client,
                base_url=f"http://127.0.0.1:{port}/v1",
                api_key=None,
                model=llama_server.MODEL_ALIAS,
                messages=messages,
                deadlines=DEADLINES,
                max_tokens=1024,
                extra_body=fields,
            )
    print(f"json_schema_500: {outcome.kind} {outcome.http_status} {outcome.detail[:400]}")


async def record_review(port: int) -> None:
    route = {
        "account": "local",
        "provider": "openai_compatible",
        "model": llama_server.MODEL_ALIAS,
        "base_url": f"http://127.0.0.1:{port}/v1",
        "api_key_env": "LOCAL_KEY",
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
        "context_length": 4096,
    }
    pol = Policy(
        preflight=PreflightPolicy(probe_budget=0, probe_timeout=1.0),
        serving=ServingPolicy(first_byte=400.0, idle=120.0, attempt=600.0, deadline=1200.0),
        review=ReviewPolicy(max_output_tokens=MAX_TOKENS),
    )
    catalog = build_catalog(parse_discovery({"routes": [route]}))
    index = DiffIndex.from_diff(sample_diff())
    with cassette("review_step_down"):
        report = (await pipeline.review(index, catalog, pol, {"LOCAL_KEY": "k" * 24})).to_json()
    print(f"review_step_down: decision {report['decision']}")
    for a in report["attempts"]:
        print(f"    {a['purpose']} {a['outcome']} {a.get('detail', '')[:300]}")


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="a Python with llama-cpp-python[server]")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument(
        "--log", type=Path, default=Path(tempfile.gettempdir()) / "llama_cpp_server.log"
    )
    parser.add_argument("only", nargs="*", help="json_schema_500, review_step_down")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    pid = start(args.python, args.port, args.log)
    print(f"llama_cpp.server pid {pid} on port {args.port}")
    try:
        if not args.only or "json_schema_500" in args.only:
            await record_500(args.port)
        if not args.only or "review_step_down" in args.only:
            await record_review(args.port)
    finally:
        llama_server.stop(pid)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
