"""A package's lazy public names: loaded from their module on first use, kept after, and an
unknown name is an AttributeError (so ``hasattr`` and ``from x import y`` behave)."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

import relay_review
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


def _lazy_packages() -> list[str]:
    """Every package of ours whose public names are lazy (its ``__init__`` calls lazy_names)."""
    src = Path(relay_review.__file__).parent
    return sorted(
        ".".join(("relay_review", *init.parent.relative_to(src).parts))
        for init in src.rglob("__init__.py")
        if "lazy_names(" in init.read_text(encoding="utf-8")
    )


@pytest.mark.parametrize("name", _lazy_packages())
def test_a_lazy_package_s_table_matches_its_typed_imports_and_every_name_loads(name: str) -> None:
    """The table (``_HOME``), the imports type checkers read (``if TYPE_CHECKING:``) and
    ``__all__`` name the same things from the same modules, and each name loads: a name moved
    to another module with the table left behind fails here, not in a run."""
    package = importlib.import_module(name)
    tree = ast.parse(Path(package.__file__ or "").read_text(encoding="utf-8"))
    typed = {
        alias.asname or alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in ast.walk(block)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == package._HOME
    assert set(package.__all__) == set(package._HOME)
    for public, home in package._HOME.items():
        assert getattr(package, public) is getattr(importlib.import_module(home), public)
