"""``ppscope parse``: recognize each input file and say what it holds.

Every file is sniffed by content: SGLang server logs (line counts per kind, tables, untyped
batch lines, each launch with its span and parallel settings), benchmark results, GPU traces
and ``run.toml``. One unreadable file is reported (on stderr too) and the others still load;
the exit code is then 1. A file named on its own that no loader reads (empty, an image, binary
data) and a folder with no readable file are unreadable. For a run directory it also shows
where each benchmark run was placed on the log's clock (``PHASE_COLUMNS``): the phase's span,
what the run offered, the peak running the log shows and their ratio, the placement's
confidence. ``--json`` prints ``{"files": [...], "runs": [{"path",
"phases"}...]}`` with every launch; the text shows at most ``LAUNCHES_SHOWN`` launches per file
and summarizes the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.cli.options import add_json, add_output, add_quiet
from toolkit.cli.output import Progress, emit, frame_lines, to_json, wrapped
from toolkit.errors import ToolkitError
from toolkit.load.assembly import launch_spans
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench import sniff_bench_format
from toolkit.load.bench.results import summarize_bench_file
from toolkit.load.damage import collecting
from toolkit.load.gpu import FORMATS as GPU_FORMATS
from toolkit.load.gpu.trace import summarize_gpu_file
from toolkit.load.phase_marks import PHASE_FORMAT, load_phase_marks, phase_file_problems
from toolkit.load.profile import TORCH_TRACE, summarize_trace
from toolkit.load.prometheus import FORMATS as METRICS_FORMATS
from toolkit.load.prometheus import summarize_metrics
from toolkit.load.requests import REQUESTS_FORMAT, load_server_requests
from toolkit.load.requests.summary import describe_requests, summarize_requests
from toolkit.load.run import load_run
from toolkit.load.run_config import read_run_config
from toolkit.load.server_info import SERVER_INFO_FORMAT, load_server_info
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sniff import expand, sniff
from toolkit.load.windows import time_span
from toolkit.run_analysis import RunAnalysis

NAME = "parse"
HELP = "recognize input files and summarize what each holds"
EXAMPLES = """\
examples:
  ppscope parse server.log                 what the log holds: kinds, tables, launches
  ppscope parse runs/pp8 --json            every file of a run directory, as JSON
  ppscope parse node0.log.gz --strict      fail at the first batch line that does not type
  ppscope parse - < server.log.zst         standard input (named <stdin>), any compression
  ppscope parse gpu.csv --gpu-fields timestamp,index,utilization.gpu
