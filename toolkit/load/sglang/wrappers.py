"""Line wrappers that other tools put in front of SGLang's own lines.

Each wrapper is recognized from a file's first lines, then cut from every line with literal
string operations (no capture regex on the hot path). A line that does not fit the file's
wrapper keeps its whole text as the message, so nothing is lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from toolkit.load.limits import python_time

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"


@dataclass(frozen=True)
class Split:
    """Expressions that take a wrapper apart: every field may be null.

    ``marks`` are positions and tests computed first, once per line, and read by the other
    expressions as ``pl.col("_w...")`` (the streaming engine does not share sub-expressions).
    """

    rest: pl.Expr  # the line without the wrapper
    wrapper_ts: pl.Expr  # Datetime("us"), naive, as the wrapper wrote it
    header: pl.Expr  # "host ident[pid]", compose service, Ray actor: decoded later
    stream: pl.Expr  # "stdout"/"stderr" (Kubernetes CRI)
    marks: tuple[dict[str, pl.Expr], ...] = ()


@dataclass(frozen=True)
class Wrapper:
    name: str
    pattern: re.Pattern[str]
    split: Callable[[pl.Expr, int | None], Split]


def byte_slice(
    text: pl.Expr, offset: pl.Expr | int, length: pl.Expr | int | None = None
) -> pl.Expr:
    """``text`` from byte ``offset`` on (what ``str.find`` returns), at most ``length`` bytes.

    ``str.slice`` counts characters, so a find's offset would cut a line holding any non-ASCII
    character before it in the wrong place. Both ends must be where a find of an ASCII
    separator put them (or that plus the separator's length), on every row: the cut text is
    then valid UTF-8, while a cut inside a character fails the whole column. A fixed number of
    characters is cut with ``str.slice`` instead. A negative length counts as 0.
    """
    if isinstance(length, pl.Expr):
        length = length.clip(lower_bound=0)
    elif length is not None:
        length = max(length, 0)
    return text.cast(pl.Binary).bin.slice(offset, length).cast(pl.String, strict=False)


_NO_TS = pl.lit(None, pl.Datetime("us"))
_NO_TEXT = pl.lit(None, pl.String)
_OK, _END, _AT = pl.col("_wok"), pl.col("_wend"), pl.col("_wat")


def _iso_ts(text: pl.Expr) -> pl.Expr:
    """Naive datetime from ``2025-05-25T21:40:21[.fffffffff][Z|+02:00]`` (zone dropped)."""
    base = text.str.slice(0, 19).str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False)
    frac = text.str.slice(20, 9)
    digits = frac.str.head(frac.str.find(r"[^0-9]").fill_null(9))
    has_frac = text.str.slice(19, 1) == "."
    micros = pl.when(has_frac).then(
        digits.str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False)
    )
    return python_time(base + pl.duration(microseconds=micros.fill_null(0)))


def _raw(line: pl.Expr, year: int | None) -> Split:
    return Split(line, _NO_TS, _NO_TEXT, _NO_TEXT)


def _journal(width: int, iso: bool) -> Callable[[pl.Expr, int | None], Split]:
    """journalctl ``-o short`` (width 15), ``short-precise`` (22), ``short-iso[-precise]``."""

    def split(line: pl.Expr, year: int | None) -> Split:
        end = line.str.find(" ", literal=True) if iso else pl.lit(width)
        if iso:
            ts = _iso_ts(byte_slice(line, 0, _END))
        elif year is not None:
            text = pl.concat_str(pl.lit(f"{year} "), line.str.head(width))
            ts = python_time(
                text.str.strptime(pl.Datetime("us"), "%Y %b %e %H:%M:%S%.f", strict=False)
            )
        else:
            ts = _NO_TS  # short format has no year and the log gave none to borrow
        ok = _AT.is_not_null() & (_AT > _END) & (line.str.slice(_END, 1) == " ")
        if iso:
            header = byte_slice(line, _END + 1, _AT - _END - 1)
        else:  # the time is a fixed number of characters
            header = byte_slice(line, 0, _AT).str.slice(width + 1)
        return Split(
            pl.when(_OK).then(byte_slice(line, _AT + 2)).otherwise(line),
            pl.when(_OK).then(ts),
            pl.when(_OK).then(header),
            _NO_TEXT,
            ({"_wend": end, "_wat": line.str.find(": ", literal=True)}, {"_wok": ok}),
        )

    return split


def _timestamped(line: pl.Expr, year: int | None) -> Split:
    """docker logs -t / kubectl logs --timestamps: RFC 3339 time, one space, the line."""
    ok = (line.str.slice(10, 1) == "T") & (line.str.slice(4, 1) == "-") & _END.is_not_null()
    return Split(
        pl.when(_OK).then(byte_slice(line, _END + 1)).otherwise(line),
        pl.when(_OK).then(_iso_ts(byte_slice(line, 0, _END))),
        _NO_TEXT,
        _NO_TEXT,
        ({"_wend": line.str.find(" ", literal=True)}, {"_wok": ok}),
    )


def _cri(line: pl.Expr, year: int | None) -> Split:
    """Kubernetes node log: ``<RFC 3339> stdout|stderr F|P <line>``."""
    after = byte_slice(line, _END + 1)
    stream = after.str.slice(0, 6)
    ok = stream.is_in(["stdout", "stderr"]) & after.str.slice(7, 2).is_in(["F ", "P "])
    return Split(
        pl.when(_OK).then(after.str.slice(9)).otherwise(line),
        pl.when(_OK).then(_iso_ts(byte_slice(line, 0, _END))),
        _NO_TEXT,
        pl.when(_OK).then(stream),
        ({"_wend": line.str.find(" ", literal=True)}, {"_wok": ok}),
    )


def _compose(line: pl.Expr, year: int | None) -> Split:
    """docker compose logs: ``service-1  | <line>``."""
    name = byte_slice(line, 0, _AT.fill_null(0)).str.strip_chars()
    ok = _AT.is_not_null() & (_AT < 80) & ~name.str.contains(" ", literal=True)
    return Split(
        pl.when(_OK).then(byte_slice(line, _AT + 3)).otherwise(line),
        _NO_TS,
        pl.when(_OK).then(name),
        _NO_TEXT,
        ({"_wat": line.str.find(" | ", literal=True)}, {"_wok": ok}),
    )


def _python_logger(line: pl.Expr, year: int | None) -> Split:
    """A parent Python logger: ``2025-03-07 23:50:27,531 - name - LEVEL - <line>``."""
    after_name = line.str.slice(26)  # the time and " - ": 26 characters
    after_level = byte_slice(after_name, _AT + 3)
    level_end = after_level.str.find(" - ", literal=True)
    ok = (line.str.slice(19, 1) == ",") & (line.str.slice(23, 3) == " - ") & _AT.is_not_null()
    ok = ok & level_end.is_not_null()
    ts = line.str.head(23).str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S,%3f", strict=False)
    ts = python_time(ts)
    return Split(
        pl.when(_OK).then(byte_slice(after_level, _END + 3)).otherwise(line),
        pl.when(_OK).then(ts),
        pl.when(_OK).then(byte_slice(after_name, 0, _AT) + " " + byte_slice(after_level, 0, _END)),
        _NO_TEXT,
        ({"_wat": after_name.str.find(" - ", literal=True)}, {"_wok": ok, "_wend": level_end}),
    )


def _ray(line: pl.Expr, year: int | None) -> Split:
    """Ray actor output: ``(SchedulerActor pid=1234, ip=10.0.0.1) <line>``."""
    head = byte_slice(line, 0, _AT.fill_null(0))
    ok = line.str.starts_with("(") & _AT.is_not_null() & head.str.contains(" pid=", literal=True)
    return Split(
        pl.when(_OK).then(byte_slice(line, _AT + 2)).otherwise(line),
        _NO_TS,
        pl.when(_OK).then(byte_slice(line, 0, _AT).str.slice(1)),
        _NO_TEXT,
        ({"_wat": line.str.find(") ", literal=True)}, {"_wok": ok}),
    )


def _docker_json(line: pl.Expr, year: int | None) -> Split:
    """A docker ``json-file`` log: ``{"log":"<line>\\n","stream":"stderr","time":"<RFC 3339>"}``."""
    text = line.str.json_path_match("$.log")
    return Split(
        pl.when(_OK).then(text.str.strip_suffix("\n")).otherwise(line),
        pl.when(_OK).then(_iso_ts(line.str.json_path_match("$.time"))),
        _NO_TEXT,
        pl.when(_OK).then(line.str.json_path_match("$.stream")),
        ({"_wok": line.str.starts_with("{") & text.is_not_null()},),
    )


def _journal_json(line: pl.Expr, year: int | None) -> Split:
    """``journalctl -o json``: one JSON object per entry, time in microseconds since the epoch."""
    text = line.str.json_path_match("$.MESSAGE")
    micros = line.str.json_path_match("$.__REALTIME_TIMESTAMP").cast(pl.Int64, strict=False)
    ident = pl.coalesce(
        line.str.json_path_match("$.SYSLOG_IDENTIFIER"), line.str.json_path_match("$._COMM")
    )
    header = pl.concat_str(
        line.str.json_path_match("$._HOSTNAME"),
        pl.lit(" "),
        ident,
        pl.lit("["),
        line.str.json_path_match("$._PID"),
        pl.lit("]"),
    )
    return Split(
        pl.when(_OK).then(text).otherwise(line),
        pl.when(_OK).then(pl.from_epoch(micros, time_unit="us")),  # UTC, naive
        pl.when(_OK).then(header),
        _NO_TEXT,
        ({"_wok": line.str.starts_with("{") & text.is_not_null()},),
    )


WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper("docker-json", re.compile(r'^\{"log":'), _docker_json),
    Wrapper("journald-json", re.compile(r'^\{.*"__REALTIME_TIMESTAMP"'), _journal_json),
    Wrapper(
        "kubernetes-cri",
        re.compile(rf"^{_ISO}(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [FP] "),
        _cri,
    ),
    Wrapper(
        "journald-short-iso",
        re.compile(rf"^{_ISO}(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) \S+ [^:]*: "),
        _journal(0, iso=True),
    ),
    Wrapper(
        "journald-short-precise",
        re.compile(rf"^(?:{_MONTHS}) [ \d]\d \d\d:\d\d:\d\d\.\d{{6}} \S+ [^:]*: "),
        _journal(22, iso=False),
    ),
    Wrapper(
        "journald-short",
        re.compile(rf"^(?:{_MONTHS}) [ \d]\d \d\d:\d\d:\d\d \S+ [^:]*: "),
        _journal(15, iso=False),
    ),
    Wrapper(
        "python-logger",
        re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - \S+ - [A-Z]+ - "),
        _python_logger,
    ),
    Wrapper("timestamped", re.compile(rf"^{_ISO}(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "), _timestamped),
    Wrapper("ray", re.compile(r"^\([\w.]+ pid=\d+(?:, ip=[\d.:a-f]+)?\) "), _ray),
    Wrapper("compose", re.compile(r"^[\w.-]+\s+\| "), _compose),
)
RAW = Wrapper("raw", re.compile(""), _raw)


def sniff_wrapper(lines: list[str]) -> Wrapper:
    """The wrapper most of the first lines carry (journald, docker, ...), else ``raw``."""
    counts = dict.fromkeys((w.name for w in WRAPPERS), 0)
    seen = 0
    for line in lines:
        if not line.strip() or line.startswith("-- "):
            continue
        seen += 1
        for w in WRAPPERS:
            if w.pattern.match(line):
                counts[w.name] += 1
                break
    best = max(WRAPPERS, key=lambda w: counts[w.name])
    # journald short-iso and docker timestamps look alike; the journal form needs "ident: ".
    return best if seen and counts[best.name] * 2 >= seen else RAW


def decode_header(wrapper: str, header: str | None) -> tuple[str | None, int | None]:
    """(host, pid) from a wrapper header such as ``gpu-node-1 python3[85690]``."""
    if header is None:
        return None, None
    if wrapper.startswith("journald"):
        host, _, ident = header.partition(" ")
        m = re.search(r"\[(\d+)\]$", ident)
        return host, int(m.group(1)) if m else None
    if wrapper == "ray":
        m = re.search(r"pid=(\d+)", header)
        return header.split(" ", 1)[0], int(m.group(1)) if m else None
    return header, None


def wrapper_named(name: str) -> Wrapper:
    """The wrapper of that name (``raw`` when unknown)."""
    return next((w for w in WRAPPERS if w.name == name), RAW)
