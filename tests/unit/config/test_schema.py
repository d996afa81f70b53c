"""The policy file: defaults, one clear message per bad value, merging, and accounts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay_review.config import (
    Policy,
    env_accounts,
    key_conventions,
    load_policy,
    merge_layers,
    merge_policy_data,
    parse_policy,
    resolve_accounts,
    resolve_require_zdr,
)
from relay_review.errors import UsageError
from relay_review.kinds import OPENCODE_GO_BASE_URL
from relay_review.records import Account

SOURCE = "relay-review.toml"


def error_of(text: str) -> str:
    with pytest.raises(UsageError) as info:
        parse_policy(text, SOURCE)
    return str(info.value)


def test_defaults() -> None:
    policy = parse_policy("", SOURCE)
    assert policy == Policy()
    assert (policy.catalog.pool, policy.catalog.limit, policy.catalog.account_cap) == (
        "free",
        12,
        8,
    )
    assert policy.catalog.require_zdr == "auto"
    assert policy.accounts == []
    assert policy.discovery.timeout == 15.0
    assert policy.discovery.models_dev_url == "https://models.dev/api.json"
    assert policy.discovery.zdr_url == "https://openrouter.ai/api/v1/endpoints/zdr"
    assert (policy.preflight.probe_budget, policy.preflight.probe_timeout) == (6, 10.0)
    s = policy.serving
    assert (s.connect, s.first_byte, s.idle, s.attempt, s.deadline) == (5, 20, 30, 180, 600)
    assert s.deadlines().attempt == 180
    assert policy.review.exclude == []
    assert policy.review.max_output_tokens >= 1


def test_built_in_defaults_pass_the_policy_rules() -> None:
    """The sections' defaults are made without validation (``model_construct``, for start-up):
    every one of them, dumped and read back as a policy file would be, is the same policy."""
    defaults = Policy()
    assert Policy.model_validate(defaults.model_dump()) == defaults
    built_in = merge_layers([])  # no layer: the defaults as they are, without a validator
    assert built_in == Policy.model_validate({}) == defaults
    assert built_in.model_fields_set == set() and built_in.accounts is not defaults.accounts
    for name, field in Policy.model_fields.items():
        section = type(getattr(defaults, name))
        if section is not list:
            assert section.model_validate(field.default.model_dump()) == field.default, name


@pytest.mark.parametrize(
    ("key", "longest", "accepted"),
    [
        ("language", "pt-BR " + "é" * 34, ["Korean", "中文", "हिन्दी", "a b-c"]),
        ("guidelines", "docs/" + "ü" * 1019, [".github/relay-review.md", "a b/ü.md"]),
    ],
)
def test_language_and_guidelines_bounds(key: str, longest: str, accepted: list[str]) -> None:
    """At most 40 (language) or 1024 (guidelines) characters; one more, or a newline at the
    end, is refused in the field's words."""
    assert len(longest) == (40 if key == "language" else 1024)
    for value in [longest, *accepted]:
        policy = parse_policy(f"[review]\n{key} = {json.dumps(value)}", SOURCE)
        assert getattr(policy.review, key) == value
    for bad in [longest + "x", accepted[0] + "\n", "", "1x" if key == "language" else "/abs"]:
        message = error_of(f"[review]\n{key} = {json.dumps(bad)}")
        assert message.startswith(f"relay-review.toml: review.{key} = "), message
        assert "is not allowed; use a " in message, message


