"""How far each constant the serving model assumes may plausibly be off, and the model refitted
at each end.

A constant the run's own points calibrate (``Fit.fitted``) is not varied: it is refitted under
each variant of the others. Every other constant came from a datasheet with an assumed
efficiency, an interconnect-class prior or a plain assumption, and is moved, one at a time, to
the low and the high end of ``PLAUSIBLE``; the fit is then redone with that prior, so what the
run's points pin down absorbs what it can. A modelled impact computed under every variant
(``Variant.params``) spans what the assumptions allow.

The ends span what a healthy server shows: the datasheet bandwidth a decode kernel reaches
(65–92 %), a PP hop (send, gloo message and per-stage CPU) from a same-switch peer copy to a
socket-crossing one, an all-reduce from a small NVLink ring to a PCIe tree, the per-step
launch, sampling and result processing of a CUDA-graph step, and routing between skewed (30 %
of the experts reachable by a batch) and uniform. A slower link or loop than that is what the
residual names, so it is not absorbed here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import polars as pl

from toolkit.analyze.model.fit import Fit, fit
from toolkit.analyze.model.machine import HBM_EFFICIENCY, MachineIdentity
from toolkit.analyze.model.spec import Hardware, ModelSpec, Params
from toolkit.errors import ToolkitError

__all__ = ["PLAUSIBLE", "ROUTING_SKEW", "Variant", "plausible_fit", "plausible_hop", "variants"]

PLAUSIBLE: dict[str, dict[str, tuple[float, float]]] = {
    "hbm_efficiency": {"any": (0.65, 0.92)},
    "hop_s": {"pcie": (0.2e-3, 1.5e-3), "nvlink": (0.05e-3, 0.6e-3)},
    "allreduce_s": {"pcie": (60e-6, 400e-6), "nvlink": (10e-6, 100e-6)},
    "overhead_s": {"any": (0.5e-3, 3.0e-3)},
}
"""Plausible (low, high) of each assumed constant on a healthy server, by interconnect where it
depends on one: a cost beyond the high end is a finding's to name, not the model's to absorb."""

ROUTING_SKEW = 0.3
"""Lowest share of a MoE layer's routed experts a batch's tokens are assumed to reach."""


@dataclass(frozen=True)
class Variant:
    """The model with one assumed constant moved to one end of its plausible range."""

    constant: str
    value: float
    params: Params
    fit: Fit | None

    def describe(self) -> str:
        unit = {"hop_s": "ms", "allreduce_s": "µs", "overhead_s": "ms"}
        if self.constant == "hbm_bytes_s":
            return f"HBM {self.value / 1e12:.2f} TB/s"
        if self.constant == "e_eff":
            return f"{self.value:.0f} experts reachable"
        scale = 1e6 if unit.get(self.constant) == "µs" else 1e3
        return f"{self.constant.removesuffix('_s')} {self.value * scale:.2g} {unit[self.constant]}"


def _link(machine: MachineIdentity) -> str:
    figures = machine.figures
    return machine.interconnect or (figures.link if figures else "pcie")


def _ends(name: str, link: str) -> tuple[float, float]:
    table = PLAUSIBLE[name]
    return table.get(link, table.get("any", next(iter(table.values()))))


def plausible_hop(machine: MachineIdentity) -> tuple[float, float]:
    """(low, high) seconds of one PP hop on ``machine``'s interconnect."""
    return _ends("hop_s", _link(machine))


def variants(
    base: Fit,
    machine: MachineIdentity,
    points: pl.DataFrame,
    sources: Mapping[str, str],
    *,
    high_load: Collection[str] = (),
) -> list[Variant]:
    """The model refitted with each assumed constant of ``base`` at each end of its plausible
    range (``points`` are the observed points ``base`` was fitted on, ``sources`` the priors'
    sources, ``high_load`` the labels whose highest load calibrates it too). Fitted constants
    are not varied; a variant whose refit fails keeps the prior values with that one constant
    moved."""
    hardware, model = base.params.hardware, base.params.model
    link = _link(machine)
    moves: list[tuple[str, float, Hardware, ModelSpec]] = []
    for name in ("hop_s", "allreduce_s", "overhead_s"):
        if name in base.fitted:
            continue
        for value in _ends(name, link):
            moves.append((name, value, replace(hardware, **{name: value}), model))
    if "hbm_bytes_s" not in base.fitted:
        figures = machine.figures
        datasheet = figures.hbm_tb_s * 1e12 if figures else hardware.hbm_bytes_s / HBM_EFFICIENCY
        low, high = _ends("hbm_efficiency", link)
        if figures is None:
            low, high = low / 2, high * 2  # an unknown GPU: its bandwidth is a guess
        for value in (datasheet * low, datasheet * high):
            moves.append(("hbm_bytes_s", value, replace(hardware, hbm_bytes_s=value), model))
    if model.experts > model.top_k > 0:
        skewed = max(float(model.top_k), ROUTING_SKEW * model.experts)
        for value in (skewed, float(model.experts)):
            if abs(value - model.e_eff) > 1e-6:
                moves.append(("e_eff", value, hardware, replace(model, e_eff=value)))
    out = []
    for name, value, hw, spec in moves:
        refit: Fit | None = None
        if points.height:
            try:
                refit = fit(
                    points, model=spec, prior=hw, prior_sources=sources, high_load=high_load
                )
            except (ToolkitError, ZeroDivisionError, ValueError):
                refit = None
            if refit is not None:
                refit = plausible_fit(refit, machine, hw, sources)
        params = refit.params if refit is not None else Params(spec, hw)
        out.append(Variant(name, value, params, refit))
    return out


def plausible_fit(
    base: Fit, machine: MachineIdentity, prior: Hardware, sources: Mapping[str, str]
) -> Fit:
    """``base`` with each fitted link cost beyond the high end of its plausible range put back
    to the prior, its source saying so (``assumed: fit rejected, …``): a single-stream point
    puts on the link whatever the weight reads leave over, and past that end it is not the
    link."""
    link = _link(machine)
    hardware = base.params.hardware
    changes: dict[str, float] = {}
    notes: dict[str, str] = {}
    for name, label in (("hop_s", "PP hop"), ("allreduce_s", "all-reduce")):
        if name not in base.fitted:
            continue
        fitted, kept = getattr(hardware, name), getattr(prior, name)
        high = _ends(name, link)[1]
        if fitted > high:
            changes[name] = kept
            notes[name] = (
                f"assumed: fit rejected ({label} fitted {fitted * 1e3:.2f} ms, above the "
                f"{high * 1e3:.2f} ms a {link} link plausibly costs); "
                f"{sources.get(name, 'prior')} {kept * 1e3:.2f} ms"
            )
    if not changes:
        return base
    fitted = tuple(n for n in base.fitted if n not in changes)
    fixed = (*base.fixed, *changes)
    params = replace(base.params, hardware=replace(hardware, **changes))
    return replace(base, params=params, fitted=fitted, fixed=fixed, sources=base.sources | notes)
