"""Imports point one way: schema ← load ← analyze ← diagnose ← chart ← views ← report ← cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "toolkit"
ORDER = [
    "errors",
    "schema",
    "load",
    "analyze",
    "diagnose",
    "chart",
    "views",
    "widgets",
    "report",
    "cli",
]


# Modules named by prefix belong to a layer: the report's building blocks (report_views,
# report_redact...) sit under both widgets and report; commands_* bodies are the CLI's.
PREFIXES = {"report_": "views", "commands_": "cli"}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "toolkit" or len(parts) < 2:
        return None
    name = next((layer for p, layer in PREFIXES.items() if parts[1].startswith(p)), parts[1])
    return ORDER.index(name) if name in ORDER else None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return found


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    own = _layer("toolkit." + ".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own is None:
        return
    for module in _imports(path):
        other = _layer(module)
        assert other is None or other <= own, f"{path.name} (layer {ORDER[own]}) imports {module}"
