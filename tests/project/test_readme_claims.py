"""The README's claims that are easy to let drift, re-checked against the program: the catalog
example's JSON (re-run and compared), the ZDR rule and ``--require-zdr`` on the shipped
examples, the Commands table against each command's ``--help``, what the log prints at INFO,
the length of the memory's chunk keys (which the Redis store uses as they are) and the ACL an
ACL user needs on a Redis Cluster (the one the cluster test runs)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from cli_harness import CliRun, run_cli
from redis_cluster import README_CLUSTER_ACL
from relay_review.routing.catalog import ZDR_FEED_PROVIDERS, ZdrIndex
from relay_review.state.redis_store import CLUSTER_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The README text under the heading ``title`` up to the next heading of any level."""
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", README, re.M | re.S)
    assert match, title
    return match.group(1)


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def relay_review(*argv: str) -> CliRun:
    """``relay-review *argv`` from the repository's root, through ``cli.main`` in this process
    (tests/support/cli_harness.py; the console's own runs are tested in tests/e2e)."""
    return run_cli(*argv, cwd=ROOT)


def catalog_json(*argv: str) -> dict:
    proc = relay_review("catalog", *argv)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


EXAMPLES = (
    "--discovery",
    "examples/discovery-example.json",
    "--zdr-feed",
    "examples/zdr-feed-example.json",
)


@pytest.mark.integration
def test_catalog_example_json_is_what_the_command_prints() -> None:
    text = section("The catalog")
    commands = [c.strip() for c in blocks(text, "sh") if "--format" not in c]
    assert len(commands) == 1, commands
    argv = shlex.split(commands[0])
    assert argv[:2] == ["relay-review", "catalog"]
    (shown,) = blocks(text, "json")[1:]  # the first json block is the discovery report's shape
    assert catalog_json(*argv[2:]) == json.loads(shown)


@pytest.mark.integration
def test_require_zdr_on_the_shipped_examples() -> None:
    text = " ".join(section("The catalog").split())
    strict = catalog_json(*EXAMPLES, "--require-zdr")
    assert strict["selected"] == []
    assert strict["report"]["excluded"]["not_zdr"] == 20
    assert "`--require-zdr` selects **0 routes** from the examples (`excluded: not_zdr=20`)" in text
    paid = catalog_json(*EXAMPLES, "--require-zdr", "--pool", "auto")
    assert [e["agent_id"] for e in paid["selected"]] == ["openrouter/z-ai/glm-4.6"]
    assert "the priced `openrouter/z-ai/glm-4.6`" in text


def test_zdr_rule_only_openrouter_routes() -> None:
    """The README: only an ``openrouter`` route can be ZDR, by exact model id."""
    assert "only an `openrouter` route can be ZDR" in " ".join(README.split())
    assert frozenset({"openrouter"}) == ZDR_FEED_PROVIDERS
    index = ZdrIndex(["meta-llama/Llama-3.3-70b-instruct"])
    assert index.is_zdr("openrouter", "meta-llama/llama-3.3-70b-instruct")
    assert not index.is_zdr("openrouter", "meta-llama/llama-3.3-70b-instruct:free")
    assert not index.is_zdr("nvidia_nim", "meta-llama/llama-3.3-70b-instruct")  # same name
    assert not index.is_zdr("nvidia_nim", "meta/llama-3.3-70b-instruct")  # same last segment


# ----------------------------------------------------------------------------- Commands table


def _flags(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]*", text))


def _groups(text: str) -> dict[str, set[str]]:
    """``*catalog flags*: `...`.`` -> {"catalog flags": {...}} from the legend under the table."""
    flat = " ".join(text.split())
    return {
        name: _flags(flags)
        for name, flags in re.findall(r"\*([a-z ]+ flags)\*: ((?:`[^`]*`)+)", flat)
    }


def _help_flags(command: str) -> set[str]:
    proc = relay_review(command, "--help")
    assert proc.returncode == 0, proc.stderr
    return _flags(proc.stdout.split("\n\n")[0]) - {"--help", "--verbose"}  # the usage lines


