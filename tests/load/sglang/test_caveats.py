"""Logging quirks stated as caveats: doubled prefill lines, mixed wrappers, time-only stamps,
and the batch lines of mixed chunked prefill and speculative decoding."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
from helpers import TEST_DATA

from toolkit.diagnose.caveats import run_caveats
from toolkit.load.sglang.caveats import log_caveats
from toolkit.load.sglang.log import load_sglang_log
from toolkit.run_analysis import RunAnalysis

DATA = TEST_DATA / "sglang"


def _kinds(name: str) -> dict[str, object]:
    log = load_sglang_log(DATA / name, cache=False)
    return {c.kind: c for c in log_caveats(log)}


def test_doubled_prefill_lines_are_counted_and_lone_repeats_are_not() -> None:
    log = load_sglang_log(DATA / "overlap-doubled-prefill.log", cache=False)
    assert log.batches.filter(pl.col("kind") == "prefill").height == 10
    (doubled,) = log_caveats(log)
    assert doubled.kind == "doubled-prefill" and doubled.affects == "prefill_count"
    assert doubled.count == 4  # the pair one second apart is two batches
    assert "#18570" in doubled.text()
    (entry,) = log.summary()["files"]
    assert entry["caveats"] == [doubled.to_dict()]


def test_under_pp_each_stage_printing_the_batch_is_no_double() -> None:
    assert "doubled-prefill" not in _kinds("v0.5.23-pp8.log")
    assert "doubled-prefill" not in _kinds("k8s-cri.log")


def test_wrapped_lines_mixed_with_unwrapped_and_glued_ones() -> None:
    caveat = _kinds("k8s-cri-mixed.log")["mixed-wrappers"]
    assert caveat.count == 5  # four pasted without the CRI wrapper, one glued behind a bar
    assert "kubernetes-cri" in caveat.text() and "tqdm" in caveat.text()
    assert _kinds("k8s-cri.log") == {}  # wrapped throughout: nothing to say


def test_tqdm_glued_lines_in_a_raw_log() -> None:
    assert _kinds("messy.log")["mixed-wrappers"].count == 3


def test_time_only_stamps() -> None:
    caveat = _kinds("v0.2.15.log")["time-only-stamps"]
    lines = (DATA / "v0.2.15.log").read_text().split("\n")
    assert caveat.count == sum(bool(re.match(r"\[\d\d:\d\d:\d\d[ \]]", ln)) for ln in lines)
    assert "HH:MM:SS" in caveat.text()
    assert "time-only-stamps" not in _kinds("v0.5.23-pp8.log")


def test_speculative_and_mixed_chunk_batch_lines() -> None:
    spec = _kinds("v0.4.3-spec.log")["speculative"]
    assert spec.count == 4
    mean = float(re.search(r"mean (\d+\.\d+)", spec.text()).group(1))  # type: ignore[union-attr]
    assert abs(mean - (3.12 + 2.97 + 3.41 + 2.88) / 4) <= 0.0051  # printed to 2 places
    assert _kinds("v0.2.15.log")["mixed-chunk"].count == 2


def test_pp_speculative_and_mixed_batches_are_typed_and_stated(tmp_path: Path) -> None:
    name = "v0.5.23-pp4-spec-mixed.log"
    log = load_sglang_log(DATA / name, cache=False)
    decode = log.batches.filter(pl.col("kind") == "decode")
    assert decode.height == 12 and decode["complete"].all()
    assert decode["extra"].null_count() == decode.height  # every field known
    assert sorted(set(decode["accept_len"].to_list())) == [2.71, 2.81, 2.91]
    assert sorted(set(decode["accept_rate"].to_list())) == [0.57, 0.6, 0.63]
    mixed = log.batches.filter((pl.col("kind") == "prefill") & (pl.col("running_req") > 0))
    assert mixed["pp"].to_list() == [0, 1, 2, 3]
    # the lines show speculative decoding; only the launch arguments show mixed chunk
    assert set(_kinds(name)) == {"speculative"}
    shutil.copy(DATA / name, tmp_path / "server.log")
    kinds = [c.kind for c in run_caveats(RunAnalysis(tmp_path))]
    assert sorted(kinds) == ["mixed-chunk", "speculative"]
