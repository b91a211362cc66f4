"""The configuration in force over time: the launch's arguments, then each runtime change.

A launch's ``server_args`` dump says what it started with; ``POST /set_internal_state`` can
change some arguments later (``pp_max_micro_batch_size`` is the usual one, for A/B tests
without a restart). Two witnesses of a change: the log's own lines
(``SGLangLog.overrides``) and ``/server_info`` answers taken during the run
(``load_server_info``). Both become one list of changes on the log's clock, from which the
value in force at any moment, and during each benchmark phase, follows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import polars as pl

from toolkit.analyze.config import INTENDED, perf_group
from toolkit.schema import Column, schema_of

__all__ = [
    "CHANGES",
    "IN_FORCE",
    "REFUSED_NOTE",
    "config_changes",
    "config_in_force",
    "in_force_at",
    "runtime_misses",
]

CHANGE_COLUMNS: tuple[Column, ...] = (
    Column("ts", pl.Datetime("ms"), "when the change was logged or first seen"),
    Column("key", pl.String(), "argument"),
    Column("value", pl.String(), "value asked for, as JSON text"),
    Column("status", pl.String(), "`set` (in force from `ts`) or `refused` (nothing changed)"),
    Column("source", pl.String(), "witness: `log line N` or `server_info`"),
    Column("note", pl.String(), "why it was refused"),
)
IN_FORCE_COLUMNS: tuple[Column, ...] = (
    Column("phase", pl.Int64(), "benchmark phase"),
    Column("key", pl.String(), "an argument changed at runtime"),
    Column("launched", pl.String(), "its value in the launch's dump, as JSON text"),
    Column("at_start", pl.String(), "value in force when the phase started"),
    Column("at_end", pl.String(), "value in force when it ended"),
)
CHANGES = schema_of(CHANGE_COLUMNS)
REFUSED_NOTE = "runtime change refused"
"""How the note of a refused runtime change starts, in ``runtime_misses``."""
IN_FORCE = schema_of(IN_FORCE_COLUMNS)


def config_changes(
    launch_args: Mapping[str, Any],
    overrides: pl.DataFrame | None,
    server_info: pl.DataFrame | None,
) -> pl.DataFrame:
    """Every runtime change of one launch, ranks collapsed, in time order (``CHANGES``).

    ``overrides`` are the launch's rows of ``SGLangLog.overrides``; a change every rank logs
    is one change. ``server_info`` answers add a change where an argument's value differs
    from the one in force before (the first answer is compared with the launch's dump; an
    argument the dump lacks is no change).
    """
    rows: list[dict[str, Any]] = []
    if overrides is not None and overrides.height:
        logged = overrides.filter(pl.col("status").is_in(["set", "refused"]))
        logged = logged.unique(["ts", "key", "value", "status"], keep="first", maintain_order=True)
        rows += [
            {
                "ts": r["ts"],
                "key": r["key"],
                "value": r["value"],
                "status": r["status"],
                "source": f"log line {r['lineno']}",
                "note": r["note"] if r["status"] == "refused" else None,
            }
            for r in logged.iter_rows(named=True)
        ]
    if server_info is not None and server_info.height:
        known = {k: json.dumps(v, default=str) for k, v in launch_args.items()}
        timed = server_info.filter(pl.col("ts").is_not_null()).sort("ts", maintain_order=True)
        for r in timed.iter_rows(named=True):
            before = known.get(r["key"])
            known[r["key"]] = r["value"]
            if before is None or _same(before, r["value"]):
                continue
            seen = any(
                x["key"] == r["key"] and x["status"] == "set" and _same(x["value"], r["value"])
                for x in rows
            )
            if not seen:
                rows.append(
                    {
                        "ts": r["ts"],
                        "key": r["key"],
                        "value": r["value"],
                        "status": "set",
                        "source": "server_info",
                        "note": None,
                    }
                )
    table = pl.DataFrame(rows, schema=CHANGES, orient="row")
    return table.sort("ts", nulls_last=True, maintain_order=True)


def in_force_at(
    launch_args: Mapping[str, Any], changes: pl.DataFrame, at: datetime | None
) -> dict[str, Any]:
    """The arguments in force at ``at``: the launch's, with every change set by then (a
    change without a time counts only when ``at`` is None, meaning "after the run")."""
    args = dict(launch_args)
    for r in changes.filter(pl.col("status") == "set").iter_rows(named=True):
        if at is None or (r["ts"] is not None and r["ts"] <= at):
            args[r["key"]] = json.loads(r["value"])
    return args


def config_in_force(
    launch_args: Mapping[str, Any], changes: pl.DataFrame, phases: pl.DataFrame
) -> pl.DataFrame:
    """For each phase and each argument changed at runtime: its launch value and the values
    in force at the phase's start and end (``IN_FORCE``); empty when nothing changed."""
    keys = changes.filter(pl.col("status") == "set")["key"].unique(maintain_order=True)
    rows: list[dict[str, Any]] = []
    if keys.len() and phases.height:
        for p in phases.iter_rows(named=True):
            start = in_force_at(launch_args, changes, p["start"])
            end = in_force_at(launch_args, changes, p["end"])
            for key in keys:
                rows.append(
                    {
                        "phase": p["phase"],
                        "key": key,
                        "launched": _text(launch_args, key),
                        "at_start": _text(start, key),
                        "at_end": _text(end, key),
                    }
                )
    return pl.DataFrame(rows, schema=IN_FORCE, orient="row")


