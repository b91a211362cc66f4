"""``load_sglang_log``: SGLang server logs of every version, under any wrapper, as typed tables.

Each file is typed once into a Parquet store (``store``); the tables here are built from the
stores on first use, so a multi-GB log never has to sit in memory as text. Launches and their
startup facts are assembled in ``launches``, multi-line error records in ``error_records``.
"""

from __future__ import annotations

import re
import shutil
import weakref
from collections.abc import Collection, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError
from toolkit.load import text as lines_io
from toolkit.load.inputs import check_input
from toolkit.load.requests import log_lines as request_lines
from toolkit.load.sglang.caveats import log_caveats
from toolkit.load.sglang.dataset import dataset_stores, is_dataset
from toolkit.load.sglang.launches import (
    NO_DUMP,
    Launch,
    launch_table,
    launches_from,
    rejoined_dump,
    startup_table,
)
from toolkit.load.sglang.log_errors import ErrorRecordViews
from toolkit.load.sglang.overrides import changes_by_launch, override_table
from toolkit.load.sglang.plan import unreadable
from toolkit.load.sglang.server_args import ServerArgsDump
from toolkit.load.sglang.store import Store, open_store
from toolkit.load.sglang.wrappers import decode_header
from toolkit.load.sparse import collect_sparse
from toolkit.schema.sglang import BATCHES, EVENTS, HTTP, OTHER, RANK_TAGS

__all__ = ["FORMAT", "NO_DUMP", "Launch", "SGLangLog", "load_sglang_log", "open_dataset"]

FORMAT = "sglang-log"
_RANK = re.compile(r"\b(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d{1,6})\b")  # a longer number is no rank
_ACCESS = r'^INFO:\s+(\S+) - "(\S+) (\S+)(?: [^"]*)?" (\d{3})'
_TIME = ["lineno", "ts", "clock", "wrapper_ts"]


