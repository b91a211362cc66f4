"""``run.toml`` from hostile bytes and from documents of every TOML type: a ``RunConfig`` or a
``ConfigError`` that names the line of the key at fault."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, mutated
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ConfigError, ToolkitError
from toolkit.load.run_config import MAX_CLOCK_OFFSET_S, read_run_config

pytestmark = pytest.mark.fuzz

SEEDS = [p.read_bytes() for p in sorted(TEST_DATA.rglob("run.toml"))] + [
    b'label = "PP8"\ncommand = "python -m sglang.launch_server --pp-size 8"\n'
    b'hardware = "8x H100"\ninterconnect = "nvlink"\nclock_offset_s = -1.5\n'
    b'synthetic = false\nnotes = """two\nlines"""\n[gpu_trace]\nfields = "timestamp,index"\n'
]
KEYS = ["label", "command", "hardware", "interconnect", "clock_offset_s", "synthetic", "notes"]
KEYS += ["lable", "clock_offset", "gpu_trace.fields", "gpu_trace.feilds", "extra.x"]


def _toml_value(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["str", "int", "float", "special", "bool", "array", "date"]))
    if kind == "str":
        text = draw(st.text(max_size=20))
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if kind == "int":
        return str(draw(st.integers(-(2**70), 2**70)))
    if kind == "float":
        value = draw(st.floats(allow_nan=False, allow_infinity=False))
        return repr(value) if "e" in repr(value) or "." in repr(value) else f"{value}.0"
    if kind == "special":
        return draw(st.sampled_from(["inf", "-inf", "nan", "+nan", "1e300", "-1e308", "864001"]))
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if kind == "array":
        return "[" + ", ".join(str(i) for i in range(draw(st.integers(0, 3)))) + "]"
    return "1979-05-27T07:32:00Z"


@st.composite
def documents(draw: st.DrawFn) -> str:
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=6, unique=True))
    top = [k for k in keys if "." not in k]
    nested = [k for k in keys if "." in k]
    lines = [f"{k} = {_toml_value(draw)}" for k in top]
    if nested and draw(st.booleans()):
        lines += [f"{k} = {_toml_value(draw)}" for k in nested]  # dotted keys
    else:
        for k in nested:
            table, key = k.split(".")
            lines += [f"[{table}]", f"{key} = {_toml_value(draw)}"]
    return "\n".join(lines) + "\n"


def _read(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "run.toml").write_bytes(data)
    try:
        config = read_run_config(tmp_path)
    except ConfigError as e:
        assert str(e).startswith(str(tmp_path / "run.toml"))
        if "key" in e.reason and "invalid toml" not in e.reason:
            assert e.lineno is not None, e  # a key error says where the key is
        return
    except ToolkitError as e:
        raise AssertionError(f"run.toml errors are ConfigErrors: {e!r}") from e
    assert math.isfinite(config.clock_offset_s)
    assert abs(config.clock_offset_s) <= MAX_CLOCK_OFFSET_S


@budget(60)
@given(doc=documents())
def test_documents_of_every_type(tmp_path: Path, doc: str) -> None:
    _read(tmp_path, doc.encode())


@budget(40)
@given(data=mutated(SEEDS))
def test_mutated_files(tmp_path: Path, data: bytes) -> None:
    _read(tmp_path, data)


@budget(20)
@given(data=st.binary(max_size=500))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    _read(tmp_path, data)
