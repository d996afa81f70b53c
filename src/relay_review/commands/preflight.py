"""``relay-review preflight``: probe catalog routes and classify each one.

Exit codes: 0 when at least one route is ready, 1 when none is (the report is still printed;
also when no selected route has its key), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from relay_review import pipeline
from relay_review.commands.common import (
    add_catalog_args,
    add_format_arg,
    add_serving_args,
    add_state_arg,
    catalog_from_args,
    missing_keys_line,
    policy_from_args,
    store_from_args,
)
from relay_review.records import Readiness


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preflight",
        help="probe catalog routes cheaply: ready / deferred / rejected / timeout / unprobed",
        description="Build the catalog, then probe up to --probe-budget routes concurrently "
        "(at most 16 output tokens each) and classify every route. Exit 0 when a route is "
        "ready, 1 when none is (the report is still printed), 2 on bad input.",
    )
    add_catalog_args(p)
    add_serving_args(p, serving=False)
    add_format_arg(p, ("json", "text"))
    add_state_arg(p)


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    catalog = catalog_from_args(args, policy)
    report = pipeline.run_sync(
        pipeline.preflight(
            catalog, policy, os.environ, store=store_from_args(args, os.environ, policy)
        )
    )
    # loaded after the probes: the renderer is no part of the path to the first request
    from relay_review.render import plural, readiness_table

    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(readiness_table(report.catalog.selected, report.readiness, None))
        sent = plural(report.probes_sent, "probe")
        print(f"\n{sent} sent in {report.elapsed_s:.1f}s")
    ready = sum(1 for r in report.readiness if r.status is Readiness.READY)
    if not ready:
        why = missing_keys_line(catalog, os.environ)
        why = why or f"no route is ready ({plural(len(report.readiness), 'selected route')})"
        print(f"relay-review preflight: {why}", file=sys.stderr)
        return 1
    return 0
