"""Explorers for JupyterLab: ipywidgets controls above a view; each change re-runs one call of
``toolkit.report.sections`` with the controls' values. No logic of their own.

In a batch render (papermill + nbconvert) there is no kernel to answer the controls, so an
explorer shows its current view as a static section instead; the charts keep their Vega-Lite
interactions (brush to zoom, legend click), which need no kernel.

Every explorer exposes ``controls`` (name → widget) and ``view`` (the current
``report_views.View``), so it can be driven from code::

    ex = TimelineExplorer(["runs/tp8", "runs/pp8"])
    ex.controls["stages"].value = ("PP0", "PP7")
    ex.view.chart  # the timeline of those two stages

An explorer takes the runs as ``load_runs`` returns them (a ``RunSet``), or anything
``load_runs`` takes (a list of run directories, a comma-separated string), or loaded ``Run``
objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import ipywidgets as W

from toolkit.load.run import Run
from toolkit.report import sections as views
from toolkit.report.context import in_report

__all__ = [
    "ConfigDiffExplorer",
    "Explorer",
    "GpuExplorer",
    "ScalingExplorer",
    "TimelineExplorer",
    "WhatIfExplorer",
    "run_set",
]

_WIDE = W.Layout(width="420px")

Runs = views.RunSet | str | Path | Sequence[str | Path] | Sequence[Run]
"""What an explorer takes: a ``RunSet``, run directories, or loaded runs."""


def run_set(runs: Runs) -> views.RunSet:
    """``runs`` as a ``RunSet``: as it is, loaded from run directories (``load_runs``), or
    gathered from loaded ``Run`` objects."""
    if isinstance(runs, views.RunSet):
        return runs
    if isinstance(runs, Run):
        return views.RunSet([runs])
    if not isinstance(runs, str | Path) and runs and all(isinstance(r, Run) for r in runs):
        return views.RunSet([r for r in runs if isinstance(r, Run)])
    names = (
        runs
        if isinstance(runs, str)
        else [str(r) for r in ([runs] if isinstance(runs, Path) else runs)]
    )
    return views.load_runs(names)


class Explorer:
    """Controls on top, the view below. Subclasses build ``controls`` and ``compute``."""

    controls: dict[str, W.Widget]

    def __init__(self, runs: Runs) -> None:
        self.runs = run_set(runs)
        self.output = W.Output()
        self.view = self.compute()
        for widget in self.controls.values():
            widget.observe(self._changed, names="value")
        self._show()

    def compute(self) -> views.View:
        """The view for the controls' current values."""
        raise NotImplementedError

    def _changed(self, _change: Any = None) -> None:
        self.refresh()

    def refresh(self) -> views.View:
        """Recompute the view (controls call this on every change) and show it."""
        self.view = self.compute()
        self._show()
        return self.view

    def _show(self) -> None:
        from IPython import get_ipython

        if get_ipython() is None:
            return  # driven from plain Python (tests): the view is there, nothing to draw into
        self.output.clear_output(wait=True)
        with self.output:
            # a live control redraws at once: no static image, which only a saved notebook
            # needs, and an explorer's output lives in widget state, not in the notebook
            self.view.show(image=False)

    @property
    def widget(self) -> W.VBox:
        """The explorer as one widget: a row of controls and the output area."""
        return W.VBox([W.HBox(list(self.controls.values())), self.output])

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if in_report():
            display(
                HTML(
                    views.note(
                        "Static view: the controls of this explorer need a live kernel "
                        "(open the notebook in JupyterLab); zoom and legend clicks work here."
                    )
                )
            )
            display(self.view)
        else:
            display(self.widget)


def _labels(runs: views.RunSet) -> list[str]:
    return runs.labels


