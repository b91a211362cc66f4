"""Every GPU fixture: recognized by content, GPU and row counts, and the summary shape.

The fixtures in ``tests/data/gpu`` reproduce the shapes in ``shared/formats/gpu-trace-formats.md``
(see ``tests/data/gpu/README.md``); spot values are checked per format in the other
``test_gpu_*`` files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from toolkit.errors import UnknownFormat
from toolkit.load.gpu.trace import load_gpu_trace, sniff_gpu_format, summarize_gpu_file

DATA = Path(__file__).parent / "data" / "gpu"
NOHEADER = "timestamp,index,utilization.gpu,memory.used,power.draw"

# file → (format, gpus, samples)
EXPECTED: dict[str, tuple[str, int, int]] = {
    "smi-lms-single.csv": ("nvidia-smi-csv", 1, 5),
    "smi-8gpu-loop.csv": ("nvidia-smi-csv", 8, 24),
    "smi-nounits.csv": ("nvidia-smi-csv", 2, 4),
    "smi-noheader.csv": ("nvidia-smi-csv", 2, 4),
    "smi-noheader-nounits.csv": ("nvidia-smi-csv", 2, 4),
    "smi-old-driver-crlf.csv": ("nvidia-smi-csv", 2, 2),
    "smi-mixed-models.csv": ("nvidia-smi-csv", 2, 2),
    "smi-flags.csv": ("nvidia-smi-csv", 2, 2),
    "dmon-mutc-td.txt": ("nvidia-smi-dmon", 1, 6),
    "dmon-legacy-pucvmet.txt": ("nvidia-smi-dmon", 4, 8),
    "dmon-u.txt": ("nvidia-smi-dmon", 2, 4),
    "dmon-m-8gpu.txt": ("nvidia-smi-dmon", 8, 16),
    "dmon-puc-t-repeated.txt": ("nvidia-smi-dmon", 2, 6),
    "dcgmi-prof-8gpu.txt": ("dcgmi-dmon", 8, 24),
    "dcgmi-nvlink-wide.txt": ("dcgmi-dmon", 2, 2),
    "dcgmi-device.txt": ("dcgmi-dmon", 2, 4),
    "dcgmi-dcgm17.txt": ("dcgmi-dmon", 2, 4),
    "exporter-v1-labels.prom": ("dcgm-exporter", 2, 2),
    "exporter-2x-two-scrapes.prom": ("dcgm-exporter", 2, 4),
    "exporter-3x-prof-timed.prom": ("dcgm-exporter", 2, 4),
    "exporter-mig.prom": ("dcgm-exporter", 4, 4),
    "exporter-old-lowercase.prom": ("dcgm-exporter", 2, 2),
}
OTHERS: dict[str, tuple[str, int]] = {
    "topo-2x1080ti.txt": ("nvidia-smi-topo", 2),
    "topo-8xa100-nvlink.txt": ("nvidia-smi-topo", 8),
    "topo-4xa10-pcie.txt": ("nvidia-smi-topo", 4),
    "topo-tabs-2x5090.txt": ("nvidia-smi-topo", 2),
    "topo-dgx1-hybrid-oldnic.txt": ("nvidia-smi-topo", 8),
    "list-8gpu.txt": ("nvidia-smi-list", 8),
    "list-mig.txt": ("nvidia-smi-list", 2),
    "apps-8gpu.csv": ("nvidia-smi-apps", 8),
    "apps-empty.csv": ("nvidia-smi-apps", 0),
    "apps-nounits-bus.csv": ("nvidia-smi-apps", 2),
}


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
    header = 1 if name.startswith("smi-") and "noheader" not in name else 0
    if name.startswith("exporter-"):
        # Several exporter lines make one sample; each sample keeps its first line.
        assert len(used) + len(skipped) <= lines
    else:
        assert len(used) + len(skipped) + header == lines


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
