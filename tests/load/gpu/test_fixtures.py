"""Every GPU fixture: recognized by content, GPU and row counts, and the summary shape.

The fixtures in ``tests/data/gpu`` reproduce the shapes in ``shared/formats/gpu-trace-formats.md``
(see ``tests/data/gpu/README.md``); spot values are checked per format in the other
tests of ``tests/load/gpu``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.gpu_fixtures import EXPECTED, OTHERS
from helpers.gpu_fixtures import GPU_DATA as DATA

from toolkit.errors import UnknownFormat
from toolkit.load.gpu.trace import load_gpu_trace, sniff_gpu_format, summarize_gpu_file

NOHEADER = "timestamp,index,utilization.gpu,memory.used,power.draw"


def _fields(name: str) -> str | None:
    if name == "smi-noheader.csv":
        return NOHEADER
    if name == "smi-noheader-nounits.csv":
        return "index,utilization.gpu,memory.used,power.draw"
    return None


def test_every_fixture_is_listed() -> None:
    on_disk = {p.name for p in DATA.iterdir() if p.is_file() and p.name != "README.md"}
    assert on_disk == set(EXPECTED) | set(OTHERS)


@pytest.mark.parametrize("name", sorted(EXPECTED) + sorted(OTHERS))
def test_sniffed_from_content_not_name(name: str, tmp_path: Path) -> None:
    want = (EXPECTED.get(name) or OTHERS[name])[0]
    assert sniff_gpu_format(DATA / name) == want
    renamed = tmp_path / "capture.log"  # the name says nothing
    shutil.copy(DATA / name, renamed)
    assert sniff_gpu_format(renamed) == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_trace_counts(name: str) -> None:
    fmt, gpus, samples = EXPECTED[name]
    trace = load_gpu_trace(DATA / name, fields=_fields(name))
    (summary,) = trace.summary()
    assert summary["format"] == fmt
    assert summary["gpus"] == gpus
    assert summary["samples"] == samples == trace.samples.height
    assert summary["metrics"], "a trace without metrics"
    assert set(summary) >= {"path", "format", "lines", "gpus", "samples", "metrics", "skipped"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_line_accounted_for(name: str) -> None:
    trace = load_gpu_trace(DATA / name, fields=_fields(name))
    lines = trace.sources[0]["lines"]
    used = set(trace.samples.get_column("lineno").to_list())
    skipped = set(trace.skipped.get_column("lineno").to_list())
    assert not used & skipped
    assert trace.sources[0]["sample_lines"] + len(skipped) == lines
    # an exporter sample gathers a GPU's metric lines, a default-table sample its two rows
    if not name.startswith(("exporter-", "smi-table-")):
        assert len(used) + len(skipped) == lines


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_companion_summaries(name: str) -> None:
    fmt, gpus = OTHERS[name]
    summary = summarize_gpu_file(DATA / name)
    assert summary["format"] == fmt
    assert summary["gpus"] == gpus


def test_companions_are_not_traces() -> None:
    with pytest.raises(UnknownFormat, match="nvidia-smi-topo"):
        load_gpu_trace(DATA / "topo-2x1080ti.txt")


def test_unrelated_file_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nthis is not a trace\n")
    assert sniff_gpu_format(path) is None
    with pytest.raises(UnknownFormat):
        load_gpu_trace(path)


def test_gzip_is_read_transparently(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "trace.gz"
    packed.write_bytes(gzip.compress((DATA / "smi-8gpu-loop.csv").read_bytes()))
    assert sniff_gpu_format(packed) == "nvidia-smi-csv"
    assert load_gpu_trace(packed).samples.height == 24


def test_several_files_on_one_clock() -> None:
    trace = load_gpu_trace([DATA / "smi-8gpu-loop.csv", DATA / "dmon-u.txt"])
    assert trace.samples.height == 28
    assert [s["format"] for s in trace.summary()] == ["nvidia-smi-csv", "nvidia-smi-dmon"]
    assert trace.samples.get_column("source").n_unique() == 2
