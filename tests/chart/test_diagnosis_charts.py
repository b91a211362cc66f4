"""Charts of the diagnosis analyses, tested as data through to_dict()."""

from __future__ import annotations

from functools import cache

from helpers import TEST_DATA

from toolkit.analyze.config import config_diff
from toolkit.analyze.occupancy import peak_headline
from toolkit.chart.config import config_diff_chart
from toolkit.chart.cudagraph import graph_coverage_chart
from toolkit.chart.occupancy import occupancy_chart
from toolkit.diagnose import RunAnalysis
from toolkit.load.run import load_run

DIAG = TEST_DATA / "diagnose"


@cache
def ctx(name: str) -> RunAnalysis:
    return RunAnalysis(load_run(DIAG / name, cache=False))


def _datasets(spec: dict) -> list[list[dict]]:
    return [rows for rows in spec.get("datasets", {}).values() if rows]


def _columns(spec: dict) -> list[set[str]]:
    return [set(rows[0]) for rows in _datasets(spec)]


def test_occupancy_chart() -> None:
    occupancy = ctx("pp8-underfilled").occupancy
    spec = occupancy_chart(occupancy, headline=peak_headline(occupancy)).to_dict()
    upper, lower = spec["vconcat"]
    assert upper["title"]["text"].startswith("At peak ~32 requests run in ~4 of 16 slots")
    assert upper["title"]["text"].endswith("#running-req shows one slot: 8")
    series = {r["series"] for rows in _datasets(spec) if "series" in rows[0] for r in rows}
    assert series == {"offered (benchmark)", "running (from #token)", "#running-req (one slot)"}
    refs = next(rows for rows in _datasets(spec) if "name" in rows[0])
    assert {r["name"]: r["value"] for r in refs} == {"stages": 8, "slots": 16}
    assert [layer["mark"]["type"] for layer in lower["layer"]] == ["line", "rule", "text"]


def test_config_diff_chart() -> None:
    a, b = ctx("tp8"), ctx("pp8-underfilled")
    diff = config_diff(a.launch, b.launch, labels=["TP8", "PP8"], only_changed=False)
    spec = config_diff_chart(diff).to_dict()
    assert spec["title"]["text"].endswith("differ between TP8 and PP8")
    shade, text = spec["layer"]
    assert shade["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert text["encoding"]["x"]["sort"] == ["TP8", "PP8", "meaning"]
    keys = text["encoding"]["y"]["sort"]
    assert keys[:2] == ["tp_size", "pp_size"] and keys[-1] == "overlap_schedule"
    assert {"key", "column"} in _columns(spec) and {"key", "column", "text"} in _columns(spec)


def test_graph_coverage_chart() -> None:
    run = ctx("tp8-eager")
    spec = graph_coverage_chart(run.coverage, run.graphs["max_captured"]).to_dict()
    assert spec["title"]["text"] == "100% of decode lines ran eagerly"
    assert "up to batch size 32" in spec["title"]["subtitle"]
    assert spec["encoding"]["x"]["field"] == "running_req"
    (rows,) = _datasets(spec)
    assert rows == [{"running_req": 64, "captured": False, "flag": "eager", "lines": 14}]
