"""Bad inputs (issue 6, item 6): every action input with an invalid value stops the run with
exit 2 and one ``::error`` that names the input, before any GitHub request (nothing posted).

Run end to end against Prism standing in for GitHub, so any request at all would be seen: the
cases of :data:`SUBPROCESS_CASES` (an empty token, a hidden token, a policy, a hidden state URL)
and the two whole-payload cases go through ``relay-review run`` as the runner starts it
(``action_harness.run_action``: the console script, its logging set-up, a real stdout); every
other case runs the action's entrypoint in this process over the same environment
(``action_harness.run_in_process``), which is where the input checks live.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from action_harness import POLICY_REPO, TOKEN, run_action, run_in_process
from github_mock import MockGitHub

ROOT_DIR = Path(__file__).resolve().parents[3]

#: (input, bad value, text the error must contain). Every input of action.yml appears at least
#: once (``test_every_input_has_a_bad_value_case`` keeps it that way).
CASES: list[tuple[str, str, str]] = [
    ("github-token", "", "input `github-token` is required"),
    ("github-token", "ghs_two words", "input `github-token`: (hidden) is not allowed"),
    ("github-token", "ghs_line\x1bbreak", "input `github-token`: (hidden) is not allowed"),
    ("github-token", "ghs_pasted\u2019quote", "input `github-token`: (hidden) is not allowed"),
    ("github-token", "ghs_\u20acuro", "use one token of ASCII characters"),
    ("policy", "[catalog\nlimit = 2\n", "input `policy`: not valid TOML"),
    ("policy", "[catalog]\nlimits = 3\n", "input `policy`: catalog.limits is not a known key"),
    ("policy", "[serving]\ndeadline = -5\n", "input `policy`: serving.deadline = -5 is not"),
    ("policy", '[catalog]\npool = "cheap"\n', "input `policy`: catalog.pool = 'cheap' is not"),
    ("policy", "[github]\ntimeout = 0\n", "input `policy`: github.timeout = 0 is not allowed"),
    ("policy", "[[accounts]]\nname = 'x'\n", "input `policy`: accounts[0].kind"),
    ("orchestrator-repo", "not a repo", "input `orchestrator-repo`: 'not a repo' is not allowed"),
    ("orchestrator-repo", "octo-org/..", "input `orchestrator-repo`: 'octo-org/..' is not"),
    ("orchestrator-repo", "o/r;rm -rf ~", "input `orchestrator-repo`: 'o/r;rm -rf ~' is not"),
    ("orchestrator-ref", "main; curl x | sh", "input `orchestrator-ref`: 'main; curl x | sh'"),
    ("orchestrator-ref", "$(id)", "input `orchestrator-ref`: '$(id)' is not allowed"),
    ("orchestrator-ref", "`reboot`", "input `orchestrator-ref`: '`reboot`' is not allowed"),
    ("orchestrator-ref", "v1..v2", "input `orchestrator-ref`: 'v1..v2' is not allowed"),
    ("orchestrator-ref", "--upload-pack=x", "input `orchestrator-ref`: '--upload-pack=x'"),
    ("orchestrator-path", "../secrets.toml", "input `orchestrator-path`: '../secrets.toml'"),
    ("orchestrator-path", "/etc/passwd", "input `orchestrator-path`: '/etc/passwd' is not"),
    ("orchestrator-path", ".github/a\n::x.toml", "input `orchestrator-path`: '.github/a\\n::x"),
    ("orchestrator-path", "p\x1b[2J.toml", "input `orchestrator-path`: 'p\\x1b[2J.toml' is"),
    ("orchestrator-min-ref", "v1&&id", "input `orchestrator-min-ref`: 'v1&&id' is not allowed"),
    ("pool", "cheap", "input `pool`: 'cheap' is not allowed; use free or auto"),
    ("limit", "-1", "input `limit`: '-1' is not a whole number"),
    ("limit", "0", "input `limit`: '0' is not allowed; use a whole number >= 1"),
    ("limit", "abc", "input `limit`: 'abc' is not a whole number"),
    ("account-cap", "-3", "input `account-cap`: '-3' is not a whole number"),
    ("require-zdr", "maybe", "input `require-zdr`: 'maybe' is not allowed; use auto, true"),
    ("deadline", "-5", "input `deadline`: '-5' is not allowed; use a number of seconds > 0"),
    ("deadline", "nan", "input `deadline`: 'nan' is not allowed"),
    ("deadline", "soon", "input `deadline`: 'soon' is not a number of seconds"),
    ("first-byte-timeout", "0", "input `first-byte-timeout`: '0' is not allowed"),
    ("probe-budget", "-1", "input `probe-budget`: '-1' is not a whole number"),
    ("probe-budget", "1.5", "input `probe-budget`: '1.5' is not a whole number"),
    ("exclude", "*.lock, dist/\x07**", "input `exclude`: '*.lock, dist/\\x07**' has a pattern"),
    ("review-drafts", "sure", "input `review-drafts`: 'sure' is not allowed; use true or false"),
    ("author-associations", "OWNER, ADMIN", "names unknown association(s) ADMIN"),
    ("fail-on", "sometimes", "input `fail-on`: 'sometimes' is not allowed; use never"),
    ("on-unavailable", "retry", "input `on-unavailable`: 'retry' is not allowed; use fail"),
    ("inline-comments", "2", "input `inline-comments`: '2' is not allowed; use true or false"),
    ("comment-author", "@evil", "input `comment-author`: '@evil' is not allowed"),
    ("inline-min-severity", "critical", "input `inline-min-severity`: 'critical' is not allowed"),
    ("max-inline-comments", "-1", "input `max-inline-comments`: '-1' is not a whole number"),
    ("language", "en; rm -rf ~", "input `language`: 'en; rm -rf ~' is not allowed; use a"),
    ("language", "x" * 41, "input `language`: 'xxxxxxxx"),
    ("trigger", "relay-review", "input `trigger`: 'relay-review' is not allowed; use a slash"),
    ("trigger", "/re view", "input `trigger`: '/re view' is not allowed"),
    ("state", "file:", "input `state`: (hidden) is not allowed"),
    ("state", "redis://:hunter2pass@/0", "file:PATH, or redis://[:PASSWORD@]HOST"),
    ("state", "valkey://cache:6379/0", "input `state`: (hidden) has an unknown scheme `valkey://`"),
    ("state", "redis://:hunter#2@cache/0", "input `state`: (hidden) has characters that must be"),
]

#: The cases run as a subprocess (one per kind of check: a missing input, a secret input's
#: value hidden in the error, a policy parse error, a secret URL hidden); the rest in process.
SUBPROCESS_CASES = frozenset(
    {
        ("github-token", ""),
        ("github-token", "ghs_two words"),
        ("policy", "[catalog\nlimit = 2\n"),
        ("state", "redis://:hunter2pass@/0"),
    }
)

#: Inputs that only mean something together with others: set those so the bad one is reached.
COMPANIONS = {
    "orchestrator-ref": {"orchestrator-repo": POLICY_REPO},
    "orchestrator-min-ref": {"orchestrator-repo": POLICY_REPO, "orchestrator-ref": "v1.0.0"},
    "orchestrator-repo": {"orchestrator-ref": "v1.0.0"},
}


def test_every_input_has_a_bad_value_case() -> None:
    declared = yaml.safe_load((ROOT_DIR / "action.yml").read_text(encoding="utf-8"))["inputs"]
    assert set(declared) == {name for name, _, _ in CASES}
    assert {(name, value) for name, value, _ in CASES} >= SUBPROCESS_CASES


@pytest.mark.parametrize(
    ("name", "value", "message"), CASES, ids=[f"{n}={v!r}" for n, v, _ in CASES]
)
def test_bad_input_exits_2_naming_it_and_posts_nothing(
    tmp_path: Path, github_mock: MockGitHub, name: str, value: str, message: str
) -> None:
    run = (run_action if (name, value) in SUBPROCESS_CASES else run_in_process)(
        tmp_path, github_mock, {**COMPANIONS.get(name, {}), name: value}
    )
    assert run.code == 2, run.stdout + run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1, run.stdout
    assert errors[0].startswith("::error title=relay-review%3A configuration::")
    assert message in errors[0].replace("%0A", "\n"), errors[0]
    assert not github_mock.calls(), [str(c) for c in github_mock.calls()]  # not even a read
    assert run.outputs["decision"] == "error"
    assert run.report is None  # no report pretends a run happened
    assert "Traceback" not in run.stdout + run.stderr
    unmasked = "\n".join(
        line for line in run.stdout.splitlines() if not line.startswith("::add-mask::")
    )
    secret = value if name == "github-token" and value else TOKEN  # a bad token is a secret too
    assert secret not in unmasked + run.stderr


def test_an_unknown_policy_key_is_echoed_capped(tmp_path: Path, github_mock: MockGitHub) -> None:
    key = "k" * 5000 + "\u202e::error::forged"
    run = run_action(tmp_path, github_mock, {"policy": f'[catalog]\n"{key}" = 1\n'})
    assert run.code == 2, run.stdout + run.stderr
    (error,) = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert "is not a known key" in error and "kkkk..." in error
    assert len(error) < 600 and "k" * 100 not in error
    assert not github_mock.calls()


def test_an_event_payload_nested_100000_levels_exits_2(
    tmp_path: Path, github_mock: MockGitHub
) -> None:
    nested = '{"pull_request": ' + "[" * 100_000 + "]" * 100_000 + "}"
    run = run_action(tmp_path, github_mock, event_text=nested)
    assert run.code == 2, run.stdout + run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "nested too deeply" in errors[0], run.stdout
    assert "Traceback" not in run.stdout + run.stderr
    assert not github_mock.calls()