class ScalingExplorer(Explorer):
    """Pick two layouts and a metric: throughput with the gap, efficiency, or a latency."""

    METRICS: ClassVar[dict[str, str]] = {
        "throughput and gap": "throughput",
        "scaling efficiency": "efficiency",
        "median TPOT": "tpot_median_ms",
        "median TTFT": "ttft_median_ms",
    }

    def __init__(self, runs: Runs, a: str = "", b: str = "") -> None:
        runs = run_set(runs)
        labels = _labels(runs)
        a = runs.label(a) if a else labels[0]
        b = runs.label(b) if b else next((x for x in labels if x != a), labels[0])
        self.controls = {
            "a": W.Dropdown(options=labels, value=a, description="layout A"),
            "b": W.Dropdown(options=labels, value=b, description="layout B"),
            "metric": W.Dropdown(options=list(self.METRICS), description="show"),
        }
        super().__init__(runs)

    def compute(self) -> views.View:
        c = self.controls
        metric = self.METRICS[c["metric"].value]
        if metric == "throughput":
            a, b = c["a"].value, c["b"].value
            return views.scaling(self.runs, a, b)
        if metric == "efficiency":
            return views.efficiency(self.runs)
        return views.latency(self.runs, metric)


class WhatIfExplorer(Explorer):
    """Sliders for the SGLang flags the serving model knows; the model answers per point."""

    def __init__(
        self,
        runs: Runs,
        pp_max_micro_batch_size: int = 0,
        pp_async_batch_depth: int = -1,
        concurrency: int = 0,
    ) -> None:
        self.controls = {
            "pp_max_micro_batch_size": W.IntSlider(
                value=pp_max_micro_batch_size,
                min=0,
                max=64,
                description="micro-batch cap",
                tooltip="--pp-max-micro-batch-size; 0 = as launched",
                style={"description_width": "initial"},
                layout=_WIDE,
            ),
            "pp_async_batch_depth": W.IntSlider(
                value=pp_async_batch_depth,
                min=-1,
                max=16,
                description="async depth",
                tooltip="--pp-async-batch-depth; -1 = as launched",
                style={"description_width": "initial"},
                layout=_WIDE,
            ),
            "concurrency": W.IntSlider(
                value=concurrency,
                min=0,
                max=256,
                description="concurrency",
                tooltip="requests in flight; 0 = as measured",
                style={"description_width": "initial"},
                layout=_WIDE,
            ),
        }
        super().__init__(runs)

    @property
    def changes(self) -> dict[str, int]:
        """The what-if the sliders describe (sliders at 'as launched' are left out)."""
        c = self.controls
        out = {}
        if c["pp_max_micro_batch_size"].value > 0:
            out["pp_max_micro_batch_size"] = c["pp_max_micro_batch_size"].value
        if c["pp_async_batch_depth"].value >= 0:
            out["pp_async_batch_depth"] = c["pp_async_batch_depth"].value
        if c["concurrency"].value > 0:
            out["concurrency"] = c["concurrency"].value
        return out

    def compute(self) -> views.View:
        return views.what_if(self.runs, self.changes)


def _set_choices(widget: W.Widget, options: list[str], value: Any) -> None:
    """New options and value for a selection widget, sent to the page in one message: sent
    apart, the page applies a selection index to options it does not have yet."""
    with widget.hold_sync():
        widget.options = options
        widget.value = value


def _window_slider(span: float) -> W.FloatRangeSlider:
    """A time window over the whole run, in minutes."""
    span = max(span, 0.1)
    return W.FloatRangeSlider(
        value=(0.0, span),
        min=0.0,
        max=span,
        step=span / 200,
        description="minutes",
        readout_format=".1f",
        layout=_WIDE,
    )


class _RunWindowExplorer(Explorer):
    """An explorer of one run over a time window: picking another run resets the other controls
    to that run's extent before one refresh."""

    def __init__(self, runs: Runs) -> None:
        self._resetting = False
        super().__init__(runs)
        self.controls["run"].observe(self._run_changed, names="value")

    def _reset(self, run: str) -> None:
        raise NotImplementedError

    def _run_changed(self, change: Any) -> None:
        self._resetting = True
        try:
            self._reset(change["new"])
        finally:
            self._resetting = False
        self.refresh()

    def _changed(self, change: Any = None) -> None:
        if change is not None and change["owner"] is self.controls["run"]:
            return  # _run_changed resets the other controls first, then refreshes
        if not self._resetting:
            self.refresh()

    def _window(self) -> tuple[float, float] | None:
        """The chosen window in minutes, or None for the whole run."""
        lo, hi = self.controls["window"].value
        return None if lo <= 0 and hi >= self.controls["window"].max else (lo, hi)

    def _set_window(self, span: float) -> None:
        window = self.controls["window"]
        with window.hold_sync():
            window.max = max(span, 0.1)
            window.value = (0.0, max(span, 0.1))


