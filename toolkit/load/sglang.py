"""``load_sglang_log``: SGLang server logs of every version, under any wrapper, as typed tables.

Each file is typed in one streaming pass (``sglang_lines.line_plan``) into a Parquet store,
cached next to the input. Tables are built from that store on first use, so a multi-GB log
never has to sit in memory as text.
"""

from __future__ import annotations

import hashlib
import mmap
import re
import shutil
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit import __version__
from toolkit.errors import ParseError, ToolkitError
from toolkit.load import lines as lines_io
from toolkit.load.batch_line import parse_batch_message
from toolkit.load.server_args import ServerArgsDump, ServerArgsError, parse_server_args
from toolkit.load.sglang_lines import line_plan, sample_keys
from toolkit.load.startup import startup_facts
from toolkit.load.wrappers import decode_header, sniff_wrapper
from toolkit.schema import (
    BATCHES,
    ERRORS,
    EVENTS,
    HTTP,
    LAUNCHES,
    OTHER,
    RANK_TAGS,
    STARTUP,
)

FORMAT = "sglang-log"
_STORE_VERSION = "1"  # bump when the stored columns change
_YEAR = re.compile(r"\[(\d{4})-\d\d-\d\d \d\d:\d\d:\d\d")
_RANK = re.compile(r"\b(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)\b")
_ACCESS = re.compile(r'^INFO:\s+(\S+) - "(\S+) (\S+)(?: [^"]*)?" (\d{3})')
_LOOKS_BINARY = r"[\x00-\x08\x0e-\x1a\x1c-\x1f]"


@dataclass(frozen=True)
class Launch:
    """One server start: its ``server_args`` dump and the startup facts each rank printed."""

    index: int
    source: str
    lineno: int
    ts: Any
    server_args: dict[str, object]
    complete: bool
    problems: tuple[str, ...]
    startup: pl.DataFrame = field(repr=False)

    def facts(self) -> dict[str, object]:
        """Fact → value where all ranks agree, else fact → {rank label: value}."""
        out: dict[str, object] = {}
        for fact, rows in self.startup.group_by("fact", maintain_order=True):
            values = {
                _rank_label(r): (r["text"] if r["value"] is None else _plain(r["value"]))
                for r in rows.iter_rows(named=True)
            }
            distinct = set(map(repr, values.values()))
            out[str(fact[0])] = next(iter(values.values())) if len(distinct) == 1 else values
        return out


@dataclass(frozen=True)
class Source:
    """One input file as read: where its typed lines are stored and how it was wrapped."""

    path: str
    wrapper: str
    lines: int
    store: Path
    clock_offset_s: float  # added to wrapper timestamps to put them on SGLang's clock
    problems: tuple[str, ...] = ()  # file-level trouble, e.g. a cut .gz


