"""The layer split of a PP launch from the KV pool (and weights) each stage reports at startup.

Logs follow SGLang 0.5.23 (``tests/data/diagnose/make_fixtures.py``'s startup block) with the
per-rank ``Load weight end`` and ``KV Cache is allocated`` lines of
``../shared/formats/sglang-log-formats.md``: Kimi K2 (61 layers) over PP4.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.partition import STAGE_MEMORY, measured_partition
from toolkit.diagnose.imbalance import split_source
from toolkit.run_analysis import RunAnalysis

_spec = importlib.util.spec_from_file_location(
    "diagnose_fixtures", TEST_DATA / "diagnose" / "make_fixtures.py"
)
assert _spec is not None and _spec.loader is not None
FX = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = FX
_spec.loader.exec_module(FX)

MLA_TOKEN_BYTES_PER_LAYER = 1152  # one MLA layer's latent per token


def _run(tmp_path: Path, layers: list[int], *, mla: bool = True, command: str = "") -> Path:
    la = FX.Launch(pp=len(layers))
    lines = [f"[{FX.stamp(0)}] server_args={FX.server_args(la)!r}"]
    tokens = 327680
    for k, n in enumerate(layers):
        tag = f" PP{k}"
        weight = 9.8 * n + (0.9 if k == 0 else 0.0) + (1.8 if k == len(layers) - 1 else 0.0)
        lines.append(
            f"[{FX.stamp(300)}{tag}] Load weight end. elapsed=312.40 s, "
            f"type=DeepseekV3ForCausalLM, avail mem={95.0 - weight:.2f} GB, "
            f"mem usage={weight:.2f} GB."
        )
        gb = tokens * MLA_TOKEN_BYTES_PER_LAYER * n / 1e9
        kv = f"KV size: {gb:.2f} GB" if mla else f"K size: {gb / 2:.2f} GB, V size: {gb / 2:.2f} GB"
        lines.append(
            f"[{FX.stamp(301)}{tag}] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {tokens}, {kv}"
        )
    phase = FX.Phase(440, [8] * len(layers), 400.0)
    lines += FX.phase_lines(la, phase)
    lines.sort(key=lambda s: s[1:20])
    (tmp_path / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    toml = 'label = "PP4"\nsynthetic = true\n'
    if command:
        toml += f'command = "{command}"\n'
    (tmp_path / "run.toml").write_text(toml, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("mla", [True, False])
def test_an_uneven_split_is_read_from_the_kv_pools(tmp_path: Path, mla: bool) -> None:
    ctx = RunAnalysis(_run(tmp_path, [10, 10, 10, 31], mla=mla))
    memory = ctx.stage_memory
    assert memory.schema == STAGE_MEMORY and memory["pp"].to_list() == [0, 1, 2, 3]
    assert memory["weight_gb"][3] > 2.5 * memory["weight_gb"][1]  # the split shows in weights
    assert ctx.layout.layer_partition == (10, 10, 10, 31)
    assert split_source(ctx) == "KV pool per stage at startup"


def test_the_default_split_leaves_the_layout_default(tmp_path: Path) -> None:
    ctx = RunAnalysis(_run(tmp_path, [15, 15, 15, 16]))
    assert ctx.layout.layer_partition is None and split_source(ctx) is None


def test_the_launch_command_wins_over_the_measure(tmp_path: Path) -> None:
    cmd = "SGLANG_PP_LAYER_PARTITION=16,15,15,15 python -m sglang.launch_server --pp-size 4"
    ctx = RunAnalysis(_run(tmp_path, [10, 10, 10, 31], command=cmd))
    assert ctx.layout.layer_partition == (16, 15, 15, 15)
    assert split_source(ctx) == "launch command"


def _memory(per_token: list[float | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "pp": list(range(len(per_token))),
            "weight_gb": [70.0] * len(per_token),
            "kv_gb": [None if x is None else x * 1e5 / 1e9 for x in per_token],
            "kv_tokens": [100000] * len(per_token),
            "kv_bytes_per_token": per_token,
        },
        schema=STAGE_MEMORY,
    )


def test_a_split_needs_every_stage_and_whole_layers() -> None:
    assert measured_partition(_memory([8064.0, 8064.0, 8064.0, 9216.0]), 29, 4) == (7, 7, 7, 8)
    assert measured_partition(_memory([8064.0, 8064.0, None, 9216.0]), 29, 4) is None
    # layers of two KV sizes (a hybrid model): the shares fall between whole layers
    assert measured_partition(_memory([8064.0, 10000.0, 8064.0, 9216.0]), 29, 4) is None
