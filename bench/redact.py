"""Redaction of a reply that echoes a key many times: one ``redact`` call over a text holding
``n`` echoes of the key (whole, and in base64 as a ``Basic`` credential; 120 characters each),
at n = 1,000, 10,000 and 40,000 (4.8 MB; the chat call keeps at most 2 MB of a reply, but the
report, the log and the comment each pass their text through ``redact``).

Prints the seconds per call and the ratio of each n's time to the previous n's beside the ratio
of their sizes (linear: the same). Before the one-pass rebuild, which copied the text once per
echo, it was quadratic: 1.02 s at 10,000 echoes and 15.1 s at 40,000 (2026-12-04); after it,
0.16 s and 0.63 s. Run: ``python bench/redact.py``.
"""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from relay_review.redact import redact

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"
ECHO = f"Bearer {KEY} Basic {base64.b64encode(f'user:{KEY}'.encode()).decode()} "


def seconds_for(n: int, runs: int = 3) -> float:
    """The fastest of ``runs`` calls over ``n`` echoes (checked: every echo removed)."""
    text = ECHO * n
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        out = redact(text, [KEY])
        best = min(best, time.perf_counter() - start)
    assert KEY not in out and out.count("***") == 2 * n
    return best


def main() -> None:
    print(f"{'echoes':>7} {'MB':>5} {'s/call':>7} {'x prev':>6} {'size x':>6}")
    previous: tuple[int, float] | None = None
    for n in (1_000, 10_000, 40_000):
        s = seconds_for(n)
        ratio = (
            f"{s / previous[1]:6.1f} {n / previous[0]:6.1f}" if previous else f"{'-':>6} {'-':>6}"
        )
        print(f"{n:>7} {n * len(ECHO) / 1e6:5.2f} {s:7.3f} {ratio}")
        previous = (n, s)


if __name__ == "__main__":
    main()
