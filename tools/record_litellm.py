"""Re-record the LiteLLM proxy cassettes under ``tests/cassettes/litellm/`` from a real proxy.

What it does: starts the project's fault fleet (``python -m relay_review.drill --serve``) as the
local upstream, starts a real LiteLLM proxy in front of it (``model_list`` entries pointing at the
fleet, a wildcard entry, ``general_settings.master_key``), makes the requests relay-review makes
(``GET /v1/models``, streamed ``POST /v1/chat/completions``) through vcrpy, and writes one
cassette per behaviour. Nothing leaves 127.0.0.1: the ``LITELLM_LOCAL_*`` switches make LiteLLM
read its bundled cost map and presets instead of fetching them.

It installs nothing itself. LiteLLM lives in its own venv (its dependencies clash with ours)::

    python -m venv /tmp/litellm && /tmp/litellm/bin/pip install 'litellm[proxy]==1.108.7'
    .venv/bin/python tools/record_litellm.py --litellm /tmp/litellm/bin/litellm

(the install took ~40 s on a 2-core runner; the proxy starts in 5-16 s; the whole recording
takes under a minute). Keys in the recordings are made-up local values, and the ``Authorization``
header is filtered out of every request anyway (``filter_headers=["authorization"]``);
``tests/unit/providers/chat/test_call_cassettes.py`` checks that no cassette holds a bearer
token, an ``sk-`` key or the master key.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import vcr
import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "cassettes" / "litellm"
#: Made-up values, only meaningful to the local fleet and proxy started here.
MASTER_KEY = "sk-relay-recording-master"
UPSTREAM_KEY = "upstream-good-key-0001"
WRONG_UPSTREAM_KEY = "upstream-wrong-key-0002"
#: Seconds between the proxy's ``: ping`` comments, and how long the silent upstream waits.
PING_INTERVAL = 1
SILENT_SECONDS = 2.5

LOCAL_ONLY_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def fleet(workdir: Path) -> Iterator[str]:
    """Run the fault fleet; yield the upstream account's base URL."""
    config = {
        "reply": "OK",
        "accounts": {
            "up": {
                "api_key": UPSTREAM_KEY,
                "models": {
                    "ok": "healthy",
                    "limited": "429@7",
                    "limited-nohint": "429@noheader",
                    "late401": f"401@{SILENT_SECONDS}",
                    "silent": f"healthy@{SILENT_SECONDS}",
                },
            }
        },
    }
    path = workdir / "fleet.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_review.drill", "--serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        yield ready["accounts"]["up"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def proxy_config(upstream: str, *, keepalive: bool) -> dict:
    """The proxy's config.yaml: one entry per behaviour, plus a wildcard entry.

    ``keepalive`` turns on ``sse_keepalive_ping_interval_seconds``. The proxy then answers every
    streamed call 200 at once and pings while the upstream is silent, so an upstream error
    arrives as an SSE error event, not as a status: the status-passthrough cassettes are
    recorded from a second proxy without it.
    """

    def entry(name: str, model: str, key: str = UPSTREAM_KEY) -> dict:
        params = {"model": f"openai/{model}", "api_base": upstream, "api_key": key}
        return {"model_name": name, "litellm_params": params}

    return {
        "model_list": [
            entry("good", "ok"),
            entry("badkey", "ok", WRONG_UPSTREAM_KEY),
            entry("limited", "limited"),
            entry("silent", "silent"),
            # two deployments: the router cools a group down only when it has alternatives
            entry("cooled", "limited-nohint"),
            entry("cooled", "limited-nohint"),
            entry("late401", "late401"),
            # the wildcard: /v1/models then lists every openai/* id in the bundled cost map
            {
                "model_name": "*",
                "litellm_params": {
                    "model": "openai/*",
                    "api_base": upstream,
                    "api_key": UPSTREAM_KEY,
                },
            },
        ],
        "litellm_settings": {
            "num_retries": 0,
            "request_timeout": 30,
            **({"sse_keepalive_ping_interval_seconds": PING_INTERVAL} if keepalive else {}),
        },
        "router_settings": {"num_retries": 0, "allowed_fails": 0, "cooldown_time": 5},
        "general_settings": {"master_key": MASTER_KEY},
    }


