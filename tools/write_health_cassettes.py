"""Write tests/cassettes/openrouter_health/*.yaml from OpenRouter's documented reply shapes.

Not recordings: this machine cannot reach openrouter.ai. The bodies follow the shapes documented
at https://openrouter.ai/docs/api/api-reference/endpoints/list-all-endpoints-for-a-model
(``PublicEndpoint``: ``uptime_last_5m``, ``uptime_last_30m``, ``uptime_last_1d``,
``latency_last_30m`` percentiles) and https://openrouter.ai/docs/api/api-reference/api-keys/
get-current-key (``is_free_tier``, ``usage``, ``usage_daily``, ``limit``, ``limit_remaining``,
``rate_limit``), checked 2026-12. Re-run with ``python tools/write_health_cassettes.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

OUT = Path(__file__).parent.parent / "tests" / "cassettes" / "openrouter_health"
BASE = "https://openrouter.ai/api/v1"
HEADER = (
    "# Shape from OpenRouter's docs (see tools/write_health_cassettes.py for the pages), not\n"
    "# recorded from the live service. Written by tools/write_health_cassettes.py.\n"
)


def endpoint(provider: str, up5: object, up30: object, up1d: object = 99.0) -> dict:
    return {
        "name": f"{provider} | model",
        "model_name": "model",
        "context_length": 131072,
        "pricing": {"prompt": "0", "completion": "0", "request": "0", "image": "0"},
        "provider_name": provider,
        "tag": provider.lower(),
        "quantization": "fp8",
        "max_completion_tokens": 4096,
        "max_prompt_tokens": 131072,
        "supported_parameters": ["max_tokens", "temperature", "top_p"],
        "status": 0,
        "uptime_last_5m": up5,
        "uptime_last_30m": up30,
        "uptime_last_1d": up1d,
        "supports_implicit_caching": False,
        "latency_last_30m": {"p50": 0.25, "p75": 0.35, "p90": 0.48, "p99": 0.85},
        "throughput_last_30m": {"p50": 45.2, "p75": 38.5, "p90": 28.3, "p99": 15.1},
    }


def listing(model: str, endpoints: list[dict]) -> dict:
    return {
        "data": {
            "id": model,
            "name": model,
            "created": 1692901234,
            "description": "placeholder description",
            "architecture": {
                "tokenizer": "Other",
                "instruct_type": None,
                "modality": "text->text",
                "input_modalities": ["text"],
                "output_modalities": ["text"],
            },
            "endpoints": endpoints,
        }
    }


def key(free: bool) -> dict:
    return {
        "data": {
            "label": "ci key (placeholder)",
            "limit": None,
            "limit_reset": None,
            "limit_remaining": None,
            "include_byok_in_limit": False,
            "usage": 0,
            "usage_daily": 0,
            "usage_weekly": 0,
            "usage_monthly": 0,
            "byok_usage": 0,
            "byok_usage_daily": 0,
            "byok_usage_weekly": 0,
            "byok_usage_monthly": 0,
            "is_free_tier": free,
            "is_management_key": False,
            "is_provisioning_key": False,
            "rate_limit": {
                "requests": -1,
                "interval": "10s",
                "note": "This field is deprecated and safe to ignore.",
            },
        }
    }


def interaction(path: str, status: int, body: object, raw: str | None = None) -> dict:
    text = raw if raw is not None else json.dumps(body)
    return {
        "request": {
            "body": "",
            "headers": {"accept": ["application/json"]},
            "method": "GET",
            "uri": f"{BASE}{path}",
        },
        "response": {
            "body": {"string": text},
            "headers": {"content-type": ["application/json"]},
            "status": {
                "code": status,
                "message": {200: "OK", 401: "Unauthorized", 404: "Not Found"}[status],
            },
        },
    }


def write(name: str, interactions: list[dict]) -> None:
    text = yaml.safe_dump({"interactions": interactions, "version": 1}, sort_keys=False, width=100)
    (OUT / name).write_text(HEADER + text, encoding="utf-8")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write(
        "health_free_tier.yaml",
        [
            # two providers: the best one's figure is the route's (99.5, its lower of 5m/30m)
            interaction(
                "/models/qwen/qwen3-coder:free/endpoints",
                200,
                listing(
                    "qwen/qwen3-coder:free",
                    [endpoint("Chutes", 100, 99.5), endpoint("Other", 40, 71.0)],
                ),
            ),
            # a recent outage: 5 minutes at 55 though 30 minutes say 62
            interaction(
                "/models/openai/gpt-oss-120b:free/endpoints",
                200,
                listing("openai/gpt-oss-120b:free", [endpoint("Chutes", 55, 62.0)]),
            ),
            # hostile numbers: NaN and a string are ignored, 250 is clamped to 100
            interaction(
                "/models/meta-llama/llama-3.3-70b-instruct:free/endpoints",
                200,
                None,
                raw=json.dumps(
                    listing(
                        "meta-llama/llama-3.3-70b-instruct:free",
                        [endpoint("A", float("nan"), "99"), endpoint("B", 250, None)],
                    )
                ),
            ),
            interaction("/key", 200, key(True)),
        ],
    )
    write(
        "health_failures.yaml",
        [
            interaction(
                "/models/qwen/qwen3-coder:free/endpoints",
                404,
                {"error": {"code": 404, "message": "Model not found"}},
            ),
            interaction("/models/openai/gpt-oss-120b:free/endpoints", 200, None, raw="<html>oops"),
            interaction(
                "/models/meta-llama/llama-3.3-70b-instruct:free/endpoints",
                200,
                {"data": {"id": "x", "endpoints": "none"}},
            ),
            interaction(
                "/key", 401, {"error": {"code": 401, "message": "No auth credentials found"}}
            ),
        ],
    )


if __name__ == "__main__":
    main()
