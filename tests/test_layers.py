"""Imports follow one table: each package names the packages and confined libraries it may use.

Every module of every package is read with ``ast`` and every import form counts: ``import a.b``,
``from a import b``, ``from a.b import c``, relative imports, imports inside functions, and
literal string imports (``importlib.import_module``, ``__import__``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO / "toolkit"

# Package -> the packages it may import (besides itself). The table is the architecture: a
# package appears only after everything it may import, so the table reads bottom first.
ALLOWED: dict[str, frozenset[str]] = {
    "_version": frozenset(),
    "errors": frozenset(),
    "schema": frozenset({"errors"}),
    "load": frozenset({"_version", "errors", "schema"}),
    # records run directories from a live server; loads only what it wrote
    "capture": frozenset({"_version", "errors", "schema", "load"}),
    "analyze": frozenset({"errors", "schema", "load"}),
    # writes sample runs with the serving model; only demos and tests read it
    "synth": frozenset({"_version", "errors", "schema", "load", "analyze"}),
    "run_analysis": frozenset({"errors", "schema", "load", "analyze"}),
    "diagnose": frozenset({"errors", "schema", "load", "analyze", "run_analysis"}),
    # Perfetto traces of the stage timeline and of the stages' profiler traces
    "export": frozenset({"errors", "schema", "load", "analyze", "run_analysis"}),
    "chart": frozenset({"errors", "schema"}),  # draws frames it is given; computes nothing
    "report": frozenset(
        {"_version", "errors", "schema", "load", "analyze", "synth", "run_analysis"}
        | {"diagnose", "export", "chart"}
    ),
    "cli": frozenset(
        {"_version", "errors", "schema", "load", "capture", "analyze", "synth"}
        | {"run_analysis", "diagnose", "export", "chart", "report"}
    ),
}
FACADE = "toolkit"  # the package root: imported by users, never by the package itself

# Third-party libraries that only some places may import (a library absent here is free to use).
# Keys are top-level import names; values are package paths (``load/gpu``) or module paths.
CONFINED: dict[str, tuple[str, ...]] = {
    "altair": ("chart", "report"),
    "vl_convert": ("report",),
    "ipywidgets": ("report",),
    "IPython": ("report",),
    "papermill": ("report",),
    "nbformat": ("report",),
    "nbclient": ("report",),
    "nbconvert": ("report",),
    "tqdm": ("report",),
    "dask": ("cli", "load/sglang/dataset.py"),
    # the compiled passes: one switch turns them off, so nothing else may depend on numba
    "numba": ("load/compiled",),
}


def top_package(module: str) -> str | None:
    """``toolkit.load.sglang.log`` → ``load``; the root itself → ``toolkit``; others None."""
    parts = module.split(".")
    if parts[0] != "toolkit":
        return None
    return parts[1] if len(parts) > 1 else FACADE


def _string_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module(...)`` or ``__import__(...)``, if literal.

    An f-string counts by its literal prefix: ``f"toolkit.cli.{name}"`` names ``toolkit.cli``.
    """
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".") or None
    return None


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
        elif isinstance(node, ast.Call) and (module := _string_import(node)):
            found.append((node.lineno, module))
    return found


def _confined_here(library: str, where: str) -> bool:
    """Whether ``where`` (``load/compiled/smi_rows.py``) may import the confined ``library``."""
    return any(where == place or where.startswith(place + "/") for place in CONFINED[library])


def violations(path: Path, source: str | None = None) -> list[str]:
    """Imports of ``path`` that the ALLOWED and CONFINED tables do not permit."""
    rel = path.relative_to(ROOT)
    if rel == Path("__init__.py"):
        return []  # the facade may import everything
    own = rel.parts[0].removesuffix(".py")
    bad = []
    for lineno, module in imported_modules(path, source):
        other = top_package(module)
        where = f"{rel}:{lineno}"
        if other is None:
            library = module.split(".")[0]
            if library in CONFINED and not _confined_here(library, rel.as_posix()):
                bad.append(f"{where} imports {library}, allowed only in {CONFINED[library]}")
        elif other == FACADE:
            bad.append(f"{where} imports the package root ({module})")
        elif other not in ALLOWED:
            bad.append(f"{where} imports {module}: no entry in ALLOWED")
        elif other != own and other not in ALLOWED.get(own, frozenset()):
            bad.append(f"{where} ({own}) may not import {module} ({other})")
    return bad


MODULES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    assert violations(path) == []


def test_every_package_has_an_entry() -> None:
    tops = {p.relative_to(ROOT).parts[0].removesuffix(".py") for p in MODULES}
    assert tops - {"__init__"} <= set(ALLOWED), f"add to ALLOWED: {tops - set(ALLOWED)}"


def test_the_table_reads_bottom_first_so_it_has_no_cycle() -> None:
    seen: set[str] = set()
    for package, allowed in ALLOWED.items():
        assert allowed <= seen, f"{package} may import {sorted(allowed - seen)}, listed later"
        seen.add(package)


def test_every_confined_place_exists() -> None:
    for library, places in CONFINED.items():
        for place in places:
            assert (ROOT / place).exists(), f"{library}: {place} does not exist"


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
        "import importlib\nimportlib.import_module('toolkit.report.render')\n",
        "import importlib\nimportlib.import_module(f'toolkit.cli.{name}')\n",
        "__import__('toolkit.diagnose.finding')\n",
        "import altair\n",
        "from papermill import execute_notebook\n",
    ],
)
def test_an_upward_import_is_caught(planted: str) -> None:
    loader = ROOT / "load" / "sglang" / "log.py"
    assert violations(loader, planted), planted


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        (("chart", "scaling.py"), "from toolkit.analyze.scaling import scaling_table\n"),
        (("chart", "scaling.py"), "from toolkit.load.run import load_run\n"),
        (("export", "perfetto.py"), "from toolkit.diagnose.finding import Finding\n"),
        (("capture", "session.py"), "from toolkit.analyze.phases import phases\n"),
        (("analyze", "stages.py"), "import altair as alt\n"),
        (("load", "run.py"), "from numba import njit\n"),
        (("diagnose", "finding.py"), "import dask\n"),
    ],
)
def test_a_sideways_or_confined_import_is_caught(module: tuple[str, str], planted: str) -> None:
    assert violations(ROOT.joinpath(*module), planted), planted


def test_downward_and_relative_imports_pass() -> None:
    path = ROOT / "report" / "view.py"
    fine = "from toolkit.analyze.stages import stage_timeline\nfrom . import redact\n"
    assert violations(path, fine) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_500_lines(path: Path) -> None:
    lines = path.read_text().count("\n")
    assert lines <= 500, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pointer_outside_the_repository(path: Path) -> None:
    """Docstrings state facts where they are used; they never send the reader elsewhere."""
    text = path.read_text()
    for pattern in (r"shared/", r"\bformats/", r"\.md\b", "§"):
        assert not re.search(pattern, text), f"{path.relative_to(ROOT)} mentions {pattern!r}"
