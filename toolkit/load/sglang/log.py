"""``load_sglang_log``: SGLang server logs of every version, under any wrapper, as typed tables.

Each file is typed once into a Parquet store (``sglang_store``); the tables here are built from
the stores on first use, so a multi-GB log never has to sit in memory as text.
"""

from __future__ import annotations

import re
import shutil
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError
from toolkit.load import text as lines_io
from toolkit.load.sglang.plan import unreadable
from toolkit.load.sglang.server_args import ServerArgsDump, ServerArgsError, parse_server_args
from toolkit.load.sglang.startup import startup_facts
from toolkit.load.sglang.store import Store, open_store
from toolkit.load.sglang.wrappers import decode_header
from toolkit.schema.sglang import BATCHES, ERRORS, EVENTS, HTTP, LAUNCHES, OTHER, RANK_TAGS, STARTUP

FORMAT = "sglang-log"
_RANK = re.compile(r"\b(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)\b")
_ACCESS = r'^INFO:\s+(\S+) - "(\S+) (\S+)(?: [^"]*)?" (\d{3})'
_TIME = ["lineno", "ts", "clock", "wrapper_ts"]
NO_DUMP = "no server_args dump printed"


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
        for (fact,), rows in self.startup.group_by("fact", maintain_order=True):
            values = {_rank_label(r): _fact_value(r) for r in rows.iter_rows(named=True)}
            distinct = {repr(v) for v in values.values()}
            out[str(fact)] = next(iter(values.values())) if len(distinct) == 1 else values
        return out


