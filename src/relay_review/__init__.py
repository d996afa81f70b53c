"""relay-review: pull-request review over free or cheap LLM routes with bounded failover."""

__version__ = "0.1.0"
