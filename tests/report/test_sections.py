"""Report sections on a small incident: what each shows, how it degrades, how big it is."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import polars as pl
import pytest
from helpers.report_runs import API_KEY, SCRIPT, make_runs

from toolkit.errors import ToolkitError
from toolkit.report import sections as views
from toolkit.report.display import chart_spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> views.RunSet:
    dirs = make_runs(tmp_path_factory.mktemp("runs"))
    return views.load_runs(",".join(map(str, dirs)), progress=False)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> views.RunSet:
    """A run with nothing but a benchmark: every log and GPU view must degrade to a note."""
    root = tmp_path_factory.mktemp("bare")
    pp8 = make_runs(root)[1]
    for name in ("server.log", "gpu.csv"):
        (pp8 / name).unlink()
    return views.load_runs([pp8], progress=False)


def _spec(chart: alt.TopLevelMixin) -> dict:
    return chart_spec(chart)


def _fields(spec: dict) -> set[str]:
    """Every field name a spec's inline rows carry."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            values = node.get("values")
            if isinstance(values, list) and values and isinstance(values[0], dict):
                found.update(values[0])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


def test_runset(runs: views.RunSet) -> None:
    assert runs.labels == ["TP8", "PP8"]
    assert runs.gpu(runs.get("TP8")) is None
    trace = runs.gpu(runs.get("PP8"))
    assert trace is not None and trace.samples.height == 8 * 150


def test_relative_run_dirs_are_found_from_a_subdirectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_runs(tmp_path / "data")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert views.resolve_run_dir("data/tp8") == Path("../data/tp8")


def test_live_provenance_hashes_runs_found_from_a_subdirectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_runs(tmp_path / "data")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    html = views.provenance_view(views.load_runs("data/tp8,data/pp8", progress=False)).html()
    assert "no input files" not in html and "server.log" in html
    assert "tp8,pp8" in html, "the parameters name the runs relative to the folder holding them"
    assert str(tmp_path) not in html


def test_header(runs: views.RunSet) -> None:
    view = views.header(runs)
    html = view.html()
    assert "ppscope-banner" in html and "PP8" in html and "pcie" in html
    assert [r["run"] for r in view.record["runs"]] == ["TP8", "PP8"]


def test_scaling_records_the_gap(runs: views.RunSet) -> None:
    view = views.scaling(runs)
    gap = view.record["gap"]
    assert [g["leader"] for g in gap] == ["PP8", "TP8"]
    assert view.chart is not None
    assert "2.33× TP8" in json.dumps(_spec(view.chart), ensure_ascii=False)


def test_runs_of_different_models_are_said_to_differ(tmp_path: Path) -> None:
    tp8, pp8 = make_runs(tmp_path)
    assert views.scaling(views.load_runs([tp8, pp8], progress=False)).record["unlike"] == []
    toml = pp8 / "run.toml"
    toml.write_text(toml.read_text() + 'model = "meta-llama/Llama-3.1-70B-Instruct"\n')
    args = (tp8 / "server.log").read_text()
    (tp8 / "server.log").write_text(args.replace("model_path='", "model_path='other/"))
    view = views.scaling(views.load_runs([tp8, pp8], progress=False))
    (sentence,) = view.record["unlike"]
    assert "different models" in sentence and "the gap compares models too" in view.html()


def test_model_and_what_if(runs: views.RunSet) -> None:
    view = views.model(runs)
    points = view.record["model"]["points"]
    assert points.filter(pl.col("label") == "PP8")["residual_pct"].min() < -20
    what = views.what_if(runs, {"pp_max_micro_batch_size": 4})
    pp = what.record["what_if"]["points"].filter(
        (pl.col("label") == "PP8") & (pl.col("base_concurrency") == 32)
    )
    assert pp["occupancy"][0] == "8×4" and pp["change_pct"][0] > 10


def test_stage_timeline_shares_one_dataset(runs: views.RunSet) -> None:
    view = views.stage_timeline(runs)
    spec = _spec(view.chart)
    assert set(spec["data"]["values"][0]) == {"t", "stage", "series", "value", "w"}
    assert all("data" not in sub for sub in spec["vconcat"]), "sub-charts reuse the top dataset"
    assert isinstance(spec["data"]["values"][0]["t"], int), "time as epoch ms"
    stages = view.record["stage_timeline"]["stages"]
    assert stages["stage"].to_list() == [f"PP{i}" for i in range(8)]
    assert stages["util_pct"][7] == stages["util_pct"].max(), "the last stage is the busiest"
    assert any(p.get("select", {}).get("type") == "interval" for p in spec.get("params", []))


