"""No secret of the run is sent to a model, even when the pull request holds one (a committed
``.env``): the diff, title and body go out with ``***`` in its place (README, Security notes:
"Keys go only to their provider's base URL, never into a prompt"). And no report the command
line prints holds one a model wrote back."""

from __future__ import annotations

import json

import httpx

from relay_review.config import Policy, PreflightPolicy, ServingPolicy
from relay_review.pipeline.review import review, review_with_health
from relay_review.pipeline.routes import chat
from relay_review.records import ChatMessage, Outcome, OutcomeKind
from relay_review.render import comment_markdown
from relay_review.review.diff import DiffIndex
from relay_review.routing.catalog import build_catalog, parse_discovery

ROUTE_KEY = "Rk4rCanary-route-key-0123456789"
OTHER_KEY = "Ok7oCanary-other-vendor-key-9876"  # another provider's key (an *API_KEY* variable)
TOKEN = "ghs_Tk2tCanaryGithubToken0123456789"
STATE_KEY = "Sk5sCanary-state-key-abcdefabcdef"
REDIS_PASSWORD = "Rp6pCanaryRedisPassword42"
EXTRA = "Ex9xCanary-passed-by-the-caller-1"
ENV = {
    "LOCAL_KEY": ROUTE_KEY,
    "OTHER_VENDOR_API_KEY": OTHER_KEY,
    "GITHUB_TOKEN": TOKEN,
    "RELAY_REVIEW_STATE_KEY": STATE_KEY,
    "RELAY_REVIEW_STATE": f"redis://relay:{REDIS_PASSWORD}@127.0.0.1:1/0",
}
SECRETS = [ROUTE_KEY, OTHER_KEY, TOKEN, STATE_KEY, REDIS_PASSWORD, EXTRA]
LINES = [f'{name} = "{value}"' for name, value in zip("ABCDEF", SECRETS, strict=True)]
DIFF = (
    "diff --git a/app/settings.py b/app/settings.py\n--- a/app/settings.py\n"
    f"+++ b/app/settings.py\n@@ -1,1 +1,{len(LINES) + 1} @@\n import os\n"
    + "".join(f"+{line}\n" for line in LINES)
)


def catalog():
    route = {
        "account": "local",
        "provider": "openai_compatible",
        "model": "gemma",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "LOCAL_KEY",
        "prompt_price_per_1k": 0.0,
        "completion_price_per_1k": 0.0,
    }
    return build_catalog(parse_discovery({"routes": [route]}))


#: One route, no probe, short bounds: one request per review.
POLICY = Policy(
    preflight=PreflightPolicy(probe_budget=0, probe_timeout=1.0),
    serving=ServingPolicy(first_byte=2.0, idle=2.0, attempt=5.0, deadline=15.0),
)


async def test_secrets_in_the_diff_title_and_body_never_reach_a_prompt() -> None:
    sent: list[str] = []

    async def chat(client: httpx.AsyncClient, *, messages: list[dict], **kw: object) -> Outcome:
        sent.append(json.dumps(messages))
        # the model flags the committed key, quoting the line as it was shown
        shown = next(line for line in LINES if line.startswith("B = "))
        reply = {
            "summary": "A key is committed.",
            "findings": [
                {
                    "path": "app/settings.py",
                    "line": 3,
                    "side": "RIGHT",
                    "quote": shown.replace(OTHER_KEY, "***"),
                    "severity": "high",
                    "message": "A hard-coded API key.",
                }
            ],
        }
        return Outcome(kind=OutcomeKind.OK, content=json.dumps(reply), finish_reason="stop")

    report = await review(
        DiffIndex.from_diff(DIFF.encode()),
        catalog(),
        POLICY,
        ENV,
        title=f"add settings {OTHER_KEY}",
        body=f"token {TOKEN}, state key {STATE_KEY}",
        chat_fn=chat,
        secrets=[EXTRA],
    )
    assert sent, "the diff was sent to the model"
    for secret in SECRETS:
        assert not any(secret in body for body in sent), secret
    assert 'B = \\"***' in sent[0]  # shown redacted, not dropped
    assert report.decision.value != "approve"  # the committed key still keeps approve away


def echoing_chat(text: str):
    """A chat function whose every reply is ``text`` (a model writing secrets back)."""

    async def chat(client: httpx.AsyncClient, **kw: object) -> Outcome:
        return Outcome(kind=OutcomeKind.OK, content=text, finish_reason="stop")

    return chat


#: What no report the command line prints may hold: the serving route's own key is scrubbed
#: by the chat call, every other secret of the run (another route's key, the state key, the
#: token, the state URL's password) only by the report's scrub.
LEAKED = f"quoting {OTHER_KEY} {STATE_KEY} {TOKEN} {REDIS_PASSWORD}"


async def test_the_review_command_report_holds_no_secret_a_reply_writes_back() -> None:
    reply = {
        "summary": LEAKED,
        "findings": [
            {
                "path": "app/settings.py",
                "line": 3,
                "side": "RIGHT",
                "quote": LINES[1],
                "severity": "high",
                "message": LEAKED,
            }
        ],
    }
    report = await review_with_health(
        DiffIndex.from_diff(DIFF.encode()),
        catalog(),
        POLICY,
        ENV,
        chat_fn=echoing_chat(json.dumps(reply)),
    )
    assert report.verdict.summary.startswith("quoting ***")
    text = json.dumps(report.to_json()) + comment_markdown(report)
    for secret in SECRETS[:-1]:
        assert secret not in text, secret


async def test_the_chat_command_report_holds_no_secret_a_reply_writes_back() -> None:
    messages: list[ChatMessage] = [{"role": "user", "content": "hi"}]
    report = await chat(catalog(), POLICY, ENV, messages, echoing_chat(LEAKED))
    assert report.reply and report.reply.startswith("quoting ***")
    text = json.dumps(report.to_json())
    for secret in SECRETS[:-1]:
        assert secret not in text, secret
