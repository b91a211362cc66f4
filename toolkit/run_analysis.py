"""``RunAnalysis``: every analysis of one run, computed once and shared by all the rules.

A rule is a function of one ``RunAnalysis`` (its ``peers`` are the other runs diagnosed with
it, for comparisons across layouts). Analyses are computed on first use, so a run without a
GPU trace never loads one and a rule that needs only the config never reads the batches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze import runtime_config
from toolkit.analyze.config import (
    captured_sizes,
    derived_settings,
    intended_vs_effective,
    layer_partition_of,
    model_layout,
)
from toolkit.analyze.cudagraph import cuda_graph_coverage, graph_summary
from toolkit.analyze.evidence import RunEvidence
from toolkit.analyze.kv import RETRACTION_PREFIXES, kv_pressure, retractions
from toolkit.analyze.model import Fit, Layout, Params, Workload, fit, observed_frame, predict
from toolkit.analyze.model.admission import replay_model
from toolkit.analyze.model.catalog import ModelIdentity, model_spec
from toolkit.analyze.model.fit import fit_none
from toolkit.analyze.model.machine import MachineIdentity, prior
from toolkit.analyze.model.spec import ModelSpec
from toolkit.analyze.observed_points import observed_points
from toolkit.analyze.occupancy import occupancy_summary, slot_occupancy
from toolkit.analyze.partition import stage_memory, uneven_partition
from toolkit.analyze.phases import decode_phases
from toolkit.analyze.stages import LOG_INTERVAL, stage_desync, stage_timeline
from toolkit.errors import ToolkitError
from toolkit.load.gpu.samples import gpu_count
from toolkit.load.run import Run, load_run
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command

__all__ = ["RunAnalysis", "model_groups", "observed_points"]

_LAUNCH_LINE = re.compile(r"(?:sglang\.launch_server|sglang serve|launch_server\.py)\b.*\s--\w")


class RunAnalysis(RunEvidence):
    """The analyses of one run directory, on first use.

    Parameters
    ----------
    run
        A loaded ``Run`` or the path of a run directory.
    """

    def __init__(self, run: Run | str | Path) -> None:
        self.run = run if isinstance(run, Run) else load_run(run)
        self.peers: tuple[RunAnalysis, ...] = ()
        self.found: list[Any] = []  # findings so far on this run, as ``diagnose`` makes them
        self.compare_models = False  # cross-run findings compare runs of different models

    def __repr__(self) -> str:
        return f"<RunAnalysis {self.label}>"

    # ------------------------------------------------------------------ identity and launch
    @cached_property
    def label(self) -> str:
        return self.run.label

    @cached_property
    def launch(self) -> Any:
        return self.run.launch

    @cached_property
    def server_args(self) -> dict[str, Any]:
        return dict(self.launch.server_args) if self.launch is not None else {}

    @cached_property
    def facts(self) -> dict[str, Any]:
        return self.launch.facts() if self.launch is not None else {}

    @cached_property
    def derived(self) -> dict[str, Any]:
        return derived_settings(self.server_args, self.facts)

    @cached_property
    def layout(self) -> Layout:
        """The serving model's layout of the run (``Run.layout`` resolved from every witness),
        with the layer split ``SGLANG_PP_LAYER_PARTITION`` sets in the launch command, else
        the one the stages' KV pools measure when it is not the default (``uneven_partition``)."""
        try:
            layout = model_layout(self.run.layout)
        except ToolkitError:
            return Layout()
        split = layer_partition_of(self.command[0]) if self.command else None
        if split is not None and len(split) == layout.pp > 1:
            return replace(layout, layer_partition=split)
        spec = self.model.spec
        measured = uneven_partition(self.stage_memory, spec.layers, layout.pp) if spec else None
        return replace(layout, layer_partition=measured) if measured else layout

    @cached_property
    def stage_memory(self) -> pl.DataFrame:
        """Per PP stage, the weights and KV pool it reported at startup (``stage_memory``)."""
        return stage_memory(self.launch.startup if self.launch is not None else pl.DataFrame())

    @property
    def pp(self) -> int:
        return self.layout.pp

    @property
    def depth(self) -> int:
        return self.layout.pp_async_batch_depth

    @property
    def slots(self) -> int:
        return self.layout.loop_size

    @cached_property
    def log_interval(self) -> int:
        value = self.server_args.get("decode_log_interval")
        return value if isinstance(value, int) and value > 0 else LOG_INTERVAL

    # ------------------------------------------------------------------ tables
    @cached_property
    def batches(self) -> pl.DataFrame:
        """Batch lines of the launch the run is about (``Run.batches``)."""
        return self.run.batches

    @cached_property
    def bench(self) -> pl.DataFrame | None:
        """The run's benchmark results, or None."""
        results = self.run.bench
        return results.runs if results is not None and results.runs.height else None

    @cached_property
    def throughput_curve(self) -> dict[int, float]:
        """Concurrency → median output tok/s of the run's benchmark (empty without one)."""
        if self.bench is None:
            return {}
        runs = self.bench.filter(pl.col("concurrency").is_not_null() & (pl.col("output_tok_s") > 0))
        agg = runs.group_by("concurrency").agg(pl.col("output_tok_s").median())
        return {int(c): float(v) for c, v in agg.iter_rows()}

    @cached_property
    def phases(self) -> pl.DataFrame:
        chunk = self.derived["resolved_chunked_prefill_size"]
        return decode_phases(
            self.batches,
            self.bench,
            chunked_prefill_size=chunk,
            pp_size=self.pp,
            marks=self.phase_marks,  # on the log's clock (RunEvidence)
        )

    @cached_property
    def occupancy(self) -> pl.DataFrame:
        return slot_occupancy(self.batches, self.phases, pp_size=self.pp, async_depth=self.depth)

    @cached_property
    def decode(self) -> pl.DataFrame:
        """The reference stage's decode lines with ``running`` (requests the line's throughput
        serves: ``#running-req`` without PP, the estimate from ``#token`` under PP) and
        ``batch`` (the logged micro-batch size)."""
        running = pl.col("running_req") if self.pp == 1 else pl.col("running_est")
        return self.occupancy.with_columns(
            running=running.cast(pl.Float64), batch=pl.col("running_req")
        )

    @cached_property
    def phase_summary(self) -> pl.DataFrame:
        return occupancy_summary(self.occupancy, self.phases, self.layout, self.replay_model)

    @cached_property
    def replay_model(self) -> ModelSpec:
        context = self.facts.get("context_len")
        return replay_model(self.model.spec, context if isinstance(context, int) else None)

    @cached_property
    def timeline(self) -> pl.DataFrame:
        return stage_timeline(self.batches, log_interval=self.log_interval)

    @cached_property
    def desync(self) -> pl.DataFrame:
        return stage_desync(self.timeline)

    @cached_property
    def captured(self) -> list[int] | None:
        return captured_sizes(self.server_args, self.facts)

    @cached_property
    def coverage(self) -> pl.DataFrame:
        padding = not self.server_args.get("disable_cuda_graph_padding", False)
        return cuda_graph_coverage(self.batches, self.captured, padding=padding)

    @cached_property
    def graphs(self) -> dict[str, Any]:
        return graph_summary(self.coverage, self.captured)

    @cached_property
    def retracted(self) -> pl.DataFrame:
        """Retraction events of the log (``KV cache pool is full. Retract requests.``)."""
        log = self.run.log
        if log is None:
            return retractions(pl.DataFrame())
        msg = pl.col("message")
        hit = pl.any_horizontal(*(msg.str.contains(p, literal=True) for p in RETRACTION_PREFIXES))
        lines = (
            log.scan()
            .filter(hit)
            .select(
                pl.coalesce("ts", pl.col("wrapper_ts").cast(pl.Datetime("ms"))).alias("ts"),
                pl.col("ranks").str.extract(r"PP(\d+)", 1).cast(pl.Int64).alias("pp"),
                pl.col("ranks").str.extract(r"TP(\d+)", 1).cast(pl.Int64).alias("tp"),
                "message",
            )
            .collect()
        )
        # Every TP rank of a stage retracts the same requests and logs it: count one rank's.
        first_tp = pl.col("tp").min().over("pp")
        lines = lines.filter(pl.col("tp").is_null() | (pl.col("tp") == first_tp)).drop("tp")
        if self.launch is not None and lines.height:
            lines = lines.filter(pl.col("ts") >= self.launch.ts)
        return retractions(lines)

    @cached_property
    def kv(self) -> pl.DataFrame:
        return kv_pressure(self.batches, self.retracted)

    # ------------------------------------------------------------------ intended vs effective
    @property
    def command(self) -> tuple[str, str] | None:
        """(launch command, where it came from): ``run.toml``, else a line of the log."""
        return self.run.command

    @cached_property
    def intended(self) -> pl.DataFrame | None:
        """The launch command's flags against the logged ServerArgs, or None."""
        if self.command is None or self.launch is None or not self.server_args:
            return None
        try:
            flags = parse_launch_command(self.command[0])
        except ServerArgsError:
            return None
        return intended_vs_effective(
            flags, self.server_args, self.facts, complete=self.launch.complete
        )

    @cached_property
    def config_changes(self) -> pl.DataFrame:
        """Runtime changes of the launch's arguments: log lines and ``/server_info`` answers."""
        log, launch = self.run.log, self.launch
        overrides = (
            log.overrides.filter(pl.col("launch") == launch.index) if log and launch else None
        )
        return runtime_config.config_changes(self.server_args, overrides, self.run.server_info)

    # ------------------------------------------------------------------ the serving model
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
        if gpu is None and self.run.config.hardware:
            gpu, gpu_from = self.run.config.hardware, "run.toml hardware"
        if count is None and self.run.layout.known:
            count = self.run.layout.gpus
        link, link_from = self.run.config.interconnect, "run.toml"
        if link is None and self.run.topology is not None:
            link, link_from = self.run.topology.interconnect, "topology"
        return MachineIdentity(gpu, gpu_from, count, link, link_from if link else None)

    @cached_property
    def fit(self) -> Fit | None:
        """The serving model calibrated for this run, None when the model is unknown.

        The starting costs come from the machine (``machine.prior``); the single-stream points
        of this run and of the peers that served the same model on the same kind of machine
        calibrate them (``Fit.sources`` says which were fitted). Runs on other machines or of
        other models never change this run's fit.
        """
        spec = self.model.spec
        if spec is None:
            return None
        hardware, sources = prior(self.machine)
        group = [self, *(p for p in self.peers if self.shares_machine(p))]
        frames = [ctx.observed for ctx in group if ctx.observed.height]
        points = pl.concat(frames) if frames else observed_frame([])
        try:
            return fit(points, model=spec, prior=hardware, prior_sources=sources)
        except (ToolkitError, ZeroDivisionError, ValueError):
            return fit_none(spec, hardware, sources)

    def identity(self) -> dict[str, Any]:
        """What the diagnosis of this run rests on, and where each part came from: the layout,
        the model, the machine, and the serving model's constants (``--json``'s ``runs``)."""
        layout = self.run.layout
        return {
            "label": self.label,
            "layout": {
                "label": layout.label,
                "tp": layout.tp,
                "pp": layout.pp,
                "dp": layout.dp,
                "pp_async_batch_depth": layout.pp_async_batch_depth,
                "layout_from": layout.layout_from,
            },
            "model": self.model.to_dict(),
            "hardware": self.machine.to_dict(),
            "constants": dict(self.fit.sources) if self.fit is not None else None,
        }

    def shares_machine(self, other: RunAnalysis) -> bool:
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
    ) -> float | None:
        """The serving model's decode tok/s for ``layout`` at ``concurrency``; None when the
        model is unknown or the prediction fails."""
        if self.params is None:
            return None
        isl = _length(input_len, 1000)
        osl = _length(output_len, isl)
        try:
            tok_s = predict(layout, Workload(max(int(concurrency), 1), isl, osl), self.params).tok_s
        except (ToolkitError, ZeroDivisionError, ValueError):
            return None
        return tok_s if math.isfinite(tok_s) and tok_s > 0 else None

    def with_layout(self, **changes: Any) -> Layout:
        """The launch's layout with some settings replaced."""
        return replace(self.layout, **changes)

    def phase(self, index: int) -> dict[str, Any]:
        """One row of ``phases`` as a dict (empty when there is no such phase)."""
        rows = self.phases.filter(pl.col("phase") == index)
        return rows.row(0, named=True) if rows.height else {}

    def load_of(self, index: int | None) -> str:
        """How a phase is named in prose: ``at 64 concurrent requests`` when a benchmark run is
        placed on it, else ``in phase 3``; ``over the run`` for None."""
        if index is None:
            return "over the run"
        offered = self.phase(index).get("offered")
        return f"at {offered} concurrent requests" if offered else f"in phase {index}"


def _length(value: float | None, default: int) -> int:
    if value is None or not math.isfinite(value) or value < 1:
        return default
    return max(round(value), 1)


def model_groups(analyses: Iterable[RunAnalysis]) -> list[tuple[Fit, list[RunAnalysis]]]:
    """The runs with a known model, grouped by shared model and machine, each group with its fit
    (``RunAnalysis.fit``), in the order the runs came."""
    groups: list[tuple[Fit, list[RunAnalysis]]] = []
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
