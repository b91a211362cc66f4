"""The load and schema layers stay at the bottom, small, and self-explaining.

Every import in every form (module level or inside a function, ``import`` or ``from``) of a
module under ``toolkit/load`` or ``toolkit/schema`` points at its own layer or below; no module
grows past ~500 lines; no comment or docstring sends the reader to a file outside the
repository.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "toolkit"
MODULES = sorted([*(ROOT / "load").rglob("*.py"), *(ROOT / "schema").rglob("*.py")])
ALLOWED = {
    "load": ("toolkit.load", "toolkit.schema", "toolkit.errors", "toolkit._version"),
    "schema": ("toolkit.schema", "toolkit.errors"),
}
MAX_LINES = 500


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return found


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_imports_stay_in_the_layer_or_below(path: Path) -> None:
    layer = path.relative_to(ROOT).parts[0]
    for module in _imports(path):
        assert not module.startswith("."), f"{_id(path)}: relative import {module}"
        if module == "toolkit" or module.startswith("toolkit."):
            ok = any(module == a or module.startswith(a + ".") for a in ALLOWED[layer])
            assert ok, f"{_id(path)} imports {module}"


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{_id(path)}: {lines} lines; split it by job"


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_no_pointer_outside_the_repository(path: Path) -> None:
    text = path.read_text()
    for pattern in (r"shared/", r"\bformats/", r"\.md\b", "§"):
        assert not re.search(pattern, text), f"{_id(path)} mentions {pattern!r}"
