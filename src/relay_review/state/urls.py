"""State URLs: which texts name a store, and why the others do not (without echoing them).

A state URL may hold a Redis password, so no message here quotes any part of it except a
scheme that is refused (``valkey://``: letters, digits and ``+.-`` only, never a password).

- ``none``, ``comment`` (the action only), ``file:PATH``;
- ``redis://`` and ``rediss://`` (exactly so, lower case) with a host, an optional port and
  database number, and only the query parameters ``prefix`` (matched literally; no braces: the
  store adds its own cluster hash tags), ``cluster`` (``true``: a Redis Cluster, without asking
  the server; ``false``: never) and, for ``rediss://``, ``ssl_cert_reqs`` (``none`` turns
  certificate checks off: allowed, warned) and ``ssl_ca_certs`` (a CA bundle's path);
- anything else that starts like a URL (``word://``) is refused, never taken for a path;
- every other text is a path.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

#: ``word://`` at the start: a URL, never a path.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
#: Characters a user or password must percent-encode in a URL's authority.
_UNSAFE = re.compile(r"[/?#@\[\]\s]|%(?![0-9A-Fa-f]{2})")
#: The query parameters a Redis state URL may carry.
QUERY = ("prefix", "cluster", "ssl_cert_reqs", "ssl_ca_certs")
#: ``cluster`` values.
CLUSTER = ("true", "false")
#: ``ssl_cert_reqs`` values (redis-py's); ``none`` is warned about.
CERT_REQS = ("none", "optional", "required")
REDIS_FORM = (
    "redis://[:PASSWORD@]HOST[:PORT][/DB][?prefix=P][&cluster=true] (rediss:// for TLS; "
    "USER:PASSWORD@ for an ACL user)"
)


def accepted(action: bool) -> str:
    """The forms a state URL may take, for every refusal."""
    first = "comment (memory in the sticky comment), " if action else ""
    return f"use {first}none, a path, file:PATH, or {REDIS_FORM}"


class StateUrlError(ValueError):
    """A state URL refused; the message never holds any part of it but a refused scheme."""


def check_state_url(text: str, *, action: bool = False) -> str:
    """``text`` as a store URL, or :class:`StateUrlError` saying why not and what is allowed
    (``comment`` only in the action)."""
    try:
        return _check(text.strip(), action)
    except StateUrlError as exc:
        raise StateUrlError(f"{exc}; {accepted(action)}") from None


def _check(url: str, action: bool) -> str:
    if url in ("none", "comment"):
        if url == "comment" and not action:
            raise StateUrlError("comment is only for the action")
        return url
    if url.startswith("file:"):
        return _check_path(url, url[len("file:") :], action)
    scheme = _SCHEME.match(url)
    if scheme is None:
        return _check_path(url, url, action)
    if scheme.group(1) not in ("redis", "rediss"):
        shown = scheme.group(1)[:20]
        raise StateUrlError(f"has an unknown scheme `{shown}://`")
    _check_redis_url(url, action)
    return url


def _check_path(url: str, path: str, action: bool) -> str:
    if not path or not path.isprintable() or len(path) > 1024:
        raise StateUrlError("is not allowed as a path")
    return url


def _check_redis_url(url: str, action: bool) -> None:
    """A ``redis://``/``rediss://`` URL redis-py reads as meant: one printable line, a user
    and password percent-encoded, a host, a port and a database number, known parameters."""
    if not url.isprintable() or len(url) > 2048:
        raise StateUrlError("is not allowed (not one printable line)")
    rest = url.split("://", 1)[1]
    user, at, _ = rest.rpartition("@")
    if (at and _UNSAFE.search(user)) or (not at and "#" in rest):
        raise StateUrlError(
            "has characters that must be percent-encoded in its password (or user, or prefix): "
            "# @ / ? [ ] % and spaces; encode them (Python: urllib.parse.quote(password, "
            "safe='')) and set the URL again"
        )
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise StateUrlError("has a port that is not a number up to 65535") from None
    if not host:
        raise StateUrlError("names no host")
    if port == 0:
        raise StateUrlError("has a port that is not a number up to 65535")
    if parts.path not in ("", "/") and not re.fullmatch(r"/[0-9]{1,5}", parts.path):
        raise StateUrlError("has a database that is not a number")
    query = query_pairs(parts.query)
    names = [name for name, _ in query]
    if any(name not in QUERY for name in names) or len(set(names)) != len(names):
        raise StateUrlError(
            "has a query parameter that is not allowed (or given twice); use only ?prefix=P, "
            "?cluster=true|false and, for rediss://, ?ssl_cert_reqs=none|optional|required "
            "and ?ssl_ca_certs=PATH"
        )
    values = dict(query)
    reqs = values.get("ssl_cert_reqs")
    if reqs is not None and (parts.scheme != "rediss" or reqs not in CERT_REQS):
        raise StateUrlError(
            "has ssl_cert_reqs that is not allowed; it is for rediss:// only, one of "
            + ", ".join(CERT_REQS)
        )
    ca = values.get("ssl_ca_certs")
    if ca is not None and (
        parts.scheme != "rediss" or not ca or not ca.isprintable() or len(ca) > 1024
    ):
        raise StateUrlError(
            "has ssl_ca_certs that is not allowed; it is for rediss:// only: the path of a CA "
            "bundle (PEM) to verify the server's certificate with"
        )
    prefix = values.get("prefix")
    if prefix is not None and (not prefix or not prefix.isprintable() or len(prefix) > 200):
        raise StateUrlError("has a prefix that is not 1 to 200 printable characters")
    if prefix is not None and ("{" in prefix or "}" in prefix):
        raise StateUrlError(
            "has a prefix with { or }; the store adds its own Redis Cluster hash tags"
        )
    cluster = values.get("cluster")
    if cluster is not None and cluster not in CLUSTER:
        raise StateUrlError("has cluster that is not allowed; use ?cluster=true or false")
    if cluster == "true" and parts.path not in ("", "/", "/0"):
        raise StateUrlError("names a database other than 0; a Redis Cluster has database 0 only")


def query_pairs(query: str) -> list[tuple[str, str]]:
    """A state URL's query as ``(name, value)`` pairs, each value percent-decoded (as redis-py
    decodes it: ``%6eone`` is ``none``); raises :class:`StateUrlError` when it is not
    name=value pairs."""
    pairs = [item.partition("=") for item in query.split("&") if item]
    if any(not sep for _, sep, _ in pairs):
        raise StateUrlError("has a query that is not name=value pairs")
    return [(name, unquote(value)) for name, _, value in pairs]


def checks_off(url: str) -> bool:
    """Whether a (checked) state URL turns certificate checks off (``ssl_cert_reqs=none``)."""
    if not url.startswith("rediss://"):
        return False
    return dict(query_pairs(urlsplit(url).query)).get("ssl_cert_reqs") == "none"


def url_secrets(text: str) -> list[str]:
    """Whatever in a ``redis://``/``rediss://`` text may be its password, as written and
    decoded (to mask like a key), even when the URL is refused: the part after ``user:``, or a
    lone ``word@`` (a password written without its colon); [] for other texts."""
    url = text.strip()
    scheme = _SCHEME.match(url)
    if scheme is None or scheme.group(1).lower() not in ("redis", "rediss"):
        return []
    user, at, _ = url[scheme.end() :].rpartition("@")
    name, colon, password = user.partition(":")
    if at and not colon:  # ``redis://word@host``: redis-py's user name, often a password meant
        password = name
    password = password if at else ""
    return list(dict.fromkeys(p for p in (password, unquote(password)) if p))
