"""ServerArgs side by side, derived values, and intended vs effective."""

from __future__ import annotations

import json

import polars as pl
from helpers import TEST_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.analyze.config import (
    CONFIG_DIFF,
    INTENDED,
    PERF_KEYS,
    captured_sizes,
    config_diff,
    default_capture_sizes,
    derived_settings,
    intended_vs_effective,
    launch_layout,
)
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sglang.server_args import parse_launch_command

DATA = TEST_DATA
PP8 = {
    "tp_size": 1,
    "pp_size": 8,
    "pp_async_batch_depth": 8,
    "pp_max_micro_batch_size": None,
    "max_running_requests": None,
    "chunked_prefill_size": 8192,
    "random_seed": 1,
    "model_path": "/m",
}
TP8 = {
    "tp_size": 8,
    "pp_size": 1,
    "pp_async_batch_depth": 0,
    "pp_max_micro_batch_size": None,
    "max_running_requests": None,
    "chunked_prefill_size": 8192,
    "random_seed": 2,
    "model_path": "/m",
    "disable_custom_all_reduce": False,
}

_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.floats(0, 1),
    st.text(max_size=6),
    st.lists(st.integers(1, 512), max_size=5),
)


@given(st.dictionaries(st.sampled_from([*PERF_KEYS, "x", "y", "seed"]), _values, max_size=12))
def test_a_launch_diffed_with_itself_is_empty(args: dict) -> None:
    assert config_diff(args, args).height == 0


def test_diff_puts_parallel_settings_first_and_keeps_values_typed() -> None:
    diff = config_diff(TP8, PP8, labels=["TP8", "PP8"])
    assert diff.schema == CONFIG_DIFF
    keys = diff["key"].unique(maintain_order=True).to_list()
    assert keys[:3] == ["tp_size", "pp_size", "pp_async_batch_depth"]
    assert keys.index("random_seed") > keys.index("pp_async_batch_depth")
    assert "disable_custom_all_reduce" in keys  # only in TP8's dump
    absent = diff.filter((pl.col("key") == "disable_custom_all_reduce") & (pl.col("run") == "PP8"))
    assert absent["value"].to_list() == [None]
    pp = diff.filter(pl.col("key") == "pp_size")
    assert [json.loads(v) for v in pp["value"]] == [1, 8]
    derived = diff.filter(pl.col("group") == "derived")["key"].unique().to_list()
    assert "pp_loop_size" in derived  # the per-slot cap needs the startup facts: unknown here


def test_full_table_keeps_unchanged_performance_keys() -> None:
    diff = config_diff(PP8, PP8, only_changed=False)
    assert diff.filter(pl.col("key") == "chunked_prefill_size").height == 2
    assert not diff["changed"].any()
    assert "random_seed" not in diff["key"].to_list()  # not a performance key


def test_derived_settings_resolve_the_auto_slot_cap() -> None:
    facts = {
        "max_running_requests": 2048,
        "max_total_num_tokens": 327680,
        "chunked_prefill_size": 8192,
        "cuda_graph_bs": [1, 2, 4, 8, 256],
    }
    d = derived_settings(PP8, facts)
    assert d["pp_loop_size"] == 16
    assert d["per_slot_cap"] == 256  # 2048 // 8, divided by pp_size, not the loop size
    assert d["kv_pool_tokens"] == 327680
    assert d["captured_max_bs"] == 256
    assert d["overlap_schedule"] is False
    assert derived_settings({**PP8, "pp_max_micro_batch_size": 4}, facts)["per_slot_cap"] == 4
    assert derived_settings(TP8, facts)["pp_loop_size"] == 1


def test_launch_layout_uses_resolved_values() -> None:
    layout = launch_layout(PP8, {"max_running_requests": 64, "max_total_num_tokens": 1000})
    assert (layout.pp, layout.pp_async_batch_depth, layout.loop_size) == (8, 8, 16)
    assert layout.max_running_requests == 64
    assert layout.micro_batch_cap(262144) == 8


def test_captured_sizes_sources() -> None:
    assert captured_sizes({"disable_cuda_graph": True}, {}) == []
    assert captured_sizes({}, {"cuda_graph_bs": {"PP0": [1, 2, 4], "PP7": [1, 2]}}) == [1, 2]
    assert captured_sizes({"cuda_graph_config": {"decode": {"bs": [8, 1]}}}, {}) == [1, 8]
    assert captured_sizes({"cuda_graph_max_bs": 16}, {}) == [1, 2, 4, 8, 12, 16]
    assert captured_sizes({}, {}) is None
    assert default_capture_sizes(40)[-3:] == [24, 32, 40]


def test_intended_vs_effective_flags_what_did_not_apply() -> None:
    flags = parse_launch_command(
        "SGLANG_PP_LAYER_PARTITION=8,8,8,8,8,7,7,7 python -m sglang.launch_server "
        "--pp-size 8 --pp-async-batch-depth 8 --pp-max-micro-batch-size 4 "
        "--max-running-requests 4096 --enable-mixed-chunk --cuda-graph-max-bs 512 --pp-asnyc 2"
    )
    args = {
        **PP8,
        "max_running_requests": 4096,
        "enable_mixed_chunk": False,
        "cuda_graph_max_bs_decode": 512,
    }
    table = intended_vs_effective(flags, args, {"max_running_requests": 2048})
    assert table.schema == INTENDED
    applied = dict(zip(table["flag"], table["applied"], strict=True))
    assert applied["pp_size"] is True and applied["pp_async_batch_depth"] is True
    assert applied["pp_max_micro_batch_size"] is False  # the dump says None
    assert applied["max_running_requests"] is False  # resolved to 2048 by the scheduler
    assert applied["enable_mixed_chunk"] is False
    assert applied["cuda_graph_max_bs"] is True  # renamed field in ≥0.5.16
    assert applied["pp_asnyc"] is False  # a typo is no field at all
    assert applied["SGLANG_PP_LAYER_PARTITION"] is None  # environment: cannot tell
    note = table.filter(pl.col("flag") == "max_running_requests")["note"].item()
    assert "resolved by the scheduler" in note


def test_cut_dump_makes_missing_flags_unknown() -> None:
    table = intended_vs_effective({"pp_size": 8, "zzz": 1}, {"pp_size": 8}, complete=False)
    assert dict(zip(table["flag"], table["applied"], strict=True)) == {"pp_size": True, "zzz": None}


def test_real_dump_diffed_with_itself() -> None:
    log = load_sglang_log(DATA / "sglang" / "v0.5.23-pp8.log", cache=False)
    launch = log.launches[0]
    assert config_diff(launch, launch).height == 0
    full = config_diff(launch, launch, only_changed=False, labels=["x", "y"])
    row = full.filter((pl.col("key") == "kv_pool_tokens") & (pl.col("run") == "x"))
    assert json.loads(row["value"].item()) == 327680
