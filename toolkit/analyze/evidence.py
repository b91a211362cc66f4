"""``RunEvidence``: a run's timed inputs on its log's clock, its GPUs by identity, and each
stage's busy share from the best evidence the run holds.

Mixed into ``RunAnalysis`` (which provides ``run``, ``batches``, ``timeline``, ``phases``,
``phase_summary`` and ``command``); every value is computed on first use.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from toolkit.analyze import gpu_clock, input_clocks
from toolkit.analyze.clocks import ClockFit, fits_note
from toolkit.analyze.stage_evidence import stage_shares
from toolkit.analyze.stages import PHASE_BUSY, STAGE_BUSY, apart_note, phase_busy, stage_busy
from toolkit.errors import ToolkitError
from toolkit.load.gpu.identity import GpuMapping, identify_roles
from toolkit.load.gpu.roles import gpu_roles
from toolkit.load.prometheus import Metrics
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command

if TYPE_CHECKING:
    from toolkit.load.run import Run

__all__ = ["RunEvidence"]

_METRICS_SOURCES = ("/metrics device time", "/metrics scheduler")


class RunEvidence:
    """The GPU-trace, clock and per-stage evidence part of ``RunAnalysis``."""

    run: Run
    batches: pl.DataFrame
    timeline: pl.DataFrame
    phases: pl.DataFrame
    phase_summary: pl.DataFrame
    command: tuple[str, str] | None

    # ------------------------------------------------------------------ clocks
    @cached_property
    def trace_fits(self) -> dict[str, ClockFit]:
        """Each timed GPU trace file's clock against the log's (``input_clocks.trace_fits``)."""
        return input_clocks.trace_fits(self.run, self.batches)

    @cached_property
    def metrics_fits(self) -> dict[str, ClockFit]:
        """Each ``/metrics`` file's clock against the log's."""
        return input_clocks.metrics_fits(self.run, self.batches)

    @cached_property
    def phase_fit(self) -> ClockFit | None:
        """The phase file's clock against the log's, or None without one."""
        return input_clocks.phase_fit(self.run, self.batches)

    @property
    def clock_fits(self) -> list[ClockFit]:
        """Every timed input's clock fit: GPU trace files, metrics files, the phase file."""
        fits = [*self.trace_fits.values(), *self.metrics_fits.values()]
        return [*fits, self.phase_fit] if self.phase_fit is not None else fits

    @cached_property
    def clocks(self) -> list[dict[str, Any]]:
        """Per timed input, the clock offset applied and why: ``input``, ``files``,
        ``offset_s`` (null: not used), ``source`` (``run.toml``, ``estimated`` or ``none``),
        ``agreement`` and ``note`` (``ClockFit.record``); a trace that prints no time is
        listed with where it was placed (no offset: ``[gpu_trace] start`` places it)."""
        out = [fit.record() for fit in self.clock_fits]
        found = self.gpu_placement
        if found is not None:
            start, score, elsewhere = found
            at = f"first sample at {start:%Y-%m-%d %H:%M:%S}"
            note = (
                f"prints no time; placed by its busy stretches with its {at} ({score:.0%} "
                f"agreement, {elsewhere:.0%} at best anywhere else)"
                if self.gpu_placed
                else f"prints no time and lines up too unclearly to place ({at} at best): not used"
            )
            out.append(
                {
                    "input": "GPU trace",
                    "files": ", ".join(Path(f).name for f in self.run.untimed_gpu_files),
                    "offset_s": None,
                    "source": "estimated" if self.gpu_placed else "none",
                    "agreement": round(score, 3),
                    "note": note,
                }
            )
        return out

    @cached_property
    def clock_candidate(self) -> tuple[float, float, float] | None:
        """(shift, agreement, agreement as recorded) of the first trace file whose clock looks
        off the log's (shifted, too weak, or ambiguous); None when every one lines up."""
        for fit in self.trace_fits.values():
            if fit.outcome in ("shifted", "weak", "ambiguous"):
                return fit.shift_s, fit.agreement or 0.0, fit.recorded_agreement or 0.0
        return None

    @cached_property
    def clock_shift(self) -> tuple[float, float, float] | None:
        """``clock_candidate`` of the first trace file read shifted; else None."""
        for fit in self.trace_fits.values():
            if fit.outcome == "shifted":
                return fit.shift_s, fit.agreement or 0.0, fit.recorded_agreement or 0.0
        return None

    def clock_problem(self, *inputs: str) -> str | None:
        """Why an input of ``inputs`` (``GPU trace``, ``metrics``, ``phases``; all when none
        is named) that is there is not read: its clock cannot be placed; else None."""
        return fits_note(self.clock_fits, inputs)

    # ------------------------------------------------------------------ GPU trace
    @cached_property
    def gpu_placement(self) -> tuple[datetime, float, float] | None:
        """Where a GPU trace that prints no time lines up with the log (``gpu_clock.placement``)."""
        return gpu_clock.placement(self.run, self.batches)

    @property
    def gpu_placed(self) -> bool:
        """Whether ``gpu_placement`` is clear enough to read the trace at that place."""
        return gpu_clock.is_clear(self.gpu_placement)

    @cached_property
    def gpu_samples(self) -> pl.DataFrame | None:
        """GPU trace samples on the log's clock, or None when the run has no trace, or none of
        its files is on the log's clock: it prints no time and is not placed, does not overlap
        the launch, or its clock cannot be placed (``mismatches`` says which). Each trace file
        whose clock is clearly off (``trace_fits``) is shifted onto the log's."""
        samples = self.run.node_samples  # the trace, each sample on its node
        if samples is not None and self.gpu_placed and self.gpu_placement is not None:
            placed = samples.filter(pl.col("elapsed_s").is_not_null())
            return placed.with_columns(ts=gpu_clock.at_elapsed(self.gpu_placement[0]))
        if self.run.gpu_span is None or not isinstance(samples, pl.DataFrame):
            return None
        samples = samples.filter(pl.col("ts").is_not_null())
        samples = input_clocks.shifted(samples, self.trace_fits)
        return samples if samples.height else None

    @cached_property
    def metrics(self) -> Metrics | None:
        """The run's ``/metrics`` series on the log's clock (``Run.metrics``, each file shifted
        or left out by ``metrics_fits``); None without any, or when they cannot be read."""
        try:
            metrics = self.run.metrics
        except ToolkitError:
            return None
        return input_clocks.shifted_metrics(metrics, self.metrics_fits)

    @cached_property
    def phase_marks(self) -> pl.DataFrame | None:
        """The phase file's benchmark runs on the log's clock (``Run.phase_marks`` shifted by
        ``phase_fit``); None without one, or when its clock cannot be placed."""
        marks, fit = self.run.phase_marks, self.phase_fit
        if marks is None or fit is None:
            return marks
        if not fit.used:
            return None
        if not fit.applied_s:
            return marks
        shift = pl.duration(milliseconds=round(fit.applied_s * 1000))
        return marks.with_columns(pl.col("start") + shift, pl.col("end") + shift)

    @cached_property
    def mismatches(self) -> list[dict[str, str]]:
        """Inputs that do not belong together (``Run.mismatches``), the clocks' notes, and how
        GPUs were mapped to stages where that is in doubt."""
        out = gpu_clock.clock_notes(self.run, self.gpu_placement, self.gpu_placed, self.clock_fits)
        if self.gpu_samples is not None:
            mapping = self.gpu_mapping
            files = ", ".join(sorted({Path(s).name for s in self.gpu_samples["source"].unique()}))
            for problem in mapping.problems if mapping is not None else ():
                out.append({"input": "GPU mapping", "files": files, "detail": problem})
            nodes = self.run.gpu_nodes
            for guess in nodes.guesses if nodes is not None else ():
                out.append({"input": "GPU trace nodes", "files": files, "detail": guess})
        return out + apart_note(self.timeline)

    # ------------------------------------------------------------------ GPUs and stages
    @cached_property
    def gpu_mapping(self) -> GpuMapping | None:
        """Which GPU runs which rank, by the strongest witness the run has
        (``identity.identify_roles``), or None when neither a launch nor any witness of the
        layout is at hand."""
        layout = self.run.layout
        if not layout.known and self.run.launch is None:
            return None
        try:
            roles = gpu_roles(layout, inventory=self.run.gpu_inventory)
        except ToolkitError:
            return None
        try:
            apps = self.run.compute_apps
        except ToolkitError:
            apps = None  # an unreadable listing is the loader's error, where it is used
        return identify_roles(
            roles,
            apps=apps,
            inventory=self.run.gpu_inventory,
            device_order=self._launch_env().get("CUDA_DEVICE_ORDER"),
            visible=layout.visible_devices,
            models=self._gpu_models(),
        )

    @cached_property
    def roles(self) -> pl.DataFrame | None:
        """Which GPU runs which stage (``gpu_mapping``), or None without a layout."""
        return self.gpu_mapping.roles if self.gpu_mapping is not None else None

    @property
    def roles_note(self) -> str | None:
        """How ranks were mapped to GPUs, and whether that is a guess."""
        return self.gpu_mapping.note if self.gpu_mapping is not None else None

    def _launch_env(self) -> dict[str, str]:
        if self.command is None:
            return {}
        try:
            env = parse_launch_command(self.command[0]).get("__env__")
        except ServerArgsError:
            return {}
        return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}

    def _gpu_models(self) -> list[str]:
        names: set[str] = set()
        inventory = self.run.gpu_inventory
        if inventory is not None and "name" in inventory.columns:
            names |= set(inventory["name"].drop_nulls().to_list())
        trace = self.run.gpu
        if trace is not None and "name" in trace.samples.columns:
            names |= set(trace.samples["name"].drop_nulls().unique().to_list())
        return sorted(names)

    @cached_property
    def stage_evidence(self) -> pl.DataFrame:
        """Per PP stage, its busy share from the best evidence at hand, with its source and
        noise (``stage_evidence.stage_shares``): over all decoding (``phase`` null), then per
        phase's steady window."""
        metrics = self.metrics.samples if self.metrics is not None else None
        common = {
            "samples": self.gpu_samples,
            "roles": self.roles,
            "metrics": metrics,
            "timeline": self.timeline,
        }
        whole = stage_shares(self.batches, windows=None, **common)
        by_phase = stage_shares(self.batches, windows=self._phase_windows(), **common)
        return pl.concat([whole, by_phase]) if by_phase.height else whole

    def _phase_windows(self) -> pl.DataFrame:
        windows = self.phase_summary.select(
            "phase", pl.col("steady_start").alias("start"), pl.col("steady_end").alias("end")
        ).drop_nulls()
        return windows if windows.height else self.phases.select("phase", "start", "end")

    def _metrics_evidence(self, by_phase: bool) -> pl.DataFrame | None:
        """``stage_evidence`` rows read from ``/metrics`` (over the run or per phase)."""
        if self.metrics is None:
            return None
        rows = self.stage_evidence.filter(
            pl.col("source").is_in(_METRICS_SOURCES)
            & (pl.col("phase").is_not_null() if by_phase else pl.col("phase").is_null())
        )
        return rows if rows.height else None

    @cached_property
    def busy(self) -> pl.DataFrame:
        """Per stage busy share while decoding: the GPU trace, else ``/metrics`` device time,
        else the log's fwd occupancy, else ``/metrics`` scheduler seconds
        (``stage_evidence``)."""
        busy = stage_busy(self.batches, self.gpu_samples, self.roles, timeline=self.timeline)
        if self.gpu_samples is not None and busy["busy_pct"].null_count() < busy.height:
            return busy
        rows = self._metrics_evidence(by_phase=False)
        if rows is None or (busy.height and rows["source"][0] != "/metrics device time"):
            return busy
        log = busy.select("pp", "fwd_occupancy_pct")
        mean = rows["busy_pct"].mean()
        out = (
            _as_busy(rows, "pp")
            .with_columns(vs_mean=pl.col("busy_pct") / mean if mean else pl.lit(None, pl.Float64))
            .join(log, on="pp", how="left")
        )
        return out.sort("pp").select(STAGE_BUSY.names()).cast(dict(STAGE_BUSY))

    @cached_property
    def busy_by_phase(self) -> pl.DataFrame | None:
        """Per phase and stage busy share: the GPU trace, else ``/metrics`` (device time, else
        scheduler seconds); None without either."""
        if self.gpu_samples is not None:
            return phase_busy(self.gpu_samples, self.roles, self._phase_windows())
        rows = self._metrics_evidence(by_phase=True)
        if rows is None:
            return None
        out = _as_busy(rows, "phase", "pp")
        return out.sort("phase", "pp").select(PHASE_BUSY.names()).cast(dict(PHASE_BUSY))


def _as_busy(rows: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """``/metrics`` stage-evidence rows in the busy tables' columns (no below-half share: a
    counter gives no per-sample distribution)."""
    return rows.select(
        *keys,
        "gpus",
        "busy_pct",
        below_half_share=pl.lit(None, pl.Float64),
        samples=pl.col("samples").cast(pl.UInt32),
        metric=pl.format("/metrics {}", "metric"),
    )