def test_full_policy_round_trip() -> None:
    policy = parse_policy(
        """
        [catalog]
        pool = "auto"
        limit = 5
        account_cap = 2
        require_zdr = true

        [[accounts]]
        name = "local"
        kind = "openai_compatible"
        base_url = "http://localhost:11434/v1/"
        api_key_env = "LOCAL_KEY"
        pricing = "declared-free"

        [discovery]
        timeout = 3
        zdr_url = "http://127.0.0.1:9/zdr"

        [preflight]
        probe_budget = 0

        [serving]
        attempt = 60.5

        [review]
        exclude = ["*.lock", "dist/**"]
        max_output_tokens = 2000
        """,
        SOURCE,
    )
    assert policy.catalog.require_zdr == "true"
    assert policy.catalog.limit == 5
    assert policy.accounts[0].base_url == "http://localhost:11434/v1/"
    assert policy.discovery.timeout == 3.0
    assert policy.preflight.probe_budget == 0
    assert policy.serving.attempt == 60.5
    assert policy.review.exclude == ["*.lock", "dist/**"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[catalog]\npool = "cheap"',
            "relay-review.toml: catalog.pool = 'cheap' is not allowed; use free or auto",
        ),
        (
            "[catalog]\nlimit = 0",
            "relay-review.toml: catalog.limit = 0 is not allowed; use a whole number >= 1",
        ),
        (
            '[catalog]\nlimit = "12"',
            "relay-review.toml: catalog.limit = '12' is not allowed; use a whole number >= 1",
        ),
        (
            "[catalog]\nlimit = 12.5",
            "relay-review.toml: catalog.limit = 12.5 is not allowed; use a whole number >= 1",
        ),
        (
            "[catalog]\naccount_cap = true",
            "relay-review.toml: catalog.account_cap = true is not allowed; use a whole number >= 1",
        ),
        (
            '[catalog]\nrequire_zdr = "maybe"',
            "relay-review.toml: catalog.require_zdr = 'maybe' is not allowed; "
            "use auto, true or false",
        ),
        (
            '[catalog]\npol = "free"',
            "relay-review.toml: catalog.pol is not a known key; "
            "keys allowed in [catalog]: pool, limit, account_cap, require_zdr, min_uptime",
        ),
        (
            "limits = 3",
            "relay-review.toml: limits is not a known key; keys allowed in the policy: "
            "catalog, accounts, discovery, preflight, serving, review, github, memory, state",
        ),
        (
            "catalog = 3",
            "relay-review.toml: catalog = 3 is not allowed; use a [catalog] table",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "together"',
            "relay-review.toml: accounts[0].kind = 'together' is not allowed; "
            "use openrouter, nvidia_nim, opencode, groq, cerebras, gemini, mistral, cloudflare, "
            "sambanova, huggingface or openai_compatible",
        ),
        (
            '[[accounts]]\nkind = "openrouter"',
            "relay-review.toml: accounts[0].name is required; use lower-case letters, digits, "
            "'_', '-' or '.', starting with a letter or digit",
        ),
        (
            '[[accounts]]\nname = "x"',
            "relay-review.toml: accounts[0].kind is required; "
            "use openrouter, nvidia_nim, opencode, groq, cerebras, gemini, mistral, cloudflare, "
            "sambanova, huggingface or openai_compatible",
        ),
        (
            '[[accounts]]\nname = "a/b"\nkind = "openrouter"',
            "relay-review.toml: accounts[0].name = 'a/b' is not allowed; use lower-case letters, "
            "digits, '_', '-' or '.', starting with a letter or digit",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openrouter"\npricing = "free"',
            "relay-review.toml: accounts[0].pricing = 'free' is not allowed; "
            "use listing, models.dev, declared-free or unknown",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openrouter"\nbase_url = "ftp://h/v1"',
            "relay-review.toml: accounts[0].base_url = 'ftp://h/v1' is not allowed; "
            "use an http:// or https:// URL",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openrouter"\napi_key_env = "MY-KEY"',
            "relay-review.toml: accounts[0].api_key_env = 'MY-KEY' is not allowed; "
            "use an environment variable name like MY_API_KEY",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openrouter"\ncolour = "red"',
            "relay-review.toml: accounts[0].colour is not a known key; keys allowed in "
            "[accounts[0]]: name, kind, base_url, api_key_env, pricing, models_dev_provider, "
            "rpm, rpd, response_format",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openai_compatible"',
            "relay-review.toml: accounts[0].base_url is required for kind openai_compatible; "
            "use an http:// or https:// URL",
        ),
        (
            '[[accounts]]\nname = "x"\nkind = "openrouter"\n'
            '[[accounts]]\nname = "x"\nkind = "nvidia_nim"',
            "relay-review.toml: accounts[1].name = 'x' is not allowed; "
            "use a name no other account has (accounts[0] has it)",
        ),
        (
            "accounts = [3]",
            "relay-review.toml: accounts[0] = 3 is not allowed; use [[accounts]] tables",
        ),
        (
            "[discovery]\ntimeout = 0",
            "relay-review.toml: discovery.timeout = 0 is not allowed; "
            "use a number of seconds > 0, at most 86400 (a day)",
        ),
        (
            "[discovery]\ntimeout = inf",
            "relay-review.toml: discovery.timeout = inf is not allowed; "
            "use a number of seconds > 0, at most 86400 (a day)",
        ),
        (
            "[serving]\ndeadline = 1e308",
            "relay-review.toml: serving.deadline = 1e+308 is not allowed; "
            "use a number of seconds > 0, at most 86400 (a day)",
        ),
        (
            "[memory]\nproven = 1e12",
            "relay-review.toml: memory.proven = 1000000000000 is not allowed; "
            "use a number of seconds > 0, at most 315360000 (ten years)",
        ),
        (
            '[discovery]\nmodels_dev_url = "models.dev"',
            "relay-review.toml: discovery.models_dev_url = 'models.dev' is not allowed; "
            "use an http:// or https:// URL",
        ),
        (
            "[preflight]\nprobe_budget = -1",
            "relay-review.toml: preflight.probe_budget = -1 is not allowed; "
            "use a whole number >= 0",
        ),
        (
            '[serving]\nidle = "30s"',
            "relay-review.toml: serving.idle = '30s' is not allowed; "
            "use a number of seconds > 0, at most 86400 (a day)",
        ),
        (
            "[serving]\nattempt = 700",
            "relay-review.toml: serving.attempt = 700 is not allowed; use a number of seconds > 0 "
            "and at most serving.deadline (600)",
        ),
        (
            '[review]\nexclude = "*.lock"',
            "relay-review.toml: review.exclude = '*.lock' is not allowed; "
            'use a list of glob strings like ["*.lock", "dist/**"]',
        ),
        (
            '[review]\nexclude = ["a", 3]',
            "relay-review.toml: review.exclude[1] = 3 is not allowed; "
            'use a list of glob strings like ["*.lock", "dist/**"]',
        ),
        (
            "[review]\nmax_output_tokens = 0",
            "relay-review.toml: review.max_output_tokens = 0 is not allowed; "
            "use a whole number >= 1",
        ),
    ],
)
def test_bad_value_names_file_key_and_allowed(text: str, message: str) -> None:
    assert error_of(text) == message


