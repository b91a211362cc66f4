"""The stage timeline as Chrome trace JSON (``traceEvents``), for ui.perfetto.dev.

One process per data-parallel rank (``SGLang``), one track per PP stage. A decode line closes
a window of ``decode_log_interval`` micro-batch steps on its stage, so each becomes a complete
event (``ph: "X"``) spanning the window, with the line's numbers as arguments; prefill lines
are instant events. Counters (``ph: "C"``) carry the queue, KV usage and gen throughput of the
reference stage and, when a GPU trace is given, each GPU's busy % on a ``GPUs`` process.
Timestamps are microseconds since the Unix epoch of the log's local clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load.redact import redact_value
from toolkit.schema.jsonable import jsonable, to_json

__all__ = ["chrome_trace", "merge_chrome_traces", "write_chrome_trace"]

SERVER_PID = 1
GPU_PID = 1000  # after every DP rank's process
METRICS_PID = 2000  # SGLang's own /metrics, per stage
RUN_PID_STEP = 10_000  # process ids of the next run when several share one trace
MAX_WINDOW_S = 120.0  # a longer "window" is an idle gap, not 40 steps of decoding


def chrome_trace(
    timeline: pl.DataFrame,
    *,
    gpu: pl.DataFrame | None = None,
    label: str = "SGLang",
    log_interval: int = 40,
    stages: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Chrome trace JSON of a stage timeline.

    Parameters
    ----------
    timeline
        ``toolkit.analyze.stages.stage_timeline`` of one launch.
    gpu
        Optional GPU busy series: ``ts``, ``gpu``, ``pp`` (may be null) and ``busy_pct``
        (``timeline.stage_gpu_series``), one counter track per GPU.
    label
        Run label, used in the process names.
    log_interval
        ``decode_log_interval``: micro-batch steps a decode window holds.
    stages
        Optional per-stage shares SGLang's ``/metrics`` measured (``ts``, ``pp_rank``,
        ``measure``, ``category``, ``share``: ``stage_wait.stage_share_series``), one counter
        track per stage and measure on an ``SGLang /metrics`` process.

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``.
    """
    events: list[dict[str, Any]] = []
    df = timeline.with_columns(_us=pl.col("ts").dt.epoch("us"))
    dps = sorted(df["dp"].unique().to_list()) if df.height else [0]
    for dp in dps:
        pid = SERVER_PID + dp
        name = f"{label} scheduler" + (f" DP{dp}" if len(dps) > 1 else "")
        events.append(_meta("process_name", pid, 0, {"name": name}))
        events.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
        for pp in sorted(df.filter(pl.col("dp") == dp)["pp"].unique().to_list()):
            events.append(_meta("thread_name", pid, pp + 1, {"name": f"PP{pp}"}))
            events.append(_meta("thread_sort_index", pid, pp + 1, {"sort_index": pp}))
    for r in df.iter_rows(named=True):
        pid, tid, end = SERVER_PID + r["dp"], r["pp"] + 1, r["_us"]
        args = _args(r)
        if r["kind"] == "decode":
            window = r["interval_s"]
            name = f"decode ×{log_interval} (#running-req {r['running_req']})"
            if window is not None and 0 < window <= MAX_WINDOW_S:
                dur = round(window * 1e6)
                event = {"name": name, "cat": "decode", "ph": "X", "ts": end - dur, "dur": dur}
                events.append({**event, "pid": pid, "tid": tid, "args": args})
            else:
                events.append(_instant(name, "decode", end, pid, tid, args))
        else:
            name = f"prefill {r['new_seq']} req, {r['new_token']} tok"
            events.append(_instant(name, "prefill", end, pid, tid, args))
    events += _counters(df)
    if gpu is not None and gpu.height:
        events += _gpu_counters(gpu)
    if stages is not None and stages.height:
        events += _stage_counters(stages)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "ppscope", "run": label},
    }


