"""Pieces every benchmark reader shares: a parsed run, number coercion, layout and labels."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError
from toolkit.load.damage import CUT_LINE, cut_tail, damaged
from toolkit.load.inputs import split_lines
from toolkit.load.jsonl import check_text
from toolkit.load.layout import RunLayout
from toolkit.schema.jsonable import to_json

PARALLEL = ("tp", "pp", "dp", "ep")
# Server-argument names of each parallel size, SGLang's first, then vLLM's.
_PARALLEL_KEYS = {
    "tp": ("tp_size", "tensor_parallel_size", "tp"),
    "pp": ("pp_size", "pipeline_parallel_size", "pp"),
    "dp": ("dp_size", "data_parallel_size", "dp"),
    "ep": ("ep_size", "expert_parallel_size", "ep"),
}
# "PP4xTP2", "tp8-pp1", "dp2_tp4": a size name not glued to a word (an "x" after a digit is fine).
_LABEL_PART = re.compile(r"(?:^|(?<=[^a-z])|(?<=\dx))(tp|pp|dp|ep)[-_=]?(\d+)(?!\d)", re.IGNORECASE)
# "c32", "conc-32", "concurrency32", "concurrency=32", "32-concurrency" in a tag or directory name.
_CONCURRENCY = re.compile(
    r"(?<![a-z0-9])(?:c|conc|concurrency|max[-_]?concurrency)[-_=]?(\d+)(?!\d)"
    r"|(?<![0-9])(\d+)[-_]?(?:concurrency|conc|users|clients)(?![a-z])",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
INT64 = (-(2**63), 2**63 - 1)
"""Integers a result may hold: what the tables' Int64 columns store."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of a result JSON; real exports nest four or five levels."""


@dataclass
class Parsed:
    """One benchmark run as a reader found it, before labels and layout are resolved.

    ``values`` uses the column names of ``RUN_COLUMNS``; ``extra`` keeps what has no column.
    """

    values: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    label: str | None = None  # a layout label written in the data itself (a CSV column)
    layout: dict[str, int] = field(default_factory=dict)  # tp/pp/dp/ep the file states
    hint: str | None = None  # free text naming the run (tag, label) that may hold "c32"
    hint_from: str = "label"  # what the hint is: the run's label/tag, or its "path"
    lineno: int | None = None
    # How the run was exported when its tool writes one run several ways (GenAI-Perf/AIPerf:
    # "json" summary, "csv" summary, per-request "records"), so that it counts once.
    export: str | None = None


def num(value: Any) -> float | None:
    """A float from a number or numeric text (``"1,234.50"``, ``"inf"``); None otherwise.

    NaN is None: no tool means "measured, and the answer is NaN".
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            out = float(value)
        except OverflowError:  # an integer beyond any float
            return math.inf if value > 0 else -math.inf
    elif isinstance(value, str):
        text = value.strip().lower().rstrip("%")
        if text in ("inf", "+inf", "infinity", "+infinity"):
            return math.inf
        if text in ("-inf", "-infinity"):
            return -math.inf
        if not text or not _NUMBER.fullmatch(text):
            return None
        try:
            out = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            return None
    else:
        return None
    return None if math.isnan(out) else out


def whole(value: Any) -> int | None:
    """An int from a whole number (``32``, ``32.0``, ``"32"``) within 64 bits; else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if INT64[0] <= value <= INT64[1] else None
    x = num(value)
    if x is None or not math.isfinite(x) or x != int(x):
        return None
    out = int(x)
    return out if INT64[0] <= out <= INT64[1] else None


def from_epoch_ns(value: Any) -> datetime | None:
    """Local time of an epoch timestamp in ns (what AIPerf writes); None when out of range."""
    ns = whole(value)
    if ns is None:
        return None
    try:
        return datetime.fromtimestamp(ns / 1e9)
    except (OverflowError, OSError, ValueError):
        return None


def layout_of(args: dict[str, Any]) -> dict[str, int]:
    """tp/pp/dp/ep from a server-arguments dict (SGLang or vLLM names); only those present."""
    out: dict[str, int] = {}
    for short, keys in _PARALLEL_KEYS.items():
        for key in keys:
            size = whole(args.get(key))
            if size is not None and size > 0:
                out[short] = size
                break
    return out


def layout_from_text(text: str | None) -> dict[str, int]:
    """tp/pp/dp/ep written in a label such as ``PP4xTP2`` or ``tp8-pp1``."""
    out: dict[str, int] = {}
    for name, size in _LABEL_PART.findall(text or ""):
        out.setdefault(name.lower(), int(size))
    return out


def layout_label(layout: dict[str, int]) -> str | None:
    """``TP8``, ``PP8``, ``PP4xTP2`` (``xDP2`` appended when data parallel); None if unknown."""
    if layout.get("tp") is None and layout.get("pp") is None:
        return None
    sizes = {k: layout.get(k) or 1 for k in ("tp", "pp", "dp")}
    return RunLayout(**sizes, layout_from="benchmark").label


def concurrency_from_text(text: str | None) -> int | None:
    """The concurrency a tag or directory name states (``pp8-c32`` → 32), else None."""
    for m in _CONCURRENCY.finditer(text or ""):
        value = int(m.group(1) or m.group(2))
        if value > 0:
            return value
    return None


