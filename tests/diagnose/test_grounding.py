"""The diagnosis rests on the run's own model and machine, never on the sample incident's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE

from toolkit.cli.main import main
from toolkit.diagnose import diagnose
from toolkit.run_analysis import RunAnalysis


def _relabelled(tmp_path: Path, model_id: str) -> Path:
    """The sample's PP8 run with its log and launch command naming another model."""
    run = tmp_path / model_id.replace("/", "_")
    shutil.copytree(SAMPLE / "pp8", run)
    for name in ("server.log", "run.toml"):
        path = run / name
        path.write_text(path.read_text().replace("moonshotai/Kimi-K2.6", model_id))
    return run


def _diagnose_json(run: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["diagnose", "--json", str(run)]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_sample_is_read_as_kimi_k2_on_its_own_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diagnose_json(SAMPLE / "pp8", capsys)
    (run,) = doc["runs"]
    assert run["model"]["spec_from"] == "table: Kimi-K2"
    assert run["model"]["id_from"] == "ServerArgs model_path"
    assert run["hardware"]["gpu"].startswith("NVIDIA RTX PRO 6000")
    assert run["hardware"]["gpu_from"] == "GPU trace" and run["hardware"]["gpus"] == 8
    assert run["hardware"]["interconnect"] == "pcie"
    assert run["constants"]["hop_s"].startswith("fitted")
    assert run["constants"]["hbm_bytes_s"].startswith("table: RTX PRO 6000 Blackwell")


def test_relabelled_as_llama_the_run_gets_llamas_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = _diagnose_json(SAMPLE / "pp8", capsys)
    llama = _diagnose_json(_relabelled(tmp_path, "meta-llama/Llama-3.1-8B-Instruct"), capsys)
    assert llama["runs"][0]["model"]["spec_from"] == "table: Llama-3.1-8B"
    assert llama["runs"][0]["model"]["layers"] == 32
    assert "Kimi" not in json.dumps(llama)
    # the measured packing cost is the same; the model's constants follow the architecture
    # (a MoE's routing is an assumed constant, a dense model has none)
    impact = {d["id"]: d["impact"] for d in kimi["findings"]}
    other = {d["id"]: d["impact"] for d in llama["findings"]}
    assert other["pp-underfilled-slots"] == impact["pp-underfilled-slots"]
    assert kimi["runs"][0]["constants"]["e_eff"].startswith("assumed: uniform routing")
    assert "e_eff" not in llama["runs"][0]["constants"]


def test_an_unknown_model_is_said_and_sized_by_measurement_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _relabelled(tmp_path, "acme/house-model-7")
    doc = _diagnose_json(run, capsys)
    model = doc["runs"][0]["model"]
    assert (model["id"], model["spec_from"], model["name"]) == (
        "acme/house-model-7",
        "unknown",
        None,
    )
    assert doc["runs"][0]["constants"] is None
    assert all(f["basis"] != "modelled" for f in doc["findings"])
    assert {"check": "unexplained-slowdown", "missing": "model architecture"}.items() <= next(
        s for s in doc["skipped"] if s["check"] == "unexplained-slowdown"
    ).items()
    assert main(["diagnose", str(run)]) == 0
    assert "config.json" in capsys.readouterr().out


def test_a_config_json_in_the_run_directory_defines_the_model(tmp_path: Path) -> None:
    run = _relabelled(tmp_path, "acme/house-model-7")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 40,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "intermediate_size": 13824,
        "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    }
    (run / "config.json").write_text(json.dumps(config, indent=2))
    ctx = RunAnalysis(run)
    assert ctx.model.source == "config.json" and ctx.model.spec.layers == 40
    assert ctx.fit is not None and ctx.fit.params.model.layers == 40


def test_an_unrelated_run_never_changes_another_runs_expectation(tmp_path: Path) -> None:
    """The PP8 run's fit is its own when passed with a run of another model on another machine."""
    alone = RunAnalysis(SAMPLE / "pp8")
    diagnose([alone])
    other = _relabelled(tmp_path, "meta-llama/Llama-3.1-8B-Instruct")
    (other / "gpu.csv").write_text(
        (other / "gpu.csv").read_text().replace("RTX PRO 6000 Blackwell Server Edition", "H100")
    )
    paired = RunAnalysis(SAMPLE / "pp8")
    diagnose([paired, RunAnalysis(other)])
    assert paired.fit.params == alone.fit.params
    assert paired.fit.calibration == alone.fit.calibration
