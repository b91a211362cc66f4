"""Server launches in an SGLang log: one per ``server_args=`` dump, with its startup facts.

A launch is its ``server_args`` dump (read without ``eval`` by ``server_args``) and the
startup facts each scheduler rank prints after it (weights, KV pool, CUDA graphs, the
``max_total_num_tokens=...`` summary; see ``startup``). Versions before 0.2 print no dump:
then the startup facts alone mark the one launch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from toolkit.load.sglang.server_args import ServerArgsDump, ServerArgsError, parse_server_args
from toolkit.load.sglang.startup import startup_facts
from toolkit.schema.sglang import LAUNCHES, RANK_TAGS, STARTUP

__all__ = [
    "NO_DUMP",
    "Launch",
    "launch_table",
    "launches_from",
    "parse_dump",
    "rejoined_dump",
    "startup_table",
]

NO_DUMP = "no server_args dump printed"

# Finds a dump split over several lines from the lines that follow it: (source, lineno, cut).
Rejoin = Callable[[str, int, ServerArgsDump], ServerArgsDump]


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


def launches_from(dumps: pl.DataFrame, startup: pl.DataFrame, rejoin: Rejoin) -> list[Launch]:
    """One ``Launch`` per dump line (``source``, ``lineno``, ``ts``, ``message``), in order.

    ``startup`` is the ``STARTUP`` table, whose ``launch`` numbers the dumps in this order; a
    dump cut by a log wrapper is handed to ``rejoin`` to be joined back.
    """
    if startup.filter(pl.col("launch") == 0).height and not dumps.height:
        # Versions before 0.2 print no dump: the startup facts alone mark the launch.
        first = startup.row(0, named=True)
        dumps = pl.DataFrame(
            [{**first, "_order": 0, "message": None}], schema_overrides={"message": pl.String}
        ).select(dumps.columns)
    out = []
    for i, row in enumerate(dumps.iter_rows(named=True)):
        parsed = parse_dump(row["message"])
        if not parsed.complete and row["message"] is not None:
            parsed = rejoin(row["source"], row["lineno"], parsed)
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


def rejoined_dump(following: pl.DataFrame, lineno: int, cut: ServerArgsDump) -> ServerArgsDump:
    """A dump a wrapper split over several lines (Kubernetes ``P`` records, journald's
    ``LineMax``), joined back from the unprefixed lines that follow it.

    ``following`` holds ``lineno``, ``has_prefix`` and ``message`` of the dump's line and the
    lines after it, in file order; ``cut`` is returned when no join parses completely.
    """
    text = None
    for r in following.iter_rows(named=True):
        if r["lineno"] == lineno:
            text = r["message"]
            continue
        if r["has_prefix"] or text is None:
            break
        text += r["message"] or ""
        joined = parse_dump(text)
        if joined.complete:
            note = f"joined from lines {lineno}-{r['lineno']} (split by the log wrapper)"
            return ServerArgsDump(joined.args, True, (*joined.problems, note), joined.style)
    return cut


def launch_table(launches: list[Launch]) -> pl.DataFrame:
    """The launches as a table (``LAUNCHES``): one row each, key parallel settings as columns."""
    rows = []
    for launch in launches:
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


def startup_table(lines: pl.DataFrame) -> pl.DataFrame:
    """Startup facts per rank, long form (``STARTUP``), from the ``startup`` and
    ``server_args`` lines of the logs in file order (with ``_order`` numbering the files).

    A fact belongs to the launch whose ``server_args`` dump precedes it in its own file.
    """
    dumps = lines.filter(pl.col("kind") == "server_args")
    # Launches are numbered in the order their dumps are listed (one clock across files).
    index = {(src, n): i for i, (src, n) in enumerate(dumps.select("source", "lineno").rows())}
    rows = []
    current: dict[str, int] = {}
    for r in lines.sort("_order", "lineno").iter_rows(named=True):
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


def parse_dump(message: str | None) -> ServerArgsDump:
    """A ``server_args=`` message read into a dump; problems recorded, never raised."""
    if message is None:
        return ServerArgsDump({}, False, (NO_DUMP,))
    try:
        return parse_server_args(message.removeprefix("server_args="))
    except ServerArgsError as e:
        return ServerArgsDump({}, False, (str(e),))


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
