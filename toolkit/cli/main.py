"""The ``ppscope`` command line: the library's jobs without opening Jupyter."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import polars as pl

from toolkit._version import __version__
from toolkit.cli.diagnose import run_diagnose, run_diff, run_timeline
from toolkit.cli.model import parse_what_if, run_model
from toolkit.cli.scaling import run_scaling
from toolkit.errors import ToolkitError
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench import sniff_bench_format
from toolkit.load.bench.results import summarize_bench_file
from toolkit.load.gpu import FORMATS as GPU_FORMATS
from toolkit.load.gpu.trace import summarize_gpu_file
from toolkit.load.run import load_run
from toolkit.load.run_config import read_run_config
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sniff import expand, sniff
from toolkit.schema.jsonable import to_json


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="ppscope", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ppscope {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    parse = commands.add_parser("parse", help="recognize and summarize input files")
    parse.add_argument("paths", nargs="+", type=Path, help="files or run directories")
    parse.add_argument("--json", action="store_true", help="print one JSON object")
    parse.add_argument("--strict", action="store_true", help="fail on the first untypable line")
    parse.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parse.set_defaults(run=_parse)

    scaling = commands.add_parser(
        "scaling", help="throughput vs concurrency: the gap between layouts"
    )
    scaling.add_argument("paths", nargs="+", type=Path, help="result files or run directories")
    scaling.add_argument("--json", action="store_true", help="print one JSON object")
    scaling.set_defaults(run=lambda a: run_scaling(a.paths, a.json))

    diagnose = commands.add_parser("diagnose", help="every hypothesis checked: findings ranked")
    diagnose.add_argument("paths", nargs="+", type=Path, help="run directories")
    diagnose.add_argument("--json", action="store_true", help="print one JSON object")
    diagnose.set_defaults(run=lambda a: run_diagnose(a.paths, a.json))

    diff = commands.add_parser("diff", help="two launches' ServerArgs, parallel settings first")
    diff.add_argument("a", type=Path, help="run directory A")
    diff.add_argument("b", type=Path, help="run directory B")
    diff.add_argument("--json", action="store_true", help="print one JSON object")
    diff.set_defaults(run=lambda a: run_diff(a.a, a.b, a.json))

    timeline = commands.add_parser("timeline", help="stage timeline as Chrome trace JSON")
    timeline.add_argument("path", type=Path, help="run directory")
    timeline.add_argument("-o", "--out", type=Path, required=True, help="trace file to write")
    timeline.set_defaults(run=lambda a: run_timeline(a.path, a.out))

    model = commands.add_parser("model", help="the serving model: expected vs observed, what-if")
    model.add_argument("paths", nargs="+", type=Path, help="run directories")
    model.add_argument("--json", action="store_true", help="print one JSON object")
    model.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an SGLang flag or workload change, e.g. pp_max_micro_batch_size=4",
    )
    model.set_defaults(run=_model)

    report = commands.add_parser("report", help="render an offline HTML postmortem")
    report.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="RUN_DIR",
        help="run directories (default: the sample)",
    )
    report.add_argument(
        "-o", "--output", type=Path, required=True, metavar="reports/NAME.html",
        help="the report; NAME.json is written beside it",
    )  # fmt: skip
    report.add_argument(
        "-p", "--param", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
        help="a notebook parameter, as with papermill -p",
    )  # fmt: skip
    report.add_argument(
        "--notebook", default="postmortem",
        help="postmortem, scaling_gap, stage_timeline, config_diff, gpu_trace, or a .ipynb path",
    )  # fmt: skip
    report.add_argument("--with-code", action="store_true", help="show the code cells")
    report.add_argument(
        "--no-redact", dest="redact", action="store_false",
        help="keep API keys, tokens and passwords in the report",
    )  # fmt: skip
    report.set_defaults(run=_report)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except ToolkitError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def _parse(args: argparse.Namespace) -> int:
    files: list[dict[str, Any]] = []
    for path in expand(args.paths):
        if not path.exists():
            raise ToolkitError(f"{path}: no such file or directory")
        fmt = sniff(path)
        if path.name == "run.toml":
            config = read_run_config(path.parent)  # checked: a typo in a key is an error
            files.append({"path": str(path), "format": "run-config", "label": config.label,
                          "synthetic": config.synthetic})  # fmt: skip
        elif fmt == "sglang-log":
            log = load_sglang_log(path, strict=args.strict, cache=not args.no_cache)
            files.extend(log.summary()["files"])
            if sniff_bench_format(path) is not None:  # printed results inside the log
                files.append(summarize_bench_file(path, cache=not args.no_cache))
        elif fmt in BENCH_FORMATS:
            files.append(summarize_bench_file(path, cache=not args.no_cache))
        elif fmt in GPU_FORMATS:
            fields = read_run_config(path.parent).gpu_trace_fields
            files.append(summarize_gpu_file(path, fields=fields, strict=args.strict))
        else:
            files.append({"path": str(path), "format": fmt or "unknown"})
    if args.json:
        print(to_json({"files": files}))
    else:
        for summary in files:
            print(_describe(summary))
    return 0


def _report(args: argparse.Namespace) -> int:
    from toolkit.cli.report import run_report  # papermill and nbconvert: only when asked

    params = dict(args.param)
    return run_report(args.paths, args.output, params, args.with_code, args.redact, args.notebook)


def _model(args: argparse.Namespace) -> int:
    """Observed points of each run (its benchmark joined with its launch's settings) → model."""
    frames = []
    for path in args.paths:
        run = load_run(path)
        if run.bench is None:
            raise ToolkitError(f"{path}: no benchmark results to compare the model with")
        layout = run.layout()
        runs = run.bench.runs.with_columns(
            pl.lit(run.label).alias("label"),
            pl.col("max_concurrency").alias("concurrency"),
            *(pl.lit(v).alias(k) for k, v in layout.items() if k not in ("tp", "pp", "dp", "ep")),
        )
        frames.append(runs)
    points = pl.concat(frames, how="diagonal_relaxed")
    return run_model(points, parse_what_if(args.what_if), args.json)


def _describe(f: dict[str, Any]) -> str:
    if f["format"] == "run-config":
        synthetic = " (synthetic data)" if f["synthetic"] else ""
        return f"{f['path']}  [run-config]\n  label {f['label'] or '-'}{synthetic}"
    if f["format"] in GPU_FORMATS:
        return _describe_gpu(f)
    if f["format"] in BENCH_FORMATS:
        layouts = ", ".join(f["layouts"]) or "-"
        return f"{f['path']}  [{f['format']}]\n  {f['runs']} benchmark runs; layouts: {layouts}"
    lines = [f"{f['path']}  [{f['format']}]"]
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
    for launch in f["launches"]:
        a = launch["server_args"]
        keys = (
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
        shown = ", ".join(f"{k}={a[k]}" for k in keys if k in a)
        cut = "" if launch["complete"] else " (dump cut)"
        lines.append(f"  launch at line {launch['lineno']}{cut}: {shown}")
        mt = launch["startup"].get("max_total_num_tokens")
        if mt is not None:
            lines.append(f"    max_total_num_tokens={mt}")
    for row in f["first_unrecognized"]:
        lines.append(f"  unrecognized line {row['lineno']}: {str(row['line'])[:100]}")
    return "\n".join(lines)


def _describe_gpu(f: dict[str, Any]) -> str:
    lines = [f"{f['path']}  [{f['format']}]"]
    if "samples" in f:
        lines.append(
            f"  {f['lines']} lines: {f['samples']} samples of {f['gpus']} GPUs, "
            f"{f['skipped']} other lines ({f['problems']} problems), "
            f"{f['unavailable']} cells without a value"
        )
        lines.append(f"  metrics: {', '.join(f['metrics'])}")
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


if __name__ == "__main__":
    raise SystemExit(main())
