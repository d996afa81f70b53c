"""Routes -> catalog: the one function every caller builds its catalog with (the action's
catalog stage, the CLI's ``catalog``, ``preflight``, ``chat``, ``review`` and ``drill``). The
action hands it discovery's :class:`~relay_review.records.Route` records as they are; a
discovery report file is read into them at the command line's edge (:func:`parse_discovery`).
Its own light module so that ``relay-review catalog`` loads no HTTP client, store or routing
session (:mod:`.routes` holds those)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from relay_review.config import CatalogPolicy, resolve_require_zdr
from relay_review.records import Catalog, Route
from relay_review.routing.catalog import (
    CatalogInputError,
    build_catalog,
    parse_discovery,
    parse_zdr_feed,
)

__all__ = ["CatalogInputError", "catalog_for", "parse_discovery"]


def catalog_for(
    routes: Sequence[Route],
    section: CatalogPolicy | None = None,
    *,
    zdr_feed: Callable[[], Any] | None = None,
    require_zdr: bool | None = None,
    bad_feed: Callable[[Exception], None] | None = None,
) -> Catalog:
    """The catalog of discovered ``routes`` under the policy's ``[catalog]`` ``section``
    (built-in defaults when ``None``): the one way every caller builds it (the action, the
    CLI's commands, the drill).

    ``zdr_feed`` reads the ZDR feed's JSON. ``require_zdr``: the
    resolved setting; by default the section's, with ``auto`` as false (the command line knows
    no repository; the action resolves it from the repository's visibility). ``bad_feed`` takes
    an unusable feed's error (no route then counts as ZDR); without it the error is raised, as
    :class:`~relay_review.routing.catalog.CatalogInputError` (a usage error)."""
    c = section or CatalogPolicy()
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
