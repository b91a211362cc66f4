"""Which node a GPU trace sample was taken on, and per-stage numbers of a multi-node launch.

The run is the two-node PP8 fixture (``multinode-a.log``: node 0, stages 0–3 on GPUs 0–3;
``multinode-b.log``: node 1, stages 4–7 on GPUs 0–3), decoding at 22:11:45–46. Each node's
trace numbers its GPUs from 0; node 0 reads busy, node 1 idle, so per stage 0–3 are busy and
4–7 idle, never the average of both nodes' GPU 0.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA
from helpers.scenarios import build

from toolkit.analyze.timeline import stage_gpu_series
from toolkit.load.gpu.nodes import place_nodes
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

LOGS = TEST_DATA / "sglang"
T0 = datetime(2025, 9, 15, 22, 11, 40)
BUSY, IDLE = 90, 0
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _smi(util: int, uuid_base: str) -> str:
    """An nvidia-smi ``--query-gpu`` CSV of GPUs 0–3 every 500 ms for 10 s, units in the
    header and the values."""
    head = "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W]"
    lines = [head]
    for k in range(20):
        when = T0 + timedelta(milliseconds=500 * k)
        for gpu in range(4):
            stamp = when.strftime("%Y/%m/%d %H:%M:%S.") + f"{when.microsecond // 1000 + gpu:03d}"
            lines.append(
                f"{stamp}, {gpu}, NVIDIA H100 80GB HBM3, {uuid_base}{gpu:012x}, {util} %, "
                f"71234 MiB, {120 + 5 * util:.2f} W"
            )
    return "\n".join(lines) + "\n"


def _exporter(hosts: dict[str, int]) -> str:
    """dcgm-exporter scrapes of both hosts in one file (a Prometheus federation dump), a
    scrape time before each; ``hosts`` is host name → utilization of its GPUs."""
    lines = []
    for k in range(10):
        lines.append((T0 + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%S"))
        lines += ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
                  "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]  # fmt: skip
        for n, (host, util) in enumerate(hosts.items()):
            for gpu in range(4):
                labels = (
                    f'gpu="{gpu}",UUID="GPU-{n}{gpu:07x}-0000-0000-0000-000000000000",'
                    f'device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"'
                )
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}")
    return "\n".join(lines) + "\n"


def _journald(text: str, host: str, pid: int) -> str:
    """The log as ``journalctl -o short`` prints it from ``host``."""
    out, when = [], "Sep 15 22:04:10"
    for line in text.splitlines():
        m = _STAMP.match(line)
        if m:
            when = datetime.fromisoformat(m.group(1)).strftime("%b %d %H:%M:%S")
        out.append(f"{when} {host} python3[{pid}]: {line}")
    return "\n".join(out) + "\n"


def _run(
    tmp_path: Path,
    traces: dict[str, str],
    toml: str = "",
    hosts: tuple[str, str] | None = None,
) -> Path:
    for n, name in enumerate(("multinode-a.log", "multinode-b.log")):
        text = (LOGS / name).read_text(encoding="utf-8")
        if hosts is not None:
            text = _journald(text, hosts[n], 4100 + n)
        (tmp_path / f"server-{n}.log").write_text(text, encoding="utf-8")
    for name, text in traces.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    if toml:
        (tmp_path / "run.toml").write_text(toml, encoding="utf-8")
    return tmp_path


def _stage_busy(directory: Path) -> dict[int, float]:
    busy = RunAnalysis(load_run(directory, cache=False)).busy
    trace = busy.filter(pl.col("metric").is_in(["util_pct", "sm_active"]))
    return dict(trace.select("pp", "busy_pct").iter_rows())


def test_two_node_traces_named_by_node_give_each_stage_its_own_gpus(tmp_path: Path) -> None:
    directory = _run(
        tmp_path,
        {
            "gpu-node0.csv": _smi(BUSY, "GPU-aaaa0000-0000-0000-0000-"),
            "gpu-node1.csv": _smi(IDLE, "GPU-bbbb0000-0000-0000-0000-"),
        },
    )
    run = load_run(directory, cache=False)
    assert run.layout.nnodes == 2 and run.layout.pp == 8
    assert run.gpu_nodes is not None
    units = run.gpu_nodes.units.sort("node")
    assert units["node"].to_list() == [0, 1]
    assert units["witness"].to_list() == ["file name", "file name"]
    assert [Path(s).name for s in units["source"]] == ["gpu-node0.csv", "gpu-node1.csv"]
    assert run.gpu_nodes.describe().startswith("gpu-node0.csv → node 0 (file name)")
    assert _stage_busy(directory) == {0: 90.0, 1: 90.0, 2: 90.0, 3: 90.0,
                                      4: 0.0, 5: 0.0, 6: 0.0, 7: 0.0}  # fmt: skip
    assert not [m for m in run.mismatches if m["input"] == "GPU trace nodes"]
    ctx = RunAnalysis(run)
    assert ctx.gpu_samples is not None
    series = stage_gpu_series(ctx.gpu_samples, ctx.roles, every="1s")
    per_gpu = series.group_by("node", "gpu", "pp").agg(pl.col("busy_pct").mean()).sort("pp")
    assert per_gpu.select("node", "gpu", "pp").rows() == [(p // 4, p % 4, p) for p in range(8)]
    assert per_gpu["busy_pct"].to_list() == [90.0] * 4 + [0.0] * 4


def test_traces_no_witness_places_are_left_out_and_said(tmp_path: Path) -> None:
    directory = _run(
        tmp_path,
        {
            "left.csv": _smi(BUSY, "GPU-aaaa0000-0000-0000-0000-"),
            "right.csv": _smi(IDLE, "GPU-bbbb0000-0000-0000-0000-"),
        },
    )
    run = load_run(directory, cache=False)
    assert run.gpu_nodes is not None
    assert run.gpu_nodes.units["node"].null_count() == 2
    assert _stage_busy(directory) == {}  # no averaging of GPU 0 over both nodes
    notes = [m for m in run.mismatches if m["input"] == "GPU trace nodes"]
    assert len(notes) == 1
    assert "160 sample(s) of left.csv, right.csv could not be placed" in notes[0]["detail"]
    assert "[gpu_trace.nodes]" in notes[0]["detail"]
    findings = RunAnalysis(run).mismatches
    assert any(m["input"] == "GPU trace nodes" for m in findings)


def test_run_toml_places_traces_whatever_their_names(tmp_path: Path) -> None:
    toml = '[gpu_trace.nodes]\n"left.csv" = 1\n"sub/right.csv" = 0\n'
    directory = _run(
        tmp_path,
        {
            "left.csv": _smi(IDLE, "GPU-aaaa0000-0000-0000-0000-"),
            "sub/right.csv": _smi(BUSY, "GPU-bbbb0000-0000-0000-0000-"),
        },
        toml,
    )
    run = load_run(directory, cache=False)
    assert run.gpu_nodes is not None
    assert run.gpu_nodes.units["witness"].to_list() == ["run.toml", "run.toml"]
    busy = _stage_busy(directory)
    assert [busy[p] for p in range(8)] == [90.0] * 4 + [0.0] * 4


def test_run_toml_naming_a_missing_file_or_node_is_said(tmp_path: Path) -> None:
    toml = '[gpu_trace.nodes]\n"gpu-node0.csv" = 5\n"gone.csv" = 1\n'
    directory = _run(
        tmp_path,
        {
            "gpu-node0.csv": _smi(BUSY, "GPU-aaaa0000-0000-0000-0000-"),
            "gpu-node1.csv": _smi(IDLE, "GPU-bbbb0000-0000-0000-0000-"),
        },
        toml,
    )
    run = load_run(directory, cache=False)
    details = [m["detail"] for m in run.mismatches if m["input"] == "GPU trace nodes"]
    assert any("on node 5, the launch has 2 nodes" in d for d in details)
    assert any("'gone.csv', no GPU trace of the run" in d for d in details)
    # the file names still place both traces
    assert run.gpu_nodes is not None
    assert run.gpu_nodes.units["witness"].to_list() == ["file name", "file name"]


def test_exporter_hostnames_match_the_hosts_of_the_logs(tmp_path: Path) -> None:
    """One dcgm-exporter file holding both hosts (``Hostname`` label); the journald headers of
    the logs name the hosts, each log's launch its ``node_rank``."""
    directory = _run(
        tmp_path,
        {"dcgm.prom": _exporter({"h100-b02": IDLE, "h100-b01": BUSY})},
        "[gpu_trace]\ninterval_s = 1.0\nstart = 2025-09-15T22:11:40\n",
        hosts=("h100-b01", "h100-b02"),
    )
    run = load_run(directory, cache=False)
    assert run.gpu_nodes is not None
    units = run.gpu_nodes.units.sort("node")
    assert units.select("host", "node", "witness").rows() == [
        ("h100-b01", 0, "host"),
        ("h100-b02", 1, "host"),
    ]
    busy = _stage_busy(directory)
    assert [busy[p] for p in range(8)] == [90.0] * 4 + [0.0] * 4


