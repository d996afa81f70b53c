"""A package's lazy public names: loaded from their module on first use, kept after, and an
unknown name is an AttributeError (so ``hasattr`` and ``from x import y`` behave)."""

from __future__ import annotations

import sys
import types

import pytest

from relay_review._lazy import lazy_names


def test_a_name_loads_from_its_home_once_and_an_unknown_one_is_an_attribute_error() -> None:
    package = types.ModuleType("lazy_pkg_for_test")
    package.__getattr__ = lazy_names(package.__name__, {"dumps": "json"})  # type: ignore[method-assign]
    sys.modules[package.__name__] = package
    try:
        assert "dumps" not in vars(package)
        import json

        assert package.dumps is json.dumps
        assert vars(package)["dumps"] is json.dumps  # kept: the next lookup is a plain one
        assert not hasattr(package, "loads")
        with pytest.raises(AttributeError, match=r"lazy_pkg_for_test.*loads"):
            _ = package.loads
    finally:
        del sys.modules[package.__name__]
