"""Imports point one way: schema ← load ← analyze ← run_analysis ← diagnose ← chart ← report ← cli.

Every module of every package is read with ``ast`` and every import form counts: ``import a.b``,
``from a import b``, ``from a.b import c``, relative imports, and imports inside functions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO / "toolkit"

# Bottom first. A module may import from its own layer and the layers before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_version", "errors"),
    ("schema",),
    ("load",),
    ("capture",),  # records run directories from a live server; loads only what it wrote
    ("analyze",),
    ("synth",),  # writes sample runs with the serving model; only demos and tests read it
    ("run_analysis",),
    ("diagnose",),
    ("export",),  # Perfetto traces of the stage timeline
    ("chart",),
    ("report",),
    ("cli",),
)
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
FACADE = "toolkit"  # the package root: imported by users, never by the package itself


def top_package(module: str) -> str | None:
    """``toolkit.load.sglang.log`` → ``load``; the root itself → ``toolkit``; others None."""
    parts = module.split(".")
    if parts[0] != "toolkit":
        return None
    return parts[1] if len(parts) > 1 else FACADE


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, ``from x import y`` as ``x.y``."""
    tree = ast.parse(source if source is not None else path.read_text())
    package = "toolkit." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] + ".__init__"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: -node.level]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(node.lineno, f"{base}.{a.name}" if base else a.name) for a in node.names]
    return found


def violations(path: Path, source: str | None = None) -> list[str]:
    """Imports of ``path`` that point upward (or at the facade)."""
    own = top_package("toolkit." + ".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own == "__init__" or path == ROOT / "__init__.py":
        return []  # the facade may import everything
    bad = []
    for lineno, module in imported_modules(path, source):
        other = top_package(module)
        if other is None or (other == "_version" and own == "_version"):
            continue
        if other == FACADE:
            bad.append(f"{path.relative_to(ROOT)}:{lineno} imports the package root ({module})")
        elif other not in RANK:
            bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}: no layer placed")
        elif own in RANK and RANK[other] > RANK[own]:
            bad.append(f"{path.relative_to(ROOT)}:{lineno} ({own}) imports {module} ({other})")
    return bad


MODULES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    assert violations(path) == []


def test_every_package_has_a_layer() -> None:
    tops = {p.relative_to(ROOT).parts[0].removesuffix(".py") for p in MODULES}
    assert tops - {"__init__"} <= set(RANK), f"place these in LAYERS: {tops - set(RANK)}"


def test_the_top_level_holds_only_the_facade_and_packages() -> None:
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "_version.py", "errors.py", "run_analysis.py"]


@pytest.mark.parametrize(
    "planted",
    [
        "from toolkit.report.view import View",
        "import toolkit.cli.main",
        "from toolkit import diagnose",
        "from toolkit.chart import theme",
        "def f():\n    from ...diagnose import finding\n",
        "from toolkit import load_run",
    ],
)
def test_an_upward_import_is_caught(planted: str) -> None:
    loader = ROOT / "load" / "sglang" / "log.py"
    assert violations(loader, planted), planted


def test_downward_and_relative_imports_pass() -> None:
    path = ROOT / "report" / "view.py"
    fine = "from toolkit.analyze.stages import stage_timeline\nfrom . import redact\n"
    assert violations(path, fine) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_500_lines(path: Path) -> None:
    lines = path.read_text().count("\n")
    assert lines <= 520, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pointer_outside_the_repository(path: Path) -> None:
    """Docstrings state facts where they are used; they never send the reader elsewhere."""
    text = path.read_text()
    for pattern in (r"shared/", r"\bformats/", r"\.md\b", "§"):
        assert not re.search(pattern, text), f"{path.relative_to(ROOT)} mentions {pattern!r}"