def test_a_single_node_run_keeps_every_sample_on_node_zero() -> None:
    samples = pl.DataFrame(
        {"source": ["a.csv", "b.csv"], "host": [None, None], "gpu": [0, 0]},
        schema={"source": pl.String, "host": pl.String, "gpu": pl.Int32},
    )
    placed = place_nodes(samples, nnodes=1)
    assert placed.units["node"].to_list() == [0, 0] and placed.problems == ()
    assert placed.apply(samples)["node"].to_list() == [0, 0]


@pytest.mark.parametrize(
    ("names", "nodes"),
    [
        (["node1/gpu.csv", "node2/gpu.csv"], [0, 1]),  # numbered from 1
        (["rank-0.csv", "rank-1.csv"], [0, 1]),
        (["smi_node_1.csv", "smi_node_0.csv"], [1, 0]),
        (["gpu-h100-a08.csv", "gpu-h100-a07.csv"], [1, 0]),  # the logs' host names
        (["node0.csv", "node0-again.csv"], [None, None]),  # two files, one node
        (["node0.csv", "node1.csv", "node2.csv"], [None, None, None]),  # more files than nodes
        (["node0.csv", "other.csv"], [None, None]),
    ],
)
def test_file_names_place_traces_only_when_each_names_its_own_node(
    tmp_path: Path, names: list[str], nodes: list[int | None]
) -> None:
    sources = [str(tmp_path / n) for n in names]
    samples = pl.DataFrame(
        {"source": sources, "host": [None] * len(names), "gpu": [0] * len(names)},
        schema={"source": pl.String, "host": pl.String, "gpu": pl.Int32},
    )
    placed = place_nodes(samples, nnodes=2, hosts={"h100-a07": 0, "h100-a08": 1}, root=tmp_path)
    got = dict(placed.units.select("source", "node").iter_rows())
    assert [got[s] for s in sources] == nodes
    assert bool(placed.problems) == (None in nodes)


