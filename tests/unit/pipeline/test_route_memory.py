"""Issue 20, part 3: a refusal of the content ends a route for this run only; memory keeps
facts about routes (an unknown model, a key the provider refused, a quota, a cooldown), never a
content filter's, a moderation's or a WAF's answer to one pull request."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from catalog_entries import route_entry as entry
from cli_harness import CliRun, run_cli
from relay_review.config import MemoryPolicy
from relay_review.drill import FaultFleet
from relay_review.drill.review import drill_reply
from relay_review.drill.script import TRIGGER
from relay_review.pipeline.route_memory import classify, recall, remember
from relay_review.providers.chat.status import classify_http_error
from relay_review.records import Outcome, OutcomeKind, Readiness
from relay_review.routing.board import RouteBoard
from relay_review.state.memory import Memory, RouteMemo

NOW = 1_800_000_000.0
POLICY = MemoryPolicy()
JSON = {"content-type": "application/json"}
WAF_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>403 Forbidden</title></head><body><h1>Access denied"
    "</h1><p>Request blocked by the web application firewall. Ray ID: 8c1f</p></body></html>"
)
MODERATION = {
    "error": {
        "code": 403,
        "message": "meta-llama/llama-guard requires moderation on OpenAI. Your input was flagged.",
        "metadata": {
            "reasons": ["violence"],
            "flagged_input": "...kill the process...",
            "provider_name": "OpenAI",
            "model_slug": "openai/gpt-4o",
        },
    }
}


def body(message: str, code: object = None, **error: object) -> str:
    return json.dumps({"error": {"code": code, "message": message, **error}})


# --- classification (providers/chat/status.py) -----------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "text", "kind"),
    [
        (400, JSON, body("content filter: the prompt was filtered", 400), "bad_request"),
        (  # Azure OpenAI's shape
            400,
            JSON,
            body(
                "The response was filtered due to the prompt triggering Azure OpenAI's content"
                " management policy.",
                "content_filter",
            ),
            "bad_request",
        ),
        (403, JSON, json.dumps(MODERATION), "bad_request"),
        (403, JSON, body("This request violates our usage policy", 403), "bad_request"),
        (422, JSON, body("Blocked by safety settings", "SAFETY"), "bad_request"),
        (400, JSON, body("Request rejected by guardrail", 400), "bad_request"),
        (451, JSON, body("Unavailable for legal reasons", 451), "bad_request"),
        (403, {"content-type": "text/html"}, WAF_PAGE, "auth_failed"),  # key check decides
        (403, {"Content-Type": "text/html; charset=utf-8"}, WAF_PAGE, "auth_failed"),
        (403, {}, WAF_PAGE, "auth_failed"),  # no content type: the page itself says HTML
        (400, {"content-type": "text/html"}, "<html><body>Bad</body></html>", "bad_request"),
    ],
)
def test_a_refusal_of_the_content_is_flagged(
    status: int, headers: dict, text: str, kind: str
) -> None:
    out = classify_http_error(status, headers, text.encode())
    assert out.content_refusal and out.kind.value == kind
    assert "refused the content" in out.detail and len(out.detail) <= 200


def test_the_waf_page_is_shown_by_its_title_and_moderation_named() -> None:
    waf = classify_http_error(403, {"content-type": "text/html"}, WAF_PAGE)
    assert "HTML page" in waf.detail and "403 Forbidden" in waf.detail and "<" not in waf.detail
    mod = classify_http_error(403, JSON, json.dumps(MODERATION))
    assert "moderation" in mod.detail and "flagged" in mod.detail


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [
        (404, body("No endpoints found matching your data policy", 404), "not_found"),
        (401, body("No auth credentials found", 401), "auth_failed"),
        (401, WAF_PAGE, "auth_failed"),  # 401 refuses the key, whatever the page
        (403, body("Forbidden", 403), "auth_failed"),  # a provider's own key refusal
        (403, json.dumps({"status": 403, "detail": "Authorization failed"}), "auth_failed"),
        (402, body("Insufficient credits; see our refund policy", 402), "payment_required"),
        (400, body("Invalid request: unsupported parameter", 400), "bad_request"),
        (400, body("Content-Type must be application/json", 400), "bad_request"),
        (400, body("This model's maximum context length is 8192 tokens", 400), "context_too_long"),
        (429, body("Rate limit exceeded: free-models-per-day", 429), "rate_limited"),
        (413, body("content too large", 413), "context_too_long"),
        (500, body("content filter service down", 500), "server_error"),
    ],
)
def test_facts_about_the_route_are_no_content_refusal(status: int, text: str, kind: str) -> None:
    out = classify_http_error(status, JSON, text)
    assert not out.content_refusal and out.kind.value == kind


# --- memory (pipeline/route_memory.py) ----------------------------------------------------------


def test_classify_never_makes_a_memo_of_a_content_refusal() -> None:
    for status, headers, text in (
        (400, JSON, body("content filter", 400)),
        (403, JSON, json.dumps(MODERATION)),
        (403, {"content-type": "text/html"}, WAF_PAGE),
    ):
        out = classify_http_error(status, headers, text)
        assert classify(out, served=False, now=NOW, policy=POLICY) is None
    plain = Outcome(kind=OutcomeKind.BAD_REQUEST, http_status=400)
    assert classify(plain, served=False, now=NOW, policy=POLICY).state == "dead"  # type: ignore[union-attr]


def test_a_plain_400_to_the_pull_requests_text_only_cools_the_route() -> None:
    """The author controls what a review request carries: a plain 400 to it may be about that
    text, so one pull request must not mark the route dead for every run of the repository (a
    helper's audit). A 400 to a probe, our own text, is the route's."""
    entries = [entry("gw", "review"), entry("gw", "probe")]
    board = RouteBoard(entries)
    plain = classify_http_error(400, JSON, body("Invalid request", 400))
    assert not plain.content_refusal
    board.note("gw/review", plain, carried_input=True)
    board.note("gw/probe", plain)
    memory = remember(Memory(), board, NOW, POLICY)
    review, probe = memory.routes["gw/review"], memory.routes["gw/probe"]
    assert review.state == "cooling" and review.until == NOW + POLICY.server_error
    assert probe.state == "dead" and probe.until == NOW + POLICY.dead
    board.note("gw/review", plain)  # the same route's probe answers 400 later in the run
    assert remember(Memory(), board, NOW, POLICY).routes["gw/review"].state == "dead"
    invalid = classify_http_error(400, JSON, body("vendor/x is not a valid model ID", 400))
    board.note("gw/review", invalid, carried_input=True)  # about the model, not the text
    assert remember(Memory(), board, NOW, POLICY).routes["gw/review"].state == "dead"


#: OpenRouter's 404 when a model's endpoints exist but none takes the request as sent.
PARAMETERS_404 = (
    "No endpoints found that can handle the requested parameters. To learn more about provider "
    "routing, visit: https://openrouter.ai/docs/provider-routing"
)


def test_openrouters_no_endpoint_for_the_requested_parameters_is_the_requests() -> None:
    """ "No endpoints found that can handle the requested parameters" (404) depends on the request
    (its size, its ``response_format``): to a request that carried the pull request's text it
    cools the route briefly. Before, it was remembered dead for a day, for every pull request
    of the repository (helper audit). A model that is gone ("No endpoints found for x") stays
    dead, and so does the parameters 404 to our own probe."""
    entries = [entry("or", "review"), entry("or", "probe"), entry("or", "gone")]
    board = RouteBoard(entries)
    params = classify_http_error(404, JSON, body(PARAMETERS_404, 404))
    gone = classify_http_error(404, JSON, body("No endpoints found for vendor/gone:free.", 404))
    assert params.kind is OutcomeKind.NOT_FOUND and gone.kind is OutcomeKind.NOT_FOUND
    board.note("or/review", params, carried_input=True)
    board.note("or/probe", params)
    board.note("or/gone", gone, carried_input=True)
    routes = remember(Memory(), board, NOW, POLICY).routes
    assert routes["or/review"].state == "cooling"
    assert routes["or/review"].until == NOW + POLICY.server_error
    assert routes["or/probe"].state == "dead" and routes["or/gone"].state == "dead"


def test_a_timeout_of_the_pull_requests_text_cools_briefly_and_never_doubles() -> None:
    """A prompt can be built to be slow to read or to answer: a timeout of a request that
    carried the author's text cools the route for ``server_error`` at most, without a strike,
    because other pull requests borrow the memo (an audit: one pull request cooled a route for
    every other one of the repository for 5 minutes, doubling to an hour). A timeout of our
    own probe is the route's, and doubles."""
    timeout = Outcome(kind=OutcomeKind.TIMEOUT)
    before = None
    for _ in range(4):  # pushes of the same pull request
        before = classify(
            timeout, served=False, now=NOW, policy=POLICY, before=before, carried_input=True
        )
        assert before is not None and before.state == "cooling"
        assert before.until == NOW + POLICY.server_error and before.strikes == 0
    probe = classify(timeout, served=False, now=NOW, policy=POLICY, before=before)
    assert probe is not None and probe.until == NOW + POLICY.timeout * 2  # the route's: a strike
    short = MemoryPolicy(server_error=900.0, timeout=120.0)  # never longer than a route's own
    memo = classify(timeout, served=False, now=NOW, policy=short, carried_input=True)
    assert memo is not None and memo.until == NOW + 120.0


def test_a_proof_newer_than_its_accounts_memo_serves_the_route() -> None:
    """An account memo (402, 5 h ago) and a newer proof that one of its routes served (another
    pull request's record, merged into this one's): the newer fact decides, either way round.
    Before, the account's memo always came first: the route stayed rejected for up to a day."""
    dead = RouteMemo(state="dead", outcome="payment_required", at=NOW - 5 * 3600, until=NOW + 3600)
    proven = RouteMemo(state="proven", outcome="ok", at=NOW - 120, until=NOW + 3480)
    for routes, accounts, status in (
        ({"or/m": proven}, {"or": dead}, Readiness.UNPROBED),
        ({"or/m": proven.model_copy(update={"at": NOW - 6 * 3600})}, {"or": dead}, None),
        (
            {"or/m": RouteMemo(state="cooling", outcome="timeout", at=NOW - 60, until=NOW + 60)},
            {"or": dead},
            None,
        ),
    ):
        board = RouteBoard([entry("or", "m", "openrouter")])
        recall(board, Memory(routes=routes, accounts=accounts), NOW)
        expected = status or Readiness.REJECTED  # an older proof, or no proof: the account's
        assert board.status("or/m") is expected, board.probes["or/m"].detail


def test_remember_skips_content_refusals_and_keeps_what_was_known() -> None:
    entries = [entry("gw", "filter"), entry("gw", "waf"), entry("or", "mod", "openrouter")]
    entries += [entry("or", "other", "openrouter"), entry("gw", "served")]
    board = RouteBoard(entries)
    board.note("gw/filter", classify_http_error(400, JSON, body("content filter", 400)))
    board.note("gw/waf", classify_http_error(403, {"content-type": "text/html"}, WAF_PAGE))
    board.note("or/mod", classify_http_error(403, JSON, json.dumps(MODERATION)))
    # served a chunk earlier this run, then refused the next one's content
    board.proven.add("gw/served")
    board.out.add("gw/served")
    board.note("gw/served", classify_http_error(400, JSON, body("content filter", 400)))
    before = Memory(
        routes={"gw/filter": RouteMemo(state="proven", outcome="ok", at=NOW - 60, until=NOW + 600)}
    )
    memory = remember(before, board, NOW, POLICY)
    assert memory.accounts == {}  # no account is dead: neither the gateway's nor OpenRouter's
    assert memory.routes["gw/filter"] == before.routes["gw/filter"]  # what was known stands
    assert memory.routes["gw/served"].state == "proven"
    assert "gw/waf" not in memory.routes and "or/mod" not in memory.routes
    fresh = RouteBoard(entries)
    recall(fresh, memory, NOW + 1)
    assert fresh.out == set()  # the next run may use every route


def test_a_waf_403_whose_key_the_listing_refused_is_a_key_fact() -> None:
    entries = [entry("gw", "waf"), entry("gw", "other")]
    board = RouteBoard(entries)
    board.note("gw/waf", classify_http_error(403, {"content-type": "text/html"}, WAF_PAGE))
    board.condemned.add("gw")  # GET /models refused the key this run
    memory = remember(Memory(), board, NOW, POLICY)
    assert memory.accounts["gw"].state == "dead" and memory.accounts["gw"].outcome == "auth_failed"
    assert "gw/waf" not in memory.routes


def test_an_auth_failure_the_run_did_not_condemn_the_account_for_is_not_account_wide() -> None:
    """A gateway's 401 for one model while GET /models accepted the key: the route is dead, the
    account is not (before, memory condemned the account whatever the key check said)."""
    board = RouteBoard([entry("gw", "a"), entry("gw", "b")])
    board.note("gw/a", Outcome(kind=OutcomeKind.AUTH_FAILED, http_status=401))
    memory = remember(Memory(), board, NOW, POLICY)
    assert memory.accounts == {} and memory.routes["gw/a"].state == "dead"


# --- through the CLI: run 1 refused on a trigger, run 2 on a clean diff uses the routes --------

KEY = "sk-refusal-test-0123456789abcdef"
ROUTES = [  # (account, provider, model, script)
    ("gw", "openai_compatible", "vendor/filter", "400@filter,trigger"),
    ("gw", "openai_compatible", "vendor/waf", "403@waf,trigger"),
    ("orx", "openrouter", "vendor/moderated", "403@moderation,trigger"),
    ("orx", "openrouter", "vendor/waf", "403@waf,trigger"),
]


def diff(line: str) -> str:
    return (
        "diff --git a/app/run.py b/app/run.py\n--- a/app/run.py\n+++ b/app/run.py\n"
        f"@@ -1,2 +1,3 @@\n import os\n+{line}\n tail = 2\n"
    )


@pytest.mark.integration
def test_refusals_of_one_diff_do_not_deny_the_next_run(tmp_path: Path) -> None:
    accounts: dict[str, dict] = {}
    for account, _, model, script in ROUTES:
        accounts.setdefault(account, {"models": {}, "api_key": KEY})["models"][model] = script
    with FaultFleet(accounts, reply=drill_reply) as fleet:
        report = [
            {
                "account": account,
                "provider": provider,
                "model": model,
                "base_url": fleet.base_url(account),
                "api_key_env": "REFUSAL_TEST_KEY",
                "prompt_price_per_1k": 0.0,
                "completion_price_per_1k": 0.0,
            }
            for account, provider, model, _ in ROUTES
        ]
        discovery = tmp_path / "discovery.json"
        discovery.write_text(json.dumps({"routes": report}))
        state = tmp_path / "state.json"
        args = ["review", "--diff", "-"]
        args += ["--discovery", str(discovery), "--state", f"file:{state}"]  # default policy

        def run(text: str) -> tuple[CliRun, dict, dict[str, list]]:
            start = len(fleet.requests)
            proc = run_cli(  # cli.main, in this process (tests/support/cli_harness.py)
                *args,
                stdin=text,
                cwd=tmp_path,  # no ./.github/relay-review.toml: built-in settings
                env={**os.environ, "REFUSAL_TEST_KEY": KEY},
            )
            calls: dict[str, list] = {}
            for r in fleet.requests[start:]:
                if r.is_chat:
                    calls.setdefault(f"{r.account}/{r.model}", []).append(r)
            return proc, json.loads(proc.stdout), calls

        proc1, one, calls1 = run(diff(f"os.system('{TRIGGER}')"))
        assert proc1.returncode == 1, proc1.stderr  # every route refused this diff's content
        assert one["decision"] == "unavailable"
        refused = [a for a in one["attempts"] if a["purpose"] != "probe"]
        assert {a["agent_id"] for a in refused} == {f"{acc}/{m}" for acc, _, m, _ in ROUTES}
        assert {a["http_status"] for a in refused} == {400, 403}
        for agent_id in calls1:  # each route got the trigger text, and refused it
            assert any(TRIGGER in json.dumps(r.body) for r in calls1[agent_id])
        stored = json.loads(state.read_text())
        assert stored.get("accounts", {}) == {}
        assert all(m["state"] != "dead" for m in stored.get("routes", {}).values()), stored

        proc2, two, calls2 = run(diff("print('hello')"))
        assert proc2.returncode == 0, proc2.stderr
        assert two["decision"] != "unavailable"
        # hedged preflight: the first route serves the clean diff, unprobed (a request reaches
        # it); the others are not needed, and none is remembered as refusing
        assert set(calls2) == {"gw/vendor/filter"}
        for row in two["readiness"]:
            assert "remembered" not in row["detail"], row
            assert row["agent_id"] == "gw/vendor/filter" or row["detail"].startswith("not needed")


def test_the_fleet_scripts_refusals_on_a_trigger() -> None:
    from relay_review.drill.script import parse_script

    (step,) = parse_script("403@waf,trigger")
    assert (step.status, step.refusal, step.only_if) == (403, "waf", TRIGGER)
    assert parse_script("400@filter")[0].only_if is None
    with pytest.raises(ValueError, match="unknown flag"):
        parse_script("400@content")


def test_a_proven_route_is_remembered_by_when_its_answer_began_not_its_keepalives() -> None:
    """The hedge delay derives from the memo's first byte and the hedge waits for the answer:
    an OpenRouter route whose ``: OPENROUTER PROCESSING`` came at 10 ms and its answer at 1.2 s
    is remembered at 1.2 s (at 10 ms a raised hedge bound would hedge it at the floor on every
    run)."""
    from relay_review.pipeline.route_memory import first_byte_of

    pinged = Outcome(kind=OutcomeKind.OK, first_byte_s=0.01, answer_s=1.2, elapsed_s=2.0)
    assert first_byte_of(pinged) == 1.2
    scripted = Outcome(kind=OutcomeKind.OK, first_byte_s=0.3, elapsed_s=2.0)
    assert first_byte_of(scripted) == 0.3
