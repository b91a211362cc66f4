"""One label, one server: runs that state different servers are kept apart, an unstated fact
is no difference, and runs that state nothing are told apart by their folder."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.analyze.servers import split_servers
from toolkit.schema.bench import RUNS


def _runs(*rows: dict[str, Any]) -> pl.DataFrame:
    full = [
        {name: None for name in RUNS} | {"label": "TP8", "run": i, "entry": 0} | row
        for i, row in enumerate(rows)
    ]
    return pl.DataFrame(full, schema=RUNS, orient="row")


def test_different_models_under_one_label_are_split() -> None:
    runs, notes = split_servers(
        _runs(
            {"source": "a/r.jsonl", "model": "/m/Llama-3-70B", "tp": 8},
            {"source": "b/r.jsonl", "model": "/m/Kimi-K2", "tp": 8},
            {"source": "c/r.log", "tp": 8},  # states no model: no difference from the first
        )
    )
    assert runs["label"].to_list() == ["TP8 (Llama-3-70B)", "TP8 (Kimi-K2)", "TP8 (Llama-3-70B)"]
    (note,) = notes
    assert note["how"] == "split" and note["labels"] == ["TP8 (Llama-3-70B)", "TP8 (Kimi-K2)"]


def test_runs_that_state_nothing_are_told_apart_by_folder() -> None:
    same, notes = split_servers(
        _runs(
            {"source": "x/a.log", "label": "unknown"},
            {"source": "x/b.log", "label": "unknown"},
        )
    )
    assert same["label"].unique().to_list() == ["unknown"]
    assert [n["how"] for n in notes] == ["guessed"]  # grouped on a guess, and said so
    apart, _ = split_servers(
        _runs(
            {"source": "x/a.log", "label": "unknown"},
            {"source": "y/a.log", "label": "unknown"},
        )
    )
    assert apart["label"].to_list() == ["unknown (x)", "unknown (y)"]


def test_one_server_is_left_as_it_is() -> None:
    runs = _runs(
        {"source": "pp8/bench.jsonl", "label": "PP8", "pp": 8, "tp": 1, "concurrency": 1},
        {"source": "pp8/bench.jsonl", "label": "PP8", "pp": 8, "tp": 1, "concurrency": 8},
    )
    out, notes = split_servers(runs)
    assert out.equals(runs) and notes == []
