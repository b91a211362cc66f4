"""Finished requests a server log records in its own lines.

* ``--enable-request-time-stats-logging``: the scheduler logs, when a request finishes,
  ``Req Time Stats(rid=R, input len=N, output len=M, type=unified): queue_duration=Q.QQms,
  forward_duration=F.FFms, start_time=T`` (0.4.x – 0.5.x; ``start_time`` is a
  ``perf_counter`` reading, no wall clock), later ``ReqTimeStats(rid=R, input_len=N,
  cached_input_len=C, output_len=M, type=unified): ...`` and, newest, ``entry_time=<epoch>``.
  Under disaggregation (``type=prefill`` / ``decode``) more durations precede
  ``queue_duration=``. Queue = wait-queue entry to forward entry; forward = forward entry to
  completion (prefill and decode).
* ``--log-requests``: ``Receive: obj=GenerateReqInput(...)`` on arrival and ``Finish:
  obj=GenerateReqInput(...), out={..., 'meta_info': {...}}`` when done (the ``obj``/``out``
  as Python reprs; ``--log-requests-level`` 0/1 leave out text and ids, 2 cuts strings to
  2048 characters, 3 keeps them whole);
* ``--log-requests-format json`` (console target ``stdout``, a logger of its own writing to
  the process's stderr): a bare JSON line per event,
  ``{"timestamp": ..., "event": "request.finished", "rid": ..., "obj": ..., "out": ...}``.

Only the lines that start with these words are read (a literal prefix filter), and only the
numbers after the last ``'meta_info': {`` of a ``Finish:`` line, so no request text is kept.
"""

from __future__ import annotations

import polars as pl

from toolkit.load.requests.fields import (
    META_JSON,
    NUMBER,
    event_head,
    json_meta,
    server_requests,
    text_meta,
)

__all__ = [
    "REQUEST_LINE_PREFIXES",
    "cut_finish_lines",
    "is_request_line",
    "line_kind",
    "log_requests",
]

TIME_STATS = ("ReqTimeStats(", "Req Time Stats(")
FINISH = "Finish: obj="
RECEIVE = "Receive: obj="
JSON_EVENT = '{"timestamp": "'
REQUEST_LINE_PREFIXES: tuple[str, ...] = (*TIME_STATS, FINISH, RECEIVE, JSON_EVENT)
"""Message starts of a request line (a JSON event line must also name its event)."""
_META = "'meta_info': {"


def is_request_line(message: pl.Expr) -> pl.Expr:
    """A cheap literal test: the message starts like a request line."""
    test = pl.lit(False)
    for prefix in REQUEST_LINE_PREFIXES:
        test = test | message.str.starts_with(prefix)
    return test


def line_kind(message: pl.Expr) -> pl.Expr:
    """``time-stats``, ``finish``, ``log-json``, ``received`` or ``other`` for a request line."""
    event = event_head(message)["event"]
    time_stats = message.str.starts_with(TIME_STATS[0]) | message.str.starts_with(TIME_STATS[1])
    return (
        pl.when(time_stats)
        .then(pl.lit("time-stats"))
        .when(message.str.starts_with(FINISH))
        .then(pl.lit("finish"))
        .when(message.str.starts_with(RECEIVE))
        .then(pl.lit("received"))
        .when(message.str.starts_with(JSON_EVENT) & (event == "request.finished"))
        .then(pl.lit("log-json"))
        .when(message.str.starts_with(JSON_EVENT) & (event == "request.received"))
        .then(pl.lit("received"))
        .otherwise(pl.lit("other"))
    )


def log_requests(lines: pl.LazyFrame) -> pl.LazyFrame:
    """``SERVER_REQUESTS`` rows of the finished-request lines among ``lines``.

    ``lines``: ``source``, ``lineno``, ``ts`` (the line's time, log clock), ``message``,
    ``pp``; typically already narrowed by ``is_request_line``.
    """
    msg = pl.col("message")
    lf = lines.with_columns(_kind=line_kind(msg)).filter(
        pl.col("_kind").is_in(["time-stats", "finish", "log-json"])
    )
    base = ["source", "lineno", pl.col("ts").cast(pl.Datetime("us")).alias("line_ts")]
    stats = lf.filter(pl.col("_kind") == "time-stats").select(
        *base, "pp", *_time_stats(msg), form=pl.lit("time-stats")
    )
    tail = msg.str.split(_META).list.last()
    finish = (
        lf.filter((pl.col("_kind") == "finish") & msg.str.contains(_META, literal=True))
        .select(*base, *text_meta(tail), _rid=_obj_rid(msg), form=pl.lit("finish"))
        .with_columns(rid=pl.coalesce("_meta_rid", "_rid"))
        .drop("_meta_rid", "_rid")
    )
    cut = lf.filter((pl.col("_kind") == "finish") & ~msg.str.contains(_META, literal=True))
    cut = cut.select(*base, rid=_obj_rid(msg), form=pl.lit("finish"))
    head = event_head(msg)
    logged = (
        lf.filter(pl.col("_kind") == "log-json")
        .select(
            *base[:2],
            pl.coalesce(head["line_ts"], pl.col("ts").cast(pl.Datetime("us"))).alias("line_ts"),
            head["rid"],
            *json_meta(msg.str.split(META_JSON).list.last()),
            form=pl.lit("log-json"),
        )
        .with_columns(rid=pl.coalesce("_meta_rid", "rid"))
        .drop("_meta_rid")
    )
    raw = pl.concat([stats, finish, cut, logged], how="diagonal_relaxed")
    raw = raw.with_columns(pl.col("rid").str.slice(0, 256)).sort("source", "lineno")
    return server_requests(raw)


def cut_finish_lines(lines: pl.LazyFrame) -> pl.LazyFrame:
    """The ``Finish:`` lines among ``lines`` that hold no ``meta_info`` (cut short)."""
    msg = pl.col("message")
    return lines.filter(msg.str.starts_with(FINISH) & ~msg.str.contains(_META, literal=True))


def _time_stats(msg: pl.Expr) -> list[pl.Expr]:
    def header(pattern: str) -> pl.Expr:
        return msg.str.extract(pattern, 1)

    def ms(key: str) -> pl.Expr:
        return msg.str.extract(rf"\b{key}={NUMBER}ms", 1).cast(pl.Float64, strict=False) / 1e3

    return [
        header(r"^Req ?Time ?Stats\(rid=([^,)\s]{1,256})").alias("rid"),
        header(r"\binput[ _]len=(\d{1,18})").cast(pl.Int64, strict=False).alias("input_len"),
        header(r"\bcached_input_len=(\d{1,18})").cast(pl.Int64, strict=False).alias("cached_len"),
        header(r"\boutput[ _]len=(\d{1,18})").cast(pl.Int64, strict=False).alias("output_len"),
        ms("queue_duration").alias("queue_s"),
        ms("forward_duration").alias("forward_s"),
        header(rf"\bentry_time={NUMBER}").cast(pl.Float64, strict=False).alias("entry_epoch"),
    ]


def _obj_rid(msg: pl.Expr) -> pl.Expr:
    """The ``rid='...'`` of the request repr (levels 0 and 1 print no text before it)."""
    return msg.str.extract(r"\brid='([^']{1,256})'", 1)
