"""No ``high`` finding on a healthy calibration draw.

A healthy draw (``helpers.calibration``, which imports nothing from ``toolkit``) is one where
no remedy ppscope could propose recovers 5 % of throughput at any load, played on the draw's
own machine: a ``high`` finding there (20 % or more) names a cost the run does not have. The
draws below cover TP, PP and TP×PP, NVLink and PCIe nodes, low and high load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.calibration import Calibrated, draw, write

from toolkit.diagnose import diagnose
from toolkit.run_analysis import RunAnalysis

SEEDS = (0, 1, 3, 4, 7, 9, 10, 11, 13, 17, 19, 28)
"""Healthy draws, one per layout shape × load × link (``test_the_seeds_cover_the_axes``)."""


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Calibrated, list]]:
    """seed → (the healthy draw, its findings), each run written and diagnosed alone."""
    root = tmp_path_factory.mktemp("calibration-healthy")
    out = {}
    for seed in SEEDS:
        sc = draw(seed, healthy=True)
        directory = write(sc, root / sc.name)
        out[seed] = (sc, diagnose([RunAnalysis(Path(directory))]))
    return out


def _describe(sc: Calibrated) -> str:
    t: dict[str, Any] = sc.truth
    loads = ",".join(str(ph.c) for ph in sc.phases)
    return (
        f"{sc.name} ({sc.layout.label()} {sc.model.path} on {sc.hardware_label}, c={loads}, "
        f"headroom {t['headroom']:.3f} from {t['headroom_from']})"
    )


def test_the_seeds_cover_the_axes(diagnosed: dict[int, tuple[Calibrated, list]]) -> None:
    axes = {
        (sc.truth["shape"], sc.truth["load"], sc.hardware.interconnect)
        for sc, _ in diagnosed.values()
    }
    assert axes == {
        (shape, load, link)
        for shape in ("tp", "pp", "tpxpp")
        for load in ("low", "high")
        for link in ("nvlink", "pcie")
    }
    assert all(sc.healthy for sc, _ in diagnosed.values())


@pytest.mark.parametrize("seed", SEEDS)
def test_no_high_finding_on_a_healthy_run(
    diagnosed: dict[int, tuple[Calibrated, list]], seed: int
) -> None:
    sc, findings = diagnosed[seed]
    high = [f for f in findings if f.severity == "high"]
    assert not high, f"{_describe(sc)}: " + "; ".join(
        f"{f.id} high, impact {f.impact if f.impact is None else round(f.impact, 3)}: {f.title}"
        for f in high
    )
