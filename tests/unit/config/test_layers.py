"""One configuration path (issue 11): command-line flags, action inputs, the inline policy and
the policy file are layers merged and validated by ``settings.merge_layers``, so a value the
policy file refuses is refused with the same words wherever it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_review.cli import main
from relay_review.config import Layer, check_override, load_policy, merge_layers
from relay_review.errors import UsageError


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``relay-review <argv>`` (argparse exits; commands return)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def _file_message(tmp_path: Path, toml: str) -> str:
    """What the policy file says about ``toml``, without its ``<path>: `` prefix."""
    path = tmp_path / "relay-review.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_policy(path)
    prefix = f"{path}: "
    assert str(info.value).startswith(prefix)
    return str(info.value)[len(prefix) :]


@pytest.fixture
def discovery(tmp_path: Path) -> str:
    path = tmp_path / "discovery.json"
    path.write_text('{"routes": []}', encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("flag", "toml"),
    [("--limit", "[catalog]\nlimit = 0\n"), ("--account-cap", "[catalog]\naccount_cap = 0\n")],
)
def test_catalog_flag_of_zero_is_refused_like_the_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], discovery: str, flag: str, toml: str
) -> None:
    message = _file_message(tmp_path, toml)
    assert message.endswith("= 0 is not allowed; use a whole number >= 1")
    code, out, err = _run(["catalog", "--discovery", discovery, flag, "0"], capsys)
    assert code == 2
    assert f"relay-review catalog: error: argument {flag}: {message}\n" in err
    assert out == ""  # no (empty) catalog printed


def test_attempt_longer_than_deadline_is_refused_like_the_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], discovery: str
) -> None:
    message = _file_message(tmp_path, "[serving]\nattempt = 900\ndeadline = 5\n")
    assert message == (
        "serving.attempt = 900 is not allowed; use a number of seconds > 0 and at most "
        "serving.deadline (5)"
    )
    argv = ["chat", "--discovery", discovery, "--message", "hi"]
    code, out, err = _run([*argv, "--attempt-timeout", "900", "--deadline", "5"], capsys)
    assert (code, out) == (2, "")
    assert err == f"relay-review chat: error: command line: {message}\n"


def test_flags_over_a_policy_file_are_checked_merged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], discovery: str
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[serving]\ndeadline = 5\n", encoding="utf-8")
    argv = ["chat", "--discovery", discovery, "--message", "hi", "--policy", str(policy)]
    code, _, err = _run([*argv, "--attempt-timeout", "900"], capsys)
    assert code == 2
    assert f"error: {policy} + command line: serving.attempt = 900 is not allowed" in err


def test_a_deadline_flag_or_input_alone_lowers_a_longer_attempt() -> None:
    """``--deadline 5`` (or the ``deadline`` input) needs no attempt flag: it lowers the attempt
    it inherits; only an attempt set beside it in the same layer is refused."""
    file = Layer("p.toml", {"serving": {"attempt": 100}})
    flags = Layer("command line", {"serving": {"deadline": 30}}, caps_attempt=True)
    serving = merge_layers([file, flags]).serving
    assert (serving.attempt, serving.deadline) == (30, 30)
    assert merge_layers([flags]).serving.attempt == 30  # the default 180 lowered too
    # a file layer does not cap: its deadline below another layer's attempt is an error
    with pytest.raises(UsageError, match=r"^p\.toml \+ q\.toml: serving\.attempt = 100 is not"):
        merge_layers([file, Layer("q.toml", {"serving": {"deadline": 30}})])


def test_check_override_uses_the_policy_rules() -> None:
    assert check_override("catalog.limit", 3) == 3
    assert check_override("catalog.require_zdr", True) == "true"
    with pytest.raises(ValueError, match=r"^catalog\.pool = 'cheap' is not allowed; use free or"):
        check_override("catalog.pool", "cheap")
    with pytest.raises(ValueError, match=r"^serving\.deadline = nan is not allowed; use a number"):
        check_override("serving.deadline", float("nan"))
