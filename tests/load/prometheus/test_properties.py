"""Properties of the metrics loader on generated input."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from tempfile import TemporaryDirectory

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.prometheus import load_metrics
from toolkit.load.prometheus.exposition import exposition_samples
from toolkit.load.prometheus.tally import Tally

_LINE = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda name, label, value: f'{name}{{pp_rank="{label}"}} {value}',
        st.sampled_from(["sglang:num_running_reqs", "x_total", "h_sum", "h_count", "h_bucket"]),
        st.text(max_size=6),
        st.one_of(st.floats(allow_nan=True), st.text(max_size=6)),
    ),
    st.sampled_from(["# TYPE h histogram", "# TYPE x counter", "# HELP x y", "# TYPE", "#"]),
)


@given(st.lists(_LINE, max_size=30))
def test_any_exposition_text_yields_samples_or_counts_them(lines: list[str]) -> None:
    tally = Tally()
    samples = list(exposition_samples("\n".join(lines), tally, "f:1"))
    assert all(s.kind in ("gauge", "counter", "histogram") for s in samples)


@given(st.lists(st.one_of(st.text(max_size=200), st.lists(_LINE, max_size=8)), max_size=6))
def test_any_snapshot_file_loads_or_raises_a_declared_error(items: list) -> None:
    lines = [
        json.dumps({"ts": f"2026-05-01T10:00:{i:02d}", "text": "\n".join(x)})
        if isinstance(x, list)
        else x.replace("\n", " ")
        for i, x in enumerate(items)
    ]
    with TemporaryDirectory() as d:
        path = Path(d) / "m.jsonl"
        path.write_text('{"ts": "2026-05-01T09:59:59", "text": ""}\n' + "\n".join(lines))
        with contextlib.suppress(ToolkitError):
            load_metrics([path])


@given(
    st.lists(
        st.lists(st.floats(min_value=0, max_value=1e12, allow_nan=False), min_size=2, max_size=4),
        min_size=2,
        max_size=12,
    )
)
def test_differenced_counters_are_never_negative(scrapes: list[list[float]]) -> None:
    texts = []
    for values in scrapes:
        text = "# TYPE sglang:gpu_execution_seconds counter\n"
        text += "".join(
            f'sglang:gpu_execution_seconds_total{{pp_rank="{pp}"}} {v!r}\n'
            for pp, v in enumerate(values)
        )
        texts.append(text)
    with TemporaryDirectory() as d:
        path = Path(d) / "m.jsonl"
        path.write_text(
            "".join(
                json.dumps({"ts": f"2026-05-01T10:00:{i:02d}", "text": t}) + "\n"
                for i, t in enumerate(texts)
            )
        )
        m = load_metrics([path])
    counters = m.samples.filter(pl.col("kind") == "counter")
    assert (counters["value"] >= 0).all()
    # every interval between two scrapes holding a series is a row or a counted reset
    intervals = sum(max(sum(len(s) > pp for s in scrapes) - 1, 0) for pp in range(4))
    resets = sum(int(n.split()[0]) for n in m.notes if "went down" in n)
    assert counters.height + resets == intervals


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"metric": st.dictionaries(st.sampled_from(["__name__", "pp_rank", "x"]), _JSON)},
            optional={"values": _JSON, "value": _JSON},
        ),
        max_size=4,
    ),
    st.sampled_from(["matrix", "vector"]),
)
def test_any_query_answer_loads_or_raises_a_declared_error(result: list, kind: str) -> None:
    doc = {"status": "success", "data": {"resultType": kind, "result": result}}
    with TemporaryDirectory() as d:
        path = Path(d) / "q.json"
        path.write_text(json.dumps(doc))
        try:
            m = load_metrics([path])
        except ToolkitError:
            return
    assert (m.samples.filter(pl.col("kind") == "counter")["value"] >= 0).all()
