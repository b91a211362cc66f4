"""Tests for toolkit.load.sglang.server_args: the server_args dump and the launch command."""

from __future__ import annotations

import contextlib
import math

import pytest
from helpers import TEST_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.sglang.server_args import (
    ServerArgsDump,
    ServerArgsError,
    parse_launch_command,
    parse_server_args,
)

DATA = TEST_DATA / "server_args"
FIXTURES = sorted(p.name for p in DATA.glob("*.log"))


def dump_text(name: str) -> str:
    """The text after ``server_args=`` in a fixture log line."""
    line = (DATA / name).read_text(encoding="utf-8").rstrip("\n")
    return line.split("server_args=", 1)[1]


def same(a: object, b: object) -> bool:
    """Exact equality that also tells True from 1, -0.0 from 0.0 and matches nan to nan."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


# --------------------------------------------------------------------------- fixtures


def test_fixtures_exist() -> None:
    assert len(FIXTURES) == 4


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_dumps_read_cleanly(name: str) -> None:
    dump = parse_server_args(dump_text(name))
    assert dump.complete
    assert dump.problems == ()
    assert next(iter(dump.args)) == "model_path"
    assert isinstance(dump.args["tp_size"], int)


def test_v0_4_dump_with_lpm_policy() -> None:
    dump = parse_server_args(dump_text("v0_4_3_tp8.log"))
    args = dump.args
    assert dump.style == "dataclass"
    assert len(args) == 96
    assert args["schedule_policy"] == "lpm"
    assert args["tp_size"] == 8
    assert "pp_size" not in args  # pp_size arrived in 0.4.6
    assert args["mem_fraction_static"] == 0.81
    assert args["cuda_graph_max_bs"] == 160
    assert args["cuda_graph_bs"] is None
    assert args["json_model_override_args"] == "{}"  # a JSON string stays a string
    assert args["torchao_config"] == ""
    assert args["trust_remote_code"] is True
    assert args["disable_cuda_graph"] is False
    assert list(args)[-1] == "enable_hierarchical_cache"


def test_v0_5_dump_with_pp_fields() -> None:
    args = parse_server_args(dump_text("v0_5_7_pp8.log")).args
    assert len(args) == 220
    assert (args["tp_size"], args["pp_size"]) == (1, 8)
    assert args["pp_max_micro_batch_size"] is None
    assert args["pp_async_batch_depth"] == 8
    assert args["disable_overlap_schedule"] is True
    assert args["watchdog_timeout"] == math.inf
    assert args["model_loader_extra_config"] == "{}"
    assert args["json_model_override_args"] == '{"rope_scaling": {"factor": 2.0}}'
    assert args["api_key"] == 'say "hi", it\'s (me), ok'
    assert args["served_model_name"] == "kimi-k2 (pp8, it's the slow one)"
    assert args["chat_template"] == "/templates/kimi (v2), final.jinja"
    assert args["lora_target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert args["tokenizer_metrics_allowed_custom_labels"] == ["tenant", "team"]
    assert args["bucket_time_to_first_token"] == [0.1, 0.25, 0.5, 1.0, 2.5, 5.0]
    bs = args["cuda_graph_bs"]
    assert isinstance(bs, list) and len(bs) == 52 and bs[:5] == [1, 2, 4, 8, 12] and bs[-1] == 512
    assert args["custom_weight_loader"] == []
    assert args["offload_group_size"] == -1
    assert args["dynamic_batch_tokenizer_batch_timeout"] == 0.002
    assert list(args)[-1] == "decrypted_draft_config_file"


def test_v0_5_16_nested_cuda_graph_config_becomes_dict() -> None:
    args = parse_server_args(dump_text("v0_5_16_nested.log")).args
    config = args["cuda_graph_config"]
    assert isinstance(config, dict)
    assert list(config) == ["decode", "prefill"]
    assert config["decode"]["backend"] == "full"
    assert config["decode"]["max_bs"] == 256
    assert config["decode"]["bs"] == args["cuda_graph_bs_decode"]
    assert config["prefill"] == {
        "backend": "disabled",
        "max_bs": None,
        "bs": None,
        "tc_compiler": "eager",
    }
    # the fields after the nested repr are still read
    assert args["disable_cuda_graph"] is False
    assert args["disable_prefill_cuda_graph"] is True
    assert (args["attn_cp_size"], args["moe_dp_size"]) == (1, 1)


def test_v0_5_20_dict_repr() -> None:
    dump = parse_server_args(dump_text("v0_5_20_dict.log"))
    args = dump.args
    assert dump.style == "dict"
    assert dump.complete
    assert (args["tp_size"], args["pp_size"], args["pp_async_batch_depth"]) == (1, 8, 8)
    assert args["pp_max_micro_batch_size"] == 128
    assert args["served_model_name"] == "kimi-k2 (pp8, it's here)"
    assert args["chat_template"] == 'say "hi", it\'s me'
    assert args["cuda_graph_config"]["decode"]["max_bs"] == 128
    assert args["cuda_graph_config"]["prefill"]["bs"] is None
    assert args["bucket_time_to_first_token"] == [0.1, 0.5, 1.0, math.inf]
    assert list(args)[-1] == "enable_dp_attention"


def test_both_shapes_give_the_same_args() -> None:
    old = parse_server_args(dump_text("v0_5_16_nested.log")).args
    as_dict = "{" + ", ".join(f"{k!r}: {v!r}" for k, v in old.items()) + "}"
    assert same(parse_server_args(as_dict).args, old)


# --------------------------------------------------------------------------- values

ODD_VALUES = [
    ("<LoadFormat.AUTO: 'auto'>", "<LoadFormat.AUTO: 'auto'>"),
    ("<Backend.FULL: 'a, b)'>", "<Backend.FULL: 'a, b)'>"),
    ("PosixPath('/x, y')", "PosixPath('/x, y')"),
    (
        "functools.partial(<function f at 0x7f3a>, 1)",
        "functools.partial(<function f at 0x7f3a>, 1)",
    ),
    ("defaultdict(<class 'list'>, {})", "defaultdict(<class 'list'>, {})"),
    ("{'a': PosixPath('/x')}", "{'a': PosixPath('/x')}"),
    ("Foo(1, b=2)", "Foo(1, b=2)"),
    ("b'raw'", "b'raw'"),
    ("1j", "1j"),
    ("some_name", "some_name"),
]
PLAIN_VALUES = [
    ("device(type='cuda', index=0)", {"type": "cuda", "index": 0}),
    (
        "Outer(inner=Inner(bs=[1, 2], on=True), name='x, y')",
        {"inner": {"bs": [1, 2], "on": True}, "name": "x, y"},
    ),
    ("(1, 'a', (2,))", [1, "a", [2]]),
    ("{3, 1}", [3, 1]),
    ("set()", []),
    ("frozenset()", []),
    ("[]", []),
    ("{}", {}),
    ("inf", math.inf),
    ("-inf", -math.inf),
    ("[inf, -inf, 1.5]", [math.inf, -math.inf, 1.5]),
    ("{'x': {'y': [None, False]}, 2: 'two'}", {"x": {"y": [None, False]}, 2: "two"}),
    ("1e-05", 1e-05),
    ("-0.0", -0.0),
    ("-3", -3),
    ("'a\\'b'", "a'b"),
    ('"it\'s"', "it's"),
    ("'tab\\there\\n'", "tab\there\n"),
    ("'\\u00e9t\\xe9'", "été"),
    ("'a=b, c)'", "a=b, c)"),
]


@pytest.mark.parametrize(("piece", "expected"), ODD_VALUES)
def test_odd_reprs_are_kept_as_text(piece: str, expected: str) -> None:
    dump = parse_server_args(f"ServerArgs(before=1, x={piece}, after=2)")
    assert dump.complete
    assert dump.args == {"before": 1, "x": expected, "after": 2}
    assert dump.problems == ("field 'x': kept as text",)


@pytest.mark.parametrize(("piece", "expected"), PLAIN_VALUES)
def test_plain_values_are_typed(piece: str, expected: object) -> None:
    for text in (
        f"ServerArgs(before=1, x={piece}, after=2)",
        f"{{'before': 1, 'x': {piece}, 'after': 2}}",
    ):
        dump = parse_server_args(text)
        assert dump.complete and dump.problems == ()
        assert same(dump.args, {"before": 1, "x": expected, "after": 2}), text


def test_nan_reads_as_float() -> None:
    value = parse_server_args("ServerArgs(a=nan, b=[nan])").args
    assert math.isnan(value["a"]) and math.isnan(value["b"][0])


def test_strings_with_separators_quotes_and_brackets() -> None:
    text = (
        "ServerArgs(a='x, y=1)', b=\"it's (fine)\", c='q\\'(', d=')', e='{', "
        "f='say \"hi\", it\\'s', g=2)"
    )
    args = parse_server_args(text).args
    assert args == {
        "a": "x, y=1)",
        "b": "it's (fine)",
        "c": "q'(",
        "d": ")",
        "e": "{",
        "f": 'say "hi", it\'s',
        "g": 2,
    }


def test_returned_lists_are_fresh_objects() -> None:
    first = parse_server_args("ServerArgs(a=[], b={})").args
    first["a"].append(1)
    first["b"]["k"] = 1
    assert parse_server_args("ServerArgs(a=[], b={})").args == {"a": [], "b": {}}


# --------------------------------------------------------------------------- edges


@pytest.mark.parametrize("junk", ["", "   ", "\r", "   \r", "\t\r\n"])
def test_trailing_whitespace_is_ignored_quietly(junk: str) -> None:
    dump = parse_server_args("ServerArgs(tp_size=8, pp_size=1)" + junk)
    assert dump == ServerArgsDump({"tp_size": 8, "pp_size": 1}, True, (), "dataclass")


@pytest.mark.parametrize("junk", ["```", "   ```\r", " [2025-01-01 00:00:00] next line"])
def test_trailing_text_is_ignored_and_noted(junk: str) -> None:
    dump = parse_server_args("  {'tp_size': 8}" + junk)
    assert dump.complete
    assert dump.args == {"tp_size": 8}
    assert len(dump.problems) == 1 and dump.problems[0].startswith("ignored text after the dump")


def test_empty_dumps_and_trailing_comma() -> None:
    assert parse_server_args("ServerArgs()") == ServerArgsDump({}, True, (), "dataclass")
    assert parse_server_args("{}") == ServerArgsDump({}, True, (), "dict")
    assert parse_server_args("ServerArgs(a=1, )").args == {"a": 1}
    assert parse_server_args("{'a': 1,}").args == {"a": 1}


def test_repeated_field_keeps_the_first() -> None:
    dump = parse_server_args("ServerArgs(a=1, b=2, a=3)")
    assert dump.args == {"a": 1, "b": 2}
    assert dump.problems == ("field 'a' repeated; kept the first value",)


def test_pieces_without_a_usable_name_are_skipped() -> None:
    dump = parse_server_args("ServerArgs(7, a=1, 2x=3, b=[1, 2])")
    assert dump.complete
    assert dump.args == {"a": 1, "b": [1, 2]}
    assert len(dump.problems) == 2


def test_non_string_dict_key_keeps_its_text() -> None:
    dump = parse_server_args("{1: 'one', 'b': 2}")
    assert dump.args == {"1": "one", "b": 2}
    assert len(dump.problems) == 1


@pytest.mark.parametrize(
    "text", ["", "   ", "hello", "Namespace(tp_size=8)", "[1, 2]", "(", "serverargs(a=1)"]
)
def test_text_that_is_not_a_dump_raises(text: str) -> None:
    with pytest.raises(ServerArgsError, match="not a server_args dump"):
        parse_server_args(text)
    assert issubclass(ServerArgsError, ToolkitError)


@pytest.mark.parametrize("text", ["S", "Server", "ServerArgs", "  ServerArgs  "])
def test_a_cut_opener_is_a_cut_dump(text: str) -> None:
    assert parse_server_args(text) == ServerArgsDump(
        {}, False, ("cut before the first field",), "dataclass"
    )


def test_cut_names_the_last_field_read() -> None:
    dump = parse_server_args("ServerArgs(model_path='/m', tp_size=8, pp_si")
    assert dump.args == {"model_path": "/m", "tp_size": 8}
    assert not dump.complete
    assert dump.problems == ("cut after field 'tp_size'",)
    dump = parse_server_args("{'model_path': '/m")
    assert dump.args == {} and dump.problems == ("cut before the first field",)


def test_a_value_right_at_the_cut_is_dropped() -> None:
    # "tp_size=8" might have been "tp_size=80": a field counts only once its comma is seen.
    assert parse_server_args("ServerArgs(a=1, tp_size=8").args == {"a": 1}
    assert parse_server_args("ServerArgs(a=1, b=[1, 2]").args == {"a": 1}


def assert_prefix(cut: ServerArgsDump, full: ServerArgsDump) -> None:
    assert not cut.complete
    keys = list(cut.args)
    assert keys == list(full.args)[: len(keys)]
    assert all(same(cut.args[k], full.args[k]) for k in keys)


@pytest.mark.parametrize("name", FIXTURES)
def test_cut_at_every_position_keeps_a_prefix(name: str) -> None:
    body = dump_text(name)
    full = parse_server_args(body)
    assert full.complete
    for end in range(1, len(body)):
        assert_prefix(parse_server_args(body[:end]), full)


# --------------------------------------------------------------------------- properties

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)
LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def as_dataclass_repr(fields: dict[str, object]) -> str:
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


@given(st.dictionaries(NAMES, VALUES, max_size=12))
def test_dataclass_repr_round_trips(fields: dict[str, object]) -> None:
    dump = parse_server_args(as_dataclass_repr(fields))
    assert dump.complete and dump.problems == ()
    assert same(dump.args, fields)


@given(st.dictionaries(st.text(max_size=12), VALUES, max_size=12))
def test_dict_repr_round_trips(fields: dict[str, object]) -> None:
    dump = parse_server_args(repr(fields))
    assert dump.complete and dump.problems == ()
    assert same(dump.args, fields)


@given(st.dictionaries(NAMES, VALUES, min_size=1, max_size=8), st.booleans(), st.data())
def test_generated_dumps_cut_anywhere_keep_a_prefix(
    fields: dict[str, object], dict_shape: bool, data: st.DataObject
) -> None:
    text = repr(fields) if dict_shape else as_dataclass_repr(fields)
    end = data.draw(st.integers(1, len(text) - 1))
    assert_prefix(parse_server_args(text[:end]), parse_server_args(text))


def read_or_refuse(text: str) -> ServerArgsDump | None:
    try:
        return parse_server_args(text)
    except ServerArgsError:
        return None


STRUCTURAL = st.text(alphabet="'\"()[]{}<>,=:\\ -.aeinfx01\r\n", max_size=80)


@given(st.text(max_size=200) | STRUCTURAL)
def test_garbage_never_raises_anything_else(text: str) -> None:
    read_or_refuse(text)


@given(
    st.sampled_from(["ServerArgs(", "{", "ServerArgs(a=", "{'a': "]),
    st.text(max_size=120) | STRUCTURAL,
)
def test_garbage_after_an_opener_always_returns(opener: str, rest: str) -> None:
    dump = parse_server_args(opener + rest)
    assert all(isinstance(k, str) for k in dump.args)


@given(st.text(max_size=200))
def test_garbage_command_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(ServerArgsError):
        parse_launch_command(text)


# --------------------------------------------------------------------------- size


def test_a_30_kb_dump_parses_whole() -> None:
    # Repeat a real dump's fields under new names: a realistic value mix at ~30 KB.
    fields = parse_server_args(dump_text("v0_5_7_pp8.log")).args
    nested = parse_server_args(dump_text("v0_5_16_nested.log")).args["cuda_graph_config"]
    pieces = [f"cuda_graph_config={nested!r}"]
    for copy in range(5):
        pieces += [f"{k}_{copy}={v!r}" for k, v in fields.items()]
    text = "ServerArgs(" + ", ".join(pieces) + ")"
    assert len(text) > 30_000
    dump = parse_server_args(text)
    assert dump.complete and len(dump.args) == 1 + 5 * len(fields)


# --------------------------------------------------------------------------- command


def test_launch_command_from_the_brief() -> None:
    command = (
        "python -m sglang.launch_server --model-path X --tp-size 8 --pp-size 8 "
        "--pp-async-batch-depth 8 --disable-cuda-graph --cuda-graph-bs 1 2 4 "
        "--json-model-override-args '{\"a\": 1}'"
    )
    assert parse_launch_command(command) == {
        "model_path": "X",
        "tp_size": 8,
        "pp_size": 8,
        "pp_async_batch_depth": 8,
        "disable_cuda_graph": True,
        "cuda_graph_bs": [1, 2, 4],
        "json_model_override_args": '{"a": 1}',
    }


def test_launch_command_with_env_continuations_and_quotes() -> None:
    command = """CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 SGLANG_PP_LAYER_PARTITION=7,7,7,7,7,7,7,12 \\
    python3 -m sglang.launch_server \\
      --model /models/Kimi-K2 \\
      --pp 8 --tp 1 --dp 1 --ep 1 \\
      --mem-fraction-static=0.85 \\
      --served-model-name "kimi k2 (pp8)" \\
      --enable-metrics \\
      --offload-group-size -1 \\
      --trust-remote-code true --skip-server-warmup False
