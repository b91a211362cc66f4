"""Typing a request record's fields, whatever form it came in, into ``SERVER_REQUESTS``.

Each form is read into the same raw columns first (numbers as SGLang wrote them: seconds,
epoch seconds, token counts); ``server_requests`` then derives the declared table. Every
expression is a literal match or a regular-expression extract (linear), so a line costs
time linear in its length; no prompt text ever leaves polars.

The fields of ``meta_info`` that SGLang writes for a finished request (``tokenizer_manager``):
``id``, ``finish_reason`` (``{"type": ..., "message": ...}``), ``prompt_tokens``,
``completion_tokens``, ``cached_tokens``, ``e2e_latency`` (s); with ``--enable-metrics`` also
``queue_time`` (s) and wall-clock stamps (epoch s): ``request_received_ts``, the first token
as ``prefill_finished_ts`` (0.5.4 – 0.5.6) or ``prefill_finished_time`` (later), the end as
``decode_finished_ts`` or ``request_finished_ts``, and (later) the forward entry as
``forward_entry_time``.
"""

from __future__ import annotations

import time

import polars as pl

from toolkit.schema.requests import SERVER_REQUESTS

__all__ = [
    "META_FLOATS",
    "META_INTS",
    "META_JSON",
    "NUMBER",
    "RAW",
    "event_head",
    "json_meta",
    "server_requests",
    "text_meta",
]

META_FLOATS: dict[str, tuple[str, ...]] = {
    "e2e_s": ("e2e_latency",),
    "queue_s": ("queue_time",),
    "received_epoch": ("request_received_ts",),
    "first_epoch": ("prefill_finished_ts", "prefill_finished_time"),
    "end_epoch": ("decode_finished_ts", "request_finished_ts"),
    "forward_epoch": ("forward_entry_time",),
}
"""Raw column → the ``meta_info`` keys that state it, newest name last."""
META_INTS: dict[str, str] = {
    "input_len": "prompt_tokens",
    "output_len": "completion_tokens",
    "cached_len": "cached_tokens",
}

RAW: dict[str, pl.DataType] = {
    "source": pl.String(),
    "lineno": pl.Int64(),
    "form": pl.String(),
    "rid": pl.String(),
    "pp": pl.Int32(),
    "line_ts": pl.Datetime("us"),  # the line's own time (log clock): when the request finished
    "e2e_s": pl.Float64(),
    "queue_s": pl.Float64(),
    "forward_s": pl.Float64(),
    "received_epoch": pl.Float64(),
    "first_epoch": pl.Float64(),
    "end_epoch": pl.Float64(),
    "forward_epoch": pl.Float64(),
    "entry_epoch": pl.Float64(),  # time-stats: wait-queue entry, wall clock (newest releases)
    "input_len": pl.Int64(),
    "output_len": pl.Int64(),
    "cached_len": pl.Int64(),
    "finish_reason": pl.String(),
    "error": pl.String(),
}
"""The raw columns every form is read into."""

NUMBER = r"([-+]?(?:\d{1,20}(?:\.\d{0,20})?|\.\d{1,20})(?:[eE][-+]?\d{1,4})?)"
_EPOCH_RANGE = (1e8, 1e10)  # 1973 – 2286: anything else is no wall-clock stamp
_ZONE_STEP_S = 900  # UTC offsets are whole quarter hours
_MAX_ZONE_S = 14 * 3600


META_JSON = '"meta_info": {'
"""Where a JSON request event's ``meta_info`` starts (it is the event's last object)."""
_EVENT = r'^\{"timestamp":\s?"([^"]{0,40})",\s?"event":\s?"([a-z._]{1,40})"'
_ISO = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S")


def event_head(line: pl.Expr) -> dict[str, pl.Expr]:
    """``line_ts``, ``event`` and ``rid`` of a ``--log-requests-format json`` line, which
    starts ``{"timestamp": "<local ISO time>", "event": "request.finished", "rid": "..."``."""
    stamp = line.str.extract(_EVENT, 1)
    return {
        "line_ts": pl.coalesce(
            [stamp.str.to_datetime(f, strict=False, time_unit="us") for f in _ISO]
        ).alias("line_ts"),
        "event": line.str.extract(_EVENT, 2).alias("event"),
        "rid": line.str.extract(_EVENT + r',\s?"rid":\s?"([^"\\]{1,256})"', 3).alias("rid"),
    }


def json_meta(tail: pl.Expr) -> list[pl.Expr]:
    """Raw columns from ``meta_info`` written as JSON (``json.dumps``): the export record
    itself, or the text after a JSON event's last ``"meta_info": {``. Inside a JSON string
    every quote is escaped (``\\"e2e_latency\\":``), so text there never matches a key."""
    return _meta(tail, '"', r'"message":\s?"((?:[^"\\]|\\.){0,200})')


def text_meta(tail: pl.Expr) -> list[pl.Expr]:
    """Raw columns from the Python repr of ``meta_info`` (``tail``: the text after the line's
    last ``'meta_info': {``, where SGLang puts it after any output text)."""
    return _meta(tail, "'", r"""'message': ['"]([^'"]{0,200})""")


