"""Issue 19: state URLs fail loudly, the right way, and never echo a password.

An unknown scheme exits 2 naming the input and the accepted forms (a ``word://`` text is never
a path); a password that needs percent-encoding exits 2 saying so with no part of it shown;
``ssl_cert_reqs=none`` is allowed with one warning; a query parameter redis-py would obey
(``socket_timeout``, ...) is refused. Through the CLI (``--state``, ``RELAY_REVIEW_STATE``) and
the action's ``state`` input (``relay-review run`` against Prism).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from action_harness import run_action, run_in_process
from cli_harness import CliRun, run_cli
from github_mock import MockGitHub
from relay_review.config.inputs import secret_values
from relay_review.state import check_state_url, open_store, url_secrets

PASSWORD = "Zq7#xV@k9/Wm?pL"
HOST = "cache-7f3e.internal"
LEAKY = [
    f"redis://:{PASSWORD}@{HOST}:6379/0",
    f"rediss://default:{PASSWORD}@{HOST}:6380/0?prefix=org:",
    f"redis://:{PASSWORD.replace('#', '%23')}@{HOST}",  # '@', '/' and '?' still unencoded
    f"redis://:pw wXq jZk@{HOST}",
    f"redis://:p%zzw@{HOST}",  # a '%' that starts no escape
]
UNKNOWN = ["valkey://cache:6379", "REDIS://cache", "redis+cluster://cache", "http://cache/x"]
UNKNOWN += ["Rediss://cache", "unix:///run/redis.sock"]


def fragments(text: str, size: int = 4) -> set[str]:
    """Every piece of ``text`` of ``size`` characters (any of them shown is a leak)."""
    return {text[i : i + size] for i in range(len(text) - size + 1)}


SECRET_PARTS = fragments(PASSWORD) | fragments(HOST) | fragments("pw wXq jZk")


def leaked(output: str) -> set[str]:
    shown = "\n".join(line for line in output.splitlines() if "::add-mask::" not in line)
    return {part for part in SECRET_PARTS if part in shown}


@pytest.mark.parametrize("url", UNKNOWN)
def test_an_unknown_scheme_is_refused_naming_it_and_the_accepted_forms(url: str) -> None:
    scheme = url.split("://")[0]
    with pytest.raises(ValueError, match="unknown scheme") as info:
        check_state_url(url)
    message = str(info.value)
    assert f"`{scheme}://`" in message and "file:PATH" in message and "rediss://" in message


@pytest.mark.parametrize("url", LEAKY)
def test_a_password_that_needs_encoding_is_refused_showing_none_of_it(url: str) -> None:
    with pytest.raises(ValueError, match="percent-encoded") as info:
        check_state_url(url)
    assert not leaked(str(info.value))
    assert any(PASSWORD in s or "pw wXq jZk" in s or "p%zzw" in s for s in url_secrets(url))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://cache/0?socket_timeout=100", "query parameter"),
        ("redis://cache/0?prefix=a&prefix=b", "given twice"),
        ("redis://cache/0?ssl_cert_reqs=none", "rediss:// only"),
        ("rediss://cache/0?ssl_cert_reqs=maybe", "ssl_cert_reqs"),
        ("redis://cache/zero", "database"),
        ("redis://cache:99999/0", "port"),
        ("redis://cache/0?prefix=", "prefix"),
        ("redis:///0", "no host"),
        ("redis://cache/0?cluster=yes", "cluster"),
        ("redis://cache/3?cluster=true", "database other than 0"),
        ("redis://cache/0?prefix=%7Bp%7D:", "hash tags"),
    ],
)
def test_other_bad_redis_urls(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_state_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "rediss://:p%23ss%40w%2Frd@cache:6380/0?prefix=org*:",
        "redis://cache",
        "rediss://cache/3?ssl_cert_reqs=none&prefix=a",
        "redis://node-1:7000?cluster=true&prefix=org:",
        "rediss://relay:pw@cache:6380/0?cluster=false",
        "file:///tmp/state.json",
        "state/memory.json",
        "redis:cache.json",  # no "//": a file name
    ],
)
def test_good_urls_and_paths_pass(url: str) -> None:
    assert check_state_url(url) == url


def test_a_path_is_anything_not_shaped_like_a_url() -> None:
    assert open_store("redis:cache.json").kind == "file"
    assert open_store("./valkey/cache.json").kind == "file"
    with pytest.raises(ValueError):
        check_state_url("valkey://cache.json")


@pytest.mark.parametrize("query", ["ssl_cert_reqs=none", "db=0&ssl_cert_reqs=%6eone"])
def test_certificate_checks_off_is_warned_once(
    caplog: pytest.LogCaptureFixture, query: str
) -> None:
    """Also when the value is percent-encoded: redis-py decodes it and turns the checks off."""
    with caplog.at_level(logging.WARNING):
        store = open_store(f"rediss://:s3cretpw@127.0.0.1:1/0?{query}")
        store.load()
    warned = [r.getMessage() for r in caplog.records if "certificate check off" in r.getMessage()]
    assert len(warned) == 1 and "s3cretpw" not in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        open_store("rediss://127.0.0.1:1/0")
    assert not caplog.records


def test_every_form_of_the_password_is_masked() -> None:
    url = "redis://:p%40ss%2Fw0rd@cache:6379/0"
    assert {"p%40ss%2Fw0rd", "p@ss/w0rd"} <= set(secret_values({"INPUT_STATE": url}))
    bad = f"redis://:{PASSWORD}@{HOST}"
    assert PASSWORD in secret_values({"RELAY_REVIEW_STATE": bad})


# --- through the CLI and the action -----------------------------------------------------------


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relay_review", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def in_process(*args: str, env: dict | None = None) -> CliRun:
    return run_cli(*args, env={**os.environ, **(env or {})})


@pytest.mark.integration
@pytest.mark.parametrize("url", [*UNKNOWN[:3], *LEAKY[:2]])
def test_the_cli_exits_2_on_a_bad_state_url_in_the_flag_or_the_variable(url: str) -> None:
    """The first URL by the flag as a process (the console's exit code and output); the rest
    through ``cli.main`` in this process (tests/support/cli_harness.py)."""
    face = cli if url == UNKNOWN[0] else in_process
    by_flag = face("drill", "--scenario", "mixed", "--state", url)
    by_env = in_process("drill", "--scenario", "mixed", env={"RELAY_REVIEW_STATE": url})
    for run, name in ((by_flag, "--state (value hidden)"), (by_env, "RELAY_REVIEW_STATE")):
        assert run.returncode == 2, run.stderr
        assert name in run.stderr and "Traceback" not in run.stderr
        assert ("unknown scheme" if url in UNKNOWN else "percent-encoded") in run.stderr
        assert not leaked(run.stdout + run.stderr)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("valkey://cache:6379/0", "unknown scheme `valkey://`"),
        (LEAKY[0], "must be percent-encoded in its password"),
        (LEAKY[1], "must be percent-encoded in its password"),
    ],
)
def test_the_action_exits_2_on_a_bad_state_input_showing_no_password(
    tmp_path: Path, github_mock: MockGitHub, url: str, message: str
) -> None:
    # the first as the runner starts it (a process); the others through the action's entrypoint
    # in this process (the same environment: action_harness.run_in_process)
    start = run_action if url == "valkey://cache:6379/0" else run_in_process
    run = start(tmp_path, github_mock, {"state": url})
    assert run.code == 2, run.stdout + run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "input `state`: (hidden)" in errors[0]
    assert message in errors[0] and "comment (memory in the sticky comment)" in errors[0]
    assert not github_mock.calls()
    assert not leaked(run.stdout + run.stderr)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:s3cret-Pa55word@cache:6379/0", ["s3cret-Pa55word"]),
        ("redis://relayusr:s3cret-Pa55word@cache/0", ["s3cret-Pa55word"]),
        # a password written without its colon is redis-py's user name: masked all the same
        # (it was printed whole in the store's warning; a helper's audit)
        ("redis://s3cret-Pa55word@cache/0", ["s3cret-Pa55word"]),
        ("redis://cache:6379/0", []),
    ],
)
def test_what_may_be_a_urls_password_is_masked(url: str, masked: list[str]) -> None:
    assert url_secrets(url) == masked
