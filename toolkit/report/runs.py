"""The runs a report compares: run directories found from the working directory or its parents,
loaded with a progress bar, and one ``RunAnalysis`` each, shared by every section."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.headline import Headline, headline, labelled_bench
from toolkit.analyze.scaling import caveat, unlike
from toolkit.diagnose import Finding, RunAnalysis, diagnose, skipped_checks
from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import GpuTrace, Topology
from toolkit.load.run import Run, load_run
from toolkit.report.context import full_paths, in_report, progress_stream
from toolkit.report.paths import common_root, shown_path, split_runs
from toolkit.synth.sample import SAMPLE_PREFIX, sample_root

__all__ = ["RunSet", "load_runs", "resolve_run_dir"]


def resolve_run_dir(path: str | Path) -> Path:
    """A run directory as given, else (when relative) the same path under a parent directory,
    else, for the sample's ``data/incident/...``, the sample wherever ppscope is installed.

    Notebooks name ``data/incident/tp8`` relative to the repository; JupyterLab starts them in
    ``notebooks/``. The path itself is returned unchanged when it exists, so reports keep
    relative names.
    """
    p = Path(path).expanduser()
    if p.exists() or p.is_absolute():
        return p
    here = Path.cwd()
    for parent in here.parents:
        candidate = parent / p
        if candidate.exists():
            return Path(*[".."] * (len(here.parts) - len(parent.parts))) / p
    parts = p.as_posix().split("/")
    if "/".join(parts[:2]) == SAMPLE_PREFIX and len(parts) == 3:
        return sample_root() / parts[2]
    raise ToolkitError(f"{path}: no such run directory (looked in {here.name}/ and its parents)")


class RunSet:
    """The runs a report compares, in the order given, with their GPU traces loaded once."""

    def __init__(self, runs: Sequence[Run], given: Sequence[str] | None = None) -> None:
        self.runs = list(runs)
        self.paths = list(given) if given is not None else [str(r.path) for r in self.runs]
        self._analyses: list[RunAnalysis] | None = None
        self._diagnosis: tuple[list[Finding], list[dict[str, str]]] | None = None

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __repr__(self) -> str:
        return f"<RunSet {', '.join(self.labels)}>"

    @property
    def labels(self) -> list[str]:
        """Run labels, unique: a repeated label gets its folder name appended."""
        seen: dict[str, int] = {}
        out = []
        for run in self.runs:
            label = run.label
            seen[label] = seen.get(label, 0) + 1
            out.append(label if seen[label] == 1 else f"{label} ({run.path.name})")
        return out

    def label(self, name: str) -> str:
        """The full label a name means: the label itself, else the one label equal to it
        ignoring case, else the one label it starts (``tp8`` → ``TP8 (tp8)``).

        Raises ``ToolkitError`` listing the labels when none or several match.
        """
        labels = self.labels
        wanted = name.strip()
        if wanted in labels:
            return wanted
        folded = wanted.casefold()
        for matches in (
            [x for x in labels if x.casefold() == folded],
            [x for x in labels if x.casefold().startswith(folded)],
        ):
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise ToolkitError(
                    f"run {name!r} is ambiguous: it matches {', '.join(map(repr, matches))}"
                )
        raise ToolkitError(f"no run labelled {name!r} (have: {', '.join(map(repr, labels))})")

    def get(self, label: str | None) -> Run:
        """The run a label names (``label``: full, any case, or a unique prefix); the first run
        when None or empty."""
        if not label or not label.strip():
            return self.runs[0]
        return self.runs[self.labels.index(self.label(label))]

    @property
    def shown_paths(self) -> list[str]:
        """The run directories as a report shows them: relative to the folder that holds them
        all (``tp8``, ``pp8``), or absolute under ``--full-paths``."""
        full = full_paths()
        dirs = [run.path for run in self.runs]
        root = None if full else common_root(dirs)
        return [shown_path(d, root, full=full) for d in dirs]

    def label_of(self, run: Run) -> str:
        return self.labels[self.runs.index(run)]

    @property
    def analyses(self) -> list[RunAnalysis]:
        """One ``RunAnalysis`` per run, shared by the findings and the sections that show the
        same occupancy, coverage and KV tables (computed once)."""
        if self._analyses is None:
            self._analyses = [RunAnalysis(run) for run in self.runs]
            for ctx in self._analyses:
                ctx.peers = tuple(c for c in self._analyses if c is not ctx)
        return self._analyses

    def diagnosis(self) -> tuple[list[Finding], list[dict[str, str]]]:
        """The ranked findings and the skipped checks of these runs (diagnosed once, shared by
        the summary and the findings section)."""
        if self._diagnosis is None:
            analyses = self.analyses
            self._diagnosis = (diagnose(analyses), skipped_checks(analyses))
        return self._diagnosis

    def analysis(self, run: Run) -> RunAnalysis:
        return self.analyses[self.runs.index(run)]

    def gpu(self, run: Run) -> GpuTrace | None:
        """The run's GPU trace, or None (also when it holds no sample)."""
        trace = run.gpu
        return trace if trace is not None and trace.samples.height else None

    def topology(self, run: Run) -> Topology | None:
        """The run's ``nvidia-smi topo -m`` output, or None."""
        return run.topology

    def bench(self) -> pl.DataFrame | None:
        """Benchmark runs of every run, labelled by run."""
        return labelled_bench(
            (label, run.bench.runs if run.bench is not None else None)
            for run, label in zip(self.runs, self.labels, strict=True)
        )

    def unlike(self) -> list[str]:
        """What differs between the runs besides their layout (``analyze.scaling.unlike``):
        the served model and the machine, where the inputs say."""
        return unlike(self._facts())

    def headline(self, a: str = "", b: str = "") -> Headline:
        """The verdict every format leads with (``analyze.headline.headline``): ``a`` and
        ``b`` in any case or by a unique prefix (``label``), default the first two layouts
        with benchmark results."""
        return headline(
            self.bench(), self._facts(), self.label(a) if a else "", self.label(b) if b else ""
        )

    def caveat(self, labels: Sequence[str] = ()) -> str:
        """The caveat a headline comparing ``labels`` (default: every run) carries when they
        differ besides their layout (``analyze.scaling.caveat``); empty when like for like."""
        facts = self._facts()
        return caveat({k: v for k, v in facts.items() if not labels or k in labels})

    def _facts(self) -> dict[str, dict[str, str | None]]:
        return {
            label: ctx.like_facts() for label, ctx in zip(self.labels, self.analyses, strict=True)
        }

    def observed(self) -> pl.DataFrame | None:
        """Observed points for the serving model: every run's ``RunAnalysis.observed``."""
        frames = [ctx.observed for ctx in self.analyses if ctx.observed.height]
        return pl.concat(frames) if frames else None


