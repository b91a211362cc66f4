"""Scenario generator: complete SGLang run directories with known, injected causes.

Each scenario is a model, a machine, a launch and a benchmark sweep whose costs follow from the
small arithmetic machine in ``machine`` (read its docstring); ``family`` holds one function per
scenario, whose docstring derives the injected cost by hand. ``build`` writes a run directory:
``server.log`` (one per node), ``bench.jsonl``, ``gpu.csv``, ``run.toml`` and
``expected.json`` (what is injected, what it costs, and the numbers per phase).

Nothing here imports ``toolkit``: these runs test ppscope's diagnosis from the outside.

Usage::

    from helpers.scenarios import build, build_all, names

    build("pp8-packed", tmp_path / "pp8-packed")
    dirs = build_all(tmp_path)  # name → run directory
    build_variant("pp8-packed", "docker", tmp_path / "pp8-packed+docker")

``variations`` holds the ways the same run may have been recorded (wrappers, timestamps,
benchmark shapes, GPU trace shapes, missing files, noise): the same causes, other evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.scenarios.family import SCENARIOS
from helpers.scenarios.spec import Scenario
from helpers.scenarios.variations import VARIATIONS, Variation, vary
from helpers.scenarios.writer import expected_record, write_run

__all__ = [
    "SCENARIOS",
    "VARIATIONS",
    "Scenario",
    "Variation",
    "build",
    "build_all",
    "build_variant",
    "expected",
    "names",
    "scenario",
    "variant",
]


def names() -> list[str]:
    """The scenario names, in a stable order."""
    return list(SCENARIOS)


def scenario(name: str) -> Scenario:
    """The spec of scenario ``name``."""
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise KeyError(f"no scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


def expected(name: str) -> dict[str, Any]:
    """What ``expected.json`` says, without writing the run (no per-phase timeline numbers)."""
    return expected_record(scenario(name))


def build(name: str, directory: str | Path) -> Path:
    """Write the run directory of scenario ``name`` into ``directory``; returns it."""
    return write_run(scenario(name), directory)


def build_all(directory: str | Path) -> dict[str, Path]:
    """Write every scenario into ``directory/<name>``; returns name → run directory."""
    root = Path(directory)
    return {name: build(name, root / name) for name in SCENARIOS}


def variant(name: str, variation: str) -> Scenario:
    """The spec of scenario ``name`` recorded as ``variation`` says (``VARIATIONS``)."""
    try:
        v = VARIATIONS[variation]
    except KeyError:
        raise KeyError(f"no variation {variation!r}; known: {', '.join(VARIATIONS)}") from None
    return vary(scenario(name), v)


def build_variant(name: str, variation: str, directory: str | Path) -> Path:
    """Write scenario ``name`` recorded as ``variation`` into ``directory``; returns it."""
    return write_run(variant(name, variation), directory)