def test_several_errors_give_one_message() -> None:
    message = error_of('[catalog]\npool = "cheap"\nlimit = 0')
    assert message.count("\n") == 0
    assert message.startswith("relay-review.toml: catalog.")


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    assert error_of("[catalog\n").startswith("relay-review.toml: not valid TOML: ")
    missing = tmp_path / "nope.toml"
    with pytest.raises(UsageError, match=r"nope\.toml: policy file not found"):
        load_policy(missing)


def test_long_values_are_clipped() -> None:
    message = error_of(f'[catalog]\npool = "{"x" * 500}"')
    assert len(message) < 200
    assert "..." in message


def test_load_policy_file_and_inline_override(tmp_path: Path) -> None:
    path = tmp_path / "relay-review.toml"
    path.write_text(
        '[catalog]\npool = "auto"\nlimit = 4\n'
        '[[accounts]]\nname = "a"\nkind = "openrouter"\n'
        '[[accounts]]\nname = "b"\nkind = "nvidia_nim"\n'
        "[serving]\nconnect = 2\n",
        encoding="utf-8",
    )
    assert load_policy(path).catalog.limit == 4
    policy = load_policy(path, '[catalog]\nlimit = 9\n[[accounts]]\nname = "c"\nkind = "opencode"')
    assert policy.catalog.pool == "auto"  # kept from the file
    assert policy.catalog.limit == 9  # overridden
    assert [a.name for a in policy.accounts] == ["c"]  # replaced wholesale
    assert policy.serving.connect == 2
    assert load_policy(None, None) == Policy()
    assert load_policy(None, '[catalog]\npool = "auto"').catalog.pool == "auto"


