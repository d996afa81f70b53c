"""A refused budget waits, never spins: ``relay-review review`` of six chunks over one route at
``rpm = 2`` (and with a second account that has budget), deadlines 8 s and 75 s.

Prints, per case, what the user feels: attempts in the report (and deferral notes), chat
requests the fleet received, chunks served per account, wall, CPU and bytes printed, and the
ratios to the deadline and to the 256 KB output bound. Before issue 19's fix the 75 s case made
761,113 "attempts", printed 485 MB and burned 70 s of CPU. Run: ``python bench/budget_spin.py
[--deadline 8 --deadline 75] [--no-spare]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from budget_wait import run_review  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, action="append")
    parser.add_argument("--no-spare", action="store_true", help="skip the two-account cases")
    args = parser.parse_args()
    deadlines = args.deadline or [8.0, 75.0]
    print(
        f"{'case':<24} {'exit':>4} {'attempts':>8} {'notes':>5} {'sent':>5} {'served':<18} "
        f"{'wall_s':>7} {'wall/dl':>7} {'cpu_s':>6} {'out_KB':>7} {'out/256KB':>9}"
    )
    for deadline in deadlines:
        for spare in (False,) if args.no_spare else (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                r = run_review(Path(tmp), deadline=deadline, spare=spare)
            case = f"{'solo+spare' if spare else 'solo'} deadline {deadline:g}s"
            served = ",".join(f"{k}={v}" for k, v in sorted(r.served_by().items())) or "-"
            kb = r.output_bytes / 1024
            print(
                f"{case:<24} {r.code:>4} {len(r.attempts):>8} {len(r.notes()):>5} "
                f"{sum(r.received.values()):>5} {served:<18} {r.wall_s:>7.2f} "
                f"{r.wall_s / deadline:>7.2f} {r.cpu_s:>6.2f} {kb:>7.1f} {kb / 256:>9.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