def runtime_misses(
    intended: pl.DataFrame | None,
    launch_args: Mapping[str, Any],
    changes: pl.DataFrame,
    phases: pl.DataFrame,
) -> pl.DataFrame:
    """What the run asked for at runtime or at launch that was not in force while it was
    measured, shaped like ``intended_vs_effective`` (``INTENDED``, ``applied`` false):

    * a refused runtime change (``effective`` is the value in force when it was refused),
      unless a change of the same argument took effect after it and before the first phase;
    * a launch flag that took effect, then a runtime change replaced it before or during a
      phase (``effective`` is the value in force then).
    """
    rows: list[dict[str, Any]] = []
    first_start = phases["start"].min() if phases.height else None
    for r in changes.filter(pl.col("status") == "refused").iter_rows(named=True):
        if _retried(changes, r, first_start):
            continue
        rows.append(
            {
                "flag": r["key"],
                "group": perf_group(r["key"]),
                "intended": r["value"],
                "effective": _text(in_force_at(launch_args, changes, r["ts"]), r["key"]),
                "applied": False,
                "note": f"{REFUSED_NOTE}{_at(r['ts'])} ({r['note'] or 'refused'}; {r['source']})",
            }
        )
    taken = intended.filter(pl.col("applied") == True) if intended is not None else None  # noqa: E712
    in_force = config_in_force(launch_args, changes, phases)
    if taken is not None and taken.height and in_force.height:
        for t in taken.iter_rows(named=True):
            during = in_force.filter(pl.col("key") == t["flag"])
            values = [v for v in (*during["at_start"], *during["at_end"]) if v is not None]
            other = next((v for v in values if not _same(v, t["intended"])), None)
            if other is None:
                continue
            change = changes.filter((pl.col("key") == t["flag"]) & (pl.col("status") == "set"))
            first = change.row(0, named=True)
            rows.append(
                t
                | {
                    "effective": other,
                    "applied": False,
                    "note": f"taken at launch, changed at runtime{_at(first['ts'])} "
                    f"({first['source']})",
                }
            )
    return pl.DataFrame(rows, schema=INTENDED, orient="row")


def _retried(changes: pl.DataFrame, refused: dict[str, Any], first_start: Any) -> bool:
    """A change of the refused argument took effect after the refusal, before any phase."""
    if refused["ts"] is None or first_start is None:
        return False
    later = changes.filter(
        (pl.col("key") == refused["key"])
        & (pl.col("status") == "set")
        & (pl.col("ts") > refused["ts"])
        & (pl.col("ts") <= first_start)
    )
    return later.height > 0


def _at(ts: datetime | None) -> str:
    return f" at {ts:%H:%M:%S}" if ts is not None else ""


def _text(args: Mapping[str, Any], key: str) -> str | None:
    return json.dumps(args[key], default=str) if key in args else None


def _same(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b
