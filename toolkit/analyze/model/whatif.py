"""What-if: a layout or workload with SGLang flags changed, and the model's answer for each
measured point."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from toolkit.analyze.model.fit import Fit
from toolkit.analyze.model.observed import Points, observed_frame, point_layout, point_workload
from toolkit.analyze.model.predict import predict
from toolkit.analyze.model.spec import Layout, Workload
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = ["WHAT_IF", "what_if", "what_if_table", "what_if_workload"]

_LAYOUT_KEYS: dict[str, str] = {
    "pp_async_batch_depth": "pp_async_batch_depth",
    "pp_max_micro_batch_size": "pp_max_micro_batch_size",
    "max_running_requests": "max_running_requests",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_total_num_tokens": "max_total_num_tokens",
    "tp_size": "tp",
    "tp": "tp",
    "pp_size": "pp",
    "pp": "pp",
    "dp_size": "dp",
    "dp": "dp",
}
_PP_ONLY = {"pp_async_batch_depth", "pp_max_micro_batch_size"}
_AUTO_OK = {"pp_max_micro_batch_size", "max_running_requests", "max_total_num_tokens"}
_WORKLOAD_KEYS: dict[str, str] = {
    "concurrency": "concurrency",
    "max_concurrency": "concurrency",
    "input_len": "input_len",
    "random_input_len": "input_len",
    "output_len": "output_len",
    "random_output_len": "output_len",
}


def _changed(changes: Mapping[str, int | None]) -> set[str]:
    """Layout fields a change set touches."""
    return {_LAYOUT_KEYS[k] for k in changes if k in _LAYOUT_KEYS}


def _unknown(key: str) -> ToolkitError:
    known = ", ".join(sorted({*_LAYOUT_KEYS, *_WORKLOAD_KEYS}))
    return ToolkitError(f"what-if: unknown setting {key!r} (known: {known})")


def what_if(layout: Layout, changes: Mapping[str, int | None]) -> Layout:
    """The layout with SGLang flags changed, e.g. ``{"pp_max_micro_batch_size": 4}``.

    Workload keys (``concurrency``, ``input_len``, ``output_len``) are ignored here: see
    ``what_if_workload``. ``None`` means auto for the cap, the request limit and the pool.
    The PP-only flags (``pp_async_batch_depth``, ``pp_max_micro_batch_size``) leave a layout
    without PP unchanged: a what-if aimed at the PP run must not throttle the TP baseline.
    """
    updates: dict[str, Any] = {}
    for key, value in changes.items():
        if key in _WORKLOAD_KEYS:
            continue
        if key not in _LAYOUT_KEYS:
            raise _unknown(key)
        if value is None and key not in _AUTO_OK:
            raise ToolkitError(f"what-if: {key} needs a number, not auto")
        if key in _PP_ONLY and layout.pp == 1 and "pp" not in _changed(changes):
            continue
        updates[_LAYOUT_KEYS[key]] = None if value is None else int(value)
    if "pp" in updates and layout.layer_partition is not None:
        updates["layer_partition"] = None  # a fixed partition is for the old stage count
    return replace(layout, **updates)


def what_if_workload(workload: Workload, changes: Mapping[str, int | None]) -> Workload:
    """The workload with ``concurrency`` / ``input_len`` / ``output_len`` changed."""
    updates: dict[str, Any] = {}
    for key, value in changes.items():
        if key in _LAYOUT_KEYS:
            continue
        if key not in _WORKLOAD_KEYS:
            raise _unknown(key)
        if value is None:
            raise ToolkitError(f"what-if: {key} needs a number, not auto")
        updates[_WORKLOAD_KEYS[key]] = int(value)
    return replace(workload, **updates)


_I, _F, _S = pl.Int64(), pl.Float64(), pl.String()

WHAT_IF_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("base_concurrency", _I, "requests in flight as measured"),
    Column("concurrency", _I, "requests in flight after the change"),
    Column("expected_tok_s", _F, "prediction for the point as measured"),
    Column("what_if_tok_s", _F, "prediction under the change"),
    Column("change_pct", _F, "100·(what_if − expected)/expected"),
    Column("active_slots", _I, "filled slots under the change"),
    Column("occupancy", _S, "slots × requests per slot under the change"),
    Column("gpu_idle_share", _F, "mean GPU idle share under the change"),
    Column("regime", _S, "binding term under the change"),
    Column("round_ms", _F, "T_round = TPOT under the change, ms"),
)
WHAT_IF = schema_of(WHAT_IF_COLUMNS)


def what_if_table(fitted: Fit, observed: Points, changes: Mapping[str, int | None]) -> pl.DataFrame:
    """Every observed point predicted as measured and under ``changes`` (schema ``WHAT_IF``).

    On the incident, ``{"pp_max_micro_batch_size": 4}`` turns PP8 c=32 into 8×4 and predicts
    ≈ 560–630 tok/s (≈ 564 with the last stage's lm_head setting the pace).
    """
    frame = observed_frame(observed)
    what_if(Layout(), changes)  # reject unknown keys before any work
    what_if_workload(Workload(1), changes)
    out = []
    for row in frame.rows(named=True):
        layout, load = point_layout(row), point_workload(row)
        before = predict(layout, load, fitted.params)
        after = predict(what_if(layout, changes), what_if_workload(load, changes), fitted.params)
        change = 100.0 * (after.tok_s - before.tok_s) / before.tok_s if before.tok_s else math.nan
        out.append(
            {
                "label": row["label"],
                "base_concurrency": row["concurrency"],
                "concurrency": after.workload.concurrency,
                "expected_tok_s": before.tok_s,
                "what_if_tok_s": after.tok_s,
                "change_pct": change,
                "active_slots": after.active_slots,
                "occupancy": after.shape,
                "gpu_idle_share": after.gpu_idle_share,
                "regime": after.regime,
                "round_ms": after.round_s * 1e3,
            }
        )
    return pl.DataFrame(out, schema=WHAT_IF)
