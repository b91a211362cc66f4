"""The one JSON encoder: every document ppscope writes (``--json``, sidecars, caches) goes here.

JSON has no NaN or infinity, so non-finite floats become ``null``; dates become ISO text, frames
lists of row objects, other objects their text. The output is strict JSON (``allow_nan=False``).

>>> to_json({"tok_s": float("nan"), "c": [1, 2.5]}, indent=None)
'{"tok_s":null,"c":[1,2.5]}'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from pathlib import PurePath
from typing import Any

import polars as pl

__all__ = ["jsonable", "to_json"]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dicts, lists, str, int, finite float, bool or None."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, pl.DataFrame):
        return [jsonable(row) for row in value.iter_rows(named=True)]
    if isinstance(value, pl.Series):
        return [jsonable(v) for v in value.to_list()]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, PurePath):
        return value.as_posix()
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return jsonable(value.to_dict())
    return str(value)


def to_json(value: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text of ``value`` (see ``jsonable``); without ``indent``, no spaces at all."""
    separators = None if indent is not None else (",", ":")
    return json.dumps(
        jsonable(value),
        indent=indent,
        allow_nan=False,
        sort_keys=sort_keys,
        separators=separators,
    )
