"""Runs of many result files into one table: labels, layouts and concurrency resolved.

Each run's label, layout (tp/pp/dp/ep) and concurrency come from the first place that states
them: the caller, the file, the run directory's ``run.toml``, its server log, the label text;
the table says where each came from (``label_from``, ``layout_from``, ``concurrency_from``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.bench.common import (
    Parsed,
    concurrency_from_text,
    extra_json,
    fill_means,
    layout_from_text,
    layout_label,
    num,
    whole,
)
from toolkit.load.bench.context import RunContext
from toolkit.load.bench.format import Detector, Format, Loader, Options, Summarizer
from toolkit.load.damage import collecting
from toolkit.load.limits import beyond
from toolkit.schema.bench import REQUESTS, RUNS

__all__ = ["BenchResults", "Collector", "read_past_damage", "result_format", "summarize_results"]


@dataclass
class BenchResults:
    """Benchmark runs (``runs``, schema ``RUNS``) and their requests (``requests``).

    ``files`` has one record per file read (``summary()`` shows them); ``skipped`` the files
    of run directories that hold no benchmark result, with the reason.
    """

    runs: pl.DataFrame
    requests: pl.DataFrame
    files: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    damaged: list[ToolkitError] = field(default_factory=list)
    """Damage read past (a cut last line, a result file of a run directory that failed)."""

    def __repr__(self) -> str:
        layouts = ", ".join(self.layouts)
        return f"<BenchResults {self.runs.height} runs from {len(self.files)} files: {layouts}>"

    @cached_property
    def layouts(self) -> list[str]:
        """Layout labels in the order they first appear."""
        return [x for x in self.runs["label"].unique(maintain_order=True).to_list() if x]

    def summary(self) -> list[dict[str, Any]]:
        """One record per file: ``{"path", "format", "runs", "layouts"}``."""
        return [dict(f) for f in self.files]


@dataclass
class Collector:
    """Runs, requests and file records gathered from the files read so far."""

    mapping: dict[str, str] | None = None
    label: str | None = None
    concurrency: dict[str, int] = field(default_factory=dict)  # file name or path → given
    runs: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    failed: list[ToolkitError] = field(default_factory=list)
    damaged: list[ToolkitError] = field(default_factory=list)
    exports: dict[int, str] = field(default_factory=dict)  # run → how its tool exported it
    strict: bool = False  # the first damaged line of a file is raised, not read past

    def add(self, path: Path, fmt: str, load: Loader, context: RunContext) -> None:
        """The runs of one file, read by ``load`` (the ``load`` of format ``fmt``)."""
        labels: list[str] = []
        start = len(self.damaged)
        options = Options(self.mapping, context.cache, self.strict)
        parsed_runs, found = read_past_damage(path, load, options)
        self.damaged += found
        for entry, parsed in enumerate(parsed_runs):
            row = _resolve(parsed, context, self.label)
            given = self.concurrency.get(str(path), self.concurrency.get(path.name))
            if given is not None:
                row["concurrency"], row["concurrency_from"] = given, "argument"
            row.update(source=str(path), run=len(self.runs), entry=entry, format=fmt)
            row["lineno"] = parsed.lineno
            row["extra"] = extra_json(parsed.extra)
            typed = _typed(row, RUNS)
            reason = _beyond_limits(typed)
            if reason is not None:  # it would size a replay: this run is left out, named
                self.damaged.append(ParseError(path, parsed.lineno, f"{reason}; run left out"))
                continue
            if parsed.export is not None:
                self.exports[row["run"]] = parsed.export
            self.runs.append(typed)
            for request in parsed.requests:
                request.update(
                    source=str(path),
                    run=row["run"],
                    label=row["label"],
                    concurrency=row["concurrency"],
                )
                self.requests.append(_typed(request, REQUESTS))
            if row["label"] not in labels:
                labels.append(row["label"])
        mine = self.damaged[start:]
        damaged = [f"line {getattr(e, 'lineno', '?')}: {getattr(e, 'reason', e)}" for e in mine]
        self.files.append(
            {"path": str(path), "format": fmt, "runs": len(parsed_runs), "layouts": labels}
            | ({"damaged": damaged} if damaged else {})
        )

    def merge_exports(self) -> None:
        """One GenAI-Perf/AIPerf run exported several ways counts once.

        Their artifact directory holds the summary JSON, the summary CSV and (AIPerf) the
        per-request records of the same run. Where a directory has at most one of each, the
        JSON's row is kept (else the CSV's, else the records'), the others are dropped and
        their requests move to the kept run.
        """
        groups: dict[Path, dict[str, list[dict[str, Any]]]] = {}
        for row in self.runs:
            kind = self.exports.get(row["run"])
            if kind is not None:
                group = groups.setdefault(Path(row["source"]).parent, {})
                group.setdefault(kind, []).append(row)
        dropped: set[int] = set()
        for group in groups.values():
            if len(group) < 2 or any(len(rows) > 1 for rows in group.values()):
                continue
            keep, *others = [group[k][0] for k in ("json", "csv", "records") if k in group]
            for row in others:
                dropped.add(row["run"])
                for request in self.requests:
                    if request["run"] == row["run"]:
                        request.update(
                            run=keep["run"], label=keep["label"], concurrency=keep["concurrency"]
                        )
                for record in self.files:
                    if record["path"] == row["source"]:
                        record["runs"] -= 1
        if not dropped:
            return
        self.runs = [row for row in self.runs if row["run"] not in dropped]
        renumber = {row["run"]: i for i, row in enumerate(self.runs)}
        for row in self.runs:
            row["run"] = renumber[row["run"]]
        for request in self.requests:
            request["run"] = renumber[request["run"]]

    def results(self, where: str) -> BenchResults:
        """The table of everything read; ``where`` names the inputs in the error when none
        of them held a run (the first failure of a named file is raised instead)."""
        if not self.runs:
            if self.failed:
                raise self.failed[0]
            raise ToolkitError(f"no benchmark results found in {where}")
        return BenchResults(
            runs=pl.DataFrame(self.runs, schema=RUNS, orient="row"),
            requests=pl.DataFrame(self.requests, schema=REQUESTS, orient="row"),
            files=self.files,
            skipped=self.skipped,
            damaged=self.damaged,
        )


def read_past_damage(
    path: Path, load: Loader, options: Options
) -> tuple[list[Parsed], list[ToolkitError]]:
    """The runs ``load`` reads from ``path`` and the damage it read past (each unreadable line,
    named with its line), in order.

    Raises
    ------
    ToolkitError
        With ``options.strict``, the first damaged line. Otherwise when the file holds no
        readable run: its first damaged line (the reason it holds none), else the loader's error.
    """
    if options.strict:
        return load(path, options), []
    with collecting() as found:
        try:
            runs = load(path, options)
        except ToolkitError:
            if found:
                raise found[0] from None
            raise
    if found and not runs:
        raise found[0]
    return runs, found


def _beyond_limits(row: dict[str, Any]) -> str | None:
    """Why a run's numbers that size work are beyond their limits (``load.limits``), or None."""
    for key, limit in (("concurrency", "concurrency"), ("max_concurrency", "concurrency"),
                       ("num_prompts", "num_prompts"), ("completed", "num_prompts")):  # fmt: skip
        value = row.get(key)
        reason = beyond(limit, value) if isinstance(value, int | float) else None
        if reason is not None:
            return f"{key}: {reason}"
    return None


