"""``Finding``: one diagnosed cause (or note) with the evidence table it rests on.

``impact`` is the share of throughput the finding's remedy is expected to recover at the load
where it matters: ``1 − now / after``, where ``after`` is the throughput with the remedy
applied. ``impact_range`` brackets it with everything the number rests on (assumed constants
over their plausible range, the sampling noise of what was measured, the model's error on the
run's own points), and severity comes from the range's low end (``severity_of``): ``high`` when
even the low end is ≥ 20 %, ``medium`` ≥ 5 %, ``low`` above 0, ``info`` when the remedy is not
expected to recover anything (or the finding is a note, such as normal PP lock-step logging).
``config-not-applied`` and ``stage-desync`` are ``high`` by kind when their evidence lies within
one launch: the run then measured something other than what was asked. ``basis`` says where the
impact comes from: ``measured`` (the run's own lines and results), ``modelled`` (the serving
model of the run's model and machine) or ``assumed`` (a stated factor, for want of either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import polars as pl

from toolkit.diagnose.thresholds import HIGH_IMPACT, MEDIUM_IMPACT

__all__ = [
    "BASES",
    "SEVERITIES",
    "Finding",
    "impact_text",
    "promise_lines",
    "recovers_text",
    "severity_of",
]

SEVERITIES: tuple[str, ...] = ("high", "medium", "low", "info")
"""From most to least severe; findings are ranked in this order."""
BASES: tuple[str, ...] = ("measured", "modelled", "assumed")
"""Where a finding's impact comes from."""


def severity_of(impact_range: tuple[float, float] | None) -> str:
    """Severity from the low end of ``impact_range``: ``high`` ≥ 20 %, ``medium`` ≥ 5 %,
    ``low`` above 0, ``info`` otherwise (and without a range: nothing sized)."""
    if impact_range is None:
        return "info"
    low = impact_range[0]
    if not math.isfinite(low) or low <= 0:
        return "info"
    if low >= HIGH_IMPACT:
        return "high"
    if low >= MEDIUM_IMPACT:
        return "medium"
    return "low"


def recovers_text(impact: float, where: str) -> str:
    """The throughput the remedy wins back, as a user reads it: ``+4 % tok/s at 32 requests``
    for an impact of 0.04 (``1/(1 − impact) − 1`` more than now)."""
    gain = 1 / max(1e-9, 1 - impact) - 1
    return f"+{gain:.0%} tok/s {where}".rstrip()


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
        Share of throughput the remedy is expected to recover, 0–1 (``1 − now/after``); None
        when not sized.
    basis
        ``measured``, ``modelled`` or ``assumed``: where ``impact`` comes from.
    phase
        The phase (one benchmark load) ``impact`` was sized at; None for the whole run.
    impact_range
        ``(low, high)`` bracketing ``impact`` with everything it rests on; severity follows
        its low end.
    recovers
        The gain in words: ``+4 % tok/s at 32 requests``.
    launch
        The server launch the finding is about, when the run holds several.
    promise
        The promise checked against runs that applied the remedy: per run and concurrency the
        promised tok/s (with its range) beside the measured one; None when no such run was
        given.
    caveats
        Quirks of the inputs that touch a quantity the finding rests on (``Caveat.to_dict``
        rows: kind, file, count, length_s, affects, detail).
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
    impact_range: tuple[float, float] | None = None
    recovers: str | None = None
    launch: str | None = None
    promise: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    caveats: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: unknown severity {self.severity!r}")
        if self.basis is not None and self.basis not in BASES:
            raise ValueError(f"finding {self.id}: unknown basis {self.basis!r}")
        if self.impact_range is not None:
            low, high = self.impact_range
            if not low <= high:
                raise ValueError(f"finding {self.id}: impact range {low}–{high} is reversed")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``ppscope diagnose --json``: id, severity, run, launch, title,
        summary, evidence (a list of row objects), remedy, impact with its range, basis and
        ``recovers`` phrase, the phase it was sized at, the promise checked against runs
        that applied the remedy (a list of row objects, or None), and the caveats of the
        inputs it rests on."""
        return {
            "id": self.id,
            "severity": self.severity,
            "run": self.run,
            "launch": self.launch,
            "title": self.title,
            "summary": self.summary,
            "evidence": _rows(self.evidence),
            "remedy": self.remedy,
            "impact": None if self.impact is None else round(self.impact, 4),
            "impact_range": (
                None if self.impact_range is None else [round(x, 4) for x in self.impact_range]
            ),
            "recovers": self.recovers,
            "basis": self.basis,
            "phase": self.phase,
            "promise": None if self.promise is None else _rows(self.promise),
            "caveats": [dict(c) for c in self.caveats],
        }


def impact_text(finding: Finding) -> str:
    """The impact as every output states it: ``+48% tok/s at 32 requests (impact 33%,
    30–35%, measured)``; empty for a finding with nothing sized."""
    if finding.impact is None or finding.recovers is None:
        return ""
    parts = [f"impact {finding.impact:.0%}"]
    if finding.impact_range is not None:
        low, high = finding.impact_range
        parts.append(f"{low:.0%}–{high:.0%}")
    if finding.basis:
        parts.append(finding.basis)
    return f"{finding.recovers} ({', '.join(parts)})"


def promise_lines(finding: Finding) -> list[str]:
    """One line per load where a run that applied the remedy measured it: before, the
    promise, after, and whether the promise held."""
    if finding.promise is None:
        return []
    return [
        f"{r['run']} ({r['setting']}) at {r['concurrency']} requests: {r['now_tok_s']:.1f} → "
        f"{r['measured_tok_s']:.1f} tok/s measured, {r['promised_low']:.0f}–"
        f"{r['promised_high']:.0f} promised ({r['verdict']})"
        for r in finding.promise.iter_rows(named=True)
    ]


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


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