@pytest.mark.integration
def test_commands_table_names_every_flag_of_every_command() -> None:
    text = section("Commands")
    groups = _groups(text)
    assert set(groups) == {"catalog flags", "serving flags"}
    table: dict[str, set[str]] = {}
    for cell in re.findall(r"^\| `relay-review ([a-z]+)([^|]*(?:\\\|[^|]*)*)` \|", text, re.M):
        command, rest = cell
        flags = _flags(rest)
        for name, members in groups.items():
            if f"[{name}]" in rest:
                flags |= members
        table.setdefault(command, set()).update(flags)
    from relay_review.cli import COMMANDS

    assert set(table) == set(COMMANDS)
    for command in COMMANDS:
        assert table[command] == _help_flags(command), command


# ----------------------------------------------------------------------------- the log at INFO

#: The INFO lines the README's Commands section names, by the words they start with.
INFO_KINDS = {
    "probe": "INFO relay_review.preflight: probe ",
    "attempt": "INFO relay_review.failover: attempt (",
    "usage": "INFO relay_review.failover: usage: ",
    "wait": "INFO relay_review.failover: waiting ",
    "review": "INFO relay_review.review: review: ",
    "progress": "INFO relay_review.progress: waiting for ",
}


@pytest.mark.integration
def test_info_lines_are_the_ones_the_readme_names() -> None:
    text = " ".join(section("Commands").split())
    assert "one line per probe that came back" in text and "one per attempt" in text
    proc = relay_review("drill", "--scenario", "mixed", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    info = [line for line in proc.stderr.splitlines() if line.startswith("INFO ")]
    kinds = {k: [line for line in info if line.startswith(p)] for k, p in INFO_KINDS.items()}
    assert sum(map(len, kinds.values())) == len(info), info  # no INFO line the README omits
    answered = [r for r in result["readiness"] if r["status"] not in ("abandoned", "unprobed")]
    assert len(kinds["probe"]) == len(answered) < result["probes_sent"]  # abandoned: no line
    # hedged preflight: the stalled first route's cancelled attempt and the served one
    assert len(kinds["attempt"]) == len(result["attempts"]) >= 1
    assert len(kinds["usage"]) == sum(1 for a in result["attempts"] if a["outcome"] == "ok")
    assert "gets a progress line, then one at most every 10 s" in text


# ----------------------------------------------------------------------------- memory keys


@pytest.mark.integration
def test_chunk_keys_are_32_hex_digits_as_the_org_scale_table_says(tmp_path: Path) -> None:
    """The Redis store keeps a chunk under ``{prefix}m:chunk:{key}`` with the memory's own key
    (state/redis_store.py); the review drill's memory shows what those keys are."""
    assert "`{prefix}m:chunk:{hash}` (32 hex digits" in README
    state = tmp_path / "state.json"
    proc = relay_review("drill", "--state", f"file:{state}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    keys = list(json.loads(state.read_text())["chunks"])
    assert keys and all(re.fullmatch(r"[0-9a-f]{32}", k) for k in keys), keys


def test_the_readmes_cluster_acl_is_the_one_the_cluster_test_runs() -> None:
    """tests/e2e/test_redis_cluster.py runs ``README_CLUSTER_ACL`` on every node of a real
    cluster; the README gives that ACL in the URL-forms table and under Managed services: the
    single server's plus the commands redis-py's cluster client runs at start-up (the ones the
    store's warning tells the user to allow)."""
    flat = " ".join(README.split())
    cluster = " ".join(f"+{c}" for c in CLUSTER_COMMANDS)
    plain = README_CLUSTER_ACL.removesuffix(f" {cluster}")
    assert plain != README_CLUSTER_ACL
    assert f"(ACL `{plain}`)" in flat  # the URL-forms row of one server
    table_cell = README_CLUSTER_ACL.replace("|", "\\|")  # a `|` in a table cell is escaped
    assert f"(ACL `{table_cell}`, on every node)" in flat
    managed = " ".join(README.split("**Managed services:**")[1].split("\n\n")[0].split())
    assert f"`{README_CLUSTER_ACL}`" in managed
    assert f"needs `{cluster}` as well (on every node)" in flat


@pytest.mark.parametrize("doc", ["README.md", "docs/reliability.md", "action.yml"])
def test_no_doc_says_the_policy_is_read_at_the_base_commit(doc: str) -> None:
    """The policy and the guidelines are read at the default branch's commit the workflow runs
    from (``pipeline/policy.py``); the PR's author picks its base, so no doc may promise that."""
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
    said = re.findall(r"[^.]*\b(?:the|its|PR's|request's) \**base\** commit[^.]*", text, re.I)
    assert said == [], said
