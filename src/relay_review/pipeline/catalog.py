"""Discovery report -> catalog: the one function every caller builds its catalog with (the
action's catalog stage, the CLI's ``catalog``, ``preflight``, ``chat``, ``review`` and
``drill``). Its own light module so that ``relay-review catalog`` loads no HTTP client, store
or routing session (:mod:`.routes` holds those)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relay_review.config import CatalogPolicy, resolve_require_zdr
from relay_review.records import Catalog
from relay_review.routing.catalog import (
    CatalogInputError,
    build_catalog,
    parse_discovery,
    parse_zdr_feed,
)


def catalog_for(
    report: Any,
    section: CatalogPolicy | None = None,
    *,
    zdr_feed: Callable[[], Any] | None = None,
    require_zdr: bool | None = None,
    bad_feed: Callable[[Exception], None] | None = None,
) -> Catalog:
    """The catalog of a discovery report (its JSON, as ``discover`` writes it) under the
    policy's ``[catalog]`` ``section`` (built-in defaults when ``None``): the one way every
    caller builds it (the action, the CLI's commands, the drill).

    ``zdr_feed`` reads the ZDR feed's JSON, after the report was read. ``require_zdr``: the
    resolved setting; by default the section's, with ``auto`` as false (the command line knows
    no repository; the action resolves it from the repository's visibility). ``bad_feed`` takes
    an unusable feed's error (no route then counts as ZDR); without it the error is raised, as
    :class:`~relay_review.routing.catalog.CatalogInputError` is for an unreadable report."""
    c = section or CatalogPolicy()
    routes = parse_discovery(report)
    zdr_ids: list[str] | None = None
    if zdr_feed is not None:
        try:
            zdr_ids = parse_zdr_feed(zdr_feed())
        except (ValueError, CatalogInputError) as exc:
            if bad_feed is None:
                raise
            bad_feed(exc)
    if require_zdr is None:
        require_zdr = resolve_require_zdr(c.require_zdr, repo_private=False)
    return build_catalog(
        routes,
        zdr_ids,
        limit=c.limit,
        account_cap=c.account_cap,
        pool=c.pool,
        require_zdr=require_zdr,
    )
