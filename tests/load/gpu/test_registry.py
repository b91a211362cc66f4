"""The GPU format registry: complete entries, every fixture recognized, a new format picked up."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers.gpu_fixtures import EXPECTED, OTHERS
from helpers.gpu_fixtures import GPU_DATA as DATA

from toolkit.load.gpu import FORMATS, sniff_gpu_format, trace_formats
from toolkit.load.gpu.format import COMPANION, TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.gpu.trace import load_gpu_trace, summarize_gpu_file
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

FIXTURES = {**{n: v[0] for n, v in EXPECTED.items()}, **{n: v[0] for n, v in OTHERS.items()}}


def test_the_format_vocabulary_is_kept() -> None:
    assert set(FORMATS) == {
        "nvidia-smi-csv",
        "nvidia-smi-csv-reprinted",
        "nvidia-smi-table",
        "nvidia-smi-dmon",
        "dcgmi-dmon",
        "dcgm-exporter",
        "aiperf-gpu-telemetry",
        "nvidia-smi-topo",
        "nvidia-smi-apps",
        "nvidia-smi-list",
    }
    assert set(trace_formats()) == {"nvidia-smi-csv", "nvidia-smi-csv-reprinted",
                                    "nvidia-smi-table", "nvidia-smi-dmon", "dcgmi-dmon",
                                    "dcgm-exporter", "aiperf-gpu-telemetry"}  # fmt: skip


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_entry_is_complete(name: str) -> None:
    fmt = FORMATS[name]
    assert fmt.name == name
    assert fmt.description
    assert callable(fmt.detect) and callable(fmt.load) and callable(fmt.summarize)
    assert fmt.kind in (TRACE, COMPANION)


def test_every_format_has_a_fixture() -> None:
    assert set(FIXTURES.values()) == set(FORMATS)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_fixture_is_its_expected_format(name: str) -> None:
    want = FIXTURES[name]
    peek = Peek(DATA / name)
    assert FORMATS[want].detect(peek), "its own detector does not claim it"
    claimed = [f.name for f in FORMATS.values() if f.detect(peek)]
    assert claimed[0] == want  # the first in registry order names the file
    assert sniff_gpu_format(DATA / name) == want


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_fixture_loads_and_summarizes_through_its_entry(name: str) -> None:
    fmt = FORMATS[FIXTURES[name]]
    fields = ("timestamp", "index", "utilization.gpu", "memory.used", "power.draw")
    options = Options(source=str(DATA / name), fields=fields if "noheader" in name else None)
    if name == "smi-noheader-nounits.csv":
        options = Options(source=options.source, fields=fields[1:])
    loaded = fmt.load(DATA / name, options)
    if fmt.kind == TRACE:
        assert isinstance(loaded, Part)
        assert loaded.format == fmt.name
    summary = fmt.summarize(DATA / name, options)
    assert summary["format"] == fmt.name
    assert summary == summarize_gpu_file(DATA / name, fields=options.fields)


# ---------------------------------------------------------------------- a new format
def _detect_fake(peek: Peek) -> bool:
    return peek.first.startswith("FAKEMON")


def _load_fake(path: Path, options: Options) -> Part:
    rows = [ln.split() for ln in path.read_text().splitlines()[1:] if ln.strip()]
    samples = pl.DataFrame(
        {
            "source": [options.source] * len(rows),
            "lineno": list(range(2, len(rows) + 2)),
            "gpu": [int(r[0]) for r in rows],
            "util_pct": [float(r[1]) for r in rows],
        }
    )
    skipped = pl.DataFrame(
        [{"source": options.source, "lineno": 1, "reason": "header", "line": "FAKEMON"}],
        schema=SKIPPED,
        orient="row",
    )
    return Part(options.source, "fakemon", len(rows) + 1, samples, skipped,
                pl.DataFrame(schema=UNAVAILABLE))  # fmt: skip


FAKE = Format("fakemon", "a made-up monitor", _detect_fake, _load_fake,
              trace_summarizer(_load_fake), TRACE)  # fmt: skip


def test_a_registered_format_is_sniffed_loaded_and_summarized(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "capture.txt"
    path.write_text("FAKEMON v1\n0 40\n1 60\n")
    assert sniff_gpu_format(path) is None
    monkeypatch.setitem(FORMATS, FAKE.name, FAKE)
    assert sniff_gpu_format(path) == "fakemon"
    assert "fakemon" in trace_formats()
    trace = load_gpu_trace(path)
    assert trace.samples.get_column("util_pct").to_list() == [40.0, 60.0]
    summary = summarize_gpu_file(path)
    assert (summary["format"], summary["gpus"], summary["samples"]) == ("fakemon", 2, 2)
