"""A user's own sweep table as CSV: one row per run, columns found by their usual names.

Headers are compared after lower-casing, taking a unit in brackets aside (``TTFT (s)``) and
turning every other non-alphanumeric run into ``_`` (``tok/s`` → ``tok_s``). ``tok/s``,
``throughput`` and friends are read as *output* tokens/s (what a scaling sweep reports). An
explicit ``mapping`` (``{"output_tok_s": "Gen speed"}``) overrides the guesses; when no
throughput column can be found, the error lists the columns the file has.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import Parsed, csv_rows, num, to_ms, whole
from toolkit.load.bench.format import FILE, Options, Peek, file_text
from toolkit.load.inputs import split_lines
from toolkit.schema.bench import RUNS

# Canonical column → accepted normalized header names (the canonical name itself always works).
ALIASES: dict[str, tuple[str, ...]] = {
    "label": (
        "config",
        "configuration",
        "layout",
        "label",
        "name",
        "setup",
        "parallelism",
        "strategy",
        "deployment",
        "system",
        "variant",
    ),
    "concurrency": (
        "concurrency",
        "conc",
        "c",
        "users",
        "clients",
        "concurrent_requests",
        "num_concurrent",
        "parallel_requests",
        "max_concurrency",
        "max_concurrent",
    ),
    "output_tok_s": (
        "tok_s",
        "tokens_s",
        "tok_per_s",
        "tokens_per_s",
        "tokens_per_sec",
        "tokens_per_second",
        "tokens_sec",
        "throughput",
        "tps",
        "output_tps",
        "output_throughput",
        "output_token_throughput",
        "output_tokens_per_s",
        "gen_throughput",
        "generation_throughput",
        "decode_throughput",
    ),
    "total_tok_s": ("total_throughput", "total_token_throughput", "total_tps", "total_tokens_s"),
    "input_tok_s": ("input_throughput", "input_token_throughput", "prefill_throughput"),
    "request_per_s": ("req_s", "requests_s", "request_throughput", "rps", "qps", "req_per_s"),
    "tp": ("tp", "tp_size", "tensor_parallel", "tensor_parallel_size"),
    "pp": ("pp", "pp_size", "pipeline_parallel", "pipeline_parallel_size"),
    "dp": ("dp", "dp_size", "data_parallel_size"),
    "ep": ("ep", "ep_size", "expert_parallel_size"),
    "num_prompts": ("num_prompts", "prompts", "requests", "num_requests"),
    "completed": ("completed", "successful_requests"),
    "duration_s": ("duration", "duration_s", "benchmark_duration", "time_s"),
    "input_len": ("input_len", "isl", "input_length", "prompt_len"),
    "output_len": ("output_len", "osl", "output_length"),
    "request_rate": ("request_rate", "rate"),
    "backend": ("backend",),
    "model": ("model",),
}
_THROUGHPUT = ("output_tok_s", "total_tok_s", "request_per_s")
_UNIT = re.compile(r"[(\[]([^)\]]*)[)\]]")
_LATENCY_WORDS = {
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "itl",
    "e2e": "e2e",
    "e2el": "e2e",
    "latency": "e2e",
    "e2e_latency": "e2e",
}
_STAT_WORDS = {
    "mean": "mean",
    "avg": "mean",
    "average": "mean",
    "median": "median",
    "p50": "median",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "std": "std",
}
_SECONDS = {"s", "sec", "secs", "seconds"}


def normalize(header: str) -> tuple[str, str | None]:
    """``"TTFT (ms)"`` → ``("ttft", "ms")``; ``"tok/s"`` → ``("tok_s", None)``."""
    unit = None
    m = _UNIT.search(header)
    if m is not None:
        unit = m.group(1).strip().lower() or None
        header = header[: m.start()] + header[m.end() :]
    name = re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")
    return name, unit


def match_columns(headers: list[str], mapping: dict[str, str] | None = None) -> dict[str, str]:
    """Canonical column → CSV header, from the mapping first, then by name.

    Raises
    ------
    ToolkitError
        When the mapping names a column ppscope does not know or a header the file lacks.
    """
    found: dict[str, str] = {}
    for target, source in _oriented(mapping or {}).items():
        if target not in RUNS:
            raise ToolkitError(f"mapping names unknown column {target!r}")
        if source not in headers:
            raise ToolkitError(
                f"mapping names column {source!r}, not in the file (found: {', '.join(headers)})"
            )
        found[target] = source
    taken = set(found.values())
    for header in headers:
        if header in taken:
            continue
        name, unit = normalize(header)
        target = _target(name, unit)
        if target is not None and target not in found:
            found[target] = header
            taken.add(header)
    return found


def _oriented(mapping: dict[str, str]) -> dict[str, str]:
    """Accept ``{column: header}`` and, forgivingly, ``{header: column}``."""
    out = {}
    for key, value in mapping.items():
        if key not in RUNS and value in RUNS:
            key, value = value, key
        out[key] = value
    return out


def _target(name: str, unit: str | None) -> str | None:
    if name in RUNS and name not in ("source", "run", "entry", "format", "extra"):
        return name
    for column, names in ALIASES.items():
        if name in names:
            return column
    if unit in ("tok/s", "tokens/s", "tok/sec", "tokens/sec") and "input" not in name:
        return "total_tok_s" if "total" in name else "output_tok_s"
    words = name.split("_")
    metric = next((_LATENCY_WORDS[w] for w in words if w in _LATENCY_WORDS), None)
    if metric is None and "e2e_latency" in name:
        metric = "e2e"
    if metric is not None:
        stat = next((_STAT_WORDS[w] for w in words if w in _STAT_WORDS), "mean")
        return f"{metric}_{stat}_ms"
    return None


def looks_like_bench_csv(lines: list[str]) -> bool:
    """True when the file starts with a header naming a throughput column.

    The next rows must have as many fields, so a log line full of commas is no header.
    """
    header = _header(lines)
    if header is None or any(len(h) > 80 for h in header):
        return False
    rows = [line.replace("\r", "") for line in lines if line.strip()][1:3]
    delimiter = _delimiter(lines[next(i for i, x in enumerate(lines) if x.strip())]) or ","
    try:
        if any(len(row) != len(header) for row in csv.reader(rows, delimiter=delimiter)):
            return False
    except csv.Error:
        return False
    return any(t in match_columns(header) for t in _THROUGHPUT)


def looks_tabular(lines: list[str]) -> bool:
    """True when the file starts like a delimited table with a text header."""
    header = _header(lines)
    return header is not None and len(header) >= 2 and all(num(h) is None for h in header)


def _header(lines: list[str]) -> list[str] | None:
    first = next((line for line in lines if line.strip()), None)
    if first is None or first.lstrip().startswith(("{", "[")):
        return None
    delimiter = _delimiter(first)
    if delimiter is None:
        return None
    try:
        return [h.strip() for h in next(csv.reader([first.replace("\r", "")], delimiter=delimiter))]
    except csv.Error:
        return None


def _delimiter(line: str) -> str | None:
    counts = {d: line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else None


def read_bench_csv(path: Path, text: str, mapping: dict[str, str] | None = None) -> list[Parsed]:
    """One run per data row.

    Raises
    ------
    ParseError
        When no throughput column can be found (the message lists the columns), or a
        throughput cell is not a number.
    """
    lines = split_lines(text)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise ParseError(path, None, "empty file")
    delimiter = _delimiter(lines[first]) or ","
    rows = list(csv_rows(path, text, delimiter, first))
    headers = [h.strip() for h in rows[0][1]]
    found = match_columns(headers, mapping)
    if not any(t in found for t in _THROUGHPUT):
        raise ParseError(
            path,
            first + 1,
            "no throughput column; columns found: "
            + ", ".join(repr(h) for h in headers)
            + ". Name one with mapping={'output_tok_s': '<column>'}",
            lines[first],
        )
    index = {h: i for i, h in enumerate(headers)}
    used = set(found.values())
    out = []
    for offset, row in rows[1:]:
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        parsed = Parsed(lineno=offset)
        for target, header in found.items():
            cell = cells[index[header]] if index[header] < len(cells) else ""
            _store(parsed, target, header, cell, path, offset, lines)
        for header in headers:
            if header not in used and index[header] < len(cells) and cells[index[header]]:
                cell = cells[index[header]]
                parsed.extra[header] = num(cell) if num(cell) is not None else cell
        out.append(parsed)
    return out


def _store(
    parsed: Parsed, target: str, header: str, cell: str, path: Path, lineno: int, lines: list[str]
) -> None:
    if target == "label":
        parsed.label = cell or None
        return
    if target in ("backend", "model"):
        parsed.values[target] = cell or None
        return
    if target in ("tp", "pp", "dp", "ep"):
        size = whole(cell)
        if size is not None:
            parsed.layout[target] = size
        return
    value = num(cell)
    if value is None and cell and target in _THROUGHPUT:
        raise ParseError(path, lineno, f"{header!r} is not a number: {cell!r}", lines[lineno - 1])
    _, unit = normalize(header)
    if target.endswith("_ms"):
        name, _ = normalize(header)
        seconds = unit in _SECONDS or (unit is None and name.endswith("_s"))
        value = to_ms(value, "s" if seconds else unit)
    elif target == "duration_s" and unit in ("ms",) and value is not None:
        value /= 1e3
    if target == "concurrency":
        parsed.values["concurrency"] = whole(value)
    elif target in ("num_prompts", "completed"):
        parsed.values[target] = whole(value)
    else:
        parsed.values[target] = value


# ----------------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return looks_like_bench_csv(peek.head)


def _load(path: Path, options: Options) -> list[Parsed]:
    return read_bench_csv(path, file_text(path), options.mapping)


BENCH_CSV = result_format(
    "bench-csv",
    "a user's own sweep table: columns found by common names or a mapping",
    _detect,
    _load,
    FILE,
)