"""
_REQUEST_SKIPS = {"received": "arrivals", "other": "JSON lines naming no request event"}
CHANGES_SHOWN = 8
"""Runtime changes listed per launch in the text output."""
LAUNCHES_SHOWN = 6
PHASE_COLUMNS = ("phase", "start", "end", "offered", "peak_running", "placement", "bench_run")
SETTINGS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "pp_async_batch_depth",
    "pp_max_micro_batch_size",
    "max_running_requests",
    "chunked_prefill_size",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH",
        help="files or folders ('-': standard input)",
    )  # fmt: skip
    parser.set_defaults(stdin_as="file")
    add_json(parser)
    add_output(parser)
    parser.add_argument("--strict", action="store_true", help="fail on the first untypable line")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument(
        "--gpu-fields",
        metavar="LIST",
        help="the --query-gpu field list of an nvidia-smi CSV written without a header",
    )
    parser.add_argument(
        "--gpu-interval",
        type=float,
        metavar="SECONDS",
        help="sampling period of a GPU trace that prints no time (dcgmi dmon, dcgm-exporter)",
    )
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        raise ToolkitError(f"{missing[0]}: no such file or directory")
    files: list[dict[str, Any]] = []
    places: list[Path] = []  # per summary, the path read (a dataset's summary names its sources)
    failed = 0
    paths = list(expand(args.paths))
    named = {p.resolve() for p in args.paths if not p.is_dir()}
    with Progress(len(paths), quiet=args.quiet, title="parse") as progress:
        for path in paths:
            size = "dataset" if path.is_dir() else f"{path.stat().st_size / 1e6:.0f} MB"
            with progress.step(f"{path.name} ({size})"):
                try:
                    found = summarize(
                        path,
                        strict=args.strict,
                        cache=not args.no_cache,
                        gpu_fields=args.gpu_fields,
                        gpu_interval_s=args.gpu_interval,
                    )
                    # read past, named
                    failed += sum(1 for f in found if f.get("damaged") or f.get("left_out"))
                    files.extend(found)
                    places.extend(path for _ in found)
                except ToolkitError as e:
                    if args.strict:
                        raise
                    failed += 1
                    files.append({"path": str(path), "format": "error", "error": str(e)})
                    places.append(path)
                    continue
            if files[-1]["format"] == "unknown" and path.resolve() in named:
                failed += 1  # a file named on its own that nothing reads is an error
                files[-1] = {"path": str(path), "format": "error", "error": unrecognized(path)}
    for folder in (p for p in args.paths if p.is_dir()):
        inside = [f for f, at in zip(files, places, strict=True) if at.is_relative_to(folder)]
        if not any(f["format"] not in ("unknown", "error") for f in inside):
            failed += 1
            why = "an empty folder" if not inside else "no file in it is in a format ppscope reads"
            files.append({"path": str(folder), "format": "error", "error": f"{folder}: {why}"})
            places.append(folder)
    runs = [run_phases(p, cache=not args.no_cache) for p in args.paths if p.is_dir()]
    runs = [r for r in runs if r is not None]
    if args.json:
        document = {"files": files, "runs": [{**r, "phases": r["phases"].to_dicts()} for r in runs]}
        emit(to_json(document), args.output)
    else:
        blocks = [describe(f) + _caveats(f) for f in files] + [describe_phases(r) for r in runs]
        emit("\n".join(blocks), args.output)
    for f in files:
        if f["format"] == "error":
            print(f"ppscope: {f['error']}", file=sys.stderr)
    return 1 if failed else 0


_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a zip archive",
    b"\x7fELF": "an executable",
}


def unrecognized(path: Path) -> str:
    """Why a file is no input: ``path: not recognized: an empty file`` (a PNG image, binary
    data, or text in no format this version reads)."""
    with path.open("rb") as f:
        head = f.read(4096)
    if not head.strip():
        what = "an empty file" if not head else "a file of blank lines"
    elif kind := next((v for k, v in _MAGIC.items() if head.startswith(k)), None):
        what = kind
    elif b"\x00" in head or head.decode("utf-8", "replace").count("\ufffd") > len(head) // 20:
        what = "binary data"
    else:
        what = "text in none of the formats this version reads (see `ppscope parse --help`)"
    return f"{path}: not recognized: {what}"


def run_phases(directory: Path, *, cache: bool = True) -> dict[str, Any] | None:
    """Where a run directory's benchmark runs sit on its log's clock; None without a log."""
    try:
        ctx = RunAnalysis(load_run(directory, cache=cache))
        if ctx.run.log is None:
            return None
        phases = ctx.phases
    except ToolkitError:
        return None  # the file blocks above say what could not be read
    return {"path": str(directory), "phases": phases.select(PHASE_COLUMNS)}


def describe_phases(run: dict[str, Any]) -> str:
    """The text block of a run directory's phases."""
    phases: pl.DataFrame = run["phases"]
    lines = [f"{run['path']}  [run: benchmark phases on the log's clock]"]
    if not phases.height:
        return "\n".join([*lines, "  no decode lines: no phases"])
    shown = phases.with_columns(
        pl.col("start", "end").dt.strftime("%H:%M:%S"),
        pl.col("peak_running").round(1),
        pl.col("placement").round(2),
    )
    lines += frame_lines(shown, 50, indent="  ")
    unplaced = phases.filter(pl.col("offered").is_null())["phase"].to_list()
    if unplaced:
        lines.append(
            f"  phases {', '.join(map(str, unplaced))}: no benchmark run fits (peak running over "
            "offered outside the placement range); not judged against a load"
        )
    return "\n".join(lines)


