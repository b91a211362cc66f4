"""Phases are named by their concurrency in every text; a warm-up is named as one and judged by
no finding."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.diagnose import diagnose
from toolkit.run_analysis import RunAnalysis


def _with_warmup(root: Path) -> Path:
    """The pp8-underfilled fixture with SGLang's warm-up before the benchmark: one 7-token
    request prefilled and decoded on all 8 stages a minute before the first run."""
    out = root / "pp8-warmup"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-underfilled", out)
    lines = (out / "server.log").read_text().splitlines()
    first = next(k for k, line in enumerate(lines) if "Prefill batch" in line)
    warm = [
        f"[2026-05-01 10:05:20 PP{r}] Prefill batch, #new-seq: 1, #new-token: 7, "
        "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, "
        "#pending-token: 0, cuda graph: False, input throughput (token/s): 12.00"
        for r in range(8)
    ]
    for step in range(3):
        warm += [
            f"[2026-05-01 10:05:2{1 + step} PP{r}] Decode batch, #running-req: 1, "
            f"#token: {8 + step}, token usage: 0.00, cuda graph: True, "
            "gen throughput (token/s): 30.00, #queue-req: 0"
            for r in range(8)
        ]
    lines[first:first] = warm
    (out / "server.log").write_text("\n".join(lines) + "\n")
    return out


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_warmup(tmp_path_factory.mktemp("warmup"))


def test_the_warmup_is_named_and_kept_out_of_every_verdict(warm_run: Path) -> None:
    ctx = RunAnalysis(warm_run)
    first = ctx.phases.row(0, named=True)
    assert first["offered"] is None and ctx.is_warmup(first["phase"])
    assert ctx.load_of(first["phase"]) == "in the warm-up before the benchmark"
    assert not any(ctx.is_warmup(p) for p in ctx.phases["phase"].to_list()[1:])
    assert first["phase"] not in ctx.phase_summary["phase"].to_list()
    for f in diagnose([ctx]):
        if f.phase is not None:
            assert not ctx.is_warmup(f.phase), f.id
        text = f"{f.title} {f.summary}"
        assert not re.search(r"\bphase \d", text), (f.id, text)
        assert "concurrency —" not in text and "None" not in text, (f.id, text)
        if "offered" in f.evidence.columns:
            assert f.evidence["offered"].null_count() == 0, f.id  # no row of the warm-up


def test_a_phase_without_a_run_is_named_by_what_ran(tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-underfilled", run)
    (run / "bench.jsonl").unlink()  # no benchmark: no concurrency offered, no warm-up
    ctx = RunAnalysis(run)
    names = [ctx.load_of(p) for p in ctx.phases["phase"]]
    assert names and all(not re.search(r"\bphase \d", n) for n in names)
    assert any(
        re.fullmatch(r"at ~\d+ requests in flight \(no benchmark run placed\)", n) for n in names
    )


def test_cli_evidence_leads_with_the_concurrency(
    warm_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", "-q", str(warm_run)]) == 0
    out = capsys.readouterr().out
    headers = [line.split() for line in out.splitlines() if line.strip().startswith("concurrency")]
    assert headers and headers[0][:2] == ["concurrency", "phase"]  # a wide table's later
    # parts repeat its first column: the concurrency names every row
    assert not re.search(r"^\s+phase\s+offered", out, re.MULTILINE)