def test_errors_name_the_part_they_come_from(tmp_path: Path) -> None:
    path = tmp_path / "relay-review.toml"
    path.write_text('[catalog]\npool = "auto"\n', encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_policy(path, '[catalog]\npool = "cheap"')
    assert str(info.value) == (
        "inline policy: catalog.pool = 'cheap' is not allowed; use free or auto"
    )
    path.write_text("[catalog]\nlimit = -3\n", encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_policy(path, "[catalog]\nlimit = 3")
    assert str(info.value).startswith(f"{path}: catalog.limit = -3 is not allowed")


def test_merge_policy_data() -> None:
    base = {"catalog": {"pool": "auto", "limit": 4}, "accounts": [{"name": "a"}], "x": 1}
    override = {"catalog": {"limit": 9}, "accounts": [{"name": "b"}], "review": {"exclude": []}}
    merged = merge_policy_data(base, override)
    assert merged == {
        "catalog": {"pool": "auto", "limit": 9},
        "accounts": [{"name": "b"}],
        "x": 1,
        "review": {"exclude": []},
    }
    assert base["catalog"] == {"pool": "auto", "limit": 4}  # inputs untouched


@pytest.mark.parametrize(
    ("setting", "private", "expected"),
    [
        ("auto", True, True),
        ("auto", False, False),
        ("auto", None, True),
        ("true", False, True),
        ("false", True, False),
        (True, False, True),
        (False, True, False),
    ],
)
def test_resolve_require_zdr(setting: str | bool, private: bool | None, expected: bool) -> None:
    assert resolve_require_zdr(setting, private) is expected


def test_resolve_require_zdr_rejects_other_words() -> None:
    with pytest.raises(UsageError, match="use auto, true or false"):
        resolve_require_zdr("sometimes", True)


# -------------------------------------------------------------------------------------------
# accounts


def names(accounts: list[Account]) -> list[str]:
    return [a.name for a in accounts]


def test_env_accounts_by_convention() -> None:
    env = {
        "OPENROUTER_API_KEY": "k-or",
        "OPENROUTER_API_KEY_TEAM": "k-or-team",
        "NVIDIA_NIM_API_KEY": "k-nim",
        "NVIDIA_NIM_API_KEY_SUB": "k-nim-sub",
        "OPENCODE_API_KEY": "k-oc",
        "OPENCODE_GO_API_KEY": "k-go",
        "OPENCODE_GO_API_KEY_SUB": "k-go-sub",
        "NVIDIA_NIM_API_KEY_EMPTY": "",
        "NVIDIA_NIM_API_KEY_BLANK": "   ",
        "OPENROUTER_API_KEY_": "k",
        "OPENROUTER_API_KEY__X": "k",
        "UNRELATED_API_KEY": "k",
    }
    accounts = {a.name: a for a in env_accounts(env)}
    assert sorted(accounts) == [
        "nvidia_nim",
        "nvidia_nim_sub",
        "opencode",
        "opencode_go",
        "opencode_go_sub",
        "openrouter",
        "openrouter_team",
    ]
    sub = accounts["nvidia_nim_sub"]
    assert (sub.kind, sub.api_key_env, sub.base_url, sub.pricing, sub.models_dev_provider) == (
        "nvidia_nim",
        "NVIDIA_NIM_API_KEY_SUB",
        "https://integrate.api.nvidia.com/v1",
        "models.dev",
        "nvidia",
    )
    team = accounts["openrouter_team"]
    assert (team.kind, team.api_key_env, team.base_url, team.pricing) == (
        "openrouter",
        "OPENROUTER_API_KEY_TEAM",
        "https://openrouter.ai/api/v1",
        "listing",
    )
    zen = accounts["opencode"]
    assert (zen.base_url, zen.models_dev_provider) == ("https://opencode.ai/zen/v1", "opencode")
    go = accounts["opencode_go"]
    assert (go.kind, go.api_key_env, go.base_url, go.models_dev_provider) == (
        "opencode",
        "OPENCODE_GO_API_KEY",
        OPENCODE_GO_BASE_URL,
        "opencode-go",
    )
    assert OPENCODE_GO_BASE_URL == "https://opencode.ai/zen/go/v1"
    assert accounts["opencode_go_sub"].api_key_env == "OPENCODE_GO_API_KEY_SUB"
    assert accounts["opencode_go_sub"].base_url == OPENCODE_GO_BASE_URL
    assert all(a.source == "env" for a in accounts.values())


def test_opencode_go_family_beats_zen_suffix_go() -> None:
    env = {"OPENCODE_API_KEY_GO": "a", "OPENCODE_GO_API_KEY": "b"}
    [go] = env_accounts(env)
    assert (go.name, go.api_key_env, go.base_url) == (
        "opencode_go",
        "OPENCODE_GO_API_KEY",
        OPENCODE_GO_BASE_URL,
    )
    [zen_go] = env_accounts({"OPENCODE_API_KEY_GO": "a"})
    assert (zen_go.name, zen_go.base_url) == ("opencode_go", "https://opencode.ai/zen/v1")


def test_policy_account_wins_over_env_and_fills_defaults() -> None:
    policy = parse_policy(
        """
        [[accounts]]
        name = "nvidia_nim_sub"
        kind = "nvidia_nim"
        base_url = "http://127.0.0.1:9/v1/"
        pricing = "declared-free"

        [[accounts]]
        name = "opencode_go_b"
        kind = "opencode"

        [[accounts]]
        name = "work"
        kind = "nvidia_nim"

        [[accounts]]
        name = "ollama"
        kind = "openai_compatible"
        base_url = "http://localhost:11434/v1"
        """,
        SOURCE,
    )
    env = {"NVIDIA_NIM_API_KEY_SUB": "k1", "OPENROUTER_API_KEY": "k2"}
    accounts = {a.name: a for a in resolve_accounts(policy, env)}
    assert names(resolve_accounts(policy, env)) == sorted(accounts)
    assert sorted(accounts) == ["nvidia_nim_sub", "ollama", "opencode_go_b", "openrouter", "work"]
    sub = accounts["nvidia_nim_sub"]
    assert (sub.source, sub.base_url, sub.api_key_env, sub.pricing) == (
        "policy",
        "http://127.0.0.1:9/v1",
        "NVIDIA_NIM_API_KEY_SUB",
        "declared-free",
    )
    go_b = accounts["opencode_go_b"]
    assert (go_b.api_key_env, go_b.base_url, go_b.models_dev_provider) == (
        "OPENCODE_GO_API_KEY_B",
        OPENCODE_GO_BASE_URL,
        "opencode-go",
    )
    work = accounts["work"]
    assert (work.api_key_env, work.base_url, work.pricing, work.models_dev_provider) == (
        "WORK_API_KEY",
        "https://integrate.api.nvidia.com/v1",
        "models.dev",
        "nvidia",
    )
    ollama = accounts["ollama"]
    assert (ollama.api_key_env, ollama.pricing) == ("OLLAMA_API_KEY", "unknown")
    assert accounts["openrouter"].source == "env"


def test_env_accounts_hold_no_key_values() -> None:
    secret = "sk-very-secret-value-123"
    accounts = env_accounts({"OPENROUTER_API_KEY": secret})
    assert secret not in repr(accounts)
    assert secret not in str([a.model_dump() for a in accounts])


def test_key_conventions_name_every_family() -> None:
    assert key_conventions() == [
        "OPENROUTER_API_KEY[_<SUFFIX>]",
        "NVIDIA_NIM_API_KEY[_<SUFFIX>]",
        "OPENCODE_API_KEY[_<SUFFIX>]",
        "OPENCODE_GO_API_KEY[_<SUFFIX>]",
        "GROQ_API_KEY[_<SUFFIX>]",
        "CEREBRAS_API_KEY[_<SUFFIX>]",
        "GEMINI_API_KEY[_<SUFFIX>]",
        "MISTRAL_API_KEY[_<SUFFIX>]",
        "CLOUDFLARE_API_TOKEN[_<SUFFIX>]",
        "SAMBANOVA_API_KEY[_<SUFFIX>]",
        "HF_TOKEN[_<SUFFIX>]",
    ]


@given(st.from_regex(r"[A-Z0-9]{1,8}(_[A-Z0-9]{1,8}){0,2}", fullmatch=True))
def test_suffix_round_trips_through_policy_defaults(suffix: str) -> None:
    """An env-derived account, declared again in a policy by name only, finds the same variable."""
    [env_account] = env_accounts({f"NVIDIA_NIM_API_KEY_{suffix}": "k"})
    assert env_account.name == f"nvidia_nim_{suffix.lower()}"
    policy = parse_policy(f'[[accounts]]\nname = "{env_account.name}"\nkind = "nvidia_nim"')
    [declared] = resolve_accounts(policy, {})
    assert declared.api_key_env == env_account.api_key_env
    assert declared.base_url == env_account.base_url


def test_rules_across_keys_apply_to_the_merged_layers(tmp_path):
    """One layer may set serving.attempt above the default deadline when another layer raises
    the deadline (found by an audit); the merged policy is still checked."""
    from relay_review.config import load_policy

    pinned = tmp_path / "pinned.toml"
    pinned.write_text("[serving]\ndeadline = 1200\n")
    policy = load_policy(pinned, text="[serving]\nattempt = 700\n")
    assert (policy.serving.attempt, policy.serving.deadline) == (700, 1200)
    pinned.write_text("[serving]\ndeadline = 500\n")
    with pytest.raises(UsageError, match=r"serving\.attempt = 700 is not allowed"):
        load_policy(pinned, text="[serving]\nattempt = 700\n")


def test_env_accounts_find_the_new_kinds_by_convention() -> None:
    env = {
        "GROQ_API_KEY": "g",
        "HF_TOKEN_TEAM": "h",
        "CLOUDFLARE_API_TOKEN": "c",
        "CLOUDFLARE_ACCOUNT_ID": "abc123",
        "CLOUDFLARE_API_TOKEN_WORK": "w",
    }
    accounts = {acc.name: acc for acc in env_accounts(env)}
    assert set(accounts) == {"groq", "huggingface_team", "cloudflare", "cloudflare_work"}
    assert accounts["groq"].base_url == "https://api.groq.com/openai/v1"
    assert accounts["groq"].pricing == "unknown"  # free only from evidence or a declaration
    assert accounts["huggingface_team"].api_key_env == "HF_TOKEN_TEAM"
    assert accounts["cloudflare"].base_url == (
        "https://api.cloudflare.com/client/v4/accounts/abc123/ai/v1"
    )
    assert accounts["cloudflare"].pricing == "listing"
    # no CLOUDFLARE_ACCOUNT_ID_WORK: the placeholder stays and discovery reports the variable
    assert "{account_id}" in accounts["cloudflare_work"].base_url


def test_policy_cloudflare_account_fills_its_id_from_the_environment() -> None:
    policy = parse_policy('[[accounts]]\nname = "cloudflare_ci"\nkind = "cloudflare"')
    [account] = resolve_accounts(policy, {"CLOUDFLARE_ACCOUNT_ID_CI": "f00d"})
    assert account.api_key_env == "CLOUDFLARE_API_TOKEN_CI"
    assert account.base_url == "https://api.cloudflare.com/client/v4/accounts/f00d/ai/v1"
