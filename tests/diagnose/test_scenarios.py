"""ppscope's diagnosis on runs it did not write: the independent scenario family.

Each scenario (``helpers.scenarios``, which imports nothing from ``toolkit``) is a complete run
directory with a known, injected cause whose cost its docstring derives by hand, or a healthy
run. Every injected cause must come out ``high``; a healthy run must get no ``high``; no other
``high`` may appear beyond what the scenario lists as true but not injected (``incidental``).
The impacts are the scenario's own arithmetic, not ppscope's: the diagnosis must land near them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.scenarios import build, names

from toolkit.diagnose import Finding, diagnose
from toolkit.run_analysis import RunAnalysis

IMPACT_SLACK = 0.15
"""How far a measured or modelled impact may sit from the scenario's derivation (absolute)."""


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], list]]:
    """name → (expected.json, findings) for every scenario, built and diagnosed once."""
    root = tmp_path_factory.mktemp("scenario-runs")
    out = {}
    for name in names():
        directory = build(name, root / name)
        expected = json.loads((directory / "expected.json").read_text(encoding="utf-8"))
        out[name] = (expected, diagnose([RunAnalysis(Path(directory))]))
    return out


def _by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


@pytest.mark.parametrize("name", names())
def test_every_injected_cause_comes_out_high(diagnosed: dict, name: str) -> None:
    expected, findings = diagnosed[name]
    found = _by_id(findings)
    for cause in expected["injected"]:
        assert cause in found, f"{name}: {cause} not found; got {sorted(found)}"
        assert found[cause].severity == "high", f"{name}: {found[cause]}"


@pytest.mark.parametrize("name", names())
def test_no_high_the_scenario_did_not_inject(diagnosed: dict, name: str) -> None:
    expected, findings = diagnosed[name]
    allowed = set(expected["injected"]) | set(expected.get("incidental", ()))
    stray = [f.id for f in findings if f.severity == "high" and f.id not in allowed]
    assert not stray, f"{name}: unexpected high findings {stray}"
    if expected["healthy"]:
        assert not [f for f in findings if f.severity == "high"]


@pytest.mark.parametrize("name", [n for n in names() if not n.startswith(("tp8-healthy", "pp8-h"))])
def test_impacts_land_near_the_derivation(diagnosed: dict, name: str) -> None:
    expected, findings = diagnosed[name]
    found = _by_id(findings)
    for cause, derived in expected["impacts"].items():
        impact, basis = found[cause].impact, found[cause].basis
        assert impact is not None and basis in ("measured", "modelled", "assumed")
        if basis == "assumed":  # a stated assumption, never a silent one
            assert "assumed" in found[cause].summary
        assert impact == pytest.approx(derived["impact"], abs=IMPACT_SLACK), derived["derivation"]


def test_the_unexplained_overhead_is_named_with_its_ms_per_round(diagnosed: dict) -> None:
    """pp8-unexplained adds 40 ms to every round the layout does not explain: the finding says
    how many ms per round, measured from the idle slowest stage."""
    expected, findings = diagnosed["pp8-unexplained"]
    residual = _by_id(findings)["unexplained-slowdown"]
    assert residual.basis == "measured"
    ms = float(residual.title.split(" ms per round")[0])
    assert ms == pytest.approx(expected["machine_ms"]["o"], rel=0.25)


def test_a_cause_is_sized_at_the_load_it_hit(diagnosed: dict) -> None:
    """Several causes at once: each names the benchmark load it was sized at."""
    _expected, findings = diagnosed["pp8-several-causes"]
    found = _by_id(findings)
    graph = found["cuda-graph-miss"]
    assert graph.phase is not None and "at 128 concurrent requests" in graph.summary
    assert found["kv-cache-pressure"].phase is not None