def summarize(
    path: Path,
    *,
    strict: bool = False,
    cache: bool = True,
    gpu_fields: str | None = None,
    gpu_interval_s: float | None = None,
) -> list[dict[str, Any]]:
    """What one file holds, as the JSON objects ``parse --json`` prints (one per part)."""
    fmt = sniff(path)
    if path.name == "run.toml":
        config = read_run_config(path.parent)  # checked: a typo in a key is an error
        return [
            {
                "path": str(path),
                "format": "run-config",
                "label": config.label,
                "synthetic": config.synthetic,
            }
        ]
    if fmt == "sglang-dataset":
        return list(load_sglang_log(path, strict=strict).summary()["files"])
    if fmt == "sglang-log":
        log = load_sglang_log(path, strict=strict, cache=cache)
        out = list(log.summary()["files"])
        spans = launch_spans(log.launches, log.scan_batches())
        by_line = {(r["source"], r["lineno"]): r for r in spans.iter_rows(named=True)}
        counts = log.request_counts()
        for part in out:
            if counts and len(out) == 1:
                other = {
                    _REQUEST_SKIPS.get(k, k): v for k, v in counts.items() if k in _REQUEST_SKIPS
                }
                part["requests"] = summarize_requests(log.scan_requests(), other)
            for launch in part["launches"]:
                span = by_line.get((str(part["path"]), launch["lineno"]), {})
                launch.update({k: span.get(k) for k in ("start", "end", "batch_lines")})
        if sniff_bench_format(path) is not None:  # results printed inside the log
            out.append(summarize_bench_file(path, cache=cache))
        return out
    if fmt in BENCH_FORMATS:
        return [summarize_bench_file(path, cache=cache, strict=strict)]
    if fmt == PHASE_FORMAT:
        marks = load_phase_marks([path], strict=strict)
        return [
            {
                "path": str(path),
                "format": fmt,
                "phases": marks.height,
                "concurrency": marks["concurrency"].to_list(),
                "interrupted": int(marks["interrupted"].sum()),
                "left_out": [
                    {"lineno": n, "reason": why} for _f, n, why in phase_file_problems([path])
                ],
            }
        ]
    if fmt == REQUESTS_FORMAT:
        got = load_server_requests(path, strict=strict)
        summary = summarize_requests(got.table, got.skipped)
        return [{"path": str(path), "format": fmt, "lines": got.lines, **summary}]
    if fmt == SERVER_INFO_FORMAT:
        with _reading_around(strict) as found:
            info = load_server_info([path])
        if found and not info.height:
            raise found[0]  # no call is readable: its first bad line is the answer
        answers = info.select("lineno", "ts").unique(maintain_order=True)
        varying = info.group_by("key").agg(pl.col("value").n_unique()).filter(pl.col("value") > 1)
        return [
            {
                "path": str(path),
                "format": fmt,
                "answers": answers.height,
                "start": answers["ts"].min(),
                "end": answers["ts"].max(),
                "changed": sorted(varying["key"].to_list()),
            }
            | _damaged(found)
        ]
    if fmt in METRICS_FORMATS:
        with _reading_around(strict) as found:
            try:
                summary = summarize_metrics(path, strict=strict)
            except ToolkitError:
                if found:
                    raise found[0] from None  # no scrape is readable: its first bad line
                raise
        return [summary | _damaged(found)]
    if fmt == TORCH_TRACE:
        return [summarize_trace(path)]
    if fmt in GPU_FORMATS:
        config = read_run_config(path.parent)
        fields = gpu_fields or config.gpu_trace_fields
        interval = gpu_interval_s or config.gpu_trace_interval_s
        return [summarize_gpu_file(path, fields=fields, interval_s=interval, strict=strict)]
    return [{"path": str(path), "format": fmt or "unknown"}]


@contextmanager
def _reading_around(strict: bool) -> Iterator[list[ToolkitError]]:
    """The lines a loader reads past in the block (``damage.collecting``); with ``strict``
    none is collected, so the loader raises the first."""
    if strict:
        yield []
        return
    with collecting() as found:
        yield found


