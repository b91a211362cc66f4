"""``Finding``: one diagnosed cause (or note) with the evidence table it rests on.

Severity says how much of the throughput a finding explains (``thresholds``): ``high`` ≥ 20 %,
``medium`` ≥ 5 %, ``low`` below that, ``info`` a note that is not a fault (normal PP lock-step
logging, a pipeline that cannot fill at low concurrency). ``config-not-applied`` and
``stage-desync`` are ``high`` whatever their throughput cost: the run then measured something
other than what was asked. ``basis`` says where the impact comes from: ``measured`` (the run's
own lines and results), ``modelled`` (the serving model of the run's model and machine) or
``assumed`` (a stated factor, for want of either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import polars as pl

from toolkit.diagnose.thresholds import HIGH_IMPACT, MEDIUM_IMPACT

__all__ = ["BASES", "SEVERITIES", "Finding", "severity_of"]

SEVERITIES: tuple[str, ...] = ("high", "medium", "low", "info")
"""From most to least severe; findings are ranked in this order."""
BASES: tuple[str, ...] = ("measured", "modelled", "assumed")
"""Where a finding's impact comes from."""


def severity_of(impact: float | None, *, floor: str = "low") -> str:
    """``high`` for a throughput share ≥ 20 %, ``medium`` ≥ 5 %, else ``floor``."""
    if impact is None or not math.isfinite(impact):
        return floor
    if impact >= HIGH_IMPACT:
        return "high"
    if impact >= MEDIUM_IMPACT:
        return "medium"
    return floor


@dataclass(frozen=True)
class Finding:
    """A diagnosed cause, ranked by severity and then by the throughput share it explains.

    Attributes
    ----------
    id
        Stable public name (``pp-underfilled-slots``, ``running-cap``, ...).
    severity
        ``high``, ``medium``, ``low`` or ``info`` (see the module docstring).
    title
        One line, with the key number.
    summary
        One or two sentences with the numbers a reader needs.
    evidence
        The small table (≤ ~20 rows) the rule read its numbers from.
    remedy
        Flags or steps to try.
    chart
        An optional altair chart of the evidence (attached by the chart layer, never by rules).
    run
        Label of the run the finding is about.
    impact
        Estimated share of throughput the finding explains, 0–1; None when not estimated.
    basis
        ``measured``, ``modelled`` or ``assumed``: where ``impact`` comes from.
    phase
        The phase (one benchmark load) ``impact`` was sized at; None for the whole run.
    """

    id: str
    severity: str
    title: str
    summary: str
    evidence: pl.DataFrame = field(repr=False, compare=False)
    remedy: str
    chart: Any = field(default=None, repr=False, compare=False)
    run: str | None = None
    impact: float | None = None
    basis: str | None = None
    phase: int | None = None
    launch: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: unknown severity {self.severity!r}")
        if self.basis is not None and self.basis not in BASES:
            raise ValueError(f"finding {self.id}: unknown basis {self.basis!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``ppscope diagnose --json``: id, severity, run, title, summary,
        evidence (a list of row objects), remedy, impact, its basis and the phase it was
        sized at."""
        return {
            "id": self.id,
            "severity": self.severity,
            "run": self.run,
            "launch": self.launch,
            "title": self.title,
            "summary": self.summary,
            "evidence": [
                {k: _plain(v) for k, v in row.items()}
                for row in self.evidence.iter_rows(named=True)
            ],
            "remedy": self.remedy,
            "impact": None if self.impact is None else round(self.impact, 4),
            "basis": self.basis,
            "phase": self.phase,
        }


def _plain(value: Any) -> Any:
    """A JSON-ready value: times as ISO text, durations in seconds, NaN as None."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