@contextmanager
def proxy(litellm: str, upstream: str, workdir: Path, *, keepalive: bool) -> Iterator[str]:
    """Run the LiteLLM proxy in front of ``upstream``; yield its ``/v1`` base URL."""
    name = "keepalive" if keepalive else "plain"
    config = workdir / f"{name}.yaml"
    config.write_text(yaml.safe_dump(proxy_config(upstream, keepalive=keepalive)), "utf-8")
    port = free_port()
    env = {**os.environ, **LOCAL_ONLY_ENV}
    env.pop("DATABASE_URL", None)
    log = (workdir / f"litellm-{name}.log").open("w")
    proc = subprocess.Popen(
        [litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"litellm exited: see {log.name}")
            try:
                if httpx.get(f"{base}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("litellm did not start within 90 s")
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def recorder(out: Path) -> vcr.VCR:
    """vcrpy set to record each cassette afresh, with the Authorization header filtered out."""
    return vcr.VCR(
        cassette_library_dir=str(out),
        record_mode="all",
        filter_headers=["authorization"],
        decode_compressed_response=True,
    )


def chat(client: httpx.Client, base: str, model: str, key: str = MASTER_KEY) -> httpx.Response:
    """The streamed chat request relay-review sends (body read to the end)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 8,
        "stream": True,
    }
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "text/event-stream",
        "Cache-Control": "no-store",
    }
    response = client.post(f"{base}/chat/completions", json=body, headers=headers)
    response.read()
    return response


def record_plain(base: str, out: Path) -> dict[str, int]:
    """Listing, errors and status passthrough, from the proxy without keep-alive pings."""
    rec = recorder(out)
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}
    statuses: dict[str, int] = {}
    with httpx.Client(timeout=60) as client:
        with rec.use_cassette("wildcard_listing.yaml"):
            statuses["wildcard_listing"] = client.get(f"{base}/models", headers=auth).status_code
        with rec.use_cassette("wrong_master_key.yaml"):
            bad = {"Authorization": "Bearer sk-not-the-master-key"}
            statuses["wrong_master_key"] = client.get(f"{base}/models", headers=bad).status_code
        with rec.use_cassette("upstream_401.yaml"):
            statuses["upstream_401"] = chat(client, base, "badkey").status_code
        with rec.use_cassette("upstream_retry_after.yaml"):
            statuses["upstream_retry_after"] = chat(client, base, "limited").status_code
        with rec.use_cassette("healthy_stream.yaml"):
            statuses["healthy_stream"] = chat(client, base, "good").status_code
        # each 429 cools one of the group's two deployments down; the third call meets the
        # router's own cooldown
        chat(client, base, "cooled")
        chat(client, base, "cooled")
        with rec.use_cassette("router_cooldown.yaml"):
            statuses["router_cooldown"] = chat(client, base, "cooled").status_code
    return statuses


def record_keepalive(base: str, out: Path) -> dict[str, int]:
    """Pings before a silent upstream's first token, and an upstream 401 behind pings."""
    rec = recorder(out)
    statuses: dict[str, int] = {}
    with httpx.Client(timeout=60) as client:
        with rec.use_cassette("keepalive_pings.yaml"):
            statuses["keepalive_pings"] = chat(client, base, "silent").status_code
        with rec.use_cassette("keepalive_upstream_401.yaml"):
            statuses["keepalive_upstream_401"] = chat(client, base, "late401").status_code
    return statuses


def main(argv: list[str] | None = None) -> int:
    """``tools/record_litellm.py --litellm PATH [--out DIR]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm", required=True, help="the litellm executable of its own venv")
    parser.add_argument("--out", type=Path, default=OUT, help="cassette directory")
    args = parser.parse_args(argv)
    if not Path(args.litellm).is_file():
        print(f"record_litellm: no {args.litellm}; see this script's docstring", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="record-litellm-") as tmp:
        workdir = Path(tmp)
        args.out.mkdir(parents=True, exist_ok=True)
        with fleet(workdir) as upstream:
            with proxy(args.litellm, upstream, workdir, keepalive=False) as base:
                statuses = record_plain(base, args.out)
            with proxy(args.litellm, upstream, workdir, keepalive=True) as base:
                statuses |= record_keepalive(base, args.out)
    for name, status in statuses.items():
        print(f"recorded {name}: HTTP {status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
