"""How much a finding's remedy recovers, and how sure that number is.

A ``Sizing`` is a finding's ``impact`` (``1 − now/after``: the share of the throughput with the
remedy applied that the run does not reach now) with the range everything it rests on allows,
the basis of the number and the load it was sized at. Rules build one with ``ratio`` (two
throughputs, each with its relative uncertainty), ``spread`` (the same impact computed under
each plausible value of what it rests on) or ``share`` (an impact bounded directly), and give
``Sizing.fields()`` to their ``Finding``: impact, its range, basis, the ``recovers`` phrase and
the severity the range's low end earns (``finding.severity_of``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.diagnose.finding import recovers_text, severity_of
from toolkit.diagnose.thresholds import METHOD_ERROR

__all__ = ["Sizing", "combine", "ratio", "share", "spread"]

_MAX = 0.99  # an impact is a share of the remedied throughput: it stays below 1


def _clip(x: float) -> float:
    return min(_MAX, max(0.0, x)) if math.isfinite(x) else 0.0


@dataclass(frozen=True)
class Sizing:
    """An impact with its range, its basis, the load it applies to and what it rests on."""

    impact: float
    low: float
    high: float
    basis: str
    where: str = ""
    rests_on: tuple[str, ...] = ()
    carried: bool = True  # the remedied throughput is worked out, not measured

    @property
    def range(self) -> tuple[float, float]:
        """``(low, high)``; a sizing ``carried`` to the remedied run by arithmetic is widened
        by ``METHOD_ERROR`` of the remedied throughput (the arithmetic's own error)."""
        if not self.carried:
            return (self.low, self.high)
        low = 1 - (1 - self.low) * (1 + METHOD_ERROR)
        high = 1 - (1 - self.high) * (1 - METHOD_ERROR)
        return (min(_clip(low), self.impact), max(_clip(high), self.impact))

    @property
    def severity(self) -> str:
        return severity_of(self.range)

    @property
    def recovers(self) -> str:
        return recovers_text(self.impact, self.where)

    def fields(self) -> dict[str, Any]:
        """The ``Finding`` fields this sizing sets: severity, impact, impact_range, basis,
        recovers."""
        return {
            "severity": self.severity,
            "impact": self.impact,
            "impact_range": self.range,
            "basis": self.basis,
            "recovers": self.recovers,
        }

    def words(self) -> str:
        """``≈32 % (28–41 %: bench noise ±2 %; ...)``: the impact as the text states it."""
        low, high = self.range
        span = f"{low:.0%}–{high:.0%}"
        reasons = self.rests_on
        if self.carried:
            reasons = (*reasons, f"±{METHOD_ERROR:.0%} for carrying it to the remedied run")
        why = "; ".join(reasons)
        return f"≈{self.impact:.0%} ({span}{': ' + why if why else ''})"

    def widened(self, relative: float, reason: str) -> Sizing:
        """The range widened by a relative error of ``after`` (the remedied throughput):
        ``1 − (1 − impact)·(1 ± relative)``, with ``reason`` added to what it rests on."""
        if relative <= 0:
            return self
        low = 1 - (1 - self.low) * (1 + relative)
        high = 1 - (1 - self.high) * max(1e-9, 1 - relative)
        return Sizing(
            self.impact,
            _clip(low),
            _clip(high),
            self.basis,
            self.where,
            (*self.rests_on, reason),
            self.carried,
        )


def ratio(
    now: float,
    after: float,
    *,
    basis: str,
    where: str = "",
    now_noise: float = 0.0,
    after_noise: float = 0.0,
    rests_on: Iterable[str] = (),
    carried: bool = True,
) -> Sizing | None:
    """``1 − now/after`` with ``now`` and ``after`` each uncertain by a relative half-width
    (``now_noise``, ``after_noise``); ``carried=False`` when ``after`` was measured on a run
    with the remedy applied. None when either throughput is not positive."""
    if not (now > 0 and after > 0 and math.isfinite(now) and math.isfinite(after)):
        return None
    impact = _clip(1 - now / after)
    low = _clip(1 - now * (1 + now_noise) / (after * (1 - min(after_noise, 0.9))))
    high = _clip(1 - now * max(0.0, 1 - now_noise) / (after * (1 + after_noise)))
    return Sizing(
        impact, min(low, impact), max(high, impact), basis, where, tuple(rests_on), carried
    )


def share(
    impact: float,
    low: float,
    high: float,
    *,
    basis: str,
    where: str = "",
    rests_on: Iterable[str] = (),
    carried: bool = True,
) -> Sizing:
    """An impact bounded directly (a share of time, tokens or idle), clipped to [0, 1) and
    ordered so that ``low ≤ impact ≤ high``."""
    impact = _clip(impact)
    return Sizing(
        impact,
        min(_clip(low), impact),
        max(_clip(high), impact),
        basis,
        where,
        tuple(rests_on),
        carried,
    )


def spread(
    central: float,
    variants: Sequence[float],
    *,
    basis: str,
    where: str = "",
    rests_on: Iterable[str] = (),
    carried: bool = True,
) -> Sizing:
    """An impact computed once with the central values and once per plausible variant of what
    it rests on: the range is the variants' lowest and highest."""
    values = [v for v in variants if math.isfinite(v)]
    low = min(values, default=central)
    high = max(values, default=central)
    return share(central, low, high, basis=basis, where=where, rests_on=rests_on, carried=carried)


def combine(parts: Sequence[Sizing], *, where: str = "") -> Sizing | None:
    """Several causes' sizings as one: their remedied throughputs multiply
    (``1 − Π(1 − impact)``), and so do their bounds."""
    if not parts:
        return None

    def joint(values: Iterable[float]) -> float:
        return 1 - math.prod(1 - v for v in values)

    return Sizing(
        _clip(joint(p.impact for p in parts)),
        _clip(joint(p.low for p in parts)),
        _clip(joint(p.high for p in parts)),
        parts[0].basis if len({p.basis for p in parts}) == 1 else "modelled",
        where or parts[0].where,
        tuple(dict.fromkeys(r for p in parts for r in p.rests_on)),
    )
