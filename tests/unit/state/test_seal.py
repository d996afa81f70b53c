"""The state key's signatures (:mod:`relay_review.state.seal`): only the key's holder makes an
entry a shared store will use, and only for the key name it was made for."""

from __future__ import annotations

import json

import pytest

from relay_review.state.seal import MIN_KEY_CHARS, Seal, check_key

KEY = "a-state-key-of-thirty-two-chars!"
NAME = b"relay-review:m:chunk:" + b"f" * 32
BODY = json.dumps({"at": 1.0, "until": 2.0, "findings": []}, separators=(",", ":"))


def test_a_signed_entry_opens_to_its_own_bytes_and_stays_a_json_object() -> None:
    sealed = Seal(KEY).close(NAME.decode(), BODY)
    assert json.loads(sealed)["at"] == 1.0  # the store's scripts still read its time
    assert Seal(KEY).open(NAME, sealed.encode()) == BODY.encode()
    assert KEY not in sealed


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: s.replace('"findings":[]', '"findings":[{}]'), id="body changed"),
        pytest.param(lambda s: s.replace('"at":1.0', '"at":9.0'), id="time changed"),
        pytest.param(lambda s: '{"at":1.0,' + s[s.index('"until"') :], id="signature removed"),
        pytest.param(lambda s: s[:10] + ("0" if s[10] != "0" else "1") + s[11:], id="signature"),
        pytest.param(lambda s: s.upper(), id="upper-cased"),
        pytest.param(lambda s: " " + s, id="leading space"),
    ],
)
def test_a_changed_entry_does_not_open(change) -> None:  # type: ignore[no-untyped-def]
    sealed = Seal(KEY).close(NAME.decode(), BODY)
    assert Seal(KEY).open(NAME, change(sealed).encode()) is None


def test_an_entry_opens_only_under_its_own_name_and_key() -> None:
    sealed = Seal(KEY).close(NAME.decode(), BODY).encode()
    assert Seal(KEY).open(NAME[:-1] + b"e", sealed) is None  # copied under another key
    assert Seal(KEY + "x").open(NAME, sealed) is None  # another setup's key
    assert Seal(KEY).open(NAME, BODY.encode()) is None  # never signed


def test_only_a_non_empty_object_is_signed() -> None:
    for body in ("[]", "{}", "{ }", '"x"'):
        with pytest.raises(ValueError):
            Seal(KEY).close(NAME.decode(), body)


def test_a_short_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as caught:
        check_key(" s3cret-short ")
    assert "s3cret" not in str(caught.value) and f"at least {MIN_KEY_CHARS}" in str(caught.value)
    assert check_key(f"  {KEY}\n") == KEY
    # an environment value that is not UTF-8 (os.environ keeps its bytes as surrogates)
    with pytest.raises(ValueError, match="not UTF-8") as caught:
        check_key(b"\xff\xfe-not-text-0123456789".decode("utf-8", "surrogateescape"))
    assert "not-text" not in str(caught.value)
