"""``load_bench``: benchmark results of every client in one declared table.

Formats are recognized from content (``sniff_bench_format``), never from file names; each has
its reader module (``bench_sglang``, ``bench_vllm``, ``bench_nvidia``, ``bench_csv``). A path
may be a run directory: its ``run.toml`` gives the layout label and launch command, and a
server log inside it (read with ``load_sglang_log``) gives tp/pp when the results do not.
"""

from __future__ import annotations

import json
import mmap
import re
import shutil
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError, UnknownFormat
from toolkit.load import text as lines_io
from toolkit.load.bench import nvidia as bench_nvidia
from toolkit.load.bench import records as bench_records
from toolkit.load.bench import sglang as bench_sglang
from toolkit.load.bench import sweep_csv as bench_csv
from toolkit.load.bench import vllm as bench_vllm
from toolkit.load.bench.common import (
    Parsed,
    concurrency_from_text,
    extra_json,
    fill_means,
    layout_from_text,
    layout_label,
    layout_of,
    num,
    whole,
)
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command
from toolkit.schema.bench import BENCH_FORMATS, REQUESTS, RUNS

__all__ = ["BenchResults", "load_bench", "sniff_bench_format"]

_SGLANG_KEYS = frozenset(
    {
        "total_output_tokens_retokenized",
        "total_output_retokenized",
        "mean_e2e_latency_ms",
        "median_e2e_latency_ms",
        "mean_e2e_latency",
        "median_e2e_latency",
        "server_info",
        "accept_length",
        "dataset_name",
    }
)
_VLLM_KEYS = frozenset(
    {
        "model_id",
        "tokenizer_id",
        "burstiness",
        "total_token_throughput",
        "mean_e2el_ms",
        "median_e2el_ms",
        "endpoint_type",
        "date",
    }
)
_THROUGHPUT_KEYS = frozenset(
    {"output_throughput", "output_token_throughput", "request_throughput", "total_throughput"}
)
# For a first JSONL line too long for the sniffing window: SGLang's own key spellings.
_SGLANG_HINT = re.compile(r'"(?:mean|median)_(?:ttft|itl|e2e_latency)(?:_ms)?"\s*:')
_VLLM_HINT = re.compile(r'"(?:model_id|tokenizer_id|mean_e2el_ms|burstiness)"\s*:')
_MAX_JSON_BYTES = 256 << 20


# ----------------------------------------------------------------------------- sniffing
def sniff_bench_format(path: Path) -> str | None:
    """The benchmark format of a file (a name of ``BENCH_FORMATS``), or None.

    Recognized from the content only: JSON keys, the CSV header, or the printed
    ``Serving Benchmark Result`` block anywhere in a text file (``.gz`` is read as is).
    """
    path = Path(path)
    if not path.is_file():
        return None
    head = lines_io.head_lines(path, n=400)
    first = next((line.lstrip("\ufeff").strip() for line in head if line.strip()), "")
    if first.startswith(("{", "[")):
        fmt = _sniff_json(path, head, first)
        if fmt is not None:
            return fmt  # else a log line that starts with "[timestamp]": look on
    if first.lower().startswith(("metric,", '"metric",')):
        return "genai-perf-csv"
    if bench_csv.looks_like_bench_csv(head):
        return "bench-csv"
    if _contains(path, bench_sglang.HEADER):
        return "sglang-bench-text"
    return None


def _sniff_json(path: Path, head: list[str], first: str) -> str | None:
    try:
        return _classify(json.loads(first))
    except json.JSONDecodeError:
        pass
    text = "\n".join(head)
    if path.stat().st_size <= _MAX_JSON_BYTES:
        try:
            return _classify(json.loads(_read(path)))
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    # A first line longer than the sniffing window (per-request details): go by key names.
    if first.startswith("{") and '"backend"' in text:
        if _VLLM_HINT.search(text):
            return "vllm-bench-json"
        if _SGLANG_HINT.search(text):
            return "sglang-bench-jsonl"
    return None


