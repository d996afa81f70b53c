"""Records cross stage boundaries as records (issue 21): no ``**x.model_dump()`` copy from one
record into another anywhere in ``src/``, and no ``dict[str, Any]`` (or ``Mapping[str, Any]``)
in the signature of a stage (the pipeline's flows, preflight, the chat call's result, the
renderings, the drill's report). JSON is made at the edges only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "relay_review"
#: A record dumped and splatted into another (``Model(**x.model_dump())``, ``{**x.model_dump()}``).
SPLAT_DUMP = re.compile(r"\*\*\s*[\w.\[\]()]+\.model_dump\(")
#: Modules whose functions are stages: their parameters and returns are records.
STAGES = [
    *sorted((SRC / "pipeline").glob("*.py")),
    SRC / "routing" / "preflight.py",
    *sorted(SRC.glob("providers/chat*.py")),
    *sorted(SRC.glob("providers/chat/*.py")),
    *sorted((SRC / "render").glob("*.py")),
    SRC / "drill" / "report.py",
]


def test_no_record_is_copied_through_a_dict() -> None:
    hits = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SPLAT_DUMP.search(line)
    ]
    assert hits == []


def _loose(annotation: ast.expr | None) -> bool:
    text = "" if annotation is None else ast.unparse(annotation)
    return "dict[str, Any]" in text or "Mapping[str, Any]" in text


def stage_signatures_with_loose_dicts(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # a stage's entry points: its module's public functions
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name.startswith("_"):
                continue  # a module's own helper: no stage boundary
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            loose = [a.arg for a in args if _loose(a.annotation)]
            if _loose(node.returns):
                loose.append("return")
            if loose:
                out.append(f"{path.name}:{node.lineno} {node.name}: {loose}")
    return out


def test_stages_take_and_return_records() -> None:
    assert all(p.exists() for p in STAGES)
    assert stage_signatures_with_loose_dicts(STAGES) == []


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import Any\n"
        "async def preflight(x: int) -> dict[str, Any]: ...\n"
        "def serve(body: dict[str, Any]) -> None: ...\n"
        "def comment(report: RunReport | Mapping[str, Any]) -> str: ...\n"
        "def _own(body: dict[str, Any]) -> None: ...\n"
        "copy = Report(**row.model_dump())\n",
        encoding="utf-8",
    )
    found = stage_signatures_with_loose_dicts([bad])
    assert [f.split(" ", 1)[1] for f in found] == [
        "preflight: ['return']",
        "serve: ['body']",
        "comment: ['report']",
    ]
    assert SPLAT_DUMP.search(bad.read_text(encoding="utf-8").splitlines()[-1])
