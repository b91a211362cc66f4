"""Every fixture log (one per SGLang version profile and wrapper) against its expected values.

``tests/data/sglang/expected.json`` was written from the format notes independently of the
loader; see ``tests/data/sglang/README.md`` for its conventions.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit import load_sglang_log
from toolkit.load.sglang.log import NO_DUMP, SGLangLog
from toolkit.load.sglang.server_args import parse_server_args
from toolkit.schema.sglang import BATCH_FIELDS

FIXTURES = TEST_DATA / "sglang"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())
FIELD_COLUMNS = {f.column for f in BATCH_FIELDS}
# The manifest names facts as SGLang prints them; the loader adds units.
FACT_NAMES = {
    "available_gpu_mem": "available_gpu_mem_gb",
    "available_cpu_mem": "available_gpu_mem_gb",
}


@cache
def _log(name: str) -> SGLangLog:
    return load_sglang_log(FIXTURES / name, cache=False)


def _same(got: object, want: object) -> bool:
    if want == "inf":
        return got == math.inf
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-9)
    return got == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_line_is_accounted_for(name: str) -> None:
    log, want = _log(name), EXPECTED[name]
    assert log.events.height == want["lines"]
    assert log.events.get_column("lineno").to_list() == list(range(1, want["lines"] + 1))
    cov = log.coverage()
    assert sum(cov["counts"].values()) == want["lines"]
    assert cov["incomplete_batches"] == want["incomplete_batches"]
    if name != "bad-input.log":
        assert cov["unreadable"] == 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts(name: str) -> None:
    log, want = _log(name), EXPECTED[name]
    typed = log.batches.filter(pl.col("complete"))
    for kind in ("decode", "prefill"):
        assert typed.filter(pl.col("kind") == kind).height == want["counts"][kind], kind
    assert log.http.height == want["counts"]["http"]
    dumps = [la for la in log.launches if NO_DUMP not in la.problems]
    assert len(dumps) == want["counts"]["launches"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_batch_lines_are_fully_typed(name: str) -> None:
    log, want = _log(name), EXPECTED[name]
    rows = {r["lineno"]: r for r in log.batches.iter_rows(named=True)}
    for expected in want["batches"]:
        row = rows[expected["lineno"]]
        assert row["complete"], expected["lineno"]
        assert row["extra"] is None, (expected["lineno"], row["extra"])
        for key, value in expected.items():
            got = row[key]
            if key == "ts":
                got = None if got is None else _stamp(got)
            elif value is None and key in FIELD_COLUMNS:  # printed as nan
                assert got is not None and math.isnan(got), (expected["lineno"], key)
                continue
            assert _same(got, value), (name, expected["lineno"], key, got, value)
        for column in FIELD_COLUMNS - set(expected):
            assert row[column] is None, (name, expected["lineno"], column, row[column])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_launches_and_startup_facts(name: str) -> None:
    log, want = _log(name), EXPECTED[name]
    launches = {la.lineno: la for la in log.launches}
    for expected in want["launches"]:
        if expected["lineno"] is None:  # a version that prints no dump
            (launch,) = log.launches
            assert launch.server_args == {}
        else:
            launch = launches[expected["lineno"]]
            assert launch.complete == expected["complete"], launch.problems
            for key, value in expected["server_args"].items():
                got = launch.server_args.get(key)
                if isinstance(got, dict) and isinstance(value, str):  # a nested dataclass repr
                    value = parse_server_args(f"ServerArgs(x={value})").args["x"]
                assert _same(got, value), (key, got, value)
        facts = launch.facts()
        for fact, value in expected["startup"].items():
            got = facts.get(FACT_NAMES.get(fact, fact))
            if isinstance(got, dict):  # differs by rank: the manifest names the first one
                got = next(iter(got.values()))
            assert _same(got, value), (fact, got, value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_http_lines(name: str) -> None:
    log, want = _log(name), EXPECTED[name]
    rows = {r["lineno"]: r for r in log.http.iter_rows(named=True)}
    for expected in want["http"]:
        row = rows[expected["lineno"]]
        for key in ("client", "method", "path", "status"):
            assert row[key] == expected[key], (key, row[key])
        if expected.get("ts"):
            assert _stamp(row["ts"]) == expected["ts"]


def test_multinode_files_merge_on_one_clock() -> None:
    log = load_sglang_log([FIXTURES / "multinode-a.log", FIXTURES / "multinode-b.log"], cache=False)
    decode = log.batches.filter(pl.col("kind") == "decode")
    assert sorted(decode.get_column("pp").unique().to_list()) == list(range(8))
    ts = decode.get_column("ts")
    assert ts.is_sorted()
    assert log.batches.get_column("source").n_unique() == 2


def test_wrappers_are_recognized() -> None:
    wrappers = {name: _log(name).sources[0].wrapper for name in EXPECTED}
    assert wrappers["journald-short.log"] == "journald-short"
    assert wrappers["journald-short-iso.log"] == "journald-short-iso"
    assert wrappers["journald-short-precise.log"] == "journald-short-precise"
    assert wrappers["docker-timestamps.log"] == "timestamped"
    assert wrappers["kubectl-timestamps.log"] == "timestamped"
    assert wrappers["k8s-cri.log"] == "kubernetes-cri"
    assert wrappers["compose.log"] == "compose"
    assert wrappers["parent-logger.log"] == "python-logger"
    assert wrappers["ray.log"] == "ray"
    assert wrappers["v0.5.23-pp8.log"] == "raw"


def test_journald_fields_and_clock() -> None:
    events = _log("journald-short.log").events
    decode = events.filter(pl.col("kind") == "decode")
    assert (
        decode.get_column("host").unique().to_list() == ["gpu-node-1"]
        or decode.get_column("host").null_count() == 0
    )
    assert decode.get_column("pid").null_count() == 0
    # journald's own time and SGLang's agree on these lines
    both = events.filter(pl.col("wrapper_ts").is_not_null() & pl.col("ts").is_not_null())
    gap = both.select((pl.col("ts") - pl.col("wrapper_ts")).abs().max()).item()
    assert gap <= timedelta(seconds=2)


def test_cri_time_zone_offset_is_learned() -> None:
    log = _log("k8s-cri.log")
    assert log.sources[0].clock_offset_s == -7200.0
    events = log.events
    unprefixed = events.filter(pl.col("wrapper_ts").is_not_null() & (pl.col("kind") == "http"))
    stream = events.filter(pl.col("kind") == "http").get_column("stream").unique().to_list()
    assert stream == ["stdout"]
    assert unprefixed.height > 0


def test_tracebacks_are_grouped() -> None:
    errors = _log("messy.log").errors
    tracebacks = errors.filter(pl.col("level") == "traceback")
    assert tracebacks.height == 1
    record = tracebacks.row(0, named=True)
    assert record["end_lineno"] > record["lineno"]
    assert "Error" in record["summary"] or "Exception" in record["summary"]
    assert errors.filter(pl.col("summary").str.contains("sigquit")).height == 1


def _stamp(value: datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + f".{value.microsecond // 1000:03d}" if value.microsecond else text


def test_multinode_startup_facts_belong_to_their_own_file_launch() -> None:
    log = load_sglang_log([FIXTURES / "multinode-a.log", FIXTURES / "multinode-b.log"], cache=False)
    assert len(log.launches) == 2
    for launch in log.launches:
        sources = set(launch.startup.get_column("source"))
        assert sources == {launch.source}, (launch.source, sources)


_DECODE = (
    "[2025-05-25 21:40:{s:02d} PP3] Decode batch, #running-req: 4, #token: 812, "
    "token usage: 0.01, cuda graph: True, gen throughput (token/s): 88.10, #queue-req: 0"
)
_NON_ASCII_WRAPPERS = {
    "journald-short": "May 25 21:40:{s:02d} nodé sglang-ü[85614]: ",
    "compose": "sglang-ü-1  | ",
    "python-logger": "2025-05-25 21:40:{s:02d},531 - sglang.serveur-é - INFO - ",
    "ray": "(SchedulerÄctor pid=1234, ip=10.0.0.1) ",
}


@pytest.mark.parametrize("wrapper", sorted(_NON_ASCII_WRAPPERS))
def test_non_ascii_wrapper_text_keeps_the_prefix(wrapper: str, tmp_path) -> None:
    """A wrapper header holding non-ASCII characters is cut by bytes, not characters: the
    SGLang prefix after it (time, rank) is still found."""
    head = _NON_ASCII_WRAPPERS[wrapper]
    path = tmp_path / "wrapped.log"
    path.write_text("".join(head.format(s=s) + _DECODE.format(s=s) + "\n" for s in range(6)))
    log = load_sglang_log(path, cache=False)
    assert log.sources[0].wrapper == wrapper
    batches = log.batches
    assert batches.height == 6
    assert batches.get_column("pp").to_list() == [3] * 6
    assert batches.get_column("running_req").to_list() == [4] * 6
    assert batches.get_column("ts").dt.second().to_list() == list(range(6))
    messages = log.events.get_column("message")
    assert messages.str.starts_with("Decode batch, #running-req: 4").all()