def merge_chrome_traces(traces: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' traces in one: run ``i``'s process ids move up by ``i × RUN_PID_STEP``, so
    each run keeps its own group of tracks on the shared clock."""
    events: list[dict[str, Any]] = []
    for i, trace in enumerate(traces):
        events += [{**e, "pid": e["pid"] + i * RUN_PID_STEP} for e in trace["traceEvents"]]
    runs = [t.get("otherData", {}).get("run") for t in traces]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "ppscope", "runs": runs},
    }


def write_chrome_trace(
    path: str | Path, trace: dict[str, Any], secrets: Iterable[str] = ()
) -> Path:
    """Write a trace dict as JSON (strict: no NaN), every secret out of its text (the run's
    ``secrets`` and whatever the scanner finds), and return the path."""
    out = Path(path)
    out.write_text(to_json(redact_value(jsonable(trace), secrets), indent=None), encoding="utf-8")
    return out


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _instant(
    name: str, cat: str, ts: int, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "i", "s": "t", "ts": ts, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def _args(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("ordinal", "running_req", "token", "token_usage", "queue_req", "gen_tok_s",
            "cuda_graph", "new_seq", "new_token", "lag_s")  # fmt: skip
    return {k: r[k] for k in keys if r.get(k) is not None and r[k] == r[k]}


def _counters(df: pl.DataFrame) -> list[dict[str, Any]]:
    """Queue, KV usage and gen throughput of the reference stage (every stage logs the same)."""
    if not df.height:
        return []
    first = df.filter((pl.col("dp") == pl.col("dp").min()) & (pl.col("pp") == pl.col("pp").min()))
    out = []
    for r in first.iter_rows(named=True):
        pid = SERVER_PID + r["dp"]
        if r["queue_req"] is not None:
            out.append(_counter("#queue-req", r["_us"], pid, {"queue_req": r["queue_req"]}))
        if r["token_usage"] is not None:
            out.append(_counter("KV usage", r["_us"], pid, {"token_usage": r["token_usage"]}))
        if r["kind"] == "decode" and r["gen_tok_s"] is not None:
            out.append(_counter("gen tok/s", r["_us"], pid, {"gen_tok_s": r["gen_tok_s"]}))
    return out


def _counter(name: str, ts: int, pid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "C", "ts": ts, "pid": pid, "tid": 0, "args": args}


def _gpu_counters(gpu: pl.DataFrame) -> list[dict[str, Any]]:
    out = [_meta("process_name", GPU_PID, 0, {"name": "GPUs"}),
           _meta("process_sort_index", GPU_PID, 0, {"sort_index": GPU_PID})]  # fmt: skip
    rows = gpu.filter(pl.col("ts").is_not_null() & pl.col("busy_pct").is_not_null())
    nodes = "node" in rows.columns and rows.get_column("node").n_unique() > 1
    rows = rows.with_columns(_us=pl.col("ts").cast(pl.Datetime("ms")).dt.epoch("us")).sort("ts")
    for r in rows.iter_rows(named=True):
        stage = f" (PP{r['pp']})" if r.get("pp") is not None else ""
        where = f"node {r['node']} " if nodes and r["node"] is not None else ""
        name = f"{where}GPU {r['gpu']} busy %{stage}"
        out.append(_counter(name, r["_us"], GPU_PID, {"busy_pct": round(r["busy_pct"], 2)}))
    return out


def _stage_counters(stages: pl.DataFrame) -> list[dict[str, Any]]:
    out = [_meta("process_name", METRICS_PID, 0, {"name": "SGLang /metrics"}),
           _meta("process_sort_index", METRICS_PID, 0, {"sort_index": METRICS_PID})]  # fmt: skip
    rows = stages.filter(pl.col("ts").is_not_null() & pl.col("share").is_finite())
    rows = rows.with_columns(_us=pl.col("ts").cast(pl.Datetime("ms")).dt.epoch("us")).sort("ts")
    for r in rows.iter_rows(named=True):
        what = r["category"] or r["measure"]
        name = f"PP{r['pp_rank']} {what} %"
        out.append(_counter(name, r["_us"], METRICS_PID, {"pct": round(100 * r["share"], 2)}))
    return out
