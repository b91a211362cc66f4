"""Caveats in findings: a finding resting on an affected quantity names the quirk, and a mode
no rule models (mixed chunked prefill, speculative decoding under PP) is stated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE, TEST_DATA

from toolkit.cli.main import main
from toolkit.diagnose import diagnose
from toolkit.diagnose.caveats import RESTS_ON
from toolkit.schema.caveats import KINDS

POLL_LINES = 8  # the sample's trace prints its 8 GPUs per poll


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The sample PP8 run with a 5 s hole in its GPU trace, launched with speculative decoding
    and mixed chunked prefill (what #30775 and #22920 allow under PP)."""
    run = tmp_path_factory.mktemp("caveats") / "pp8"
    shutil.copytree(SAMPLE / "pp8", run)
    lines = (run / "gpu.csv").read_text().split("\n")
    first = 1 + 975 * POLL_LINES  # a poll's first line, mid-run
    gap = 50 * POLL_LINES  # 50 polls of 0.1 s
    (run / "gpu.csv").write_text("\n".join(lines[:first] + lines[first + gap :]))
    log = (run / "server.log").read_text()
    log = log.replace("'speculative_algorithm': None", "'speculative_algorithm': 'EAGLE'")
    log = log.replace("'enable_mixed_chunk': False", "'enable_mixed_chunk': True")
    (run / "server.log").write_text(log)
    return {f.id: f for f in diagnose([run])}


def test_a_busy_share_from_a_trace_with_a_stall_names_the_stall(findings: dict) -> None:
    bubbles = findings["gpu-idle-bubbles"]
    (stall,) = bubbles.caveats
    assert stall["kind"] == "sampling-stall" and stall["file"].endswith("gpu.csv")
    assert stall["length_s"] == pytest.approx(5.1, abs=0.05)  # 50 polls gone: 51 intervals
    assert "Caveat (sampling-stall, gpu.csv)" in bubbles.summary
    assert bubbles.to_dict()["caveats"] == [stall]
    assert [c["kind"] for c in findings["stage-imbalance"].caveats] == ["sampling-stall"]


def test_slot_fill_states_the_modes_it_does_not_model(findings: dict) -> None:
    slots = findings["pp-underfilled-slots"]
    kinds = {c["kind"]: c for c in slots.caveats}
    assert set(kinds) == {"mixed-chunk", "speculative"}
    assert "EAGLE" in kinds["speculative"]["detail"]
    assert "#22920" in kinds["mixed-chunk"]["detail"]
    assert "Caveat (speculative, the launch arguments)" in slots.summary
    # a finding that rests on neither quantity is left as the rule made it
    assert findings["pp-lockstep-logging"].caveats == ()


def test_every_caveat_kind_affects_a_known_quantity() -> None:
    assert {quantity for quantity, _ in KINDS.values()} <= set(RESTS_ON)


def test_parse_json_lists_the_caveats_of_each_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(TEST_DATA / "sglang" / "overlap-doubled-prefill.log", tmp_path / "server.log")
    shutil.copy(TEST_DATA / "gpu" / "aiperf-gpu-telemetry.jsonl", tmp_path / "telemetry.jsonl")
    shutil.copy(TEST_DATA / "prometheus" / "metrics-gateway.txt", tmp_path / "metrics.txt")
    assert main(["parse", "--json", "--no-cache", str(tmp_path)]) == 0
    files = {Path(f["path"]).name: f for f in json.loads(capsys.readouterr().out)["files"]}
    kinds = {name: [c["kind"] for c in f["caveats"]] for name, f in files.items()}
    assert kinds == {
        "server.log": ["doubled-prefill"],
        "telemetry.jsonl": ["sampling-stall"],
        "metrics.txt": ["gateway-rename", "router-series"],
    }
    assert files["telemetry.jsonl"]["caveats"][0]["length_s"] == 7.0


def test_a_busy_share_from_a_reprinted_trace_names_the_reprint(tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run)
    rows = [ln.split(", ") for ln in (run / "gpu.csv").read_text().splitlines()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    padded = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    (run / "gpu.csv").write_text("\n".join(padded) + "\n")  # as column -t -s, prints it
    bubbles = {f.id: f for f in diagnose([run])}["gpu-idle-bubbles"]
    assert [c["kind"] for c in bubbles.caveats] == ["reprinted-table"]
    assert "Caveat (reprinted-table, gpu.csv)" in bubbles.summary
