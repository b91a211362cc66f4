"""The serving model of one run: its model and machine from the run's own inputs, the model
calibrated on them, its plausible variants, and its predictions (``RunAnalysis`` mixes this in).

The model's id comes from the ServerArgs, ``run.toml`` or the launch command; its architecture
from a ``config.json`` in the run directory or the table of well-known models. The machine comes
from the GPU trace, ``run.toml`` and the topology. Nothing of another run changes this run's
fit unless that run served the same model on the same kind of machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from functools import cached_property
from typing import Any

import polars as pl

from toolkit.analyze.model import Fit, Layout, Params, Workload, fit, observed_frame, predict
from toolkit.analyze.model.catalog import ModelIdentity, model_spec
from toolkit.analyze.model.fit import fit_none
from toolkit.analyze.model.machine import MachineIdentity, hardware_gpus, prior
from toolkit.analyze.model.ranges import ROUTING_SKEW, Variant, plausible_fit, variants
from toolkit.analyze.observed_points import observed_points
from toolkit.errors import ToolkitError
from toolkit.load.gpu.samples import gpu_count
from toolkit.load.run import Run
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command

__all__ = ["ServingModel", "model_groups"]


class ServingModel:
    """The serving model of a run analysis, on first use."""

    run: Run
    label: str
    layout: Layout
    peers: tuple[Any, ...]
    server_args: dict[str, Any]
    facts: dict[str, Any]
    command: tuple[str, str] | None
    gpu_samples: pl.DataFrame | None

    @cached_property
    def observed(self) -> pl.DataFrame:
        """The run's observed points for the serving model (``observed_points``)."""
        return observed_points(self.run, self.label)

    @cached_property
    def model(self) -> ModelIdentity:
        """The served model: its id (ServerArgs ``model_path``/``served_model_name``, else
        ``run.toml``'s ``model``, else the launch command's ``--model-path``) and its
        architecture (``config.json`` in the run directory, else the table of well-known
        models), or unknown."""
        model_id, id_from = None, None
        for key in ("model_path", "served_model_name"):
            value = self.server_args.get(key)
            if isinstance(value, str) and value.strip():
                model_id, id_from = value.strip(), f"ServerArgs {key}"
                break
        if model_id is None and self.run.config.model:
            model_id, id_from = self.run.config.model, "run.toml model"
        if model_id is None and self.command is not None:
            try:
                flags = parse_launch_command(self.command[0])
            except ServerArgsError:
                flags = {}
            value = flags.get("model_path")
            if isinstance(value, str) and value.strip():
                model_id, id_from = value.strip(), f"launch command ({self.command[1]})"
        context = self.facts.get("context_len")
        return model_spec(
            model_id,
            self.run.model_config,
            id_from=id_from,
            context_len=context if isinstance(context, int) else None,
        )

    @cached_property
    def machine(self) -> MachineIdentity:
        """The machine: GPU model and count from the trace (else ``run.toml`` hardware),
        interconnect from ``run.toml`` or the topology."""
        gpu, gpu_from, count = None, None, None
        samples = self.gpu_samples
        if samples is not None and "name" in samples.columns:
            names = samples["name"].drop_nulls()
            if names.len():
                gpu, gpu_from = str(names.mode().sort()[0]), "GPU trace"
        if samples is not None:
            count = gpu_count(samples)  # physical GPUs: a MIG instance is part of its GPU
        stated, named = hardware_gpus(self.run.config.hardware)
        if gpu is None and named:
            gpu, gpu_from = named, "run.toml hardware"
        if count is None and stated:
            count = stated
        if count is None and self.run.layout.known:
            count = self.run.layout.gpus
        link, link_from = self.run.config.interconnect, "run.toml"
        if link is None and self.run.topology is not None:
            link, link_from = self.run.topology.interconnect, "topology"
        return MachineIdentity(gpu, gpu_from, count, link, link_from if link else None)

    def like_facts(self) -> dict[str, str | None]:
        """What a comparison with another run must match besides the layout (the facts of
        ``analyze.scaling.caveat``): the model id and the kind of machine, by its datasheet
        name (a trace's and run.toml's spelling agree) and interconnect; None is unknown."""
        kind, link = self.machine.key
        return {
            "model": self.model.id,
            "hardware": (f"{kind} ({link})" if link else str(kind)) if kind else None,
        }

    @cached_property
    def fit_points(self) -> pl.DataFrame:
        """The observed points the serving model is calibrated on: this run's and those of the
        peers that served the same model on the same kind of machine."""
        group = [self, *(p for p in self.peers if self.shares_machine(p))]
        frames = [ctx.observed for ctx in group if ctx.observed.height]
        return pl.concat(frames) if frames else observed_frame([])

    @cached_property
    def fit(self) -> Fit | None:
        """The serving model calibrated for this run, None when the model is unknown.

        The starting costs come from the machine (``machine.prior``); the single-stream points
        of this run and of the peers that served the same model on the same kind of machine
        (``fit_points``), and the highest load of such peers without PP
        (``calibrating_peers``), calibrate them (``Fit.sources`` says which were fitted). A
        fitted link
        cost beyond its plausible range is rejected (``ranges.plausible_fit``). Runs on other
        machines or of other models never change this run's fit.
        """
        spec = self.model.spec
        if spec is None:
            return None
        hardware, sources = prior(self.machine)
        try:
            found = fit(
                self.fit_points,
                model=spec,
                prior=hardware,
                prior_sources=sources,
                high_load=self.calibrating_peers,
            )
        except (ToolkitError, ZeroDivisionError, ValueError):
            return fit_none(spec, hardware, sources)
        return plausible_fit(found, self.machine, hardware, sources)

    @cached_property
    def model_variants(self) -> list[Variant]:
        """The serving model with each assumed constant at each end of its plausible range,
        refitted on ``fit_points`` (``ranges.variants``); empty when the model is unknown."""
        if self.fit is None:
            return []
        _, sources = prior(self.machine)
        return variants(
            self.fit, self.machine, self.fit_points, sources, high_load=self.calibrating_peers
        )

    @property
    def calibrating_peers(self) -> tuple[str, ...]:
        """Labels of the peers without PP that served the same model on the same kind of
        machine: their highest load calibrates the HBM bandwidth too (a TP step reads every
        weight at a batch size the single-stream points do not reach). A run's own high load
        never calibrates its own model, so a fault there cannot hide in the fit."""
        return tuple(
            p.label
            for p in self.peers
            if p.pp == 1 and self.shares_machine(p) and p.label != self.label
        )

    def constants(self) -> dict[str, str]:
        """Every constant the serving model of this run rests on and where it came from:
        fitted, table or assumed (``Fit.sources``), the routing (effective experts) and the
        context length."""
        if self.fit is None:
            return {}
        out = dict(self.fit.sources)
        spec = self.fit.params.model
        if spec.experts > spec.top_k > 0:
            out["e_eff"] = (
                f"assumed: uniform routing, {spec.e_eff:.0f} of {spec.experts} experts reachable "
                f"(varied down to {ROUTING_SKEW:.0%} for the ranges)"
            )
        context = self.facts.get("context_len")
        out["context_len"] = (
            f"log: {context}"
            if isinstance(context, int)
            else f"{self.model.source}: {spec.context_len}"
        )
        return out

    def shares_machine(self, other: ServingModel) -> bool:
        """Whether ``other`` served the same model on the same kind of machine."""
        return (
            other.machine.key == self.machine.key
            and other.model.spec is not None
            and self.model.spec is not None
            and other.model.spec.name == self.model.spec.name
        )

    @property
    def params(self) -> Params | None:
        """The calibrated model parameters, None when the model is unknown."""
        return self.fit.params if self.fit is not None else None

    def model_tok_s(
        self,
        layout: Layout,
        concurrency: int,
        input_len: float | None = None,
        output_len: float | None = None,
        *,
        params: Params | None = None,
    ) -> float | None:
        """The serving model's decode tok/s for ``layout`` at ``concurrency`` (under
        ``params``, by default the run's fit); None when the model is unknown or the
        prediction fails."""
        params = params or self.params
        if params is None:
            return None
        isl = _length(input_len, 1000)
        osl = _length(output_len, isl)
        try:
            tok_s = predict(layout, Workload(max(int(concurrency), 1), isl, osl), params).tok_s
        except (ToolkitError, ZeroDivisionError, ValueError):
            return None
        return tok_s if math.isfinite(tok_s) and tok_s > 0 else None

    def with_layout(self, **changes: Any) -> Layout:
        """The launch's layout with some settings replaced."""
        return replace(self.layout, **changes)


def _length(value: float | None, default: int) -> int:
    if value is None or not math.isfinite(value) or value < 1:
        return default
    return max(round(value), 1)


def model_groups(analyses: Iterable[Any]) -> list[tuple[Fit, list[Any]]]:
    """The runs with a known model, grouped by shared model and machine, each group with its fit
    (``RunAnalysis.fit``), in the order the runs came."""
    groups: list[tuple[Fit, list[Any]]] = []
    for ctx in analyses:
        if ctx.fit is None:
            continue
        for _, members in groups:
            if members[0].shares_machine(ctx):
                members.append(ctx)
                break
        else:
            groups.append((ctx.fit, [ctx]))
    return groups