class SGLangLog:
    """Typed tables of one or more SGLang log files.

    ``events``, ``batches``, ``launches`` (with ``launch_table``), ``startup``, ``http``,
    ``errors`` and ``other`` are polars DataFrames built on first access; their schemas are
    declared in ``toolkit.schema.sglang``. ``coverage()`` accounts for every line.
    """

    def __init__(self, stores: list[Store], workdir: Path | None = None) -> None:
        self.sources = stores
        if workdir is not None:
            weakref.finalize(self, shutil.rmtree, workdir, True)

    def __repr__(self) -> str:
        names = ", ".join(Path(s.path).name for s in self.sources)
        return f"<SGLangLog {names}: {sum(s.lines for s in self.sources)} lines>"

    # ------------------------------------------------------------------ tables
    def scan(self) -> pl.LazyFrame:
        """Every stored line of every source, lazily (internal columns included)."""
        frames = [
            s.scan().with_columns(
                source=pl.lit(s.path), _offset=pl.lit(s.clock_offset_s), _order=pl.lit(i)
            )
            for i, s in enumerate(self.sources)
        ]
        return pl.concat(frames, how="diagonal_relaxed")

    @cached_property
    def events(self) -> pl.DataFrame:
        """One row per input line: where, when, wrapper fields, ranks, kind and message."""
        lf = self._resolved(self.scan())
        hosts = {h: decode_header(s.wrapper, h) for s in self.sources for h in s.headers}
        lf = lf.with_columns(
            host=pl.col("header").replace_strict(
                {h: v[0] for h, v in hosts.items()}, default=None, return_dtype=pl.String
            ),
            pid=pl.col("header").replace_strict(
                {h: v[1] for h, v in hosts.items()}, default=None, return_dtype=pl.Int64
            ),
        )
        df = self._sorted(lf.select(*EVENTS.names(), "_order").collect(engine="streaming"))
        spans = self._error_spans()
        if spans.height:
            df = df.join(spans, on=["source", "lineno"], how="left", maintain_order="left")
            df = df.with_columns(kind=pl.coalesce("_err", "kind")).drop("_err")
        return df.select(EVENTS.names()).cast(dict(EVENTS))

    @cached_property
    def batches(self) -> pl.DataFrame:
        """Every ``Prefill batch`` / ``Decode batch`` line, typed (see ``schema.BATCHES``)."""
        lf = self.scan().filter(pl.col("kind").is_in(["decode", "prefill"]) & ~pl.col("unresolved"))
        lf = lf.with_columns(complete=pl.lit(True), extra=pl.lit(None, pl.String))
        fixups = [
            s.fixups()
            .lazy()
            .with_columns(source=pl.lit(s.path), _offset=pl.lit(s.clock_offset_s), _order=pl.lit(i))
            for i, s in enumerate(self.sources)
        ]
        lf = pl.concat([lf, *fixups], how="diagonal_relaxed")
        have = set(lf.collect_schema().names())
        lf = self._resolved(lf).with_columns(
            pl.lit(None, dtype).alias(name) for name, dtype in BATCHES.items() if name not in have
        )
        columns = [*BATCHES.names(), "complete"]
        df = lf.select(*columns, "_order").collect(engine="streaming")
        if any(s.fixups().height for s in self.sources) or len(self.sources) > 1:
            df = self._sorted(df)
        return df.select(columns).cast(dict(BATCHES))

    @cached_property
    def launches(self) -> list[Launch]:
        """One ``Launch`` per ``server_args=`` dump, with the startup facts that follow it."""
        dumps = self._rows(["server_args"], ["message"])
        startup = self.startup
        out = []
        if startup.filter(pl.col("launch") == 0).height and not dumps.height:
            # Versions before 0.2 print no dump: the startup facts alone mark the launch.
            first = startup.row(0, named=True)
            dumps = pl.DataFrame(
                [{**first, "_order": 0, "message": None}], schema_overrides={"message": pl.String}
            ).select(dumps.columns)
        for i, row in enumerate(dumps.iter_rows(named=True)):
            parsed = _parse_dump(row["message"])
            if not parsed.complete and row["message"] is not None:
                parsed = self._rejoined_dump(row["source"], row["lineno"], parsed)
            out.append(
                Launch(
                    index=i,
                    source=row["source"],
                    lineno=row["lineno"],
                    ts=row["ts"],
                    server_args=parsed.args,
                    complete=parsed.complete,
                    problems=parsed.problems,
                    startup=startup.filter(pl.col("launch") == i),
                )
            )
        return out

    def _rejoined_dump(self, source: str, lineno: int, cut: ServerArgsDump) -> ServerArgsDump:
        """A dump a wrapper split over several lines (Kubernetes ``P`` records, journald's
        ``LineMax``), joined back from the unprefixed lines that follow it."""
        following = (
            self.scan()
            .filter((pl.col("source") == source) & pl.col("lineno").is_between(lineno, lineno + 16))
            .select("lineno", "has_prefix", "message")
            .sort("lineno")
            .collect()
        )
        text = None
        for r in following.iter_rows(named=True):
            if r["lineno"] == lineno:
                text = r["message"]
                continue
            if r["has_prefix"] or text is None:
                break
            text += r["message"] or ""
            joined = _parse_dump(text)
            if joined.complete:
                note = f"joined from lines {lineno}-{r['lineno']} (split by the log wrapper)"
                return ServerArgsDump(joined.args, True, (*joined.problems, note), joined.style)
        return cut

    @cached_property
    def launch_table(self) -> pl.DataFrame:
        """The launches as a table: one row each, key parallel settings as columns."""
        rows = []
        for launch in self.launches:
            args = dict(launch.server_args)
            if args.get("pp_max_micro_batch_size") is None:
                args["pp_max_micro_batch_size"] = args.get("max_micro_batch_size")  # ≤0.5.1 name
            row = {
                "source": launch.source,
                "lineno": launch.lineno,
                "ts": launch.ts,
                "launch": launch.index,
                "complete": launch.complete,
            }
            for name, dtype in LAUNCHES.items():
                if name not in row:
                    value = args.get(name)
                    wanted = str if dtype == pl.String else int
                    ok = isinstance(value, wanted) and not isinstance(value, bool)
                    row[name] = value if ok else None
            rows.append(row)
        return pl.DataFrame(rows, schema=LAUNCHES, orient="row")

    @cached_property
    def startup(self) -> pl.DataFrame:
        """Startup facts per rank (weights, KV pool, CUDA graphs, scheduler summary), long form.

        A fact belongs to the launch whose ``server_args`` dump precedes it in its file.
        """
        df = self._rows(["startup", "server_args"], ["kind", "message", *RANK_TAGS])
        dumps = df.filter(pl.col("kind") == "server_args")
        # Launches are numbered in the order ``launches`` lists them (one clock across files);
        # a fact belongs to the latest dump before it in its own file.
        index = {(src, n): i for i, (src, n) in enumerate(dumps.select("source", "lineno").rows())}
        rows = []
        current: dict[str, int] = {}
        for r in df.sort("_order", "lineno").iter_rows(named=True):
            if r["kind"] == "server_args":
                current[r["source"]] = index[(r["source"], r["lineno"])]
                continue
            # Before the first dump of a file no launch is known, unless the version prints
            # no dump at all (before 0.2): then the facts mark the only launch.
            launch = current.get(r["source"], None if dumps.height else 0)
            for fact, value, text in startup_facts(r["message"]):
                rows.append(
                    {
                        **{c: r[c] for c in ("source", "lineno", "ts", *RANK_TAGS)},
                        "launch": launch,
                        "fact": fact,
                        "value": value,
                        "text": text,
                    }
                )
        return pl.DataFrame(rows, schema=STARTUP, orient="row")

    @cached_property
    def http(self) -> pl.DataFrame:
        """uvicorn access lines: client, method, path, status."""
        df = self._rows(["http"], ["message"])
        parts = df.get_column("message").str.extract_groups(_ACCESS)
        df = df.with_columns(
            client=parts.struct.field("1"),
            method=parts.struct.field("2"),
            path=parts.struct.field("3"),
            status=parts.struct.field("4").cast(pl.Int32, strict=False),
        )
        return df.select(HTTP.names()).cast(dict(HTTP))

    @cached_property
    def errors(self) -> pl.DataFrame:
        """Warnings, errors and tracebacks, each multi-line record grouped into one row."""
        return self._error_groups[0]

    @cached_property
    def other(self) -> pl.DataFrame:
        """Every line no other table holds, with its line number and kind."""
        df = self._rows(["other", "progress", "marker", "blank"], ["kind", "message"])
        spans = self._error_spans()
        if spans.height:
            df = df.join(spans, on=["source", "lineno"], how="anti", maintain_order="left")
        return df.select(OTHER.names()).cast(dict(OTHER))

    # ------------------------------------------------------------------ accounting
    @property
    def counts(self) -> dict[str, int]:
        """Lines of each kind, over all sources."""
        total: dict[str, int] = {}
        for s in self.sources:
            for kind, n in s.counts.items():
                total[kind] = total.get(kind, 0) + n
        return dict(sorted(total.items()))

    def coverage(self) -> dict[str, Any]:
        """Lines read, rows per table, batch lines that did not type fully, odd lines.

        Cheap: counts come from the stores; only the small tables are built.
        """
        lines = sum(s.lines for s in self.sources)
        counts = self.counts
        fixups = [s.fixups() for s in self.sources]
        absorbed = self._error_spans().height - counts.get("error", 0)
        leftover = sum(counts.get(k, 0) for k in ("other", "progress", "marker", "blank"))
        return {
            "lines": lines,
            "tables": {
                "events": lines,
                "batches": counts.get("decode", 0) + counts.get("prefill", 0),
                "launches": len(self.launches),
                "startup": self.startup.height,
                "http": counts.get("http", 0),
                "errors": self.errors.height,
                "other": leftover - absorbed,
            },
            "counts": counts,
            "incomplete_batches": sum(int((~f.get_column("complete")).sum()) for f in fixups),
            **{k: sum(s.odd[k] for s in self.sources) for k in ("unreadable", "undated")},
        }

    def unrecognized(self, n: int = 5) -> pl.DataFrame:
        """The first ``n`` lines of kind ``other`` (what no loader recognized)."""
        spans = self._error_spans()
        df = self._rows(["other"], ["message"]).head(n + spans.height)
        if spans.height:
            df = df.join(spans, on=["source", "lineno"], how="anti", maintain_order="left")
        return df.head(n)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary per file (the shape ``ppscope parse --json`` prints)."""
        files = []
        for s in self.sources:
            one = self if len(self.sources) == 1 else SGLangLog([s])
            cov = one.coverage()
            unrecognized = one.unrecognized(5)
            files.append(
                {
                    "path": s.path,
                    "format": FORMAT,
                    "wrapper": s.wrapper,
                    "lines": s.lines,
                    "tables": cov["tables"],
                    "counts": cov["counts"],
                    "incomplete_batches": cov["incomplete_batches"],
                    "odd_lines": {k: cov[k] for k in ("unreadable", "undated")},
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
                        {"lineno": n, "line": m}
                        for n, m in unrecognized.select("lineno", "message").iter_rows()
                    ],
                }
            )
        return {"files": files}

    # ------------------------------------------------------------------ helpers
    def _resolved(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """``ts`` on SGLang's clock and the rank columns, from the stored raw columns."""
        shifted = pl.col("wrapper_ts") + pl.duration(seconds=pl.col("_offset"))
        dated_clock = pl.col("wrapper_ts").dt.date().dt.combine(pl.col("clock"))
        lf = lf.with_columns(
            ts=pl.coalesce(
                pl.col("ts"), dated_clock.cast(pl.Datetime("ms")), shifted.cast(pl.Datetime("ms"))
            )
        )
        tags = {text: _rank_tags(text) for s in self.sources for text in s.ranks}
        return lf.with_columns(
            pl.col("ranks")
            .replace_strict({k: v.get(t) for k, v in tags.items()}, default=None,
                            return_dtype=pl.Int32)
            .alias(t)
            for t in RANK_TAGS
        )  # fmt: skip

    @cached_property
    def _minor(self) -> pl.DataFrame:
        """Every line that is not a batch line, read once: the small tables come from it."""
        kind = pl.col("kind")
        lf = self._resolved(self.scan().filter(~kind.is_in(["decode", "prefill"])))
        columns = ["source", "_order", *_TIME[:2], "kind", "has_prefix", "level", "message"]
        return self._sorted(lf.select(*columns, *RANK_TAGS).collect(engine="streaming"))

    def _rows(self, kinds: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
        """The lines of some (non-batch) kinds, resolved and in file order."""
        wanted = dict.fromkeys(["source", "_order", *_TIME[:2], *columns])
        return self._minor.filter(pl.col("kind").is_in(list(kinds))).select(list(wanted))

    def _sorted(self, df: pl.DataFrame) -> pl.DataFrame:
        """File order for one source; one clock (ts, then file order) across several."""
        keys = ["_order", "lineno"] if len(self.sources) < 2 else ["ts", "_order", "lineno"]
        return df.sort(keys, nulls_last=True, maintain_order=True)

    @cached_property
    def _error_groups(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        kind = pl.col("kind")
        candidates = (kind == "error") | (kind.is_in(["other", "progress"]) & ~pl.col("has_prefix"))
        return _group_errors(self._minor.filter(candidates))

    def _error_spans(self) -> pl.DataFrame:
        return self._error_groups[1]


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
        a cut ``server_args`` dump, invalid UTF-8, control characters) instead of recording it.
    cache
        Keep the typed lines as Parquet in ``.ppscope-cache`` next to the input (or in
        ``~/.cache/ppscope``), so the next load of the same unchanged file is near-instant.

    Returns
    -------
    SGLangLog
        Tables ``events``, ``batches``, ``launches``, ``startup``, ``http``, ``errors``,
        ``other``, and ``coverage()``.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not files:
        raise ToolkitError("no log files given")
    workdir = lines_io.workdir()
    try:
        stores = []
        for path in files:
            if not path.is_file():
                raise ToolkitError(f"{path}: no such file")
            stores.append(open_store(path, workdir, cache))
    except BaseException:
        shutil.rmtree(workdir, True)
        raise
    log = SGLangLog(stores, workdir)
    if strict:
        _check_strict(log)
    return log


def _parse_dump(message: str | None) -> ServerArgsDump:
    if message is None:
        return ServerArgsDump({}, False, (NO_DUMP,))
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
            reason = "server_args dump is cut or garbled: " + "; ".join(launch.problems)
            raise ParseError(launch.source, launch.lineno, reason)
    odd = unreadable(log.scan()).select("source", "lineno", "message").head(1).collect()
    if odd.height:
        r = odd.row(0, named=True)
        reason = "invalid utf-8" if "\ufffd" in r["message"] else "control characters (binary data)"
        raise ParseError(r["source"], r["lineno"], reason, r["message"])


# ---------------------------------------------------------------------- records
def _group_errors(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Error lines and the unprefixed lines that continue them (tracebacks), as records."""
    records: list[dict[str, Any]] = []
    spans: list[tuple[str, int]] = []
    current: dict[str, Any] | None = None
    for r in rows.iter_rows(named=True):
        if (
            current is not None
            and r["source"] == current["source"]
            and r["lineno"] == current["end_lineno"] + 1
            and not r["has_prefix"]
        ):
            current["end_lineno"] = r["lineno"]
            current["lines"].append(r["message"] or "")
            spans.append((r["source"], r["lineno"]))
            continue
        current = None
        if r["kind"] == "error":
            keep = ("source", "lineno", "ts", *RANK_TAGS)
            current = {
                **{k: r[k] for k in keep},
                "end_lineno": r["lineno"],
                "lines": [r["message"]],
                "first_level": r["level"],
            }
            records.append(current)
            spans.append((r["source"], r["lineno"]))
    table = [_record(rec) for rec in records]
    spans_df = pl.DataFrame(spans, schema={"source": pl.String, "lineno": pl.Int64}, orient="row")
    return (
        pl.DataFrame(table, schema=ERRORS, orient="row"),
        spans_df.with_columns(_err=pl.lit("error")),
    )


def _record(rec: dict[str, Any]) -> dict[str, Any]:
    lines = rec.pop("lines")
    printed_level = rec.pop("first_level")
    text = "\n".join(lines)
    if "Traceback (most recent call last)" in text:
        level = "traceback"
        tail = [ln for ln in lines if ln and not ln.startswith((" ", "\t"))]
        summary = tail[-1] if tail else lines[0]
    else:
        warned = printed_level == "WARNING" or re.search(r"WARNING|Warning\b", lines[0])
        level = "warning" if warned else "error"
        summary = lines[0]
    return {**rec, "level": level, "summary": summary, "text": text}


def _rank_tags(text: str) -> dict[str, int]:
    return {t.lower(): int(n) for t, n in _RANK.findall(text)}


def _rank_label(row: dict[str, Any]) -> str:
    return " ".join(f"{t.upper()}{row[t]}" for t in RANK_TAGS if row.get(t) is not None) or "main"


def _fact_value(row: dict[str, Any]) -> object:
    """A startup fact as the user thinks of it: a number, a list of sizes, or its text."""
    text, value = row["text"], row["value"]
    if text is not None and text.startswith("["):
        return [int(x) for x in re.findall(r"\d+", text)]
    if value is None:
        return text
    return int(value) if float(value).is_integer() else value