def to_ms(value: Any, unit: str | None) -> float | None:
    """A latency in ms from a value in ``unit`` (ms, s/sec, us, ns; default ms)."""
    x = num(value)
    if x is None:
        return None
    u = unit.strip().lower() if isinstance(unit, str) and unit.strip() else "ms"
    if u in ("s", "sec", "secs", "second", "seconds"):
        return x * 1e3
    if u in ("us", "µs", "μs", "usec"):
        return x / 1e3
    if u in ("ns", "nsec"):
        return x / 1e6
    return x


def extra_json(extra: dict[str, Any]) -> str | None:
    """``extra`` as strict JSON text (non-finite numbers as their names), or None if empty."""
    if not extra:
        return None
    return to_json(extra, indent=None, sort_keys=True)


def find_key(data: Any, key: str, depth: int = 4) -> Any:
    """The first value under ``key`` anywhere in nested dicts (breadth first), else None."""
    level = [data]
    for _ in range(depth):
        nxt = []
        for node in level:
            if isinstance(node, dict):
                if node.get(key) is not None:
                    return node[key]
                nxt.extend(v for v in node.values() if isinstance(v, dict))
        level = nxt
    return None


def fill_means(values: dict[str, Any]) -> None:
    """Mean lengths, token rates and requests in flight from totals where the file gives totals
    only (exact)."""
    completed = whole(values.get("completed"))
    duration = num(values.get("duration_s"))
    for total, mean in (("total_input_tokens", "input_len"), ("total_output_tokens", "output_len")):
        t = num(values.get(total))
        if values.get(mean) is None and t is not None and completed:
            values[mean] = t / completed
    t = num(values.get("total_input_tokens"))
    if values.get("input_tok_s") is None and t is not None and duration:
        values["input_tok_s"] = t / duration
    e2e = num(values.get("e2e_mean_ms"))
    if values.get("concurrency_observed") is None and e2e is not None and completed and duration:
        # the sum of the latencies over the duration: the mean number of requests in flight
        # (older clients print no ``Concurrency:`` row but do print these three)
        values["concurrency_observed"] = completed * e2e / 1000 / duration


def parse_json(text: str, path: Path, lineno: int | None = None) -> Any:
    """The JSON value of ``text`` (a file, or its line ``lineno``), checked for what breaks
    readers: nesting deeper than ``MAX_JSON_DEPTH`` and integers beyond 64 bits.

    Raises
    ------
    ParseError
        Invalid JSON, too deep, or an integer out of range; with the line where it is.
    """

    def line_of(needle: str) -> int | None:
        if lineno is not None:
            return lineno
        at = text.find(needle)
        return None if at < 0 else text.count("\n", 0, at) + 1

    try:
        value = json.loads(text, parse_int=_bounded_int)
    except _IntOutOfRange as e:
        shown = e.literal
        if len(shown) > 24:
            shown = f"{shown[:20]}… ({len(shown)} digits)"
        raise ParseError(path, line_of(e.literal), f"integer out of range: {shown}") from None
    except json.JSONDecodeError as e:
        where = lineno if lineno is not None else e.lineno
        raise ParseError(path, where, f"not valid JSON: {e.msg}") from None
    except RecursionError:
        raise ParseError(path, lineno, f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise ParseError(path, lineno, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    check_text(text, value, path, lineno)
    return value


class _IntOutOfRange(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _bounded_int(literal: str) -> int:
    # checked on the text first: int() of thousands of digits is slow, then refused
    if len(literal.lstrip("-")) > 19:
        raise _IntOutOfRange(literal)
    value = int(literal)
    if not INT64[0] <= value <= INT64[1]:
        raise _IntOutOfRange(literal)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def csv_rows(
    path: Path, text: str, delimiter: str = ",", first: int = 0
) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each row of CSV text, from physical line ``first + 1`` on.

    Lines are the file's physical lines; a carriage return inside one is dropped (the ``csv``
    module refuses it outside quotes). A row quoted over several lines is numbered by its
    first line.

    Raises
    ------
    ParseError
        A row the ``csv`` module cannot read (a field beyond its size limit), with its line.
    """
    lines = split_lines(text)
    reader = csv.reader((line.replace("\r", "") for line in lines[first:]), delimiter=delimiter)
    start = first + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            lineno = first + reader.line_num
            raise ParseError(path, lineno, f"not a csv row: {e}", lines[lineno - 1]) from None
        yield start, row
        start = first + reader.line_num + 1


def json_lines(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSONL file that is one JSON object.

    A line that is not (not JSON, not an object, an integer out of range, a lone surrogate) is
    ``damaged`` and the lines after it are read: while damage is collected it is kept there,
    named with its line; otherwise (strict) it is raised. A cut last line (no newline after it)
    is named as such.

    Raises
    ------
    ParseError
        Outside ``damage.collecting``, at the first line that is no JSON object.
    """
    lines = split_lines(text)
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, path, lineno)
        except ParseError as e:
            if cut_tail(text, lineno, len(lines)) and "JSON" in e.reason:
                damaged(ParseError(path, lineno, CUT_LINE, line))
                return
            damaged(ParseError(path, lineno, e.reason, line))
            continue
        if not isinstance(obj, dict):
            damaged(ParseError(path, lineno, "expected one JSON object per line", line))
            continue
        yield lineno, obj
