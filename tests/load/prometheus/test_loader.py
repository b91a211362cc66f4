"""Prometheus metrics: capture snapshots and API answers into the declared long table."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError, UnknownFormat
from toolkit.load.prometheus import load_metrics, sniff_metrics_format
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff
from toolkit.schema.prometheus import METRICS

DATA = TEST_DATA / "prometheus"
SNAPSHOTS = DATA / "metrics.jsonl"
QUERY = DATA / "query_range.json"


def _scrapes(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _snapshot_file(tmp_path: Path, texts: list[str], name: str = "m.jsonl") -> Path:
    path = tmp_path / name
    lines = [
        json.dumps({"ts": f"2026-05-01T10:00:{i:02d}.000", "text": t}) for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_snapshots_load_into_the_declared_table() -> None:
    m = load_metrics([SNAPSHOTS])
    assert m.samples.schema == METRICS
    assert m.scrapes == len(_scrapes(SNAPSHOTS))
    assert set(m.samples["pp_rank"].drop_nulls()) == {0, 1, 2, 3}
    assert set(m.samples["tp_rank"].drop_nulls()) == {0}
    assert not m.samples["metric"].str.ends_with("_bucket").any()
    assert not m.samples["metric"].str.ends_with("_created").any()
    labels = json.loads(m.samples.filter(pl.col("metric").str.contains("stage"))["labels"][0])
    assert labels["model_name"] == "moonshotai/Kimi-K2.6" and "category" in labels
    assert "pp_rank" not in labels  # ranks have their own columns


def test_counters_are_differenced_per_series() -> None:
    m = load_metrics([SNAPSHOTS])
    busy = m.samples.filter(pl.col("metric") == "sglang:gpu_execution_seconds_total")
    # the fixture's counters grow by a fixed amount per second on each stage
    first = {pp: None for pp in range(4)}
    for scrape in _scrapes(SNAPSHOTS)[:2]:
        for line in scrape["text"].splitlines():
            if line.startswith("sglang:gpu_execution_seconds_total{"):
                pp = int(line.split('pp_rank="')[1][0])
                value = float(line.rsplit(" ", 1)[1])
                first[pp] = value if first[pp] is None else value - first[pp]
    per_stage = busy.group_by("pp_rank").agg(pl.col("value").mean(), pl.col("interval_s").mean())
    for pp, value, interval in per_stage.iter_rows():
        assert value == pytest.approx(first[pp])
        assert interval == pytest.approx(1.0)
    assert (m.samples.filter(pl.col("kind") == "counter")["value"] >= 0).all()


def test_a_restart_drops_its_interval_and_says_so() -> None:
    m = load_metrics([SNAPSHOTS])
    series = m.samples.filter(
        pl.col("metric") == "sglang:prompt_tokens_total"
    )  # one series, 12 scrapes: 11 intervals, one of them across the restart
    assert series.height == m.scrapes - 2
    assert any("went down" in n for n in m.notes)
    (note,) = [n for n in m.notes if "went down" in n]
    assert int(note.split()[0]) >= 1


def test_histograms_are_interval_means() -> None:
    m = load_metrics([SNAPSHOTS])
    ttft = m.samples.filter(pl.col("metric") == "sglang:time_to_first_token_seconds")
    assert ttft["kind"].unique().to_list() == ["histogram"]
    texts = [s["text"] for s in _scrapes(SNAPSHOTS)[:2]]

    def total(text: str, suffix: str) -> float:
        line = next(x for x in text.splitlines() if x.startswith(f"sglang:time_{suffix}"))
        return float(line.rsplit(" ", 1)[1])

    d_sum = total(texts[1], "to_first_token_seconds_sum") - total(
        texts[0], "to_first_token_seconds_sum"
    )
    d_n = total(texts[1], "to_first_token_seconds_count") - total(
        texts[0], "to_first_token_seconds_count"
    )
    assert ttft["value"][0] == pytest.approx(d_sum / d_n)
    assert ttft["count"][0] == pytest.approx(d_n)


def test_clock_offset_shifts_every_time() -> None:
    plain = load_metrics([SNAPSHOTS]).samples
    shifted = load_metrics([SNAPSHOTS], clock_offset_s=-3600).samples
    assert (plain["ts"] - shifted["ts"]).dt.total_seconds().unique().to_list() == [3600]


def test_query_range_answer() -> None:
    m = load_metrics([QUERY])
    assert m.samples.schema == METRICS
    running = m.samples.filter(pl.col("metric") == "sglang:num_running_reqs")
    assert running["ts"].min() == datetime(2026, 5, 1, 10, 15, 40)  # Unix seconds as UTC
    assert json.loads(running["labels"][0])["instance"] == "10.0.0.7:30000"
    busy = m.samples.filter(pl.col("metric") == "sglang:gpu_execution_seconds_total")
    assert (busy["value"] >= 0).all()
    assert busy.filter(pl.col("pp_rank") == 1)["value"].mean() == pytest.approx(0.42)
    assert "(unnamed)" in set(m.samples["metric"])  # a rate(...) has no __name__
    assert any("NaN" in n for n in m.notes)


def test_formats_are_recognized_by_content(tmp_path: Path) -> None:
    a, b = tmp_path / "scrapes.txt", tmp_path / "answer"
    shutil.copy(SNAPSHOTS, a)
    shutil.copy(QUERY, b)
    assert sniff(a) == "sglang-metrics-jsonl"
    assert sniff(b) == "prometheus-query-range"
    gz = tmp_path / "x.gz"
    gz.write_bytes(gzip.compress(SNAPSHOTS.read_bytes()))
    assert sniff_metrics_format(gz) == "sglang-metrics-jsonl"
    assert load_metrics([gz]).samples.height == load_metrics([SNAPSHOTS]).samples.height
    for name, pack in (("x.xz", lzma.compress), ("x.bz2", bz2.compress)):
        packed = tmp_path / name
        packed.write_bytes(pack(SNAPSHOTS.read_bytes()))
        got, want = load_metrics([packed]).samples, load_metrics([SNAPSHOTS]).samples
        assert got.drop("source").equals(want.drop("source"))
    answer = tmp_path / "answer.xz"
    answer.write_bytes(lzma.compress(QUERY.read_bytes()))
    assert load_metrics([answer]).samples.height == load_metrics([QUERY]).samples.height


def test_a_first_scrape_longer_than_the_sniff_window_is_recognized(tmp_path: Path) -> None:
    text = "".join(f'sglang:token_usage{{pp_rank="{i % 8}",x="{i}"}} 0.5\n' for i in range(40_000))
    path = _snapshot_file(tmp_path, [text, text])
    assert path.stat().st_size > 2 << 20
    assert sniff(path) == "sglang-metrics-jsonl"


def test_bad_lines_are_counted_with_their_place_or_raise_in_strict_mode(tmp_path: Path) -> None:
    lines = SNAPSHOTS.read_text().splitlines()
    lines.insert(3, lines[3][:500])  # a scrape cut short
    lines.insert(5, '{"ts": "2026-05-01T10:15:44+02:00", "text": ""}')  # a zone
    lines.insert(7, "")
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    m = load_metrics([path])
    assert m.scrapes == len(lines) - 3
    assert "1 blank lines" in m.notes
    (note,) = [n for n in m.notes if "no scrape" in n]
    assert note.startswith("2 ") and f"{path}:4" in note
    with pytest.raises(ParseError) as e:
        load_metrics([path], strict=True)
    assert e.value.lineno == 4 and e.value.path == str(path)


def test_an_unreadable_exposition_line_keeps_the_rest_of_the_scrape(tmp_path: Path) -> None:
    good = '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{pp_rank="0"} 3\n'
    bad = good + 'sglang:num_running_reqs{pp_rank="0" 8\n'
    m = load_metrics([_snapshot_file(tmp_path, [good, bad])])
    assert m.samples.filter(pl.col("metric") == "sglang:num_queue_reqs").height == 2
    (note,) = [n for n in m.notes if "parser rejects" in n]
    assert note.startswith("1 ") and "m.jsonl:2, text line 3" in note


def test_a_failed_query_answer_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"status": "error", "errorType": "bad_data", "error": "parse error"}')
    with pytest.raises(UnknownFormat):
        load_metrics([path])  # no resultType: not recognized as an answer at all
    path.write_text('{"status":"error","data":{"resultType":"matrix","result":[]},"error":"x"}')
    with pytest.raises(ParseError, match="not a successful"):
        load_metrics([path])
    path.write_text(
        '{"status":"success","data":{"resultType":"matrix","result":'
        '[{"metric":{"__name__":"g"},"values":[[1,"1"],["x","2"],[3]]}]}}'
    )
    m = load_metrics([path])
    assert m.samples.height == 1 and any("2 [time, value] pairs" in n for n in m.notes)
    with pytest.raises(ParseError, match="result 0, value 1"):
        load_metrics([path], strict=True)


def test_run_directory_loads_metrics_with_its_clock_offset(tmp_path: Path) -> None:
    shutil.copy(SNAPSHOTS, tmp_path / "metrics.jsonl")
    (tmp_path / "run.toml").write_text("clock_offset_s = 7.5\n")
    run = load_run(tmp_path)
    assert run.metrics is not None
    first = run.metrics.samples["ts"].min()
    assert first == datetime(2026, 5, 1, 10, 15, 47, 500000)
    assert load_run(TEST_DATA / "sglang").metrics is None


def test_label_values_are_read_by_the_prometheus_parser(tmp_path: Path) -> None:
    text = (
        "# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{model_name="a, b} {c}",note="say \\"hi\\"\\n",pp_rank="2"} 5\n'
        "sglang:num_queue_reqs\t7 1716672021000\n"
        'sglang:num_queue_reqs{pp_rank="1"} 3 not-a-time\n'
    )
    m = load_metrics([_snapshot_file(tmp_path, [text])])
    rows = m.samples.sort("value")
    assert rows["value"].to_list() == [5.0, 7.0]
    labels = json.loads(rows["labels"][0])
    assert labels == {"model_name": "a, b} {c}", "note": 'say "hi"\n'}
    assert rows["pp_rank"].to_list() == [2, None]
    assert any("text line 4" in n for n in m.notes)


AIPERF = DATA / "server_metrics_export.parquet"


def test_aiperf_parquet_export() -> None:
    source = pl.read_parquet(AIPERF)
    m = load_metrics([AIPERF])
    assert m.samples.schema == METRICS
    assert m.scrapes == source["timestamp_ns"].n_unique()
    first = datetime.fromtimestamp(source["timestamp_ns"].min() / 1e9)  # local, like AIPerf's
    assert m.samples["ts"].min() == first.replace(microsecond=first.microsecond // 1000 * 1000)
    # counters get back the _total the server exposes; values are growth per interval
    busy = m.samples.filter(pl.col("metric") == "sglang:gpu_execution_seconds_total")
    assert set(busy["pp_rank"]) == {0, 1} and (busy["value"] >= 0).all()
    rows = source.filter(
        pl.col("metric_name") == "sglang:gpu_execution_seconds", pl.col("pp_rank") == "0"
    ).sort("timestamp_ns")
    assert busy.filter(pl.col("pp_rank") == 0).sort("ts")["value"].to_list() == pytest.approx(
        rows["value"].diff().drop_nulls().to_list()
    )
    assert any("went down" in n for n in m.notes)  # AIPerf's clamp to 0 at the restart
    ttft = m.samples.filter(pl.col("metric") == "sglang:time_to_first_token_seconds")
    hist = source.filter(pl.col("metric_name") == "sglang:time_to_first_token_seconds")
    per_ts = hist.group_by("timestamp_ns").agg(pl.col("sum", "count").first()).sort("timestamp_ns")
    d_sum, d_n = per_ts["sum"].diff().drop_nulls(), per_ts["count"].diff().drop_nulls()
    assert ttft.sort("ts")["value"].to_list() == pytest.approx((d_sum / d_n).to_list())
    assert json.loads(ttft["labels"][0])["endpoint_url"] == source["endpoint_url"][0]
    unknown = m.samples.filter(pl.col("metric") == "sglang:cache_hit_rate")
    assert unknown["kind"].unique().to_list() == ["gauge"]  # untyped reads as a gauge
    assert sniff(AIPERF) == "aiperf-server-metrics-parquet"


def test_a_parquet_file_of_another_shape_is_not_an_aiperf_export(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    assert sniff_metrics_format(path) is None
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(AIPERF.read_bytes()[:200])
    assert sniff_metrics_format(damaged) is None


def test_aiperf_labels_named_like_internal_columns_stay_labels(tmp_path: Path) -> None:
    source = pl.read_parquet(AIPERF).with_columns(
        kind=pl.lit("x"), ts=pl.lit("y"), metric=pl.lit("z")
    )
    path = tmp_path / "e.parquet"
    source.write_parquet(path)
    m = load_metrics([path])
    assert m.samples.height == load_metrics([AIPERF]).samples.height
    labels = json.loads(m.samples["labels"][0])
    assert labels["kind"] == "x" and labels["ts"] == "y" and labels["metric"] == "z"


def test_summary_spans_every_scrape_also_of_counters_only(tmp_path: Path) -> None:
    text = "# TYPE x counter\n" + 'x_total{pp_rank="0"} {v}\n'
    path = _snapshot_file(tmp_path, [text.replace("{v}", str(v)) for v in (1, 2, 4)])
    summary = load_metrics([path]).summary()
    assert summary["start"] == datetime(2026, 5, 1, 10, 0, 0)
    assert summary["end"] == datetime(2026, 5, 1, 10, 0, 2)
    assert summary["scrapes"] == 3 and summary["series"] == 1 and summary["rows"] == 2


def test_query_answers_fold_histogram_series(tmp_path: Path) -> None:
    def series(name: str, values: list[str], **labels: str) -> dict:
        return {
            "metric": {"__name__": name, **labels},
            "values": [[1777630540 + i, v] for i, v in enumerate(values)],
        }

    h = "sglang:e2e_request_latency_seconds"
    doc = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series(f"{h}_bucket", ["1", "3"], le="1.0"),
                series(f"{h}_sum", ["2", "8"]),
                series(f"{h}_count", ["1", "3"]),
                series("sglang:prompt_tokens_created", ["1.7e9", "1.7e9"]),
            ],
        },
    }
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    m = load_metrics([path])
    assert m.samples["metric"].to_list() == [h]
    assert m.samples["value"].to_list() == [3.0] and m.samples["count"].to_list() == [2.0]
    assert any(n.startswith("2 histogram bucket") for n in m.notes)
    assert any(n.startswith("2 _created") for n in m.notes)


def test_a_cut_gzip_keeps_the_scrapes_before_the_damage(tmp_path: Path) -> None:
    data = gzip.compress(SNAPSHOTS.read_bytes())
    path = tmp_path / "metrics.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    m = load_metrics([path])
    assert 0 < m.scrapes < len(_scrapes(SNAPSHOTS))
    assert any("compressed stream cut" in n for n in m.notes)
