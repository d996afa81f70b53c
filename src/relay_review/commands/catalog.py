"""``relay-review catalog``: select and rank routes from a discovery report."""

from __future__ import annotations

import argparse
import json

from relay_review.commands.common import add_catalog_args, add_format_arg, catalog_from_args
from relay_review.render import catalog_table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "catalog",
        help="select routes round-robin across accounts (free before priced, ZDR first)",
        description="Build the bounded route catalog from a discovery report.",
    )
    add_catalog_args(p)
    add_format_arg(p, ("json", "text"))


def run(args: argparse.Namespace) -> int:
    catalog = catalog_from_args(args)
    if args.format == "json":
        print(json.dumps(catalog.to_json(), indent=2))
    else:
        print(catalog_table(catalog))
    return 0
