"""JSON-lines files of finished requests written by the server, recognized by content.

Two writers make them:

* ``--export-metrics-to-file`` (``--export-metrics-to-file-dir DIR``): files
  ``sglang-request-metrics-YYYYMMDD_HH.log``, a new one each hour, one object per finished
  request: ``{"request_parameters": "<the request as a JSON string>", <meta_info keys>}``
  (``id``, ``finish_reason``, ``prompt_tokens``, ``completion_tokens``, ``e2e_latency``, ...);
* ``--log-requests --log-requests-format json`` with a file target: ``{HOST}_{RANK}.log``,
  one ``{"timestamp": "<local ISO time>", "event": "request.received" | "request.finished",
  "rid": ..., "obj": {...}, "out": {"meta_info": {...}}}`` per line.

The export's records state no local time; the hour in the file's name (the server's local
hour) gives the server's UTC offset for their epoch stamps. Only ``request.finished`` events
and export records become rows; every other line is counted
with its reason. The request text (prompt, output) is never read into a column.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load import compression
from toolkit.load import text as lines_io
from toolkit.load.inputs import check_input
from toolkit.load.jsonl import first_record
from toolkit.load.requests.fields import META_JSON, event_head, json_meta, server_requests
from toolkit.schema.requests import SERVER_REQUESTS

__all__ = ["REQUESTS_FORMAT", "RequestFile", "is_request_file", "load_server_requests"]

REQUESTS_FORMAT = "sglang-requests"
_EXPORT_KEY = '"request_parameters"'
_NAME = re.compile(r"sglang-request-metrics-(\d{8}_\d{2})\.log(?:\.gz)?")
_EVENTS = ("request.finished", "request.received")
_RECEIVED = "request.received event (arrival only)"
_CUT = "not a complete JSON object (a cut or edited line)"


def is_request_file(path: Path) -> bool:
    """True when the first non-blank line is an export record or a request event."""
    found = first_record(path)
    record = found[1] if found is not None else None
    if record is None:
        return False
    return "request_parameters" in record or (record.get("event") in _EVENTS and "rid" in record)


class RequestFile:
    """The finished requests of request files, with what was skipped and why."""

    def __init__(self, table: pl.DataFrame, skipped: dict[str, int], lines: int) -> None:
        self.table = table
        self.skipped = skipped
        """Reason → lines that are no finished-request record (blank lines not counted)."""
        self.lines = lines


def load_server_requests(
    paths: str | Path | Iterable[str | Path], *, strict: bool = False
) -> RequestFile:
    """Finished requests of metrics-export or JSON request-log files (``SERVER_REQUESTS``).

    Times are the server's: written by the server itself, these files are on the log's
    clock (no ``clock_offset_s``).

    Raises
    ------
    ParseError
        With ``strict``, at the first non-blank line that is no JSON request record.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    tables, skipped, total = [], {}, 0
    workdir = lines_io.workdir()
    try:
        for path in files:
            check_input(path)
            plain, _ = compression.plain_copy(path, workdir)
            lines = lines_io.scan_lines(plain, workdir)
            table, skips, n = _one(lines, str(path), strict, _name_hour(path))
            tables.append(table)
            total += n
            for reason, count in skips.items():
                skipped[reason] = skipped.get(reason, 0) + count
    finally:
        shutil.rmtree(workdir, True)
    table = pl.concat(tables) if tables else pl.DataFrame(schema=SERVER_REQUESTS)
    return RequestFile(table.sort("ts", "source", "lineno", nulls_last=True), skipped, total)


def _name_hour(path: Path) -> datetime | None:
    """The server's local hour the exporter named the file after, if it did."""
    m = _NAME.fullmatch(path.name)
    if m is None:
        return None
    try:
        return datetime.strptime(m.group(1), "%Y%m%d_%H")
    except ValueError:
        return None


def _zone(frame: pl.DataFrame, hour: datetime | None) -> float | None:
    """The server's UTC offset, s, from the hour in the file's name: the local hour each
    record was written in, less the UTC hour it finished in (median, whole hours)."""
    if hour is None or not frame.height:
        return None
    end = frame.select(
        pl.coalesce("end_epoch", pl.col("received_epoch") + pl.col("e2e_s")).alias("e")
    )["e"]
    end = end.filter(end.is_between(1e8, 1e10))
    if not end.len():
        return None
    utc_hours = (end // 3600) * 3600
    local = (hour - datetime(1970, 1, 1)).total_seconds()
    offset = float(((local - utc_hours) / 3600).median() or 0.0)
    return round(offset) * 3600.0 if abs(offset) <= 14 else None


def _one(
    lines: pl.LazyFrame, source: str, strict: bool, hour: datetime | None = None
) -> tuple[pl.DataFrame, dict, int]:
    line = pl.col("line")
    head = event_head(line)
    complete = line.str.strip_chars_end().str.ends_with("}") & line.str.starts_with("{")
    is_export = line.str.contains(_EXPORT_KEY, literal=True) & head["event"].is_null()
    kind = (
        pl.when(~complete)
        .then(pl.lit(_CUT))
        .when(is_export)
        .then(pl.lit("export"))
        .when(head["event"] == "request.finished")
        .then(pl.lit("log-json"))
        .when(head["event"] == "request.received")
        .then(pl.lit(_RECEIVED))
        .otherwise(pl.lit("JSON object that is no request record"))
    )
    tail = pl.when(is_export).then(line).otherwise(line.str.split(META_JSON).list.last())
    frame = (  # one pass, regular expressions only; the line itself is never collected
        lines.filter(line.is_not_null() & (line.str.strip_chars() != ""))
        .select(
            "lineno",
            kind.alias("_kind"),
            head["rid"],
            pl.when(~is_export).then(head["line_ts"]).alias("line_ts"),
            *json_meta(tail),
        )
        .collect(engine="streaming")
    )
    counts = dict(frame.group_by("_kind").len().iter_rows())
    bad = frame.filter(~pl.col("_kind").is_in(["export", "log-json", _RECEIVED]))
    if strict and bad.height:
        lineno, reason = bad.row(0)[:2]
        text = lines.filter(pl.col("lineno") == lineno).select("line").collect().item()
        raise ParseError(source, lineno, reason, text)
    raw = frame.filter(pl.col("_kind").is_in(["export", "log-json"])).with_columns(
        form=pl.col("_kind"),
        source=pl.lit(source),
        rid=pl.coalesce("_meta_rid", "rid"),
    )
    table = server_requests(raw.lazy(), _zone(raw, hour)).collect()
    skips = {k: v for k, v in counts.items() if k not in ("export", "log-json")}
    return table, skips, frame.height