def test_the_generated_two_node_pp16_run_reads_each_stage_on_its_node(tmp_path: Path) -> None:
    """``pp16-multinode`` writes ``gpu-node0.csv`` and ``gpu-node1.csv`` (GPUs 0–7 each):
    each phase's busy per stage is the generator's own (3-layer stages 0–2 below the rest,
    the lm_head stage 15 above), not stage k and k + 8 averaged over both nodes' GPU k."""
    directory = build("pp16-multinode", tmp_path / "pp16")
    truth = json.loads((directory / "expected.json").read_text(encoding="utf-8"))
    analysis = RunAnalysis(load_run(directory, cache=False))
    nodes = analysis.run.gpu_nodes
    assert nodes is not None and nodes.units["witness"].to_list() == ["file name"] * 2
    by_phase = analysis.busy_by_phase
    assert by_phase is not None
    for phase, played in enumerate(truth["phases"]):
        rows = by_phase.filter(pl.col("phase") == phase).sort("pp")
        assert rows["pp"].to_list() == list(range(16))
        expected = [100 * b for b in played["stage_busy"]]
        assert rows["busy_pct"].to_list() == pytest.approx(expected, abs=1.0)


def _apps(uuid_base: str, stages: range) -> str:
    """One node's ``--query-compute-apps`` listing: SGLang's scheduler of each stage on GPUs
    0–3 of the node (``_smi``'s UUIDs), as ``ppscope capture`` records it."""
    head = "timestamp, gpu_uuid, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]"
    stamp = T0.strftime("%Y/%m/%d %H:%M:%S.") + "120"
    rows = [
        f"{stamp}, {uuid_base}{gpu:012x}, 00000000:{0x18 + 16 * gpu:02X}:00.0, {4100 + pp}, "
        f"sglang::scheduler_PP{pp}, 70312 MiB"
        for gpu, pp in enumerate(stages)
    ]
    return "\n".join([head, *rows]) + "\n"