def test_stage_timeline_window_and_stages(runs: views.RunSet) -> None:
    view = views.stage_timeline(runs, "PP8", window=(0.0, 1.0), stages=["PP0", "PP7"])
    stages = view.record["stage_timeline"]["stages"]["stage"].to_list()
    assert stages == ["PP0", "PP7"]


@pytest.mark.parametrize("max_points", [100, 1000])
def test_downsampled_to_max_points(runs: views.RunSet, max_points: int) -> None:
    for view in (
        views.stage_timeline(runs, max_points=max_points),
        views.gpu_metrics(runs, max_points=max_points),
        views.kv_pressure(runs, max_points=max_points),
    ):
        rows = _spec(view.chart)["data"]["values"]
        assert len(rows) <= max_points


def test_gpu_metrics_labels_gpus_by_stage(runs: views.RunSet) -> None:
    view = views.gpu_metrics(runs, metric="power_w")
    spec = _spec(view.chart)
    assert _fields(spec) == {"t", "gpu", "value"}, "only the encoded columns are sent"
    gpus = view.record["gpu"]["gpus"]["gpu"].to_list()
    assert gpus[0] == "PP0 (GPU 0)" and len(gpus) == 8
    assert any(p.get("bind") == "legend" for p in spec["params"]), "legend click picks GPUs"


def test_cuda_graphs_and_kv(runs: views.RunSet) -> None:
    graphs = {r["run"]: r for r in views.cuda_graphs(runs).record["cuda_graph"]}
    assert graphs["TP8"]["eager_lines"] == 2 and graphs["PP8"]["eager_lines"] == 0
    kv = {r["run"]: r for r in views.kv_pressure(runs).record["kv"]}
    assert kv["TP8"]["peak_usage"] == pytest.approx(0.19)


def test_config_diff_redacts(runs: views.RunSet) -> None:
    view = views.config_diff(runs, contains="api_key")
    table = view.record["config_diff"]
    assert table["key"].unique().to_list() == ["api_key"]
    assert API_KEY not in json.dumps(_spec(view.chart)) and "[redacted]" in table["value"][0]
    assert views.config_diff(runs, contains="pp_size").record["config_diff"].height == 2


def test_log_excerpts_escape(runs: views.RunSet) -> None:
    html = views.log_excerpts(runs).html()
    assert SCRIPT not in html and "&lt;script&gt;" in html


def test_findings_degrade_or_rank(runs: views.RunSet) -> None:
    view = views.findings(runs)
    assert "findings" in view.record
    if view.record["findings"] is None:
        assert "not part of this build" in view.notes[0]


def test_missing_inputs_become_notes(bare: views.RunSet) -> None:
    assert "No GPU trace" in views.gpu_metrics(bare).notes[0]
    for view in (
        views.stage_timeline(bare),
        views.occupancy(bare),
        views.cuda_graphs(bare),
        views.kv_pressure(bare),
        views.config_diff(bare),
    ):
        assert view.notes and view.chart is None, view.key
    assert views.scaling(bare).chart is not None, "the benchmark alone still charts"


def test_table_html_escapes_and_cuts() -> None:
    frame = pl.DataFrame({"text": [SCRIPT] * 50, "n": [1.5e-14] * 50})
    html = views.table_html(frame, max_rows=10)
    assert SCRIPT not in html and html.count("<tr>") == 11 and "first 10 of 50" in html


# ── forgiving labels, empty results ──────────────────────────────────────────────────────────


def test_labels_match_by_case_or_unique_prefix(runs: views.RunSet) -> None:
    assert runs.label("PP8") == "PP8"
    assert runs.label("tp8") == "TP8"
    assert runs.label("t") == "TP8"
    assert runs.get("pp") is runs.get("PP8")
    with pytest.raises(ToolkitError, match=r"no run labelled 'xx' \(have: 'TP8', 'PP8'\)"):
        runs.label("xx")


def test_an_ambiguous_label_lists_the_matches(tmp_path: Path) -> None:
    dirs = make_runs(tmp_path)
    (dirs[0] / "run.toml").write_text('label = "PP8 tuned"\n')
    runs = views.load_runs(dirs, progress=False)
    assert runs.label("PP8") == "PP8", "an exact label wins over a longer one it starts"
    with pytest.raises(ToolkitError, match="'pp' is ambiguous: it matches 'PP8 tuned', 'PP8'"):
        runs.label("pp")


