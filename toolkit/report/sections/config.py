"""ServerArgs and the values SGLang derived from them, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from toolkit.analyze.config import config_diff as diff_launches
from toolkit.chart.config import config_diff_chart
from toolkit.report.context import redacting
from toolkit.report.redact import REDACTED, is_secret_key, redact_text
from toolkit.report.runs import RunSet
from toolkit.report.view import (
    Table,
    View,
    note,
)

__all__ = ["config_diff"]


def _redacted_diff(diff: pl.DataFrame) -> pl.DataFrame:
    """The diff with secret settings' values replaced and every value's text redacted."""
    if not redacting() or not diff.height:
        return diff
    secret = pl.col("key").map_elements(is_secret_key, return_dtype=pl.Boolean)
    value = pl.col("value").map_elements(redact_text, return_dtype=pl.String)
    shown = pl.col("value").is_not_null() & (pl.col("value") != "null")
    return diff.with_columns(
        value=pl.when(secret & shown).then(pl.lit(f'"{REDACTED}"')).otherwise(value)
    )


def config_diff(
    runs: RunSet,
    *,
    labels: Sequence[str] | None = None,
    only_different: bool = True,
    contains: str = "",
) -> View:
    """ServerArgs and the values SGLang derived from them, side by side (``analyze.config``).

    Parameters
    ----------
    labels
        Runs to compare (default all).
    only_different
        Only the settings the runs disagree on; else every performance setting too.
    contains
        Keep settings whose name contains this text.
    """
    chosen = [runs.get(lab) for lab in labels] if labels else list(runs)
    with_launch = [r for r in chosen if r.launch is not None]
    missing = [runs.label_of(r) for r in chosen if r.launch is None]
    items: list[Any] = []
    if missing:
        items.append(note(f"No ServerArgs dump for {', '.join(missing)}."))
    if not with_launch:
        items.append(note("No ServerArgs dump: nothing to compare."))
        return View("config", items)
    names = [runs.label_of(r) for r in with_launch]
    diff = diff_launches(
        *[r.launch for r in with_launch],
        labels=names,
        only_changed=only_different and len(with_launch) > 1,
    )
    compared = diff["key"].n_unique()
    if contains:
        diff = diff.filter(pl.col("key").str.contains(contains.strip(), literal=True))
    diff = _redacted_diff(diff)
    shown = diff.select("key", "group", "run", "value")
    if not diff.height:
        if contains and compared:
            scope = "that differ" if only_different and len(with_launch) > 1 else "shown"
            text = f"No setting name contains {contains.strip()!r} among the {compared} {scope}" + (
                ": untick 'only differences' to search every setting." if scope != "shown" else "."
            )
        else:
            text = "No setting differs between these runs."
        items.append(note(text))
        return View("config", items, {"config_diff": shown})
    items.append(config_diff_chart(diff))
    changes = _runtime_changes(runs, with_launch)
    if changes.height:
        items.append(
            note(
                "Changed while the server ran (/set_internal_state): the dumps above are the "
                "launches' values; these took effect (or were refused) later."
            )
        )
        items.append(Table(changes, key=("run", "time", "key", "value", "status")))
    return View("config", items, {"config_diff": shown, "runtime_changes": changes})


def _runtime_changes(runs: RunSet, chosen: Sequence[Any]) -> pl.DataFrame:
    """Every chosen run's runtime changes, values redacted like the diff's."""
    frames = []
    for run in chosen:
        changes = runs.analysis(run).config_changes
        if changes.height:
            frames.append(changes.with_columns(run=pl.lit(runs.label_of(run))))
    if not frames:
        return pl.DataFrame(schema={"run": pl.String})
    table = pl.concat(frames).with_columns(time=pl.col("ts").dt.strftime("%H:%M:%S"))
    table = _redacted_diff(table).select("run", "time", "key", "value", "status", "source", "note")
    return table
