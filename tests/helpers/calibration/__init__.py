"""Calibration draws: random healthy and faulty runs whose recoverable shares are known.

Where ``helpers.scenarios`` holds hand-picked runs, this package draws them: a model (dense or
MoE, 8B to 1T: ``tables.MODEL_FIGURES``), a GPU node (NVLink or PCIe: ``tables.GPU_FIGURES``),
a layout that fits it (TP, PP or TP×PP), the machine's costs drawn log-uniformly over wide
ranges, a low (concurrency at most the stage count) or high (1 up to 16–128) load, and either
nothing wrong or one injected cause (sometimes two) among ``CAUSES``. The runs are written and
played by ``helpers.scenarios`` (its machine, admission and timeline); ``truth`` plays each
remedy ppscope could propose and says what it recovers, phase by phase. A healthy draw is one
where no remedy recovers 5 % at any phase; the largest share any remedy would recover is its
``headroom``.

Nothing here imports ``toolkit``: the draws test ppscope's diagnosis from the outside.

Usage::

    from helpers.calibration import draw, draws, write

    sc = draw(7)                      # deterministic per seed
    healthy = draw(7, healthy=True)
    write(sc, tmp_path / sc.name)     # the run directory, expected.json with the truth
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from helpers.calibration.drawing import (
    CAUSES,
    HEALTHY_BELOW,
    INJECTED_AT_LEAST,
    Calibrated,
    draw,
)
from helpers.scenarios.timeline import forget
from helpers.scenarios.writer import write_run

__all__ = [
    "CAUSES",
    "HEALTHY_BELOW",
    "INJECTED_AT_LEAST",
    "Calibrated",
    "draw",
    "draws",
    "write",
]


def draws(n: int, seed0: int = 0, *, healthy: bool | None = None) -> Iterator[Calibrated]:
    """The draws of seeds ``seed0`` … ``seed0 + n − 1``, one at a time."""
    for seed in range(seed0, seed0 + n):
        yield draw(seed, healthy=healthy)


def write(sc: Calibrated, directory: str | Path) -> Path:
    """Write the run of ``sc`` into ``directory``; ``expected.json`` carries, besides what every
    scenario's does, the draw's truth under ``calibration``. Returns the directory."""
    out = write_run(sc, directory)
    forget(sc.name)
    path = out / "expected.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["calibration"] = sc.truth
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
