"""``ppscope model``'s body: the fit, the expected-vs-observed table, ``--json``, ``--what-if``."""

from __future__ import annotations

import io
import json
import math

import polars as pl
import pytest

from toolkit.analyze.model import INCIDENT_HARDWARE, KIMI_K2, ObservedPoint, incident_points
from toolkit.cli.model import parse_what_if, run_model
from toolkit.errors import ToolkitError
from toolkit.schema.jsonable import jsonable

INCIDENT = {"model": KIMI_K2, "prior": INCIDENT_HARDWARE}
"""The sample incident's model and machine, given explicitly: the model never assumes them."""
POINT_KEYS = [
    "label",
    "concurrency",
    "observed_tok_s",
    "expected_tok_s",
    "residual_pct",
    "active_slots",
    "gpu_idle_share",
]


def _run(points, what_if=None, as_json=False) -> str:
    out = io.StringIO()
    assert run_model(points, what_if or {}, as_json, out=out, high_load=True, **INCIDENT) == 0
    return out.getvalue()


def test_json_has_the_params_and_one_object_per_point():
    doc = json.loads(_run(incident_points(), as_json=True))
    assert set(doc) == {"fits", "points"}
    (params,) = doc["fits"]
    assert params["runs"] == ["PP8", "TP8"]
    assert params["hbm_tb_s"] == pytest.approx(1.50, abs=0.02)
    assert params["fitted"] == ["allreduce_s", "hop_s", "hbm_bytes_s"]
    assert params["sources"]["overhead_s"] == "prior"
    assert params["sources"]["hop_s"].startswith("fitted (PP8 c=1, TP8 c=1, TP8 c=32")
    assert [list(p) for p in doc["points"]] == [POINT_KEYS] * 4
    pp32 = doc["points"][2]
    assert (pp32["label"], pp32["concurrency"], pp32["observed_tok_s"]) == ("PP8", 32, 248.1)
    assert pp32["expected_tok_s"] == pytest.approx(417, abs=10)
    assert pp32["residual_pct"] == pytest.approx(-40, abs=3)
    assert pp32["active_slots"] == 4
    assert 0.45 <= pp32["gpu_idle_share"] <= 0.56


def test_json_with_a_what_if_adds_the_prediction_under_the_change():
    doc = json.loads(_run(incident_points(), {"pp_max_micro_batch_size": 4}, as_json=True))
    assert doc["what_if"]["changes"] == {"pp_max_micro_batch_size": 4}
    pp32 = doc["what_if"]["points"][2]
    assert 560 <= pp32["what_if_tok_s"] <= 630
    assert pp32["occupancy"] == "8×4"


def test_the_text_table_reads_like_section_5_4():
    text = _run(incident_points())
    assert "fit from 3 point(s): PP8 c=1, TP8 c=1, TP8 c=32" in text
    assert "1.50 TB/s" in text and "prior" in text
    row = next(line for line in text.splitlines() if line.startswith("PP8") and " 32 " in line)
    assert "248.1" in row and "417." in row and "-40." in row and "4×8" in row
    assert "+0.0 %" in text and "-0.0 %" not in text
    assert "52." in text and "ms per round unexplained" in text


def test_the_text_what_if_prints_the_prediction_under_the_change():
    text = _run(incident_points(), parse_what_if(["pp_max_micro_batch_size=4"]))
    block = text.split("what-if pp_max_micro_batch_size=4:")[1]
    row = next(line for line in block.splitlines() if line.startswith("PP8") and "32" in line)
    assert "8×4" in row and "56" in row  # ≈ 564 tok/s, TPOT ≈ 57 ms
    concurrency = _run(incident_points(), {"concurrency": 64})
    assert "32→64" in concurrency


def test_points_may_be_dataclasses_or_mappings():
    points = [
        ObservedPoint("PP8", 1, 8, 1, 34.3, pp_async_batch_depth=8),
        {"label": "PP8", "tp": 1, "pp": 8, "pp_async_batch_depth": 8, "concurrency": 32,
         "output_tok_s": 248.1},
    ]  # fmt: skip
    doc = json.loads(_run(points, as_json=True))
    assert [p["concurrency"] for p in doc["points"]] == [1, 32]


def test_bad_input_is_a_toolkit_error():
    with pytest.raises(ToolkitError, match="unknown setting 'bogus'"):
        run_model(incident_points(), {"bogus": 1}, False, out=io.StringIO(), **INCIDENT)
    with pytest.raises(ToolkitError, match="no observed points"):
        run_model(pl.DataFrame(), {}, True, out=io.StringIO(), **INCIDENT)


def test_parse_what_if_reads_sglang_spellings():
    got = parse_what_if(["pp_max_micro_batch_size=4", "--pp-async-batch-depth=0", "x=auto"])
    assert got == {"pp_max_micro_batch_size": 4, "pp_async_batch_depth": 0, "x": None}
    for bad in ["pp_async_batch_depth", "=3", "concurrency=lots"]:
        with pytest.raises(ToolkitError, match="what-if"):
            parse_what_if([bad])


def test_non_finite_numbers_become_null():
    assert jsonable({"a": [math.nan, math.inf, 1.5], "b": (-math.inf,)}) == {
        "a": [None, None, 1.5],
        "b": [None],
    }
    assert json.dumps(jsonable({"x": math.nan}), allow_nan=False) == '{"x": null}'