"""
    args = parse_launch_command(command)
    assert args == {
        "__env__": {
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
            "SGLANG_PP_LAYER_PARTITION": "7,7,7,7,7,7,7,12",
        },
        "model_path": "/models/Kimi-K2",
        "pp_size": 8,
        "tp_size": 1,
        "dp_size": 1,
        "ep_size": 1,
        "mem_fraction_static": 0.85,
        "served_model_name": "kimi k2 (pp8)",
        "enable_metrics": True,
        "offload_group_size": -1,
        "trust_remote_code": True,
        "skip_server_warmup": False,
    }


def test_sglang_serve_and_windows_line_ends() -> None:
    args = parse_launch_command("sglang serve --model-path /m \\\r\n --tp 8\r\n")
    assert args == {"model_path": "/m", "tp_size": 8}
    assert "__env__" not in args


def test_shell_plumbing_ends_the_command() -> None:
    args = parse_launch_command(
        "nohup python -m sglang.launch_server --tp 8 --log-level info 2>&1 | tee s.log &"
    )
    assert args == {"tp_size": 8, "log_level": "info"}
    assert parse_launch_command("FOO=1 env BAR=2 sglang serve --pp 4 > out.log; echo done") == {
        "__env__": {"FOO": "1", "BAR": "2"},
        "pp_size": 4,
    }


def test_values_keep_their_text_unless_plainly_typed() -> None:
    args = parse_launch_command(
        "sglang serve --model-path 007 --x 1e-3 --y none --z 1,2,4 --w -- --v=a=b --u '' "
        "--tp 2 --tp 4"
    )
    assert args["model_path"] == "007"  # not an int literal
    assert args["x"] == 0.001
    assert args["y"] == "none"
    assert args["z"] == "1,2,4"
    assert args["w"] is True  # the bare "--" is not a value
    assert args["v"] == "a=b"
    assert args["u"] == ""
    assert args["tp_size"] == 4  # the last repeat wins, as with argparse


def test_unbalanced_quote_still_reads_the_flags() -> None:
    args = parse_launch_command("sglang serve --served-model-name 'kimi --tp 8")
    assert args["tp_size"] == 8


@pytest.mark.parametrize("command", ["", "python -m sglang.launch_server", "FOO=1 sglang serve -h"])
def test_command_without_flags_raises(command: str) -> None:
    with pytest.raises(ServerArgsError, match="no --flag"):
        parse_launch_command(command)
