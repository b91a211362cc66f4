"""PyTorch profiler traces: both Kineto layouts load with their ranks, kept events and
communication arguments; a cut trace is read up to the cut and says so; a damaged one is a
``ParseError`` naming the line and the event; the scanner agrees with ``json`` on any layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.cli.main import main
from toolkit.errors import ParseError
from toolkit.load.profile import TORCH_TRACE, is_torch_trace, load_profile, phase_of
from toolkit.load.profile.scan import Scanner
from toolkit.load.profile.trace import load_profile_trace, rank_tags
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff
from toolkit.schema.profile import EVENTS
from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

HAND = TEST_DATA / "profile" / "1764000000.5-TP-1.trace.json"


@pytest.mark.parametrize("shape", ["kineto-2.5", "kineto-2023"])
def test_generated_pp_traces_load_per_stage(tmp_path: Path, shape: str) -> None:
    spec = PipelineProfile(compute_ms=(4.0, 4.0, 6.0), steps=5, shape=shape)
    write_pp_profile(tmp_path / "profile" / "phase-1-c16", spec)
    files = sorted(tmp_path.rglob("*.trace.json.gz"))
    assert [sniff(f) for f in files] == [TORCH_TRACE] * 3
    profile = load_profile(files, tmp_path)
    assert [t.pp for t in profile.traces] == [0, 1, 2]
    assert profile.phases == ["phase-1-c16"] * 3
    first = profile.traces[0]
    assert first.events.schema == EVENTS
    assert (first.base_ns is not None) == (shape == "kineto-2.5")
    assert first.world_size == (3 if shape == "kineto-2.5" else None)
    # per iteration: 5 loop ranges, 3 compute kernels, a SendRecv; one more partial iteration
    kernels = first.events.filter(pl.col("cat") == "kernel")
    assert kernels.height == 4 * (spec.steps + 1)
    sends = kernels.filter(pl.col("name").str.starts_with("ncclDevKernel_SendRecv"))
    assert sends["in_nelems"].unique().to_list() == [spec.proxy_bytes // 2]
    assert sends["dtype"].unique().to_list() == ["BFloat16"]
    assert set(first.skipped) == {"M/None", "X/cuda_runtime", "i/None"}  # launches, metadata
    graph = first.events.filter(pl.col("name") == "cudaGraphLaunch")
    assert graph.height == spec.steps + 1
    flows = first.events.filter(pl.col("cat") == "ac2g")
    assert set(flows["ph"]) == {"s", "f"} and flows["flow_id"].null_count() == 0


def test_a_hand_written_collective_trace_keeps_its_communication_arguments() -> None:
    trace = load_profile_trace(HAND)
    assert trace.tags == {"TP": 1} and trace.rank == 1 and trace.pp is None
    assert trace.backend == "nccl" and trace.devices == ["NVIDIA H100 80GB HBM3"]
    assert trace.base_ns == 1758000000000000000 and trace.cut is None
    kernel = trace.events.filter(pl.col("cat") == "kernel").row(0, named=True)
    assert kernel["collective"] == "allreduce" and kernel["group_size"] == 2
    assert kernel["in_nelems"] == 7168 and kernel["stream"] == 51
    assert kernel["correlation"] == 40961 and kernel["device"] == 0
    assert kernel["ts_us"] == pytest.approx(6021014401.875)
    comm_op = trace.events.filter(pl.col("name") == "record_param_comms")
    assert comm_op["collective"].to_list() == ["allreduce"]
    kept = set(trace.events["cat"])
    assert kept == {"user_annotation", "cpu_op", "cuda_runtime", "kernel", "ac2g",
                    "gpu_user_annotation"}  # fmt: skip
    assert trace.skipped == {"X/cuda_runtime": 1, "M/None": 1, "i/None": 2}


def test_rank_tags_follow_sglang_file_names() -> None:
    assert rank_tags("1764.1-TP-3-DP-1-PP-5-EP-2-DECODE.trace.json.gz") == {
        "TP": 3, "DP": 1, "PP": 5, "EP": 2,
    }  # fmt: skip
    assert rank_tags("trace.json") == {}


def test_pp_from_distributed_info_when_the_name_has_none(tmp_path: Path) -> None:
    text = HAND.read_text().replace('"world_size": 2,', '"world_size": 4, "pp_size": 2,')
    path = tmp_path / "rank.json"
    path.write_text(text.replace('"rank": 1,', '"rank": 3,'))
    trace = load_profile_trace(path)
    assert trace.pp == 1  # rank 3 of 4 in 2 stages


def _gz_trace(tmp_path: Path, steps: int = 40) -> Path:
    write_pp_profile(tmp_path / "t", PipelineProfile(compute_ms=(4.0, 4.0), steps=steps))
    return sorted((tmp_path / "t").glob("*.gz"))[0]


def test_a_cut_gzip_is_read_up_to_the_cut(tmp_path: Path) -> None:
    whole = load_profile_trace(_gz_trace(tmp_path))
    path = tmp_path / "cut.trace.json.gz"
    data = _gz_trace(tmp_path).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    trace = load_profile_trace(path)
    assert trace.cut is not None and "cut" in trace.cut and "line" in trace.cut
    assert 0 < trace.events.height < whole.events.height
    assert trace.events["event"].to_list() == whole.events["event"].to_list()[: trace.events.height]
    assert trace.base_ns is None  # written after the events


def test_text_ending_inside_an_event_is_a_cut(tmp_path: Path) -> None:
    text = HAND.read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: text.index('"name": "fused_moe_kernel"') + 10])
    trace = load_profile_trace(path)
    assert trace.cut is not None and "after 7 events" in trace.cut
    assert trace.events_read == 7


def test_damage_is_a_parse_error_with_line_and_event(tmp_path: Path) -> None:
    text = HAND.read_text().replace('"dur": 250.000,', '"dur": 250.000,, "oops"', 1)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ParseError) as e:
        load_profile_trace(path)
    assert e.value.lineno is not None and "event 7" in e.value.reason
    assert text.splitlines()[e.value.lineno - 1].strip().startswith("{")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty file"),
        ('{"schemaVersion": 1, "deviceProperties": []}', "no traceEvents"),
        ('{"traceEvents": [1, 2]}', "no JSON object"),
        ("[1, 2]", "expected a JSON object"),
        ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "between events"),
        ('{"schemaVersion": 1, "traceEvents": [{"ph": "X", @}]}\n', "event 0 is no valid JSON"),
    ],
)
def test_not_a_trace_is_a_parse_error(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ParseError, match=reason):
        load_profile_trace(path)


def test_a_run_lists_unreadable_and_cut_traces(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_pp_profile(run / "profile" / "c8", PipelineProfile(compute_ms=(3.0, 3.0), steps=4))
    bad = run / "profile" / "c8" / "9-TP-0-PP-9.trace.json"
    bad.write_text(HAND.read_text().replace('"ts": 6021014470.125', '"ts": @', 1))
    loaded = load_run(run)
    assert loaded.profile is not None and len(loaded.profile.traces) == 2
    kept = set(loaded.profile.traces[0].events["cat"])  # what the loop account reads, only
    assert kept == {"user_annotation", "kernel", "cuda_runtime", "ac2g"}
    assert (
        loaded.profile.traces[0].skipped["X/cpu_op"] == 4 + 1
    )  # one per iteration, and the cut one
    notes = [m for m in loaded.mismatches if m["input"] == "profiler trace"]
    assert [m["files"] for m in notes] == [bad.name]
    assert "not used" in notes[0]["detail"] and ":" in notes[0]["detail"]


def test_the_sniffer_tells_traces_from_other_json(tmp_path: Path) -> None:
    other = tmp_path / "result.json"
    other.write_text(json.dumps({"traceEvents": [], "output_throughput": 1.0}))
    assert not is_torch_trace(other)
    assert is_torch_trace(HAND)
    assert phase_of(tmp_path / "profile" / "x.json", tmp_path) is None
    assert phase_of(tmp_path / "profile" / "c8" / "x.json", tmp_path) == "c8"


_scalar = st.one_of(
    st.integers(-(2**40), 2**40), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12), st.booleans(), st.none(),
)  # fmt: skip
_event = st.dictionaries(st.sampled_from(["ph", "cat", "name", "ts", "args", "id"]), _scalar)


@given(
    events=st.lists(_event, max_size=30),
    indent=st.sampled_from([None, 0, 2]),
    meta=st.dictionaries(st.sampled_from(["schemaVersion", "traceName", "x"]), _scalar),
)
def test_the_scanner_agrees_with_json(events: list, indent: int | None, meta: dict) -> None:
    import tempfile

    doc = {**meta, "traceEvents": events, "baseTimeNanoseconds": 5}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(doc, f, indent=indent)
        items = list(Scanner(path).items())
    got = [v for kind, _, v in items if kind == "event"]
    assert got == events
    assert {k: v for kind, k, v in items if kind == "meta"} == {
        k: v for k, v in doc.items() if k != "traceEvents"
    }


def test_a_trace_of_many_megabytes_streams_through_a_bounded_buffer(tmp_path: Path) -> None:
    path = _gz_trace(tmp_path, steps=1500)
    scanner = Scanner(path)
    largest, events = 0, 0
    for kind, _, _ in scanner.items():
        events += kind == "event"
        largest = max(largest, len(scanner._buf))
    text = gzip.decompress(path.read_bytes()).decode()
    assert len(text) > 4 * (1 << 20)  # several buffers' worth
    assert events == len(json.loads(text)["traceEvents"])
    assert largest <= 3 * (1 << 20)


def test_parse_describes_each_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_pp_profile(tmp_path / "profile" / "c8", PipelineProfile(compute_ms=(3.0, 3.0), steps=3))
    assert main(["parse", "-q", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    first = load_profile_trace(sorted(tmp_path.rglob("*.gz"))[0])
    kernels = first.events.filter(pl.col("cat") == "kernel").height
    line = f"  stage 0: {first.events_read} events, {first.events.height} kept, {kernels} kernels"
    assert f"[torch-profiler-trace]\n{line}\n" in out
    assert main(["parse", "-q", "--json", str(HAND)]) == 0
    doc = json.loads(capsys.readouterr().out)["files"][0]
    assert doc["rank"] == 1 and doc["tp"] == 1 and doc["kernels"] == 2 and doc["cut"] is None
