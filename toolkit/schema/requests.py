"""Declared tables of server-side request records and of their breakdown per phase.

SGLang records each finished request on the server in three ways: the per-request metrics
export (``--export-metrics-to-file``), ``ReqTimeStats(...)`` log lines
(``--enable-request-time-stats-logging``) and ``Finish:`` lines (``--log-requests``, text or
JSON). Each becomes rows of ``SERVER_REQUESTS``; names shared with the client-side
``schema.bench.REQUESTS`` mean the same thing there.
"""

from __future__ import annotations

import polars as pl

from toolkit.schema import Column, schema_of

_I = pl.Int64()
_F = pl.Float64()
_S = pl.String()
_B = pl.Boolean()
_T = pl.Datetime("us")

REQUEST_FORMS: dict[str, str] = {
    "export": "a record of the metrics export file (`sglang-request-metrics-*.log`)",
    "log-json": "a `request.finished` JSON event of `--log-requests-format json`",
    "finish": "a `Finish: obj=..., out={...}` line of `--log-requests`",
    "time-stats": "a `ReqTimeStats(...)` / `Req Time Stats(...)` scheduler line",
}
"""Where a server request row came from (column ``form``)."""

SERVER_REQUEST_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", _I, "line of the record"),
    Column("form", _S, "record form: export, log-json, finish, time-stats"),
    Column("rid", _S, "request id as the server names it"),
    Column("pp", pl.Int32(), "PP rank of the scheduler line that logged it (time-stats only)"),
    Column("ts", _T, "arrival: received by the server (time-stats: entered the wait queue)"),
    Column("first_token_ts", _T, "prefill finished: the first token exists"),
    Column("end_ts", _T, "the request finished"),
    Column("queue_ms", _F, "waiting queue: wait-queue entry to forward entry, ms"),
    Column("prefill_ms", _F, "ttft_ms - queue_ms: tokenize, dispatch and prefill forward, ms"),
    Column("forward_ms", _F, "forward entry to completion (prefill + decode), ms"),
    Column("decode_ms", _F, "first token to finish, ms"),
    Column("ttft_ms", _F, "time to first token on the server, ms"),
    Column("e2e_ms", _F, "end-to-end latency on the server, ms"),
    Column("input_len", _I, "prompt tokens"),
    Column("output_len", _I, "generated tokens"),
    Column("cached_len", _I, "prompt tokens served from the prefix cache"),
    Column("finish_reason", _S, "stop, length, abort, ... (the reason's `type`)"),
    Column("ok", _B, "the request was not aborted"),
    Column("error", _S, "the abort message, if any (first 200 characters)"),
)

BREAKDOWN_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase the requests arrived in; null = outside every phase (or none)"),
    Column("concurrency", _I, "requests the benchmark kept in flight in the phase, where known"),
    Column("requests", _I, "finished requests (one per request id)"),
    Column("with_ttft", _I, "of them, requests whose record states the first token's time"),
    Column("ttft_median_ms", _F, "median server-side time to first token, ms"),
    Column("ttft_p90_ms", _F, "p90 server-side time to first token, ms"),
    Column("queue_median_ms", _F, "median waiting-queue time, ms"),
    Column("queue_p90_ms", _F, "p90 waiting-queue time, ms"),
    Column("prefill_median_ms", _F, "median of ttft - queue, ms"),
    Column("prefill_p90_ms", _F, "p90 of ttft - queue, ms"),
    Column("decode_per_token_ms", _F, "median of decode_ms / (output_len - 1), ms"),
    Column(
        "queue_share",
        _F,
        "sum of queue time / sum of e2e latency (else scheduler time, queue + forward), 0-1",
    ),
    Column("aborted", _I, "requests that were aborted"),
)

TIMELINE_COLUMNS: tuple[Column, ...] = (
    Column("rid", _S, "request id"),
    Column("phase", _I, "phase the request arrived in; null = outside every phase"),
    Column("start", _T, "arrival"),
    Column("queue_end", _T, "left the waiting queue (start + queue)"),
    Column("first_token", _T, "first token"),
    Column("end", _T, "finished"),
)

SERVER_REQUESTS = schema_of(SERVER_REQUEST_COLUMNS)
REQUEST_BREAKDOWN = schema_of(BREAKDOWN_COLUMNS)
REQUEST_TIMELINE = schema_of(TIMELINE_COLUMNS)
