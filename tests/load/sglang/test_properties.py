"""Property tests: generated and mutated SGLang lines, under every wrapper.

The fast polars plan must agree with the Python reference reader on every batch line, and no
input, however broken, may lose a line or raise anything but ``ParseError``.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit import ParseError, load_sglang_log
from toolkit.load.sglang.batch_line import KEY_COLUMN, parse_batch_message
from toolkit.schema.sglang import BATCH_FIELDS

SETTINGS = settings(max_examples=40, deadline=None)

KEYS = sorted(KEY_COLUMN)
WRAPPERS = {
    "raw": lambda i, line: line,
    "journald": lambda i, line: (
        f"May 25 21:40:{i % 60:02d} node-1 python3[{85690 + i % 8}]: {line}"
    ),
    "docker": lambda i, line: f"2025-05-25T21:40:{i % 60:02d}.{i:09d}Z {line}",
    "cri": lambda i, line: f"2026-06-24T17:38:{i % 60:02d}.436246479+02:00 stderr F {line}",
    "parent": lambda i, line: f"2025-03-07 23:50:{i % 60:02d},531 - __main__ - INFO - {line}",
}


def _value(key: str, draw) -> str:
    field = KEY_COLUMN[key]
    if field.dtype == pl.Boolean:
        return draw(st.sampled_from(["True", "False"]))
    if field.dtype == pl.Int64:
        return str(draw(st.integers(0, 10**7)))
    value = draw(st.floats(0, 1e6, allow_nan=False) | st.sampled_from([math.nan, math.inf]))
    text = "nan" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.2f}")
    return text + ("%" if field.column.endswith("_pct") else "")


@st.composite
def batch_messages(draw) -> str:
    kind = draw(st.sampled_from(["Decode", "Prefill"]))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=10, unique_by=_column))
    body = ", ".join(f"{k}: {_value(k, draw)}" for k in keys)
    sep = draw(st.sampled_from([". ", ", "]))
    fct = draw(st.sampled_from(["", " [1280]"])) if sep == ", " else ""
    trail = draw(st.sampled_from(["", ", "]))
    return f"{kind} batch{fct}{sep}{body}{trail}"


def _column(key: str) -> str:
    return KEY_COLUMN[key].column


@st.composite
def prefixes(draw) -> str:
    ms = draw(st.sampled_from(["", ".123"]))
    tags = draw(st.permutations(["DP1", "PP3", "TP2", "EP4", "ATTN_CP0", "MOE_DP1"]))
    n = draw(st.integers(0, 3))
    return f"[2026-05-25 21:40:21{ms}{''.join(' ' + t for t in tags[:n])}] "


@SETTINGS
@given(
    messages=st.lists(batch_messages(), min_size=1, max_size=12),
    prefix=prefixes(),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
)
def test_fast_plan_agrees_with_reference(write_log, messages, prefix, wrapper) -> None:
    lines = [WRAPPERS[wrapper](i, prefix + m) for i, m in enumerate(messages)]
    log = load_sglang_log(write_log("\n".join(lines) + "\n"), cache=False)
    got = log.batches
    assert got.height == len(messages)
    for row, message in zip(got.iter_rows(named=True), messages, strict=True):
        ref = parse_batch_message(message)
        assert ref is not None and row["complete"] == ref.complete
        for field in BATCH_FIELDS:
            want = ref.values.get(field.column)
            have = row[field.column]
            if isinstance(want, float) and math.isnan(want):
                assert have is not None and math.isnan(have), field.column
            else:
                assert have == want, (field.column, message)
        for tag in ("dp", "pp", "tp", "ep", "attn_cp", "moe_dp"):
            token = f" {tag.upper()}"
            expected = None
            for part in prefix.strip("[] ").split(" "):
                if part.startswith(token.strip()) and part[len(token) - 1 :].isdigit():
                    expected = int(part[len(token) - 1 :])
            assert row[tag] == expected, (tag, prefix)


@SETTINGS
@given(
    messages=st.lists(batch_messages(), min_size=1, max_size=8),
    cut=st.integers(0, 400),
    junk=st.binary(min_size=0, max_size=40),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
)
def test_mutated_lines_are_never_lost(write_log, messages, cut, junk, wrapper) -> None:
    lines = [
        WRAPPERS[wrapper](i, "[2026-05-25 21:40:21 PP1] " + m).encode()
        for i, m in enumerate(messages)
    ]
    lines[0] = lines[0][:cut]  # a line cut anywhere
    lines.insert(len(lines) // 2, junk.replace(b"\n", b" "))  # garbage in the middle
    path = write_log(b"\n".join(lines) + b"\n")
    log = load_sglang_log(path, cache=False)
    events = log.events
    assert events.height == len(lines)
    assert events.get_column("lineno").to_list() == list(range(1, len(lines) + 1))
    cov = log.coverage()
    assert sum(cov["counts"].values()) == len(lines)
    assert cov["tables"]["batches"] + cov["tables"]["http"] + cov["tables"]["other"] + sum(
        1 for k in events.get_column("kind") if k in ("error", "server_args", "startup")
    ) == len(lines)
    try:
        load_sglang_log(path, strict=True, cache=False)
    except ParseError as e:
        assert str(path) in str(e)


def test_every_field_of_the_schema_is_reachable() -> None:
    columns = {f.column for f in BATCH_FIELDS}
    assert columns == {KEY_COLUMN[k].column for k in KEYS}


@pytest.mark.usefixtures("cache_beside_input")
def test_cached_load_equals_fresh_load(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_text(
        "[2026-05-25 21:40:21 PP0] Decode batch, #running-req: 8, #token: 10, token usage: 0.10, "
        "cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0\n"
        "[2026-05-25 21:40:22 PP0] Decode batch, #running-req: 8, #token: 1\n"
    )
    first = load_sglang_log(path).batches
    assert (tmp_path / ".ppscope-cache").is_dir()
    second = load_sglang_log(path).batches
    assert first.equals(second)
