"""``RunAnalysis``: every analysis of one run, computed once and shared by all the rules.

A rule is a function of one ``RunAnalysis`` (its ``peers`` are the other runs diagnosed with
it, for comparisons across layouts). Analyses are computed on first use, so a run without a
GPU trace never loads one and a rule that needs only the config never reads the batches.
"""

from __future__ import annotations

import math
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
from toolkit.analyze.launches import LaunchViews
from toolkit.analyze.model import Layout
from toolkit.analyze.model.admission import replay_model
from toolkit.analyze.model.spec import ModelSpec
from toolkit.analyze.observed_points import observed_points
from toolkit.analyze.occupancy import occupancy_summary, slot_occupancy
from toolkit.analyze.partition import stage_memory, uneven_partition
from toolkit.analyze.phases import WARMUP_REQUESTS, decode_phases
from toolkit.analyze.serving import ServingModel, model_groups
from toolkit.analyze.stage_account import profile_phase, stage_account
from toolkit.analyze.stages import LOG_INTERVAL, stage_desync, stage_timeline
from toolkit.errors import ToolkitError
from toolkit.load.profile import Profile
from toolkit.load.run import Run, load_run
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command

__all__ = ["RunAnalysis", "model_groups", "observed_points"]


class RunAnalysis(LaunchViews, ServingModel, RunEvidence):
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
        """``occupancy_summary`` of the run's phases but its warm-ups (``is_warmup``): every
        verdict reads its phases from here."""
        summary = occupancy_summary(self.occupancy, self.phases, self.layout, self.replay_model)
        warmups = [p for p in summary["phase"].to_list() if self.is_warmup(p)]
        return summary.filter(~pl.col("phase").is_in(warmups)) if warmups else summary

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

    @property
    def profile(self) -> Profile | None:
        """The run's PyTorch profiler traces (``Run.profile``), or None."""
        return self.run.profile

    @cached_property
    def stage_account(self) -> pl.DataFrame | None:
        """Per stage and loop iteration, where the time of the run's profiler traces goes
        (``stage_account``; transfers measured); None without a readable trace."""
        profile = self.profile
        account = stage_account(profile) if profile is not None and profile.traces else None
        return account if account is not None and account.height else None

    def profile_phase(self, name: str | None) -> int | None:
        """The phase a profile folder was taken in (``profile_phase``), or None."""
        return profile_phase(name, self.phases)

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
            "constants": self.constants() if self.fit is not None else None,
            **self.launch_record(),
        }

    def phase(self, index: int) -> dict[str, Any]:
        """One row of ``phases`` as a dict (empty when there is no such phase)."""
        rows = self.phases.filter(pl.col("phase") == index)
        return rows.row(0, named=True) if rows.height else {}

    def load_of(self, index: int | None) -> str:
        """How a phase is named in prose, by its concurrency, never by its index: ``at 64
        concurrent requests`` when a benchmark run is placed on it; ``in the warm-up before
        the benchmark`` for a warm-up (``is_warmup``); else by the requests the log shows in
        flight, ``at ~12 requests in flight (no benchmark run placed)``; ``over the run`` for
        None."""
        if index is None:
            return "over the run"
        row = self.phase(index)
        offered, peak = row.get("offered"), row.get("peak_running")
        if offered:
            return f"at {offered} concurrent requests"
        if self.is_warmup(index):
            return "in the warm-up before the benchmark"
        if isinstance(peak, int | float) and math.isfinite(peak) and peak > 0:
            return f"at ~{peak:.0f} requests in flight (no benchmark run placed)"
        return "in a stretch of decoding no benchmark run is placed on"

    def is_warmup(self, index: int | None) -> bool:
        """Whether a phase is a warm-up: no benchmark run placed on it, at most one request in
        flight, before the first phase a run is placed on (SGLang's or the benchmark's single
        warm-up request). Warm-ups are named as such and judged by no finding."""
        if index is None or self.bench is None:
            return False
        row = self.phase(index)
        if not row or row.get("offered") is not None or row.get("bench_run") is not None:
            return False
        placed = self.phases.filter(pl.col("offered").is_not_null())["phase"]
        peak = row.get("peak_running")
        return (
            placed.len() > 0
            and index < placed.min()
            and (peak is None or not math.isfinite(peak) or peak <= WARMUP_REQUESTS)
        )