def load_runs(runs: str | Sequence[str | Path], *, progress: bool | None = None) -> RunSet:
    """Load run directories and parse their inputs now.

    ``runs`` is a list, a comma-separated string, or a JSON list (for names with commas).

    Parsing happens here, so later sections are quick, with a progress bar per file: in a
    live notebook under the cell; in a batch render on the terminal of ``ppscope report``
    (never in the report itself). ``progress=False`` silences it.
    """
    given = split_runs(runs)
    if not given:
        raise ToolkitError("no run directories given")
    loaded = [load_run(resolve_run_dir(g)) for g in given]
    for run, path in zip(loaded, given, strict=True):
        if not run.has_inputs:  # an empty folder must not read as a healthy run
            raise ToolkitError(f"{path}: no SGLang log, benchmark result or GPU trace found")
    bar = _progress_bar(loaded) if progress is not False else None
    out = RunSet(loaded, given)
    for run, path in zip(loaded, given, strict=True):
        for step in ("log", "bench", "gpu"):
            if bar is not None:
                bar.set_description(f"{path}: {step}")
            if step == "gpu":
                out.gpu(run)
            else:
                getattr(run, step)
            if bar is not None:
                bar.update(_step_bytes(run, step))
    if bar is not None:
        bar.close()
    return out


def _step_bytes(run: Run, step: str) -> int:
    """Bytes of the files a loading step reads, to advance the progress bar by."""
    logs = {"sglang-log"}
    traces = {"nvidia-smi-csv", "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter"}
    wanted = {"log": logs, "gpu": traces}.get(step)
    return sum(
        p.stat().st_size
        for fmt, ps in run.files.items()
        for p in ps
        if (fmt in wanted if wanted is not None else fmt not in logs | traces)
    )


def _progress_bar(runs: Sequence[Run]) -> Any:
    total = sum(p.stat().st_size for r in runs for ps in r.files.values() for p in ps)
    options = {"total": total, "unit": "B", "unit_scale": True, "leave": False}
    if in_report():
        stream = progress_stream()
        if stream is None:
            return None
        from tqdm import tqdm as text_bar

        # the kernel's own stderr is the terminal of ``ppscope report``: the bar is seen
        # there and never lands in the notebook's outputs
        return text_bar(file=stream, **options)
    from tqdm.auto import tqdm

    return tqdm(**options)
