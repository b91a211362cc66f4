"""The offline HTML charts: a div and a call each, the bundle once, no network address."""

from __future__ import annotations

import json

import altair as alt
import nbformat
import pytest

from toolkit.report import offline
from toolkit.report.display import VEGA_MIME, chart_bundle
from toolkit.report.offline import chart_html, external_refs, inline_charts, json_for_script


def test_json_for_script_cannot_close_the_script() -> None:
    text = json_for_script({"note": "</script><script>alert(1)</script> & <!--"})
    assert "</" not in text and "<!--" not in text and "<" not in text
    assert json.loads(text)["note"].startswith("</script>")


def test_chart_html_is_a_div_and_a_call() -> None:
    spec = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q").to_dict()
    html = chart_html(spec)
    assert html.startswith('<div class="ppscope-chart" id="ppscope-chart-')
    assert "vegaEmbed" in html and "<script src" not in html
    assert len(html) < 2000, "no bundle inside a chart"
    ids = {chart_html(spec).split('"')[3] for _ in range(3)}
    assert len(ids) == 3, "each output gets its own container"


def test_chart_html_names_the_mode_instead_of_a_schema() -> None:
    vega = chart_bundle(alt.Chart(alt.Data(values=[{"x": 1}])).mark_point(), image=False)
    html = chart_html(vega[VEGA_MIME])
    assert "mode:'vega'" in html and "$schema" not in html
    lite = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().to_dict()
    assert "mode:'vega-lite'" in chart_html(lite)


def test_inline_charts_swaps_the_vega_part_for_html_in_a_copy() -> None:
    chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart")
    cell.outputs = [nbformat.v4.new_output("display_data", data=chart_bundle(chart))]
    nb.cells = [cell]
    page = inline_charts(nb)
    data = page.cells[0].outputs[0]["data"]
    assert set(data) == {"text/html", "text/plain"}, "no image in the page: the chart is live"
    assert 'class="ppscope-chart"' in data["text/html"]
    assert VEGA_MIME in nb.cells[0].outputs[0]["data"], "the notebook itself is left as it was"


@pytest.mark.parametrize(
    ("html", "refs"),
    [
        ('<script src="https://cdn.jsdelivr.net/npm/vega@6"></script>', ["https://cdn.jsdelivr.net/npm/vega@6"]),
        ('<link rel="stylesheet" href="//fonts.example/x.css">', ["//fonts.example/x.css"]),
        ("<style>@import url(https://fonts.example/a.css);</style>", ["https://fonts.example/a.css"]),
        ('<a href="https://github.com/x">a link is not a load</a>', []),
        ('<img src="data:image/png;base64,AAAA">', []),
        ('<script src="local.js"></script>', []),
    ],
)  # fmt: skip
def test_external_refs(html: str, refs: list[str]) -> None:
    assert external_refs(html) == refs


def test_bundle_defines_vega_embed_once() -> None:
    text = offline.bundle_html()
    assert text.startswith("<script>if(!window.vegaEmbed)")
    assert text.count("window.vegaEmbed=") == 1 and "</script" not in text[8:-9]