class SGLangLog:
    """Typed tables of one or more SGLang log files (``events``, ``batches``, ``launches``...).

    Tables are polars DataFrames built on first access; their schemas are declared in
    ``toolkit.schema``.
    """

    def __init__(self, sources: list[Source], fixups: pl.DataFrame, workdir: Path | None) -> None:
        self.sources = sources
        self._fixups = fixups
        if workdir is not None:
            weakref.finalize(self, shutil.rmtree, workdir, True)

    def __repr__(self) -> str:
        names = ", ".join(Path(s.path).name for s in self.sources)
        return f"<SGLangLog {names}: {sum(s.lines for s in self.sources)} lines>"

    # ------------------------------------------------------------------ raw store
    def scan(self) -> pl.LazyFrame:
        """All stored line rows of all sources (internal columns included)."""
        frames = [
            pl.scan_parquet(s.store).with_columns(
                source=pl.lit(s.path),
                _offset=pl.lit(s.clock_offset_s),
                _order=pl.lit(i, pl.Int32),
            )
            for i, s in enumerate(self.sources)
        ]
        return pl.concat(frames, how="diagonal_relaxed") if frames else _empty_store()

    def _rows(self, kinds: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
        lf = self.scan().filter(pl.col("kind").is_in(list(kinds)))
        return lf.select("source", "_order", "_offset", *columns).collect(engine="streaming")

    # ------------------------------------------------------------------ tables
    @cached_property
    def events(self) -> pl.DataFrame:
        """One row per input line: where, when, wrapper fields, ranks, kind and message."""
        df = self.scan().collect(engine="streaming")
        df = _with_time(df)
        df = _with_ranks(df)
        df = _with_header(df, {s.path: s.wrapper for s in self.sources})
        spans = self._error_lines()
        if spans.height:
            df = df.join(spans, on=["source", "lineno"], how="left").with_columns(
                kind=pl.coalesce("_err", "kind")
            )
        return self._ordered(df).select(EVENTS.names()).cast(dict(EVENTS))

    @cached_property
    def batches(self) -> pl.DataFrame:
        """Every ``Prefill batch`` / ``Decode batch`` line, typed (see ``schema.BATCHES``)."""
        lf = self.scan().filter(pl.col("kind").is_in(["decode", "prefill"]) & ~pl.col("unresolved"))
        have = set(lf.collect_schema().names())
        stored = [c for c in BATCHES.names() if c in have and c not in RANK_TAGS]
        typed = lf.select("_order", "_offset", "clock", "wrapper_ts", "ranks", *stored)
        df = typed.collect(engine="streaming")
        if self._fixups.height:
            df = pl.concat([df, self._fixups], how="diagonal_relaxed")
        df = _with_ranks(_with_time(df))
        for name, dtype in BATCHES.items():
            if name not in df.columns:
                df = df.with_columns(pl.lit(None, dtype).alias(name))
        if "complete" not in df.columns:
            df = df.with_columns(complete=pl.lit(True))
        df = df.with_columns(complete=pl.col("complete").fill_null(True))
        return self._ordered(df).select([*BATCHES.names(), "complete"]).cast(dict(BATCHES))

    @cached_property
    def launches(self) -> list[Launch]:
        """One ``Launch`` per ``server_args=`` dump, with the startup facts that follow it."""
        dumps = _with_time(
            self._rows(["server_args"], ["lineno", "ts", "clock", "wrapper_ts", "message"])
        )
        startup = self.startup
        out = []
        for i, row in enumerate(self._ordered(dumps).iter_rows(named=True)):
            parsed = _parse_dump(row["message"])
            facts = startup.filter(pl.col("launch") == i)
            out.append(
                Launch(
                    i,
                    row["source"],
                    row["lineno"],
                    row["ts"],
                    parsed.args,
                    parsed.complete,
                    parsed.problems,
                    facts,
                )
            )
        return out

    @cached_property
    def launch_table(self) -> pl.DataFrame:
        """The launches as a table: one row each, key parallel settings as columns."""
        rows = []
        for launch in self.launches:
            args = launch.server_args
            row = {
                "source": launch.source,
                "lineno": launch.lineno,
                "ts": launch.ts,
                "launch": launch.index,
                "complete": launch.complete,
            }
            for name in LAUNCHES.names()[5:]:
                value = args.get(name)
                if name == "pp_max_micro_batch_size" and value is None:
                    value = args.get("max_micro_batch_size")  # its name in 0.4.6–0.5.1
                row[name] = (
                    value if isinstance(value, int | str) and not isinstance(value, bool) else None
                )
            rows.append(row)
        return pl.DataFrame(rows, schema=LAUNCHES, orient="row") if rows else LAUNCHES.to_frame()

    @cached_property
    def startup(self) -> pl.DataFrame:
        """Startup facts per rank (weights, KV pool, CUDA graphs, scheduler summary), long form."""
        rows_df = _with_ranks(
            _with_time(
                self._rows(
                    ["startup", "server_args"],
                    ["lineno", "ts", "clock", "wrapper_ts", "ranks", "kind", "message"],
                )
            )
        )
        rows = []
        launch = -1
        for r in self._ordered(rows_df).iter_rows(named=True):
            if r["kind"] == "server_args":
                launch += 1
                continue
            for fact, value, text in startup_facts(r["message"]):
                rows.append(
                    {
                        "source": r["source"],
                        "launch": max(launch, 0) if launch >= 0 else None,
                        **{t: r[t] for t in RANK_TAGS},
                        "lineno": r["lineno"],
                        "ts": r["ts"],
                        "fact": fact,
                        "value": value,
                        "text": text,
                    }
                )
        return pl.DataFrame(rows, schema=STARTUP, orient="row") if rows else STARTUP.to_frame()

    @cached_property
    def http(self) -> pl.DataFrame:
        """uvicorn access lines: client, method, path, status."""
        df = _with_time(self._rows(["http"], ["lineno", "ts", "clock", "wrapper_ts", "message"]))
        parts = df.get_column("message").str.extract_groups(_ACCESS.pattern)
        df = df.with_columns(
            client=parts.struct.field("1"),
            method=parts.struct.field("2"),
            path=parts.struct.field("3"),
            status=parts.struct.field("4").cast(pl.Int32, strict=False),
        )
        return self._ordered(df).select(HTTP.names()).cast(dict(HTTP))

    @cached_property
    def errors(self) -> pl.DataFrame:
        """Warnings, errors and tracebacks, each multi-line record grouped into one row."""
        return self._error_records()[0]

    @cached_property
    def other(self) -> pl.DataFrame:
        """Every line no other table holds, with its line number."""
        absorbed = self._error_lines()
        df = self._rows(["other", "progress", "marker", "blank"], ["lineno", "kind", "message"])
        if absorbed.height:
            df = df.join(absorbed, on=["source", "lineno"], how="anti")
        return self._ordered(df).select(OTHER.names()).cast(dict(OTHER))

    # ------------------------------------------------------------------ summary
    @cached_property
    def counts(self) -> dict[str, int]:
        """Lines of each kind, over all sources."""
        df = self.scan().group_by("kind").len().collect()
        return {k: int(n) for k, n in sorted(df.iter_rows())}

    def coverage(self) -> dict[str, Any]:
        """Lines read, rows per table, batch lines that did not type fully, odd input."""
        odd = (
            self.scan()
            .select(
                invalid_utf8=pl.col("message").str.contains("\ufffd", literal=True).sum(),
                binary=pl.col("message").str.contains(_LOOKS_BINARY).sum(),
                undated=(
                    pl.col("ts").is_null()
                    & pl.col("clock").is_null()
                    & pl.col("wrapper_ts").is_null()
                    & (pl.col("kind") != "blank")
                ).sum(),
            )
            .collect()
            .row(0, named=True)
        )
        return {
            "lines": sum(s.lines for s in self.sources),
            "tables": {
                "events": sum(s.lines for s in self.sources),
                "batches": self.batches.height,
                "launches": len(self.launches),
                "startup": self.startup.height,
                "http": self.http.height,
                "errors": self.errors.height,
                "other": self.other.height,
            },
            "counts": self.counts,
            "incomplete_batches": int((~self.batches.get_column("complete")).sum()),
            **{k: int(v) for k, v in odd.items()},
        }

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary per file (the shape ``ppscope parse --json`` prints)."""
        files = []
        for s in self.sources:
            one = SGLangLog([s], self._fixups.filter(pl.col("source") == s.path), None)
            cov = one.coverage()
            files.append(
                {
                    "path": s.path,
                    "format": FORMAT,
                    "wrapper": s.wrapper,
                    "lines": s.lines,
                    "tables": cov["tables"],
                    "counts": cov["counts"],
                    "incomplete_batches": cov["incomplete_batches"],
                    "odd_lines": {k: cov[k] for k in ("invalid_utf8", "binary", "undated")},
                    "problems": list(s.problems),
                    "launches": [
                        {
                            "lineno": la.lineno,
                            "complete": la.complete,
                            "server_args": la.server_args,
                            "startup": la.facts(),
                        }
                        for la in one.launches
                    ],
                    "first_unrecognized": [
                        {"lineno": r["lineno"], "line": r["message"]}
                        for r in one.other.filter(pl.col("kind") == "other")
                        .head(5)
                        .iter_rows(named=True)
                    ],
                }
            )
        return {"files": files}

    # ------------------------------------------------------------------ helpers
    def _ordered(self, df: pl.DataFrame) -> pl.DataFrame:
        """File order for one source; one clock (ts, then file order) across several."""
        order = {s.path: i for i, s in enumerate(self.sources)}
        df = df.with_columns(_order=pl.col("source").replace_strict(order, return_dtype=pl.Int32))
        keys = ["_order", "lineno"] if len(self.sources) < 2 else ["ts", "_order", "lineno"]
        return df.sort(keys, nulls_last=True, maintain_order=True)

    def _error_records(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        cached = self.__dict__.get("_errors_cache")
        if cached is None:
            rows = _with_ranks(
                _with_time(
                    self.scan()
                    .filter(
                        (pl.col("kind") == "error")
                        | ((pl.col("kind") == "other") & ~pl.col("has_prefix"))
                    )
                    .select(
                        "source",
                        "_order",
                        "_offset",
                        "lineno",
                        "ts",
                        "clock",
                        "wrapper_ts",
                        "ranks",
                        "kind",
                        "has_prefix",
                        "message",
                    )
                    .collect(engine="streaming")
                )
            )
            cached = _group_errors(rows.sort("_order", "lineno"))
            self.__dict__["_errors_cache"] = cached
        return cached

    def _error_lines(self) -> pl.DataFrame:
        return self._error_records()[1]


# ---------------------------------------------------------------------- loading
def load_sglang_log(
    paths: str | Path | Iterable[str | Path], *, strict: bool = False, cache: bool = True
) -> SGLangLog:
    """Read SGLang server logs (any version, raw or wrapped by journald/docker/kubectl/...).

    Parameters
    ----------
    paths
        One file or several (e.g. one per node, merged on one clock); ``.gz`` is read as is.
    strict
        Raise ``ParseError`` at the first line that cannot be typed fully (a cut batch line,
        a cut ``server_args`` dump, invalid UTF-8, binary data) instead of recording it.
    cache
        Keep the typed lines as Parquet next to the input (or in ``~/.cache/ppscope``) so the
        next load of the same unchanged file is near-instant.

    Returns
    -------
    SGLangLog
        Tables ``events``, ``batches``, ``launches``, ``startup``, ``http``, ``errors``,
        ``other`` and ``coverage()``.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not files:
        raise ToolkitError("no log files given")
    workdir = lines_io.workdir()
    sources = []
    fixups = []
    try:
        for path in files:
            if not path.is_file():
                raise ToolkitError(f"{path}: no such file")
            source, fix = _load_file(path, workdir, cache)
            sources.append(source)
            fixups.append(fix)
    except BaseException:
        shutil.rmtree(workdir, True)
        raise
    log = SGLangLog(sources, pl.concat(fixups, how="diagonal_relaxed"), workdir)
    if strict:
        _check_strict(log)
    return log


def _load_file(path: Path, workdir: Path, cache: bool) -> tuple[Source, pl.DataFrame]:
    store_dir = _cache_dir(path) if cache else workdir
    key = _cache_key(path)
    store = store_dir / f"{path.name}.{key}.lines.parquet"
    fix_path = store_dir / f"{path.name}.{key}.fix.parquet"
    meta_path = store_dir / f"{path.name}.{key}.meta.parquet"
    if cache and store.exists() and fix_path.exists() and meta_path.exists():
        meta = pl.read_parquet(meta_path).row(0, named=True)
        src = Source(
            str(path),
            meta["wrapper"],
            meta["lines"],
            store,
            meta["offset"],
            tuple(meta["problems"]),
        )
        return src, pl.read_parquet(fix_path).with_columns(source=pl.lit(str(path)))
    plain, problem = lines_io.plain_copy(path, workdir)
    problems = (problem,) if problem else ()
    head = lines_io.head_lines(plain)
    wrapper = sniff_wrapper(head)
    year = _first_year(head)
    plan = line_plan(
        lines_io.scan_lines(plain, workdir),
        wrapper,
        year,
        sample_keys(head),
        ansi=_has_escape(plain),
    )
    tmp = store.with_suffix(".partial")
    plan.sink_parquet(tmp, compression="lz4", statistics=False)
    tmp.replace(store)
    summary = (
        pl.scan_parquet(store)
        .select(
            lines=pl.len(),
            offset=(pl.col("ts").cast(pl.Datetime("us")) - pl.col("wrapper_ts"))
            .dt.total_seconds()
            .median(),
        )
        .collect()
        .row(0, named=True)
    )
    offset = _round_offset(summary["offset"])
    src = Source(str(path), wrapper.name, int(summary["lines"]), store, offset, problems)
    fix = _fixups(store)
    fix.write_parquet(fix_path)
    pl.DataFrame(
        {
            "wrapper": [wrapper.name],
            "lines": [src.lines],
            "offset": [offset],
            "problems": [list(problems)],
        },
        schema={
            "wrapper": pl.String,
            "lines": pl.Int64,
            "offset": pl.Float64,
            "problems": pl.List(pl.String),
        },
    ).write_parquet(meta_path)
    if plain != path:
        plain.unlink()
    return src, fix.with_columns(source=pl.lit(str(path)))


def _fixups(store: Path) -> pl.DataFrame:
    """Type, with the Python reader, the batch lines the fast path left unresolved."""
    rows = (
        pl.scan_parquet(store)
        .filter(pl.col("unresolved"))
        .select("lineno", "ts", "clock", "wrapper_ts", "ranks", "gpu_id", "message")
        .collect()
    )
    typed = []
    for r in rows.iter_rows(named=True):
        parsed = parse_batch_message(r["message"])
        values = parsed.values if parsed else {}
        typed.append(
            {
                **{k: r[k] for k in ("lineno", "ts", "clock", "wrapper_ts", "ranks", "gpu_id")},
                **values,
                "extra": parsed.extra if parsed else r["message"],
                "complete": parsed.complete if parsed else False,
            }
        )
    schema = {
        **{k: rows.schema[k] for k in rows.columns if k != "message"},
        **{k: v for k, v in BATCHES.items() if k not in rows.columns},
        "complete": pl.Boolean,
    }
    return (
        pl.DataFrame(typed, schema=schema, orient="row") if typed else pl.DataFrame(schema=schema)
    )


def _cache_key(path: Path) -> str:
    st = path.stat()
    versions = f"{__version__}|{_STORE_VERSION}|{pl.__version__}"
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{versions}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _cache_dir(path: Path) -> Path:
    """``.ppscope-cache`` beside the input, else the user's cache directory."""
    for candidate in (path.parent / ".ppscope-cache", Path.home() / ".cache" / "ppscope"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            probe = candidate / ".probe"
            probe.touch()
            probe.unlink()
            return candidate
        except OSError:
            continue
    return lines_io.workdir()


def _has_escape(path: Path) -> bool:
    if path.stat().st_size == 0:
        return False
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"\x1b") >= 0


def _first_year(head: list[str]) -> int | None:
    for line in head:
        m = _YEAR.search(line)
        if m:
            return int(m.group(1))
    return None


def _round_offset(seconds: float | None) -> float:
    """Wrapper-to-SGLang clock offset, rounded to whole quarter hours (time zones)."""
    if seconds is None:
        return 0.0
    return float(round(seconds / 900.0) * 900)


def _parse_dump(message: str) -> ServerArgsDump:
    try:
        return parse_server_args(message.removeprefix("server_args="))
    except ServerArgsError as e:
        return ServerArgsDump({}, False, (str(e),))


def _check_strict(log: SGLangLog) -> None:
    bad = log.batches.filter(~pl.col("complete"))
    if bad.height:
        r = bad.row(0, named=True)
        raise ParseError(r["source"], r["lineno"], "batch line does not type fully", r["extra"])
    for launch in log.launches:
        if not launch.complete:
            raise ParseError(
                launch.source,
                launch.lineno,
                "server_args dump is cut or garbled: " + "; ".join(launch.problems),
            )
    odd = (
        log.scan()
        .filter(
            pl.col("message").str.contains("\ufffd", literal=True)
            | pl.col("message").str.contains(_LOOKS_BINARY)
        )
        .select("source", "lineno", "message")
        .head(1)
        .collect()
    )
    if odd.height:
        r = odd.row(0, named=True)
        reason = "invalid utf-8" if "\ufffd" in r["message"] else "binary data"
        raise ParseError(r["source"], r["lineno"], reason, r["message"])


# ---------------------------------------------------------------------- columns
def _with_time(df: pl.DataFrame) -> pl.DataFrame:
    """``ts`` on SGLang's clock: its own stamp, else the wrapper's shifted by the file offset."""
    shifted = (pl.col("wrapper_ts") + pl.duration(seconds=pl.col("_offset"))).cast(
        pl.Datetime("ms")
    )
    dated_clock = pl.col("wrapper_ts").dt.date().dt.combine(pl.col("clock")).cast(pl.Datetime("ms"))
    return df.with_columns(ts=pl.coalesce(pl.col("ts"), dated_clock, shifted))


def _with_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """Rank columns from the prefix text (``" PP3 TP0"``), decoded once per distinct value."""
    if "ranks" not in df.columns:
        return df.with_columns(*(pl.lit(None, pl.Int32).alias(t) for t in RANK_TAGS))
    distinct = df.get_column("ranks").drop_nulls().unique().to_list()
    rows = []
    for text in distinct:
        tags = {t.lower(): int(n) for t, n in _RANK.findall(text)}
        rows.append({"ranks": text, **{t: tags.get(t) for t in RANK_TAGS}})
    mapping = pl.DataFrame(rows, schema={"ranks": pl.String, **dict.fromkeys(RANK_TAGS, pl.Int32)})
    drop = [t for t in RANK_TAGS if t in df.columns]
    return df.drop(drop).join(mapping, on="ranks", how="left", maintain_order="left")


def _with_header(df: pl.DataFrame, wrappers: dict[str, str]) -> pl.DataFrame:
    """``host`` and ``pid`` from the wrapper header, decoded once per distinct header."""
    pairs = df.select("source", "header").unique().drop_nulls("header")
    rows = []
    for source, header in pairs.iter_rows():
        host, pid = decode_header(wrappers.get(source, "raw"), header)
        rows.append({"source": source, "header": header, "host": host, "pid": pid})
    mapping = pl.DataFrame(
        rows, schema={"source": pl.String, "header": pl.String, "host": pl.String, "pid": pl.Int64}
    )
    return df.join(mapping, on=["source", "header"], how="left", maintain_order="left")


def _group_errors(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group error lines and their unprefixed continuation lines into records."""
    records: list[dict[str, Any]] = []
    absorbed: list[tuple[str, int]] = []
    current: dict[str, Any] | None = None
    for r in rows.iter_rows(named=True):
        continues = (
            current is not None
            and r["source"] == current["source"]
            and r["lineno"] == current["end_lineno"] + 1
            and not r["has_prefix"]
        )
        if continues:
            assert current is not None
            current["end_lineno"] = r["lineno"]
            current["lines"].append(r["message"])
            absorbed.append((r["source"], r["lineno"]))
            continue
        if r["kind"] != "error":
            current = None
            continue
        current = {
            **{k: r[k] for k in ("source", "lineno", "ts", *RANK_TAGS)},
            "end_lineno": r["lineno"],
            "lines": [r["message"]],
        }
        records.append(current)
        absorbed.append((r["source"], r["lineno"]))
    out = []
    for rec in records:
        lines = rec.pop("lines")
        text = "\n".join(lines)
        if "Traceback (most recent call last)" in text:
            level = "traceback"
            tail = [ln for ln in lines if ln and not ln.startswith((" ", "\t"))]
            summary = tail[-1] if tail else lines[0]
        else:
            level = "warning" if re.search(r"WARNING|Warning\b", lines[0]) else "error"
            summary = lines[0]
        out.append({**rec, "level": level, "summary": summary, "text": text})
    table = pl.DataFrame(out, schema=ERRORS, orient="row") if out else ERRORS.to_frame()
    lines_df = pl.DataFrame(
        absorbed, schema={"source": pl.String, "lineno": pl.Int64}, orient="row"
    )
    return table, lines_df.with_columns(_err=pl.lit("error"))


def _rank_label(row: dict[str, Any]) -> str:
    return " ".join(f"{t.upper()}{row[t]}" for t in RANK_TAGS if row.get(t) is not None) or "main"


def _plain(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _empty_store() -> pl.LazyFrame:
    return pl.LazyFrame(schema={**EVENTS, "source": pl.String})