def _damaged(found: list[ToolkitError]) -> dict[str, list[str]]:
    """The ``damaged`` entry of a file's summary (``line N: reason`` each), if any."""
    said = [f"line {getattr(e, 'lineno', '?')}: {getattr(e, 'reason', e)}" for e in found]
    return {"damaged": said} if said else {}


def describe(f: dict[str, Any]) -> str:
    """The text block of one file's summary."""
    if f["format"] == "error":
        return f"{f['path']}  [unreadable]\n  {f['error']}"
    if f["format"] == "run-config":
        synthetic = " (synthetic data)" if f["synthetic"] else ""
        return f"{f['path']}  [run-config]\n  label {f['label'] or '-'}{synthetic}"
    if f["format"] in GPU_FORMATS:
        return _describe_gpu(f)
    if f["format"] == PHASE_FORMAT:
        levels = ", ".join("-" if c is None else str(c) for c in f["concurrency"]) or "-"
        stopped = f"; {f['interrupted']} stopped by the capture" if f["interrupted"] else ""
        head = f"{f['path']}  [{f['format']}]"
        left = "".join(f"\n  line {x['lineno']} left out: {x['reason']}" for x in f["left_out"])
        return f"{head}\n  {f['phases']} phases at concurrency {levels}{stopped}{left}"
    if f["format"] == SERVER_INFO_FORMAT:
        changed = ", ".join(f["changed"]) or "nothing"
        damaged = "".join(f"\n  damaged, {x}" for x in f.get("damaged", []))
        head = f"{f['path']}  [{f['format']}]"
        return f"{head}\n  {f['answers']} answers; changed: {changed}{damaged}"
    if f["format"] in METRICS_FORMATS:
        return _describe_metrics(f)
    if f["format"] == REQUESTS_FORMAT:
        return "\n".join([f"{f['path']}  [{f['format']}]", *describe_requests(f)])
    if f["format"] in BENCH_FORMATS:
        layouts = ", ".join(f["layouts"]) or "-"
        damaged = "".join(f"\n  damaged, {x}" for x in f.get("damaged", []))
        runs = f"{f['runs']} benchmark runs; layouts: {layouts}"
        return f"{f['path']}  [{f['format']}]\n  {runs}{damaged}"
    lines = [f"{f['path']}  [{f['format']}]"]
    if f["format"] == TORCH_TRACE:
        stage = f"stage {f['pp']}" if f["pp"] is not None else f"rank {f['rank']}"
        cut = f"; {f['cut']}" if f["cut"] else ""
        lines.append(
            f"  {stage}: {f['events']} events, {f['kept']} kept, {f['kernels']} kernels{cut}"
        )
        return "\n".join(lines)
    if "lines" not in f:
        lines.append("  not recognized: no loader reads this format")
        return "\n".join(lines)
    tables = ", ".join(f"{k} {v}" for k, v in f["tables"].items())
    lines.append(f"  wrapper {f['wrapper']}, {f['lines']} lines: {tables}")
    counts = ", ".join(f"{k} {v}" for k, v in f["counts"].items())
    lines.append(f"  kinds: {counts}")
    odd = {k: v for k, v in f["odd_lines"].items() if v}
    for problem in f.get("problems", []):
        lines.append(f"  problem: {problem}")
    lines.append(
        f"  batch lines not fully typed: {f['incomplete_batches']}"
        + (f"; odd lines: {odd}" if odd else "")
    )
    lines += _launches(f["launches"])
    if "requests" in f:
        lines += describe_requests(f["requests"])
    for row in f["first_unrecognized"]:
        lines.append(f"  unrecognized line {row['lineno']}: {str(row['line'])[:80]}")
    return "\n".join(lines)


def _caveats(f: dict[str, Any]) -> str:
    """The caveats a loader met in the file, a line each (none: nothing)."""
    return "".join(f"\n  caveat ({c['kind']}): {c['detail']}" for c in f.get("caveats") or [])


