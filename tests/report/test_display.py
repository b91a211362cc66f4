"""How charts are shown: a Vega part and a static image per chart, and altair left alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import altair as alt
import pytest
import vl_convert
from helpers import REPO

from toolkit.chart import theme
from toolkit.report.display import (
    VEGA_MIME,
    chart_bundle,
    chart_spec,
    pack_data,
    static_image,
    vega_spec,
)
from toolkit.report.view import View

STATE = (
    "import altair as alt, json; "
    "state = lambda: json.dumps([alt.renderers.active, alt.theme.active, "
    "alt.data_transformers.active, alt.data_transformers.options, alt.renderers.options])"
)


def _chart(rows: int = 3) -> alt.Chart:
    values = [{"x": i, "y": i * i} for i in range(rows)]
    return alt.Chart(alt.Data(values=values)).mark_line().encode(x="x:Q", y="y:Q")


def test_importing_toolkit_and_the_notebook_setup_change_no_altair_setting() -> None:
    """In a fresh interpreter: every toolkit module imported, a notebook's setup run, a view
    displayed; altair's renderer, theme and data transformer stay as they were."""
    code = (
        f"{STATE}; before = state(); "
        "import toolkit, toolkit.cli.main, toolkit.report.render, toolkit.report.widgets; "
        "import toolkit.report.sections as views; views.setup(); "
        "from toolkit.report.view import View; "
        "View('x', [alt.Chart(alt.Data(values=[{'x': 1}])).mark_point()]).show(image=False); "
        "assert state() == before, (before, state()); "
        "bundle = alt.Chart(alt.Data(values=[{'x': 1}])).mark_point()._repr_mimebundle_(); "
        "data = bundle[0] if isinstance(bundle, tuple) else bundle; "
        "assert 'ppscope' not in json.dumps(data), 'a user chart keeps altair rendering'; "
        "print(before)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])[0] == "default"


def test_chart_spec_applies_the_theme_for_the_call_only() -> None:
    before = alt.theme.active
    spec = chart_spec(_chart())
    assert spec["config"]["font"] == theme.FONT
    assert alt.theme.active == before


def test_a_user_theme_wins() -> None:
    with alt.theme.enable("dark"):
        spec = chart_spec(_chart())
    assert spec["config"].get("font") != theme.FONT


def test_large_frames_pass_without_touching_the_row_limit() -> None:
    import polars as pl

    frame = pl.DataFrame({"x": range(6000), "y": range(6000)})
    spec = chart_spec(alt.Chart(frame).mark_line().encode(x="x:Q", y="y:Q"))
    assert len(next(iter(spec["datasets"].values()))) == 6000
    assert alt.data_transformers.options.get("max_rows", 5000) == 5000


def test_bundle_has_vega_an_image_and_a_title() -> None:
    chart = _chart().properties(title="squares")
    bundle = chart_bundle(chart)
    assert set(bundle) == {VEGA_MIME, "image/svg+xml", "text/plain"}
    vega = bundle[VEGA_MIME]
    assert vega["$schema"].endswith("/vega/v5.json") and "marks" in vega
    assert bundle["image/svg+xml"].lstrip().startswith("<svg")
    assert bundle["text/plain"] == "<chart: squares>"
    assert "image/svg+xml" not in chart_bundle(chart, image=False)


def test_a_large_svg_gives_way_to_a_smaller_png(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [{"x": i % 40, "y": i // 40, "v": i} for i in range(1600)]
    cells = alt.Chart(alt.Data(values=values)).mark_rect().encode(x="x:O", y="y:O", color="v:Q")
    vega = vega_spec(chart_spec(cells))
    monkeypatch.setattr("toolkit.report.display.SVG_LIMIT", 10)
    image = static_image(vega)
    svg = vl_convert.vega_to_svg(vega)
    assert list(image) == ["image/png"] and len(image["image/png"]) < len(svg)


def test_a_chart_of_many_rows_goes_straight_to_png(monkeypatch: pytest.MonkeyPatch) -> None:
    vega = vega_spec(chart_spec(_chart(50)))
    monkeypatch.setattr("toolkit.report.display.PNG_ROWS", 10)
    monkeypatch.setattr("vl_convert.vega_to_svg", lambda *_a, **_k: pytest.fail("no SVG"))
    assert list(static_image(vega)) == ["image/png"]


def test_view_displays_bundles(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[dict] = []
    monkeypatch.setattr(
        "IPython.display.display", lambda obj, raw=False: shown.append(obj if raw else {"obj": obj})
    )
    View("x", ["<p>a</p>", _chart(), "<p>b</p>"]).show()
    assert [VEGA_MIME in s for s in shown] == [False, True, False]
    assert "image/svg+xml" in shown[1]


def test_packed_data_draws_the_same_chart() -> None:
    """CSV with a type per column: quotes, commas, nulls, booleans, epoch ms all survive."""
    values = [
        {
            "t": 1779745612970 + 1000 * i,
            "label": 'PP8, "tuned"' if i % 2 else "TP8\nnew",
            "v": None if i % 7 == 0 else i / 3,
            "flag": i % 3 == 0,
        }
        for i in range(40)
    ]
    chart = (
        alt.Chart(alt.Data(values=values))
        .mark_point()
        .encode(x="t:T", y="v:Q", color="label:N", shape="flag:N", tooltip=["label:N", "v:Q"])
    )
    spec = chart_spec(chart)
    packed = vega_spec(spec)
    source = next(d for d in packed["data"] if isinstance(d.get("values"), str))
    assert source["format"] == {
        "type": "csv",
        "parse": {"t": "number", "label": "string", "v": "number", "flag": "boolean"},
    }
    raw = vl_convert.vegalite_to_vega(spec)
    same = lambda svg: re.sub(r"clip\d+", "clip", svg)  # noqa: E731
    assert same(vl_convert.vega_to_svg(packed)) == same(vl_convert.vega_to_svg(raw))


@pytest.mark.parametrize(
    "values",
    [
        [{"x": 1}] * 5,  # small: readable as it is
        [{"x": 1}, {"x": "a"}] * 20,  # mixed types
        [{"x": ""}, {"x": "a"}] * 20,  # an empty text would read back as null
        [{"x": [1, 2]}] * 30,  # nested
    ],
)
def test_data_that_csv_cannot_carry_stays_json(values: list[dict]) -> None:
    entry = {"name": "source_0", "values": values}
    assert pack_data(entry) is entry
