"""The configuration in force over time, and what a run asked for that was not in force.

The run is ``tests/data/diagnose/pp8-underfilled`` (PP8, launched with
``pp_max_micro_batch_size`` None; its c=1 phase runs 10:06:42 – 10:07:0x, its c=32 phase to
10:07:35) with runtime changes appended to a copy of its log.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
from helpers import TEST_DATA

from toolkit.analyze.runtime_config import (
    REFUSED_NOTE,
    config_changes,
    config_in_force,
    in_force_at,
    runtime_misses,
)
from toolkit.diagnose import RULES, RunAnalysis
from toolkit.load.run import load_run

RUN = TEST_DATA / "diagnose" / "pp8-underfilled"


def _run_with(tmp_path: Path, *lines: str) -> RunAnalysis:
    run = tmp_path / "pp8"
    shutil.copytree(RUN, run)
    with (run / "server.log").open("a") as f:
        f.writelines(line + "\n" for line in lines)
    return RunAnalysis(load_run(run))


def _changes(rows: list[tuple[str, str, object, str]]) -> pl.DataFrame:
    overrides = pl.DataFrame(
        [
            {"ts": datetime.fromisoformat(t), "lineno": i + 1, "key": k, "value": json.dumps(v),
             "status": s, "note": "out of range" if s == "refused" else None}
            for i, (t, k, v, s) in enumerate(rows)
        ]
    )  # fmt: skip
    return config_changes({"pp_max_micro_batch_size": None, "tp_size": 1}, overrides, None)


def test_values_in_force_follow_the_changes() -> None:
    changes = _changes(
        [
            ("2026-05-01 10:00:10", "pp_max_micro_batch_size", 4, "set"),
            ("2026-05-01 10:00:10", "pp_max_micro_batch_size", 4, "set"),  # another rank
            ("2026-05-01 10:00:20", "pp_max_micro_batch_size", 40, "refused"),
            ("2026-05-01 10:00:30", "pp_max_micro_batch_size", 2, "set"),
        ]
    )
    assert changes.height == 3
    launch = {"pp_max_micro_batch_size": None}
    at = datetime.fromisoformat
    assert (
        in_force_at(launch, changes, at("2026-05-01 10:00:05"))["pp_max_micro_batch_size"] is None
    )
    assert in_force_at(launch, changes, at("2026-05-01 10:00:25"))["pp_max_micro_batch_size"] == 4
    assert in_force_at(launch, changes, None)["pp_max_micro_batch_size"] == 2
    phases = pl.DataFrame(
        {"phase": [0, 1], "start": [at("2026-05-01 10:00:00"), at("2026-05-01 10:00:25")],
         "end": [at("2026-05-01 10:00:15"), at("2026-05-01 10:00:40")]}
    )  # fmt: skip
    table = config_in_force(launch, changes, phases)
    assert table.select("phase", "launched", "at_start", "at_end").rows() == [
        (0, "null", "null", "4"),
        (1, "null", "4", "2"),
    ]


def test_server_info_adds_changes_the_log_did_not_print() -> None:
    at = datetime.fromisoformat
    info = pl.DataFrame(
        {"ts": [at("2026-05-01 10:00:00"), at("2026-05-01 10:01:00")],
         "key": ["pp_max_micro_batch_size"] * 2, "value": ["null", "6"]}
    )  # fmt: skip
    changes = config_changes({"pp_max_micro_batch_size": None}, None, info)
    assert changes.select("ts", "value", "source").rows() == [
        (at("2026-05-01 10:01:00"), "6", "server_info")
    ]


def test_a_launch_flag_replaced_at_runtime_was_not_in_force() -> None:
    at = datetime.fromisoformat
    intended = pl.DataFrame(
        {"flag": ["pp_max_micro_batch_size"], "group": ["parallel"], "intended": ["16"],
         "effective": ["16"], "applied": [True], "note": ["logged ServerArgs"]}
    )  # fmt: skip
    overrides = pl.DataFrame(
        {"ts": [at("2026-05-01 10:00:10")], "lineno": [9], "key": ["pp_max_micro_batch_size"],
         "value": ["4"], "status": ["set"], "note": [None]}
    )  # fmt: skip
    launch = {"pp_max_micro_batch_size": 16}
    changes = config_changes(launch, overrides, None)
    phases = pl.DataFrame(
        {"phase": [0], "start": [at("2026-05-01 10:00:20")], "end": [at("2026-05-01 10:01:00")]}
    )
    missed = runtime_misses(intended, launch, changes, phases)
    assert missed.select("flag", "intended", "effective", "applied").rows() == [
        ("pp_max_micro_batch_size", "16", "4", False)
    ]
    assert "changed at runtime at 10:00:10 (log line 9)" in missed["note"][0]


def test_a_refused_change_is_a_config_not_applied_finding(tmp_path: Path) -> None:
    ctx = _run_with(
        tmp_path,
        "[2026-05-01 10:06:30 PP0] Updating pp_max_micro_batch_size to 64 is rejected because "
        "it is out of the valid range [1, 32].",
        "[2026-05-01 10:07:40 PP0] Config updated via context override: "
        "{'pp_max_micro_batch_size': 16}",
    )
    changes = ctx.config_changes
    assert changes.select("key", "value", "status").rows() == [
        ("pp_max_micro_batch_size", "64", "refused"),
        ("pp_max_micro_batch_size", "16", "set"),
    ]
    found = dict(RULES)["config-not-applied"](ctx)
    assert found is not None and found.severity == "high"
    assert found.summary.startswith("A runtime change asks for pp_max_micro_batch_size=64")
    notes = found.evidence["note"].to_list()
    assert notes[0].startswith(f"{REFUSED_NOTE} at 10:06:30")
    assert "the range" in found.remedy


def test_a_refusal_retried_before_the_phases_is_no_finding(tmp_path: Path) -> None:
    ctx = _run_with(
        tmp_path,
        "[2026-05-01 10:06:30 PP0] Updating pp_max_micro_batch_size to 64 is rejected because "
        "it is out of the valid range [1, 32].",
        "[2026-05-01 10:06:31 PP0] Config updated via context override: "
        "{'pp_max_micro_batch_size': 32}",
    )
    assert dict(RULES)["config-not-applied"](ctx) is None