def result_format(name: str, description: str, detect: Detector, load: Loader, kind: str) -> Format:
    """A ``Format`` whose summary is its file's runs and layouts (``summarize_results``)."""
    return Format(name, description, detect, load, summarize_results(name, load), kind)


def summarize_results(name: str, load: Loader) -> Summarizer:
    """The ``ppscope parse --json`` entry of a result format: the file's runs and layouts,
    resolved as ``load_bench`` resolves a file named alone."""

    def summarize(path: Path, options: Options) -> dict[str, Any]:
        collector = Collector(mapping=options.mapping, strict=options.strict)
        collector.add(path, name, load, RunContext(path.parent, False, options.cache))
        return collector.results(str(path)).summary()[0]

    return summarize


def _resolve(parsed: Parsed, context: RunContext, label: str | None) -> dict[str, Any]:
    """Label, layout and concurrency of one run, each with where it came from."""
    values = dict(parsed.values)
    fill_means(values)
    row: dict[str, Any] = values

    layout, layout_from = parsed.layout, "file"
    if not layout:
        layout, layout_from = context.toml_layout, "run.toml"
    if not layout:
        layout, layout_from = context.server_layout, "server-log"
    named = label or parsed.label or context.config.label
    if not layout:
        layout, layout_from = layout_from_text(named) or layout_from_text(parsed.hint), "label"
    row.update({k: layout.get(k) for k in ("tp", "pp", "dp", "ep")})
    row["layout_from"] = layout_from if layout else None

    for text, origin in (
        (label, "argument"),
        (parsed.label, "file"),
        (context.config.label, "run.toml"),
        (layout_label(layout), "layout"),
        (context.directory.name if context.is_run_dir else None, "dir"),
    ):
        if text:
            row["label"], row["label_from"] = text, origin
            break
    else:
        row["label"], row["label_from"] = "unknown", None

    concurrency, origin = whole(values.get("max_concurrency")), "max_concurrency"
    if concurrency is None:
        concurrency, origin = whole(values.get("concurrency")), "file"
    if concurrency is None and parsed.hint:
        concurrency, origin = concurrency_from_text(parsed.hint), parsed.hint_from
    for text in (parsed.label, row["label"]):  # the file's own label, then the one given
        if concurrency is None:
            concurrency, origin = concurrency_from_text(text), "label"
    observed = values.get("concurrency_observed")
    if concurrency is None and isinstance(observed, int | float) and observed >= 0.5:
        # no cap configured (``Max request concurrency: not set``): the mean in flight
        concurrency, origin = max(round(observed), 1), "observed"
    row["concurrency"] = concurrency
    row["concurrency_from"] = origin if concurrency is not None else None
    return row


def _typed(row: dict[str, Any], schema: pl.Schema) -> dict[str, Any]:
    """``row`` with exactly the schema's columns, each coerced to its type (else null)."""
    out: dict[str, Any] = {}
    for name, dtype in schema.items():
        value = row.get(name)
        if value is None:
            out[name] = None
        elif dtype == pl.Int64:
            out[name] = whole(value)
        elif dtype == pl.Float64:
            out[name] = num(value)
        elif dtype == pl.Boolean:
            out[name] = bool(value)
        elif isinstance(dtype, pl.Datetime):
            out[name] = value if isinstance(value, datetime) else None
        else:
            out[name] = str(value)
    return out
