"""The drill: a local fleet of scripted faults, the scenarios run against it, and their report.

Modules, one job each:

- :mod:`~relay_review.drill.script`: the behaviour scheme a fleet model id is written in.
- :mod:`~relay_review.drill.fleet`: the fault fleet, a local OpenAI-compatible server
  (``_exchange`` plays one behaviour, ``_wire`` speaks HTTP/1.1); ``python -m relay_review.drill``
  serves one in its own process.
- :mod:`~relay_review.drill.scenarios`: chat scenarios (a catalog over a fleet, preflight and
  failover run against it, measured against the healthy route's direct latency).
- :mod:`~relay_review.drill.review`: the review drill (a bundled sample diff reviewed through a
  fleet of honest, lying and broken reviewers).
- :mod:`~relay_review.drill.report`: the ``drill`` command's report for people.

This package exposes the fleet alone, so tests that only need a fault server import no pipeline.
"""

from relay_review.drill.fleet import Account, FaultFleet, RecordedRequest, load_config
from relay_review.drill.script import KINDS, Behaviour, parse_script

__all__ = [
    "KINDS",
    "Account",
    "Behaviour",
    "FaultFleet",
    "RecordedRequest",
    "load_config",
    "parse_script",
]