def test_sections_take_short_labels(runs: views.RunSet) -> None:
    assert views.scaling(runs, "pp8", "tp").record["gap"][0]["a"] == "PP8"
    assert views.stage_timeline(runs, "pp").record["stage_timeline"]["run"] == "PP8"
    same = views.scaling(runs, "PP8", "pp8")
    assert same.record["gap"] is None and "both PP8" in same.notes[0]


def test_empty_filters_say_so(runs: views.RunSet) -> None:
    view = views.config_diff(runs, contains="no_such_setting")
    assert view.chart is None and "No setting name contains &#x27;no_such" in view.notes[0]
    view = views.stage_timeline(runs, "PP8", stages=["PP42"])
    assert view.chart is None and "no stage named PP42" in view.notes[0]


# ── the first screen ─────────────────────────────────────────────────────────────────────────


def test_summary_states_verdict_gap_findings_and_missing_data(runs: views.RunSet) -> None:
    view = views.summary(runs)
    record = view.record["summary"]
    assert record["verdict"].startswith("TP8 delivers") and "PP8" in record["verdict"]
    gap = {row["concurrency"]: row for row in record["gap"]}
    assert set(gap) == {"TP8 tok/s", "PP8 tok/s", "TP8 vs PP8"}
    assert all(f["severity"] in ("high", "medium") for f in record["findings"])
    html = view.html()
    assert html.index("ppscope-verdict") < html.index("TP8 vs PP8") < html.index("Missing data")
    assert "<details>" in html or not any(
        f.severity in ("low", "info") for f in runs.diagnosis()[0]
    )


def test_summary_without_benchmarks(bare: views.RunSet) -> None:
    record = views.summary(bare).record["summary"]
    assert "Only one layout" in record["verdict"] and record["missing"]
    assert "Missing data:" in views.summary(bare).html()


def test_findings_fold_the_notes(runs: views.RunSet) -> None:
    html = views.findings(runs).html()
    found = runs.diagnosis()[0]
    if any(f.severity == "info" for f in found):
        folded = html[html.index("note(s) that are not faults") :]
        assert all(f"<code>{f.id}</code>" in folded for f in found if f.severity == "info"), (
            "every info finding sits in the folded block"
        )


def test_wide_tables_show_key_columns_first(runs: views.RunSet) -> None:
    html = views.header(runs).html()
    visible, folded = html.split('<details class="ppscope-more">', 1)
    assert "<th>directory</th>" not in visible and "<th>directory</th>" in folded
    assert "<th>layout</th>" in visible
    wide = pl.DataFrame({f"c{i}": [i] for i in range(12)})
    assert views.table_html(wide).count("<table") == 2 and "all 12 columns" in views.table_html(
        wide
    )


def test_phases_are_named_by_concurrency(runs: views.RunSet) -> None:
    html = views.occupancy(runs).html()
    assert "<th>concurrency</th><th>phase</th>" in html
    offered = runs.analysis(runs.get("TP8")).phases["offered"].drop_nulls().to_list()
    spec = json.dumps(_spec(views.stage_timeline(runs, "TP8").chart))
    assert offered and all(f'"c={c}"' in spec for c in offered), "phases named by their load"


def test_every_run_gets_a_timeline(runs: views.RunSet) -> None:
    view = views.stage_timelines(runs)
    assert len(view.charts) == 2
    assert [r["run"] for r in view.record["stage_timelines"]] == ["TP8", "PP8"]
    assert len(views.stage_timelines(runs, "pp8").charts) == 1


def test_config_lists_runtime_changes(tmp_path: Path) -> None:
    tp8, pp8 = make_runs(tmp_path)
    with (pp8 / "server.log").open("a") as f:
        f.write(
            "[2026-05-01 10:15:50 PP0] Config updated via context override: "
            "{'pp_max_micro_batch_size': 16, 'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz0123456'}\n"
        )
    view = views.config_diff(views.load_runs([tp8, pp8], progress=False))
    changes = view.record["runtime_changes"]
    assert changes.select("run", "time", "key", "status").rows() == [
        ("PP8", "10:15:50", "pp_max_micro_batch_size", "set"),
        ("PP8", "10:15:50", "hf_token", "set"),
    ]
    assert changes["value"].to_list() == ["16", '"[redacted]"']
    assert "Changed while the server ran" in view.html()
