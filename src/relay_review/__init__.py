"""relay-review: pull-request review over free or cheap LLM routes with bounded failover."""

import sys

__version__ = "0.1.0"

# httpx's package imports its command-line client (``httpx._main``: click, rich and pygments,
# some 80 modules and 40 ms of start-up) whenever those happen to be installed, as rich is in
# the development environment (import-linter needs it) and not in the action's image.
# relay-review never runs that client: marked absent before httpx loads, httpx defines its stub
# ``httpx.main`` instead, as it does in the image (bench/startup.py).
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not there"