class SGLangLog(ErrorRecordViews):
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
    def scan(self, kinds: Collection[str] | None = None) -> pl.LazyFrame:
        """Every stored line of every source, lazily (internal columns included); with
        ``kinds``, only the pieces that hold a line of one of them are read."""
        frames = [
            s.scan(kinds).with_columns(
                source=pl.lit(s.path), _offset=pl.lit(s.clock_offset_s), _order=pl.lit(i)
            )
            for i, s in enumerate(self.sources)
        ]
        return pl.concat(frames, how="diagonal_relaxed")

    @cached_property
    def events(self) -> pl.DataFrame:
        """One row per input line: where, when, wrapper fields, ranks, kind and message.

        A multi-GB log makes this table as large as the file: analyses read ``scan_events()``
        (lazy) or the smaller tables instead.
        """
        return self.scan_events().collect(engine="streaming")

    def scan_events(self) -> pl.LazyFrame:
        """``events`` as a lazy scan of the stores (nothing is read until collected)."""
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
        spans = self._error_spans()
        if spans.height:
            lf = lf.join(spans.lazy(), on=["source", "lineno"], how="left", maintain_order="left")
            lf = lf.with_columns(kind=pl.coalesce("_err", "kind"))
        lf = self._sorted_lazy(lf.select(*EVENTS.names(), "_order"))
        return lf.select(EVENTS.names()).cast(dict(EVENTS))

    @cached_property
    def batches(self) -> pl.DataFrame:
        """Every ``Prefill batch`` / ``Decode batch`` line, typed: ``schema.sglang.BATCHES``."""
        return collect_sparse(self.scan_batches())  # fields this log never prints take no room

    def scan_batches(self) -> pl.LazyFrame:
        """``batches`` as a lazy scan of the stores."""
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
        lf = lf.select(*columns, "_order")
        if any(s.fixups().height for s in self.sources) or len(self.sources) > 1:
            keys = ["_order", "lineno"] if len(self.sources) < 2 else ["ts", "_order", "lineno"]
            lf = lf.sort(keys, nulls_last=True, maintain_order=True)
        return lf.select(columns).cast(dict(BATCHES))

    @cached_property
    def launches(self) -> list[Launch]:
        """One ``Launch`` per ``server_args=`` dump, with the startup facts that follow it."""
        return launches_from(self._rows(["server_args"], ["message"]), self.startup, self._rejoin)

    def _rejoin(self, source: str, lineno: int, cut: ServerArgsDump) -> ServerArgsDump:
        following = (
            self.scan()
            .filter((pl.col("source") == source) & pl.col("lineno").is_between(lineno, lineno + 16))
            .select("lineno", "has_prefix", "message")
            .sort("lineno")
            .collect()
        )
        return rejoined_dump(following, lineno, cut)

    @cached_property
    def launch_table(self) -> pl.DataFrame:
        """The launches as a table: one row each, key parallel settings as columns."""
        return launch_table(self.launches)

    @cached_property
    def startup(self) -> pl.DataFrame:
        """Startup facts per rank (weights, KV pool, CUDA graphs, scheduler summary), long form.

        A fact belongs to the launch whose ``server_args`` dump precedes it in its file.
        """
        return startup_table(
            self._rows(["startup", "server_args"], ["kind", "message", *RANK_TAGS])
        )

    @cached_property
    def overrides(self) -> pl.DataFrame:
        """Arguments changed at runtime (``/set_internal_state``), and refused changes: one
        row per argument and rank (``schema.sglang.OVERRIDES``)."""
        lines = self._rows(["override", "server_args"], ["kind", "message", *RANK_TAGS])
        return override_table(lines, {la.index: la.server_args for la in self.launches})

    @cached_property
    def http(self) -> pl.DataFrame:
        """uvicorn access lines: client, method, path, status."""
        return self.scan_http().collect(engine="streaming")

    def scan_http(self) -> pl.LazyFrame:
        """``http`` as a lazy scan of the stores."""
        parts = pl.col("message").str.extract_groups(_ACCESS)
        lf = self._lines(["http"], ["message"]).with_columns(
            client=parts.struct.field("1"),
            method=parts.struct.field("2"),
            path=parts.struct.field("3"),
            status=parts.struct.field("4").cast(pl.Int32, strict=False),
        )
        return lf.select(HTTP.names()).cast(dict(HTTP))

    @cached_property
    def requests(self) -> pl.DataFrame:
        """Finished requests the log's own lines record (``ReqTimeStats``, ``Finish:``, JSON
        ``request.finished`` events): ``schema.requests.SERVER_REQUESTS``, on the log's clock."""
        return self.scan_requests().collect(engine="streaming")

    def scan_requests(self) -> pl.LazyFrame:
        """``requests`` as a lazy scan of the stores."""
        return request_lines.log_requests(self._request_lines())

    def request_counts(self) -> dict[str, int]:
        """Request lines of each kind (``time-stats``, ``finish``, ``log-json``,
        ``received``; ``other`` = a JSON line that names no request event)."""
        kinds = self._request_lines().select(_k=request_lines.line_kind(pl.col("message")))
        counts = kinds.group_by("_k").len().collect(engine="streaming")
        return dict(sorted(counts.iter_rows()))

    def _request_lines(self) -> pl.LazyFrame:
        lines = self._lines(["other"], ["message", "pp"])
        return lines.filter(request_lines.is_request_line(pl.col("message")))

    @cached_property
    def errors(self) -> pl.DataFrame:
        """Warnings, errors and tracebacks, each multi-line record grouped into one row."""
        return self._error_groups

    @cached_property
    def other(self) -> pl.DataFrame:
        """Every line no other table holds, with its line number and kind."""
        return self.scan_other().collect(engine="streaming")

    def scan_other(self) -> pl.LazyFrame:
        """``other`` as a lazy scan of the stores."""
        lf = self._lines(
            ["other", "progress", "marker", "blank"], ["kind", "message", "line_bytes"]
        )
        spans = self._error_spans()
        if spans.height:
            lf = lf.join(spans.lazy(), on=["source", "lineno"], how="anti", maintain_order="left")
        return lf.select(OTHER.names()).cast(dict(OTHER))

    def rank_sizes(self) -> dict[str, int]:
        """Highest rank + 1 of each tag in the scheduler prefixes (``{"pp": 8}``), from the
        distinct rank texts the pass kept: no line is read."""
        sizes: dict[str, int] = {}
        for s in self.sources:
            for text in s.ranks:
                for tag, n in _rank_tags(text).items():
                    sizes[tag] = max(sizes.get(tag, 0), n + 1)
        return sizes

    def pids(self) -> frozenset[int]:
        """Process ids the wrapper headers name (journald ``ident[pid]``, Ray ``pid=``), from
        the distinct headers the pass kept: no line is read. Empty for a bare log."""
        found = (decode_header(s.wrapper, h)[1] for s in self.sources for h in s.headers)
        return frozenset(pid for pid in found if pid is not None)

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
        """Lines read, rows per table, batch lines that did not type fully, odd lines, lines
        longer than ``text.LINE_CAP`` (kept cut, in ``other``).

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
                "overrides": counts.get("override", 0),
                "http": counts.get("http", 0),
                "errors": self._error_record_lines.get_column("_record").n_unique(),
                "other": leftover - absorbed,
            },
            "counts": counts,
            "incomplete_batches": sum(int((~f.get_column("complete")).sum()) for f in fixups),
            **{k: sum(s.odd[k] for s in self.sources) for k in ("unreadable", "undated")},
            "cut_lines": sum(s.long_lines for s in self.sources),
        }

    def unrecognized(self, n: int = 5) -> pl.DataFrame:
        """The first ``n`` lines of kind ``other`` that no loader recognized (request lines
        are read by ``requests``)."""
        request = request_lines.is_request_line(pl.col("message"))
        lf = self._lines(["other"], ["message"]).filter(~request)
        spans = self._error_spans()
        if spans.height:
            lf = lf.join(spans.lazy(), on=["source", "lineno"], how="anti", maintain_order="left")
        return lf.head(n).collect()

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary per file (the shape ``ppscope parse --json`` prints)."""
        files = []
        for s in self.sources:
            one = self if len(self.sources) == 1 else SGLangLog([s])
            cov = one.coverage()
            unrecognized = one.unrecognized(5)
            changes = changes_by_launch(one.overrides) if cov["counts"].get("override") else {}
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
                            "runtime_changes": changes.get(la.index, []),
                        }
                        for la in one.launches
                    ],
                    "caveats": [c.to_dict() for c in log_caveats(one)],
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

    def _lines(self, kinds: Sequence[str], columns: Sequence[str]) -> pl.LazyFrame:
        """The lines of some (non-batch) kinds, resolved, in file order: lazily."""
        wanted = list(dict.fromkeys(["source", "_order", *_TIME[:2], *columns]))
        lf = self._resolved(self.scan(kinds).filter(pl.col("kind").is_in(list(kinds))))
        return self._sorted_lazy(lf.select(wanted))

    def _rows(self, kinds: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
        """The lines of some (non-batch) kinds, resolved and in file order."""
        return self._lines(kinds, columns).collect(engine="streaming")

    def _sorted_lazy(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """File order for one source (as stored); one clock (ts, then file order) across
        several."""
        if len(self.sources) < 2:
            return lf
        return lf.sort(["ts", "_order", "lineno"], nulls_last=True, maintain_order=True)


# ---------------------------------------------------------------------- loading
def load_sglang_log(
    paths: str | Path | Iterable[str | Path], *, strict: bool = False, cache: bool = True
) -> SGLangLog:
    """Read SGLang server logs (any version, raw or wrapped by journald/docker/kubectl/...).

    Parameters
    ----------
    paths
        One file or several (e.g. one per node, merged on one clock), compressed or not.
        A dataset directory written by ``ppscope ingest`` stands for the logs it holds.
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
            if is_dataset(path):
                stores.extend(dataset_stores(path))
                continue
            check_input(path)  # a pipe would hang, an unreadable file end in a traceback
            stores.append(open_store(path, workdir, cache))
    except BaseException:
        shutil.rmtree(workdir, True)
        raise
    log = SGLangLog(stores, workdir)
    if strict:
        _check_strict(log)
    return log


def open_dataset(path: str | Path, *, strict: bool = False) -> SGLangLog:
    """The logs of a dataset written by ``ppscope ingest``: the same tables as
    ``load_sglang_log`` of the files it was made from, as lazy scans of its Parquet pieces."""
    return load_sglang_log([Path(path)], strict=strict)


def _check_strict(log: SGLangLog) -> None:
    bad = log.batches.filter(~pl.col("complete"))
    if bad.height:
        r = bad.row(0, named=True)
        raise ParseError(r["source"], r["lineno"], "batch line does not type fully", r["extra"])
    for launch in log.launches:
        if not launch.complete:
            reason = "server_args dump is cut or garbled: " + "; ".join(launch.problems)
            raise ParseError(launch.source, launch.lineno, reason)
    cut = request_lines.cut_finish_lines(log._request_lines()).select("source", "lineno", "message")
    for r in cut.head(1).collect().iter_rows(named=True):
        raise ParseError(r["source"], r["lineno"], "Finish line cut: no meta_info", r["message"])
    odd = unreadable(log.scan()).select("source", "lineno", "message").head(1).collect()
    if odd.height:
        r = odd.row(0, named=True)
        reason = "invalid utf-8" if "\ufffd" in r["message"] else "control characters (binary data)"
        raise ParseError(r["source"], r["lineno"], reason, r["message"])


def _rank_tags(text: str) -> dict[str, int]:
    return {t.lower(): int(n) for t, n in _RANK.findall(text)}
