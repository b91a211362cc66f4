"""What a live server said its arguments were: ``/server_info`` (``/get_server_info``) answers.

Two shapes: ``server_info.jsonl`` of ``ppscope capture`` (one object per call, ``{"ts",
"phase", "when", "endpoint", "info"}``, local times of the capture host, shifted by the run's
``clock_offset_s`` like the GPU trace), and one saved answer (``curl .../server_info >
server_info.json``: no time, no phase). An answer holds the arguments flat (older releases) or
under ``server_args``; ``internal_states`` (one object per data-parallel rank) holds the values
the scheduler runs with, which a runtime change updates while ``server_args`` keeps the launch
value: a key of both is read from ``internal_states``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load import compression
from toolkit.load.damage import CUT_LINE, cut_tail, damaged
from toolkit.load.inputs import check_input, split_lines
from toolkit.load.jsonl import first_record, json_object, local_time, lone_surrogate
from toolkit.schema.sglang import SERVER_INFO

__all__ = [
    "SERVER_INFO_FORMAT",
    "args_of_info",
    "first_answer_args",
    "is_server_info",
    "load_server_info",
]

SERVER_INFO_FORMAT = "server-info"
MAX_BYTES = 64 << 20
"""A few hundred answers of a few KB each; a larger file is something else."""
_CALL_KEYS = {"ts", "endpoint", "info"}
_NOT_ARGS = ("internal_states", "version")
"""Keys of a flat answer that are no server arguments."""
_ARG_KEYS = ("model_path", "tp_size", "pp_size", "max_running_requests", "chunked_prefill_size")


def args_of_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments an answer states, runtime values of ``internal_states`` over launch ones.

    >>> args_of_info({"server_args": {"tp_size": 1, "pp_max_micro_batch_size": None},
    ...               "internal_states": [{"pp_max_micro_batch_size": 4, "last_gen_throughput": 9}]
    ...               })
    {'tp_size': 1, 'pp_max_micro_batch_size': 4}
    """
    nested = info.get("server_args")
    args = dict(nested) if isinstance(nested, Mapping) else dict(info)
    for key in _NOT_ARGS:
        args.pop(key, None)
    states = info.get("internal_states")
    first = states[0] if isinstance(states, list) and states else None
    if isinstance(first, Mapping):
        args.update({k: v for k, v in first.items() if k in args})
    return args


def first_answer_args(table: pl.DataFrame | None) -> dict[str, Any]:
    """The arguments of the first answer of a ``load_server_info`` table, values decoded.

    The first answer was given before any benchmark ran, so it holds the launch's settings
    (a later one may hold a runtime change). Empty for no table or no answer.
    """
    if table is None or not table.height:
        return {}
    first = table.select("source", "lineno").row(0)
    rows = table.filter((pl.col("source") == first[0]) & (pl.col("lineno") == first[1]))
    out: dict[str, Any] = {}
    for key, value in rows.select("key", "value").iter_rows():
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            out[key] = value
    return out


def is_server_info(path: Path) -> bool:
    """``server_info.jsonl`` of a capture, or one saved answer that states server arguments."""
    found = first_record(path, n=3)
    if found is None or not found[0].lstrip().startswith("{"):
        return False
    record = found[1]
    if record is not None:  # a line that is a whole object: a call, or one answer
        return set(record) >= _CALL_KEYS or _states_arguments(record)
    if path.stat().st_size > MAX_BYTES:
        return False
    answer = _whole_object(path)  # an answer printed over several lines
    return answer is not None and _states_arguments(answer)


def load_server_info(paths: Iterable[str | Path], *, clock_offset_s: float = 0.0) -> pl.DataFrame:
    """Every argument of every answer, long form (``schema.sglang.SERVER_INFO``), in order.

    Raises
    ------
    ParseError
        When a line of a ``server_info.jsonl`` is no call record (with its line; while damage
        is collected, ``damage.collecting``, it is kept there and the other lines are read),
        or a saved answer is no JSON object stating server arguments.
    """
    shift = timedelta(seconds=clock_offset_s)
    rows: list[dict[str, Any]] = []
    for path in paths:
        path = check_input(path)
        if path.stat().st_size > MAX_BYTES:
            raise ParseError(path, None, "too large for server_info answers")
        answer = _whole_object(path)
        if answer is not None and not (set(answer) >= _CALL_KEYS):
            broken = lone_surrogate(json.dumps(answer), answer)
            if broken is not None:
                raise ParseError(path, None, broken)
            if not _states_arguments(answer):
                raise ParseError(path, 1, "a JSON object that states no server arguments")
            rows += _rows(str(path), 1, None, None, None, answer)
            continue
        text = compression.head_bytes(path, MAX_BYTES).decode("utf-8", "replace")
        lines = split_lines(text)
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            call = _call(line)
            if call is None and cut_tail(text, lineno, len(lines)):
                damaged(ParseError(path, lineno, CUT_LINE, line))
                break
            why = "not a server_info call ({ts, endpoint, info})"
            why = why if call is None else lone_surrogate(line, call)
            if why is not None:  # kept as damage while it is collected: the other calls are read
                damaged(ParseError(path, lineno, why, line))
                continue
            ts = local_time(call.get("ts"))
            phase = call.get("phase")
            phase = phase if isinstance(phase, int) and not isinstance(phase, bool) else None
            when = call.get("when") if isinstance(call.get("when"), str) else None
            at = ts + shift if ts is not None else None
            rows += _rows(str(path), lineno, at, phase, when, call["info"])
    return pl.DataFrame(rows, schema=SERVER_INFO, orient="row").sort(
        "ts", "source", "lineno", nulls_last=True, maintain_order=True
    )


def _rows(
    source: str,
    lineno: int,
    ts: datetime | None,
    phase: int | None,
    when: str | None,
    info: Mapping[str, Any],
) -> list[dict[str, Any]]:
    where = {"source": source, "lineno": lineno, "ts": ts, "phase": phase, "when": when}
    return [
        where | {"key": str(k), "value": json.dumps(v, default=str)}
        for k, v in args_of_info(info).items()
    ]


def _call(line: str) -> dict[str, Any] | None:
    record = json_object(line)
    ok = record is not None and set(record) >= _CALL_KEYS
    return record if ok and isinstance(record["info"], dict) else None


def _whole_object(path: Path) -> dict[str, Any] | None:
    """The file as one JSON object, None when it is not one (a JSONL file is not)."""
    return json_object(compression.head_bytes(path, MAX_BYTES).decode("utf-8", "replace"))


def _states_arguments(answer: Mapping[str, Any]) -> bool:
    args = args_of_info(answer)
    return sum(key in args for key in _ARG_KEYS) >= 2