def _meta(tail: pl.Expr, q: str, message: str) -> list[pl.Expr]:
    def number(key: str) -> pl.Expr:
        return tail.str.extract(rf"{q}{key}{q}:\s?{NUMBER}", 1)

    floats = [
        pl.coalesce([number(k).cast(pl.Float64, strict=False) for k in reversed(keys)]).alias(c)
        for c, keys in META_FLOATS.items()
    ]
    ints = [number(k).cast(pl.Int64, strict=False).alias(c) for c, k in META_INTS.items()]
    typed = rf"{q}finish_reason{q}:\s?\{{{q}type{q}:\s?{q}(\w{{1,40}}){q}"
    reason = tail.str.extract(typed, 1)
    return [
        *floats,
        *ints,
        reason.alias("finish_reason"),
        _abort_message(reason, tail.str.extract(message, 1)),
        tail.str.extract(rf"{q}id{q}:\s?{q}([^{q}\\]{{1,256}}){q}", 1).alias("_meta_rid"),
    ]


def _abort_message(reason: pl.Expr, message: pl.Expr) -> pl.Expr:
    return pl.when(reason == "abort").then(message.str.slice(0, 200)).alias("error")


def server_requests(raw: pl.LazyFrame, utc_offset_s: float | None = None) -> pl.LazyFrame:
    """The declared ``SERVER_REQUESTS`` table from the raw columns.

    Wall-clock epochs become the server's local time, the clock of its log lines. Its UTC
    offset is measured from the records that state both (a log line's time and the epoch of
    the same moment), rounded to a quarter hour; without such a record it is
    ``utc_offset_s``, else this machine's. Arrival falls back to the line's time minus the
    latency it states; the end to the line's time (a log line is written when the request
    finishes).
    """
    have = set(raw.collect_schema().names())
    raw = raw.with_columns(pl.lit(None, t).alias(c) for c, t in RAW.items() if c not in have)
    raw = raw.cast(RAW)  # type: ignore[arg-type]
    zone = _server_offset(utc_offset_s)

    def _local(column: str) -> pl.Expr:
        x = pl.col(column)
        us = ((x + zone) * 1e6).round().cast(pl.Int64, strict=False)
        return pl.when(x.is_between(*_EPOCH_RANGE)).then(pl.from_epoch(us, time_unit="us"))

    received, first = _local("received_epoch"), _local("first_epoch")
    scheduler_s = pl.col("queue_s") + pl.col("forward_s")
    ts = pl.coalesce(
        received,
        _local("entry_epoch"),
        pl.col("line_ts") - _seconds(pl.coalesce("e2e_s", scheduler_s)),
    )
    end = pl.coalesce(_local("end_epoch"), pl.col("line_ts"), ts + _seconds(pl.col("e2e_s")))
    lf = raw.with_columns(ts=ts, first_token_ts=first, end_ts=end)
    ms = 1000.0
    ttft = (pl.col("first_token_ts") - pl.col("ts")).dt.total_microseconds() / 1e3
    lf = lf.with_columns(
        queue_ms=pl.col("queue_s") * ms,
        forward_ms=pl.coalesce(
            pl.col("forward_s") * ms,
            (pl.col("end_ts") - _local("forward_epoch")).dt.total_microseconds() / 1e3,
        ),
        ttft_ms=pl.when(received.is_not_null()).then(ttft),
        e2e_ms=pl.col("e2e_s") * ms,
        decode_ms=(pl.col("end_ts") - pl.col("first_token_ts")).dt.total_microseconds() / 1e3,
        ok=pl.when(pl.col("finish_reason").is_not_null()).then(pl.col("finish_reason") != "abort"),
    )
    lf = lf.with_columns(prefill_ms=pl.col("ttft_ms") - pl.col("queue_ms"))
    return lf.select(SERVER_REQUESTS.names()).cast(dict(SERVER_REQUESTS))  # type: ignore[arg-type]


def _server_offset(given: float | None) -> pl.Expr:
    """The server's UTC offset, s: the median of (line time - epoch of the same moment) over
    the rows that state both, to a quarter hour; else ``given``; else this machine's."""
    line = pl.col("line_ts").dt.epoch("us") / 1e6  # local clock read as if it were UTC
    moment = pl.coalesce(
        "end_epoch",
        pl.col("entry_epoch") + pl.col("queue_s") + pl.col("forward_s"),
        pl.col("received_epoch") + pl.col("e2e_s"),
    )
    gap = line - moment
    measured = (gap.filter(gap.abs() <= _MAX_ZONE_S).median() / _ZONE_STEP_S).round()
    fallback = time.localtime().tm_gmtoff if given is None else given
    return (measured * _ZONE_STEP_S).fill_null(fallback)


def _seconds(x: pl.Expr) -> pl.Expr:
    return pl.duration(microseconds=(x * 1e6).round().cast(pl.Int64, strict=False))
