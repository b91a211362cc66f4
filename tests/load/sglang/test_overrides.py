"""Runtime changes of the arguments, in each form SGLang logs them, per launch and rank."""

from __future__ import annotations

import json

import pytest

from toolkit import load_sglang_log
from toolkit.load.sglang.overrides import Override, changed_keys, parse_override

ARGS = "model_path='m', tp_size=1, pp_size=2, max_running_requests=64, pp_max_micro_batch_size=None"
P0, P1 = "[2026-05-25 21:40:{s:02d} PP0]", "[2026-05-25 21:40:{s:02d} PP1]"


def _line(prefix: str, s: int, message: str) -> str:
    return f"{prefix.format(s=s)} {message}"


@pytest.mark.parametrize(
    ("message", "values", "whole"),
    [
        (
            "Global server args updated! global_server_args_dict={'attention_backend': 'fa3', "
            "'max_micro_batch_size': 16, 'enable_dp_attention': False}",
            {"attention_backend": "fa3", "max_micro_batch_size": 16, "enable_dp_attention": False},
            True,
        ),
        (
            f"Global server args updated! get_global_server_args()=ServerArgs({ARGS})",
            {
                "model_path": "m",
                "tp_size": 1,
                "pp_size": 2,
                "max_running_requests": 64,
                "pp_max_micro_batch_size": None,
            },
            True,
        ),
        (
            "Config updated via context override: {'pp_max_micro_batch_size': 4}",
            {"pp_max_micro_batch_size": 4},
            False,
        ),
    ],
)
def test_each_accepted_form(message: str, values: dict[str, object], whole: bool) -> None:
    change = parse_override(message)
    assert change == Override(values, whole)


def test_refusals_name_the_key_and_the_reason() -> None:
    refused = parse_override(
        "Updating max_micro_batch_size to 40 is rejected because it is out of the valid "
        "range [1, 8]."
    )
    assert refused is not None and refused.values == {"max_micro_batch_size": 40}
    assert refused.refused == "it is out of the valid range [1, 8]"
    assert changed_keys({}, refused) == {}
    assert parse_override("Updating weights from disk...") is None
    assert parse_override("Decode batch, #running-req: 1") is None


def test_a_whole_state_changes_only_what_differs() -> None:
    before = {"pp_max_micro_batch_size": None, "tp_size": 1}
    change = parse_override(
        "Global server args updated! get_global_server_args()=ServerArgs(tp_size=1, "
        "pp_max_micro_batch_size=4)"
    )
    assert change is not None and changed_keys(before, change) == {"pp_max_micro_batch_size": 4}


def test_a_cut_state_is_read_as_far_as_it_goes() -> None:
    change = parse_override(
        "Global server args updated! get_global_server_args()=ServerArgs(tp_size=1, pp_max_mi"
    )
    assert change is not None and change.values == {"tp_size": 1}
    assert "the logged state is cut" in change.problems


def test_a_log_lists_its_changes_per_launch_and_rank(write_log) -> None:
    dump = f"server_args=ServerArgs({ARGS})"
    whole = f"Global server args updated! get_global_server_args()=ServerArgs({ARGS})".replace(
        "pp_max_micro_batch_size=None", "pp_max_micro_batch_size=4"
    )
    lines = [
        _line(P0, 1, dump),
        _line(P0, 2, "Decode batch, #running-req: 8, #token: 800, token usage: 0.01, "
              "cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0"),
        _line(P0, 3, whole),
        _line(P1, 3, whole),
        _line(P0, 4, "Updating tp_size is not supported."),
        _line(P0, 5, "Config updated via context override: {'pp_max_micro_batch_size': 6}"),
        _line(P0, 6, "Global server args updated! nothing after it"),
        _line(P0, 7, dump),
        _line(P0, 8, "Config updated via context override: {'chunked_prefill_size': 2048}"),
        _line(P0, 9, "Updating weights from disk is not supported."),
    ]  # fmt: skip
    log = load_sglang_log(write_log("\n".join(lines) + "\n"), cache=False)
    rows = log.overrides.select("launch", "pp", "lineno", "key", "value", "status").rows()
    assert rows == [
        (0, 0, 3, "pp_max_micro_batch_size", "4", "set"),
        (0, 1, 4, "pp_max_micro_batch_size", "4", "set"),
        (0, 0, 5, "tp_size", "null", "refused"),
        (0, 0, 6, "pp_max_micro_batch_size", "6", "set"),
        (0, 0, 7, None, None, "unreadable"),
        (1, 0, 9, "chunked_prefill_size", "2048", "set"),
        (1, 0, 10, None, None, "unreadable"),
    ]
    assert json.loads(rows[0][4]) == 4
    coverage = log.coverage()
    assert coverage["counts"]["override"] == 7 and coverage["tables"]["overrides"] == 7
