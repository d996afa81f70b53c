"""A package's public names loaded from their modules on first use (PEP 562 ``__getattr__``), so
importing the package for one name does not import every module behind the others."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` for ``package``: ``name`` imported from ``homes[name]`` (a module
    path) the first time it is asked for, then kept in the package's globals."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
