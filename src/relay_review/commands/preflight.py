"""``relay-review preflight``: probe catalog routes and classify each one."""

from __future__ import annotations

import argparse
import json
import os

from relay_review import pipeline
from relay_review.commands.common import (
    add_catalog_args,
    add_serving_args,
    catalog_from_args,
    policy_from_args,
)
from relay_review.render import readiness_table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preflight",
        help="probe catalog routes cheaply: ready / deferred / rejected / timeout / unprobed",
        description="Build the catalog, then probe up to --probe-budget routes concurrently "
        "(at most 16 output tokens each) and classify every route.",
    )
    add_catalog_args(p)
    add_serving_args(p, serving=False)
    p.add_argument("--format", choices=("json", "table"), default="json")


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    catalog = catalog_from_args(args, policy)
    report = pipeline.run_sync(pipeline.preflight(catalog, policy, os.environ))
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(readiness_table(report["catalog"]["selected"], report["readiness"], None))
        print(f"\n{report['probes_sent']} probes sent in {report['elapsed_s']:.2f}s")
    return 0