def _launches(launches: list[dict[str, Any]]) -> list[str]:
    """A line or two per launch; past ``LAUNCHES_SHOWN``, the first and last few and a count."""
    if len(launches) <= LAUNCHES_SHOWN:
        shown, hidden = launches, []
    else:
        half = LAUNCHES_SHOWN // 2
        shown, hidden = [*launches[:half], *launches[-half:]], launches[half:-half]
    lines = []
    for i, launch in enumerate(shown):
        if hidden and i == LAUNCHES_SHOWN // 2:
            lines.append(
                f"  ... {len(hidden)} more launches between lines {hidden[0]['lineno']} and "
                f"{hidden[-1]['lineno']} ({len(launches)} in all; --json lists every one)"
            )
        a = launch["server_args"]
        settings = ", ".join(f"{k}={a[k]}" for k in SETTINGS if k in a)
        if not a:
            cut = " (no server_args dump: the log starts after it)"
        else:
            cut = "" if launch["complete"] else " (dump cut)"
        lines += wrapped(f"launch at line {launch['lineno']}{cut}: {settings}", indent="  ")
        facts = []
        start, end = launch.get("start"), launch.get("end")
        if start is not None and end is not None:
            facts.append(time_span(start, end))
            facts.append(f"{launch['batch_lines']} batch lines")
        tokens = launch["startup"].get("max_total_num_tokens")
        if tokens is not None:
            facts.append(f"max_total_num_tokens={tokens}")
        if facts:
            lines.append("    " + ", ".join(facts))
        for c in launch.get("runtime_changes", [])[:CHANGES_SHOWN]:
            what = "?" if c["key"] is None else f"{c['key']}={json.dumps(c['value'])}"
            why = f" ({c['note']})" if c["note"] else ""
            lines.append(f"    runtime change, line {c['lineno']}: {what} {c['status']}{why}")
        more = len(launch.get("runtime_changes", [])) - CHANGES_SHOWN
        if more > 0:
            lines.append(f"    ... {more} more runtime changes (--json lists every one)")
    return lines


def _describe_gpu(f: dict[str, Any]) -> str:
    lines = [f"{f['path']}  [{f['format']}]"]
    if "samples" in f:
        lines.append(
            f"  {f['lines']} lines: {f['samples']} samples of {f['gpus']} GPUs, "
            f"{f['skipped']} other lines ({f['problems']} problems), "
            f"{f['unavailable']} cells without a value"
        )
        lines.append(f"  metrics: {', '.join(f['metrics'])}")
        if f.get("labels"):
            lines.append(f"  labels: {', '.join(f['labels'])}")
    else:
        facts = {k: v for k, v in f.items() if k not in ("path", "format", "notes")}
        lines.append(
            "  " + ", ".join(f"{k} {v}" for k, v in facts.items() if not isinstance(v, list | dict))
        )
    for problem in f.get("first_problems", []):
        lines.append(f"  problem: {problem}")
    for note in f.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _describe_metrics(f: dict[str, Any]) -> str:
    lines = [f"{f['path']}  [{f['format']}]"]
    span = (
        time_span(f["start"], f["end"])
        if f["start"] is not None and f["end"] is not None
        else "no interval"
    )
    ranks = ", ".join(f"PP{r}" for r in f["pp_ranks"]) or "no pp_rank label"
    lines.append(f"  {f['series']} series over {f['scrapes']} scrapes, {span}; {ranks}")
    lines += wrapped(f"metrics: {', '.join(f['metrics']) or '-'}", indent="  ")
    if f.get("untimed_scrapes"):
        lines += wrapped(
            f"{f['untimed_scrapes']} scrape(s) of no known time: {f['untimed_rows']} values "
            "listed as read (lifetime counters, no rates)",
            indent="  ",
        )
    router = f.get("router")
    if router:
        workers = ", ".join(router["workers"]) or "no worker label"
        lines += wrapped(f"router: {router['series']} series ({workers})", indent="  ")
    for note in f["notes"]:
        lines.append(f"  note: {note}")
    lines += [f"  damaged, {x}" for x in f.get("damaged", [])]
    return "\n".join(lines)