def test_two_node_traces_are_placed_by_the_gpus_their_schedulers_hold(tmp_path: Path) -> None:
    """Trace files named after nothing, but each node's compute-apps listing shows which
    stage's scheduler holds each UUID: a trace whose UUIDs are all one node's is that node's."""
    node0, node1 = "GPU-aaaa0000-0000-0000-0000-", "GPU-bbbb0000-0000-0000-0000-"
    directory = _run(
        tmp_path,
        {
            "left.csv": _smi(IDLE, node1),
            "right.csv": _smi(BUSY, node0),
            "apps-left.csv": _apps(node1, range(4, 8)),
            "apps-right.csv": _apps(node0, range(4)),
        },
    )
    run = load_run(directory, cache=False)
    assert run.gpu_nodes is not None
    units = run.gpu_nodes.units.sort("node")
    assert [Path(s).name for s in units["source"]] == ["right.csv", "left.csv"]
    assert units["witness"].to_list() == ["UUID", "UUID"] and run.gpu_nodes.guesses == ()
    assert _stage_busy(directory) == {0: 90.0, 1: 90.0, 2: 90.0, 3: 90.0,
                                      4: 0.0, 5: 0.0, 6: 0.0, 7: 0.0}  # fmt: skip
    ctx = RunAnalysis(run)
    assert not [m for m in ctx.mismatches if m["input"].startswith("GPU trace")]


def test_traces_placed_by_their_names_are_said_to_be_a_guess(tmp_path: Path) -> None:
    directory = _run(
        tmp_path,
        {
            "gpu-node1.csv": _smi(BUSY, "GPU-aaaa0000-0000-0000-0000-"),
            "gpu-node2.csv": _smi(IDLE, "GPU-bbbb0000-0000-0000-0000-"),
        },
    )
    ctx = RunAnalysis(load_run(directory, cache=False))
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU trace nodes"]
    assert "gpu-node1.csv → node 0, gpu-node2.csv → node 1" in note["detail"]
    assert "a guess" in note["detail"] and "[gpu_trace.nodes]" in note["detail"]


def test_traces_named_by_the_logs_hosts_read_each_stage_on_its_node(tmp_path: Path) -> None:
    """nvidia-smi prints no host: files named after the hosts the journald headers of the two
    nodes' logs name are placed by those names."""
    directory = _run(
        tmp_path,
        {
            "smi-h100-a08.csv": _smi(IDLE, "GPU-bbbb0000-0000-0000-0000-"),
            "smi-h100-a07.csv": _smi(BUSY, "GPU-aaaa0000-0000-0000-0000-"),
        },
        hosts=("h100-a07", "h100-a08"),
    )
    run = load_run(directory, cache=False)
    assert run.gpu_nodes is not None
    placed = dict(
        (Path(s).name, n) for s, n in run.gpu_nodes.units.select("source", "node").iter_rows()
    )
    assert placed == {"smi-h100-a07.csv": 0, "smi-h100-a08.csv": 1}
    busy = _stage_busy(directory)
    assert [busy[p] for p in range(8)] == [90.0] * 4 + [0.0] * 4