def _classify(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    if bench_records.is_record(obj):
        return "aiperf-json"
    if bench_nvidia.has_metric_dicts(obj):
        return "aiperf-json" if bench_nvidia.is_aiperf(obj) else "genai-perf-json"
    if not _THROUGHPUT_KEYS & obj.keys():
        return None
    if _SGLANG_KEYS & obj.keys():
        return "sglang-bench-jsonl"
    if _VLLM_KEYS & obj.keys():
        return "vllm-bench-json"
    if "backend" in obj:
        return "sglang-bench-jsonl"
    return None


def _contains(path: Path, needle: bytes) -> bool:
    """Whether the (decompressed) file holds ``needle``, without reading it into memory."""
    if path.stat().st_size == 0:
        return False
    if not lines_io.is_gzip(path):
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(needle) >= 0
    inflater = zlib.decompressobj(wbits=31)
    tail = b""
    with path.open("rb") as f:
        try:
            while chunk := f.read(1 << 20):
                while chunk:
                    data = tail + inflater.decompress(chunk)
                    if needle in data:
                        return True
                    tail = data[-len(needle) :]  # a match may straddle two chunks
                    chunk = inflater.unused_data  # a concatenated gzip member follows
                    if chunk:
                        inflater = zlib.decompressobj(wbits=31)
        except zlib.error:
            return False  # a damaged archive: what came before the damage was searched
    return False


@contextmanager
def _plain(path: Path) -> Iterator[Path]:
    """The file itself, or a decompressed temporary copy of a ``.gz``."""
    if not lines_io.is_gzip(path):
        yield path
        return
    work = lines_io.workdir()
    try:
        plain, _ = lines_io.plain_copy(path, work)
        yield plain
    finally:
        shutil.rmtree(work, True)


def _read(path: Path) -> str:
    with _plain(path) as plain:
        return plain.read_bytes().decode("utf-8", "replace").lstrip("\ufeff")


# ----------------------------------------------------------------------------- results
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


# ----------------------------------------------------------------------------- run dirs
@dataclass
class _Context:
    """What a run directory says about the runs found in it."""

    directory: Path
    is_run_dir: bool  # named by the user (not just the parent of a named file)
    cache: bool
    config: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        self.config = read_run_config(self.directory)

    @cached_property
    def toml_layout(self) -> dict[str, int]:
        command = self.config.command
        if not command:
            return {}
        try:
            flags = parse_launch_command(command)
        except ServerArgsError:
            return {}
        layout = layout_of(flags)
        if "sglang" in command:  # unset sizes are SGLang's defaults, not unknowns
            layout = {"tp": 1, "pp": 1, **layout}
        return layout

    @cached_property
    def server_layout(self) -> dict[str, int]:
        """tp/pp of the server log(s) in a run directory, when all launches agree."""
        if not self.is_run_dir:
            return {}
        layouts = []
        for path in _walk(self.directory):
            head = lines_io.head_lines(path, n=2000)
            if not any("server_args=" in line for line in head):
                continue
            try:
                log = load_sglang_log(path, cache=self.cache)
                layouts.extend(layout_of(launch.server_args) for launch in log.launches)
            except ToolkitError:
                continue
        distinct = {tuple(sorted(x.items())) for x in layouts if x}
        return dict(distinct.pop()) if len(distinct) == 1 else {}


def _walk(directory: Path) -> Iterator[Path]:
    """Files under a directory, sorted, hidden files and folders (caches) skipped."""
    for child in sorted(directory.rglob("*")):
        hidden = any(part.startswith(".") for part in child.relative_to(directory).parts)
        if child.is_file() and not hidden and child.name != "run.toml":
            yield child


# ----------------------------------------------------------------------------- loading
def load_bench(
    paths: str | Path | Iterable[str | Path],
    *,
    mapping: dict[str, str] | None = None,
    label: str | None = None,
    cache: bool = True,
) -> BenchResults:
    """Read benchmark results of any supported client into one table.

    Parameters
    ----------
    paths
        Result files and/or run directories (searched recursively). Files that hold no
        benchmark result are skipped and listed in ``skipped``; when nothing else loads, the
        error about a named file is raised instead.
    mapping
        For generic CSVs: ``{column: csv_header}``, e.g. ``{"output_tok_s": "Gen tok/s",
        "concurrency": "Users"}``; overrides the guesses by name.
    label
        Layout label for every run loaded, overriding what the files and run.toml say.
    cache
        Passed to ``load_sglang_log`` when a run directory's server log is read for tp/pp.

    Returns
    -------
    BenchResults
        ``runs`` (one row per run; repeats stay separate rows) and ``requests``.

    Raises
    ------
    ToolkitError
        No path given, a path that does not exist, or nothing readable in any of them.
    ParseError
        A result file whose content is broken (with its line), or a CSV named explicitly
        whose columns match nothing, when nothing else loads (the message lists them).
    UnknownFormat
        The only file named is not a benchmark result.
    """
    items = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not items:
        raise ToolkitError("no benchmark files or run directories given")
    state = _State(mapping=mapping, label=label)
    for item in items:
        if not item.exists():
            raise ToolkitError(f"{item}: no such file or directory")
        if item.is_dir():
            context = _Context(item, True, cache)
            for path in _walk(item):
                fmt = sniff_bench_format(path)
                if fmt is None:
                    state.skipped.append({"path": str(path), "reason": "no benchmark result"})
                    continue
                state.add(path, fmt, context)
        else:
            fmt = sniff_bench_format(item)
            if fmt is not None:
                state.add(item, fmt, _Context(item.parent, False, cache))
                continue
            # A named file that is no known result: a table is tried as a sweep CSV, whose
            # reader says which columns it found. Among other results (a shell glob over run
            # directories) such files are skipped; alone, their error is the answer.
            try:
                head = lines_io.head_lines(item, n=50)
                if not (mapping or bench_csv.looks_tabular(head)):
                    raise UnknownFormat(item, "not a benchmark result this version reads")
                state.add(item, "bench-csv", _Context(item.parent, False, cache))
            except (ParseError, UnknownFormat) as e:
                state.failed.append(e)
                state.skipped.append({"path": str(item), "reason": str(e)})
    state.merge_exports()
    if not state.runs:
        if state.failed:
            raise state.failed[0]
        where = ", ".join(str(p) for p in items)
        raise ToolkitError(f"no benchmark results found in {where}")
    return BenchResults(
        runs=pl.DataFrame(state.runs, schema=RUNS, orient="row"),
        requests=pl.DataFrame(state.requests, schema=REQUESTS, orient="row"),
        files=state.files,
        skipped=state.skipped,
    )


@dataclass
class _State:
    mapping: dict[str, str] | None
    label: str | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    failed: list[ToolkitError] = field(default_factory=list)

    def add(self, path: Path, fmt: str, context: _Context) -> None:
        labels: list[str] = []
        parsed_runs = _parse(path, fmt, self.mapping)
        for entry, parsed in enumerate(parsed_runs):
            row = _resolve(parsed, context, self.label)
            row.update(source=str(path), run=len(self.runs), entry=entry, format=fmt)
            row["lineno"] = parsed.lineno
            row["extra"] = extra_json(parsed.extra)
            self.runs.append(_typed(row, RUNS))
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
        self.files.append(
            {"path": str(path), "format": fmt, "runs": len(parsed_runs), "layouts": labels}
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
            kind = _export_kind(row)
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


def _export_kind(row: dict[str, Any]) -> str | None:
    """How a GenAI-Perf/AIPerf run was exported: json, csv, records; None for other tools."""
    if row["format"] == "genai-perf-csv":
        return "csv"
    if row["format"] in ("genai-perf-json", "aiperf-json"):
        computed = json.loads(row["extra"] or "{}").get("computed_from")
        return "records" if computed == bench_records.COMPUTED else "json"
    return None


def _parse(path: Path, fmt: str, mapping: dict[str, str] | None) -> list[Parsed]:
    if fmt not in BENCH_FORMATS:
        raise ToolkitError(f"unknown benchmark format {fmt!r}")
    if fmt == "sglang-bench-text":
        with _plain(path) as plain:
            return bench_sglang.read_text(plain)
    text = _read(path)
    if fmt == "sglang-bench-jsonl":
        return bench_sglang.read_jsonl(path, text)
    if fmt == "vllm-bench-json":
        return bench_vllm.read_vllm(path, text)
    if fmt == "genai-perf-csv":
        return bench_nvidia.read_csv(path, text)
    if fmt == "bench-csv":
        return bench_csv.read_bench_csv(path, text, mapping)
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        if bench_records.is_record(json.loads(first)):
            return bench_records.read_records(path, text)
    except json.JSONDecodeError:
        pass
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(path, e.lineno, f"invalid JSON: {e.msg}") from e
    if not isinstance(obj, dict):
        raise ParseError(path, None, "expected a JSON object")
    return bench_nvidia.read_json(path, obj)


def _resolve(parsed: Parsed, context: _Context, label: str | None) -> dict[str, Any]:
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
