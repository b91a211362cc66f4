"""The ``Prefill batch`` / ``Decode batch`` message: its keys, and a reference reader in Python.

The fast path (``toolkit.load.sglang.plan``) types these lines with vectorized polars expressions;
this module holds the shared key table and ``parse_batch_message``, the exact reader used for
the few lines the fast path cannot settle (unknown keys, cut lines) and by the tests as the
reference the fast path must agree with.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import polars as pl

from toolkit.schema.sglang import BATCH_FIELDS, BatchField

GRAPH_LABELS = ("cuda graph", "cpu graph", "npu graph", "musa graph")

# Printed key → column. Several spellings of one quantity share a column.
KEY_COLUMN: dict[str, BatchField] = {f.key: f for f in BATCH_FIELDS}
for _label in GRAPH_LABELS:
    KEY_COLUMN[_label] = KEY_COLUMN["cuda graph"]
for _phase in ("decode", "prefill"):
    KEY_COLUMN[f"est. {_phase} TFLOPS/s (per GPU)"] = KEY_COLUMN["est. TFLOPS/s (per GPU)"]

_HEADER = re.compile(
    r"^(?:\[gpu(?:_id)?=(?P<gpu>\d+)\] )?(?P<kind>Prefill|Decode) batch"
    r"(?:\(mixed #running-req: (?P<mixed>\d+)\))?(?: \[(?P<fct>\d+)\])?[.,] ?"
)


class BatchLine(NamedTuple):
    """A typed batch message: the columns of ``batches`` it fills, and whether it typed fully."""

    values: dict[str, object]
    extra: str | None
    complete: bool


def is_batch_message(message: str) -> bool:
    """True when the message looks like a Prefill/Decode batch line (typed or not)."""
    return _HEADER.match(message) is not None


def typed_value(field: BatchField, text: str) -> object:
    """The value of one field, or raise ValueError when the text does not fit its type."""
    text = text.strip()
    if field.dtype == pl.Boolean:
        if text in ("True", "False"):
            return text == "True"
        raise ValueError(text)
    if field.column.endswith("_pct"):
        text = text.removesuffix("%")
    if field.dtype == pl.Int64:
        # past 64 bits the text is kept (the line's ``extra``), never a column's overflow
        if not re.fullmatch(r"-?\d{1,19}", text) or not -(2**63) <= int(text) < 2**63:
            raise ValueError(text)
        return int(text)
    value = float(text)  # accepts nan and inf, which SGLang prints for 0/0 and x/0
    if math.isnan(value) and text.lower() != "nan":
        raise ValueError(text)
    return value


def batch_shape(message: str) -> tuple[str, tuple[str, ...]] | None:
    """``(kind, keys in order)`` of a batch message that types fully with known keys, else None.

    Examples
    --------
    >>> batch_shape("Decode batch, #running-req: 8, #token: 100, #queue-req: 0, ")
    ('decode', ('#running-req', '#token', '#queue-req'))
    """
    parsed = parse_batch_message(message)
    if parsed is None or not parsed.complete or parsed.extra is not None:
        return None
    head = _HEADER.match(message)
    assert head is not None
    body = message[head.end() :].rstrip().removesuffix(",")
    keys = tuple(part.partition(": ")[0] for part in body.split(", "))
    return str(parsed.values["kind"]), keys


def parse_batch_message(message: str) -> BatchLine | None:
    """Type one batch message; None when it is not a batch line at all.

    Examples
    --------
    >>> line = parse_batch_message("Decode batch, #running-req: 8, #token: 33536, "
    ...     "token usage: 0.10, cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0")
    >>> line.values["running_req"], line.values["cuda_graph"], line.complete
    (8, True, True)
    """
    head = _HEADER.match(message)
    if head is None:
        return None
    values: dict[str, object] = {"kind": head["kind"].lower()}
    for group, column in (("gpu", "gpu_id"), ("mixed", "mixed_running_req"), ("fct", "forward_ct")):
        if head[group] is not None and len(head[group]) <= 18:  # longer: kept in the message
            values[column] = int(head[group])
    body = message[head.end() :].rstrip()
    if body.endswith(","):
        body = body[:-1]
    extra: list[str] = []
    complete = bool(body)
    for part in body.split(", ") if body else []:
        key, sep, text = part.partition(": ")
        field = KEY_COLUMN.get(key)
        if not sep:
            complete = False
            extra.append(part)
            continue
        if field is None:
            extra.append(part)
            continue
        try:
            values[field.column] = typed_value(field, text)
        except ValueError:
            complete = False
            extra.append(part)
            continue
        if key in GRAPH_LABELS:
            values["graph_device"] = key.split()[0]
    return BatchLine(values, ", ".join(extra) or None, complete)
