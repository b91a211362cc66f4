"""Hostile values are declared errors with their place, or values kept as text: integers past
64 bits in a batch field, a journald pid or a rank tag; year 0; a 400-digit exporter value; a
lone surrogate escape in a Prometheus answer, metrics snapshots or benchmark results."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.errors import ParseError
from toolkit.load.bench.results import load_bench
from toolkit.load.gpu.exporter import load_exporter
from toolkit.load.prometheus import load_metrics
from toolkit.load.run import load_run

RUN = TEST_DATA / "diagnose" / "pp8-not-applied"
BIG = "9" * 30


def _batch(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if "Decode batch" in line)


def _big_field(lines: list[str]) -> list[str]:
    i = _batch(lines)
    lines[i] = re.sub(r"#running-req: \d+", f"#running-req: {BIG}", lines[i])
    return lines


def _big_rank(lines: list[str]) -> list[str]:
    i = _batch(lines)
    lines[i] = lines[i].replace(" PP0]", f" PP{BIG}]", 1)
    return lines


def _year_zero(lines: list[str]) -> list[str]:
    i = _batch(lines)
    lines[i] = "[0000-01-01 00:00:00" + lines[i][len("[2026-05-01 10:07:22") :]
    return lines


def _big_pid(lines: list[str]) -> list[str]:
    i = _batch(lines)
    return [
        f"May 01 10:00:{n % 60:02d} gpu-node-3 python3[{BIG if n == i else 4242}]: {line}"
        for n, line in enumerate(lines)
    ]


@pytest.mark.parametrize("change", [_big_field, _big_rank, _year_zero, _big_pid])
def test_a_hostile_log_value_is_kept_as_text(
    tmp_path: Path, change: Callable[[list[str]], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(RUN, tmp_path / "run"))
    log = run / "server.log"
    log.write_text("\n".join(change(log.read_text().splitlines())) + "\n")
    loaded = load_run(run, cache=False)
    batches = loaded.log.batches
    assert batches.height  # the rest of the log is read
    assert main(["diagnose", "-q", str(run)]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err
    if change is _big_field:
        assert BIG not in [str(v) for v in batches["running_req"].to_list()]
    if change is _year_zero:
        assert all(ts is None or ts.year > 1 for ts in batches["ts"].to_list())


def test_a_400_digit_exporter_value_is_an_unreadable_cell(tmp_path: Path) -> None:
    text = (TEST_DATA / "gpu" / "exporter-2x-two-scrapes.prom").read_text().splitlines()
    i = next(n for n, line in enumerate(text) if line and not line.startswith("#"))
    text[i] = re.sub(r" \S+$", " " + "9" * 400, text[i])
    path = tmp_path / "dcgm.prom"
    path.write_text("\n".join(text) + "\n")
    part = load_exporter(path, str(path))
    assert part.samples.height
    assert "(400 digits)" in " ".join(part.unavailable["value"].to_list())


def _surrogate(text: str, needle: str) -> str:
    assert needle in text
    return text.replace(needle, needle[:-1] + '\\ud800"', 1)


def test_a_lone_surrogate_in_a_prometheus_answer_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "query_range.json"
    text = (TEST_DATA / "prometheus" / "query_range.json").read_text()
    path.write_text(_surrogate(text, '"sglang:num_running_reqs"'))
    with pytest.raises(ParseError, match=r"lone surrogate escape \(\\ud800\)") as e:
        load_metrics([path])
    assert e.value.lineno == 1


def test_a_lone_surrogate_in_a_snapshot_is_a_skipped_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = (TEST_DATA / "prometheus" / "metrics.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('engine_type=\\"unified\\"', 'engine_type=\\"uni\\ud800\\"', 1)
    path.write_text("\n".join(lines) + "\n")
    metrics = load_metrics([path])
    assert metrics.scrapes == len(lines) - 1
    assert any("metrics.jsonl:2: a lone surrogate" in n for n in metrics.notes)


def test_a_lone_surrogate_in_bench_results_is_named_with_its_line(tmp_path: Path) -> None:
    # The line is damage named with its line, the run before it is used; a file with no
    # other line has no readable run, so the line's error is the answer.
    path = tmp_path / "bench.jsonl"
    record = json.loads((RUN / "bench.jsonl").read_text())
    line = json.dumps(record)
    bad = _surrogate(line, f'"{record["backend"]}"')
    path.write_text(line + "\n" + bad + "\n")
    results = load_bench(path)
    assert results.runs["lineno"].to_list() == [1]
    [error] = results.damaged
    assert error.lineno == 2 and "lone surrogate" in error.reason
    path.write_text(bad + "\n")
    with pytest.raises(ParseError, match="lone surrogate") as e:
        load_bench(path)
    assert e.value.lineno == 1
