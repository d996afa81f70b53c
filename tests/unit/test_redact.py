"""Secret scrubbing: whole values, values cut at a truncation point, and short placeholders."""

import base64
from urllib.parse import quote

import pytest

from relay_review.github.log import Secrets
from relay_review.redact import forms, redact, redact_data

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"


def test_whole_and_cut_keys_are_removed():
    assert redact(f"HTTP 401: bad key Bearer {KEY}", [KEY]) == "HTTP 401: bad key Bearer ***"
    cut = f"HTTP 401: invalid key: Bearer {KEY[:20]}…"
    assert KEY[:20] not in redact(cut, [KEY])
    assert redact(f"echo {KEY[:12]}...", [KEY]) == "echo ***..."
    assert redact(f"ends with {KEY[:15]}", [KEY]) == "ends with ***"


def test_a_key_prefix_in_the_middle_of_text_is_left_alone():
    text = "keys look like sk-or-v1-<hex>; see the docs"
    assert redact(text, [KEY]) == text


def test_surrounding_whitespace_of_a_pasted_key_does_not_defeat_redaction():
    assert redact(f"Bearer {KEY}", [KEY + "\n"]) == "Bearer ***"


def test_short_placeholders_are_not_scrubbed_everywhere(capsys):
    secrets = Secrets()
    secrets.add(["EMPTY", "x", KEY])
    out = capsys.readouterr().out
    assert "::add-mask::EMPTY" in out and f"::add-mask::{KEY}" in out  # still masked in the log
    marker = "<!-- relay-review:sticky -->"
    assert secrets.redact(f"{marker} EMPTY x {KEY}") == f"{marker} EMPTY x ***"
    assert secrets.redact_data({"decision": "x", "detail": [KEY]}) == {
        "decision": "x",
        "detail": ["***"],
    }


def test_redact_data_walks_nested_values_and_keys():
    data = {"a": [f"Bearer {KEY}", 3, {KEY: None}], "b": None}
    assert redact_data(data, [KEY]) == {"a": ["Bearer ***", 3, {"***": None}], "b": None}


def test_markdown_escaped_keys_are_removed():
    from relay_review.render import md_text

    key = "nvapi-Ab_cd*ef@gh_0123456789"
    assert "\\_" in md_text(key) and "\u200b" in md_text(key)  # what the comment would show
    assert redact(f"key {md_text(key)} here", [key]) == "key *** here"
    cut = md_text(f"Bearer {key}", limit=20)  # cut inside the key, then escaped
    assert cut.endswith("…") and "nvapi-Ab" in cut
    assert "nvapi-Ab" not in redact(cut, [key])
    assert redact(f"\\{key[:10]}...", [key]) == "***..."


def test_every_appearance_is_removed_and_near_misses_kept():
    text = f"{KEY} and {KEY[:10]}… and {KEY[:9]}X and {KEY}"
    assert redact(text, [KEY]) == f"*** and ***… and {KEY[:9]}X and ***"
    assert redact(KEY[:7] + "…", [KEY]) == KEY[:7] + "…"  # shorter than MIN_SECRET_CHARS


def test_a_key_with_a_backslash_is_still_found():
    key = "ab\\cdefgh-0123456789"
    assert redact(f"x {key} y", [key]) == "x *** y"
    assert redact(f"x {key[:9]}…", [key]) == "x ***…"


def test_a_false_start_overlapping_the_key_does_not_hide_it():
    # found by an audit: a non-overlapping search resumed past the real key's start
    assert redact("Bearer sk-sk-sk-sk-Q7v9Lm2Xp4", ["sk-sk-sk-Q7v9Lm2Xp4"]) == "Bearer sk-***"
    assert redact("see ababababababXYZ123456 end", ["abababXYZ123456"]) == "see ababab*** end"


#: A self-hosted token may hold any character; these are the ones percent-encoding changes.
TOKEN = "Sh3h+Tok/en=Fa6Gu1Ri8Dk5On2"


def _b64(data: bytes, urlsafe: bool) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize("before", [b"", b"u", b"us", b"relay:", b"user:"])
@pytest.mark.parametrize("after", [b"", b"!", b"\n\r"])
def test_a_key_echoed_in_base64_is_removed_at_every_alignment(urlsafe, before, after):
    # Authorization: Basic base64(user:key), as a proxy's error page may echo it back
    for key in (KEY, TOKEN):
        text = f"received Authorization: Basic {_b64(before + key.encode() + after, urlsafe)} ok"
        redacted = redact(text, [key])
        assert "***" in redacted and redacted.endswith(" ok")
        assert len(redacted) < len(text) - len(key)  # all but a character or three at its edges


def test_a_percent_encoded_key_is_removed_whole_and_cut_off():
    for encoded in (quote(TOKEN), quote(TOKEN, safe="")):
        assert encoded != TOKEN
        assert redact(f"GET /v1?key={encoded}&x=1", [TOKEN]) == "GET /v1?key=***&x=1"
    assert redact(f"echo {quote(TOKEN, safe='')[:14]}…", [TOKEN]) == "echo ***…"


def test_a_base64_key_cut_off_or_markdown_escaped_is_removed():
    key = "Zq8~w?Lm>Ty?Xp4~Rd?Kv9"  # "?" and "~" make "_" in URL-safe base64
    encoded = _b64(b"user:" + key.encode(), urlsafe=True)
    assert "_" in encoded[8:-4]  # Markdown escapes it: the escape is skipped while matching
    cut = f"Basic {encoded[:20]}…"
    assert encoded[8:20] not in redact(cut, [key])
    escaped = encoded.replace("_", "\\_")
    # "user:" is 5 bytes: the key starts 2 bytes into a 3-byte group, at the 8th character
    assert redact(f"Basic {escaped} ok", [key]) == f"Basic {encoded[:7]}*** ok"


def test_encodings_of_other_text_are_left_alone():
    other = "Ot4e+Tok/en=Zz9Yy8Xx7Ww6Vv5"
    basic = _b64(b"user:" + other.encode(), urlsafe=False)
    text = f"Basic {basic} and %2B%2F and {quote(other, safe='')}"
    assert redact(text, [KEY, TOKEN]) == text
    assert forms(KEY)[0] != KEY and KEY in forms(KEY)  # longest first, the key among them


def test_a_key_echoed_thousands_of_times_in_two_forms_is_removed_every_time():
    # rebuilt in one pass (bench/redact.py: a copy per echo made 40,000 echoes take 15 s)
    basic = _b64(b"user:" + KEY.encode(), urlsafe=False)
    echo = f"Bearer {KEY}, Basic {basic}; "
    redacted = redact(echo * 5000, [KEY])
    # 46 bytes: the key ends in a padded group; its mixed character and the padding ("g==") stay
    assert basic.endswith("g==")
    assert redacted == f"Bearer ***, Basic {basic[:7]}***g==; " * 5000