class TimelineExplorer(_RunWindowExplorer):
    """One run's stages over time: pick the run, a time window and the stages to show."""

    def __init__(self, runs: Runs, run: str = "", max_points: int = views.MAX_POINTS) -> None:
        runs = run_set(runs)
        self.max_points = max_points
        first = runs.label_of(views.pick_run(runs, run or None))
        span, stages = views.timeline_extent(runs, first)
        self.controls = {
            "run": W.Dropdown(options=_labels(runs), value=first, description="run"),
            "window": _window_slider(span),
            "stages": W.SelectMultiple(options=stages, value=tuple(stages), description="stages"),
        }
        super().__init__(runs)

    def _reset(self, run: str) -> None:
        """A new run has its own length and stages: reset the window and stage list to them."""
        span, stages = views.timeline_extent(self.runs, run)
        self._set_window(span)
        _set_choices(self.controls["stages"], stages, tuple(stages))

    def compute(self) -> views.View:
        c = self.controls
        return views.stage_timeline(
            self.runs,
            c["run"].value,
            window=self._window(),
            stages=list(c["stages"].value) or None,
            max_points=self.max_points,
        )


class GpuExplorer(_RunWindowExplorer):
    """One run's GPU trace: pick the run, the metric, the GPUs and a time window."""

    def __init__(
        self,
        runs: Runs,
        run: str = "",
        metric: str = "util_pct",
        max_points: int = views.MAX_POINTS,
    ) -> None:
        runs = run_set(runs)
        self.max_points = max_points
        first = runs.label_of(views.pick_run(runs, run or None))
        span, gpus, metrics = views.gpu_extent(runs, first)
        self.controls = {
            "run": W.Dropdown(options=_labels(runs), value=first, description="run"),
            "metric": W.Dropdown(
                options=metrics or [metric],
                value=metric if metric in metrics or not metrics else metrics[0],
                description="metric",
            ),
            "gpus": W.SelectMultiple(options=gpus, value=tuple(gpus), description="GPUs"),
            "window": _window_slider(span),
        }
        super().__init__(runs)

    def _reset(self, run: str) -> None:
        span, gpus, metrics = views.gpu_extent(self.runs, run)
        c = self.controls
        if metrics:
            keep = c["metric"].value if c["metric"].value in metrics else metrics[0]
            _set_choices(c["metric"], metrics, keep)
        _set_choices(c["gpus"], gpus, tuple(gpus))
        self._set_window(span)

    def compute(self) -> views.View:
        c = self.controls
        return views.gpu_metrics(
            self.runs,
            c["run"].value,
            metric=c["metric"].value,
            gpus=list(c["gpus"].value) or None,
            window=self._window(),
            max_points=self.max_points,
        )


class ConfigDiffExplorer(Explorer):
    """Launch settings side by side: pick the runs, all settings or only differences, a filter."""

    def __init__(self, runs: Runs, only_different: bool = True, contains: str = "") -> None:
        runs = run_set(runs)
        labels = _labels(runs)
        self.controls = {
            "runs": W.SelectMultiple(options=labels, value=tuple(labels), description="runs"),
            "only_different": W.Checkbox(value=only_different, description="only differences"),
            "contains": W.Text(value=contains, description="filter", placeholder="e.g. pp_"),
        }
        super().__init__(runs)

    def compute(self) -> views.View:
        c = self.controls
        return views.config_diff(
            self.runs,
            labels=list(c["runs"].value) or None,
            only_different=c["only_different"].value,
            contains=c["contains"].value,
        )
