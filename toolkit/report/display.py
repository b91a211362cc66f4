"""How a chart is shown in a notebook: a Vega part JupyterLab draws, and a static image.

A chart's output is a MIME bundle with

- ``application/vnd.vega.v5+json``: the chart's Vega-Lite spec compiled to Vega by vl-convert
  (the Vega-Lite version altair writes). JupyterLab's built-in Vega extension draws it without
  a network, without trust and without a kernel. That extension ships Vega 5 and Vega-Lite 5
  only, so a Vega-Lite 6 spec is compiled here, by the version that wrote it, rather than read
  by an older compiler in the browser;
- ``image/svg+xml`` (or ``image/png`` when smaller): the same chart drawn by vl-convert, for
  readers without JavaScript: a saved notebook on GitHub or nbviewer;
- ``text/plain``: the chart's title.

Inline datasets of more than a few rows travel as CSV text with a declared type per column
(``pack_data``): half the size of row objects, and one line in a saved notebook instead of one
line per field.

Nothing here changes a setting of altair: the theme and the row limit are applied for the
moment a spec is made (``chart_spec``). The offline HTML report turns the Vega part into a
``<div>`` and a call (``toolkit.report.offline.inline_charts``).
"""

from __future__ import annotations

import base64
import csv
import io
from typing import Any

import altair as alt

from toolkit.chart import theme
from toolkit.report.mime import IMAGE_MIMES, VEGA_MIME, vl_version

__all__ = [
    "IMAGE_MIMES",
    "VEGA_MIME",
    "chart_bundle",
    "chart_spec",
    "chart_title",
    "pack_data",
    "static_image",
    "vega_spec",
    "vl_version",
]

VEGA_SCHEMA = "https://vega.github.io/schema/vega/v5.json"
SVG_LIMIT = 400_000
"""An SVG larger than this (a heat strip of thousands of cells) is replaced by a PNG when the
PNG is smaller."""
CSV_ROWS = 20
"""Inline datasets with at least this many rows are sent as CSV."""
PNG_ROWS = 4_000
"""A chart drawing more data rows than this gets a PNG straight away: its SVG would hold one
element per mark (megabytes), and drawing both would double the time."""


def chart_spec(chart: alt.TopLevelMixin, *, validate: bool = True) -> dict[str, Any]:
    """The chart's Vega-Lite spec, with the ppscope theme (unless the user enabled their own)
    and without altair's 5000-row guard; both only for this call.

    ``validate=False`` skips altair's schema check, seconds on a chart of 10k rows: the
    display path uses it, the chart tests validate every spec the library makes.
    """
    with theme.applied(), alt.data_transformers.disable_max_rows():
        return chart.to_dict(validate=validate)


def chart_title(spec: dict[str, Any]) -> str | None:
    """The title text of a Vega-Lite or Vega spec, if it has one."""
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return title if isinstance(title, str) else None


def vega_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A Vega-Lite spec compiled to Vega with its datasets packed (``pack_data``); ``$schema``
    names Vega 5, the MIME type it goes by."""
    import vl_convert as vlc

    version = vl_version()
    vega = vlc.vegalite_to_vega(spec, vl_version=version) if version else vlc.vegalite_to_vega(spec)
    vega["$schema"] = VEGA_SCHEMA
    vega["data"] = [pack_data(d) for d in vega.get("data", [])]
    return vega


def _kind(values: list[Any]) -> str | None:
    """The Vega parse type of a column's values, None when they mix types or nest."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds or kinds == {str}:
        # an empty text reads back as null: keep such a column (and the dataset) as JSON
        return "string" if "" not in values else None
    if kinds == {bool}:
        return "boolean"
    if kinds <= {int, float}:
        return "number"
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        # epoch ms came back from the compiler as floats; -0.0 keeps its sign
        return str(int(value)) if value or str(value)[0] != "-" else "-0"
    return str(value)


def pack_data(entry: dict[str, Any]) -> dict[str, Any]:
    """A Vega dataset of inline row objects as CSV text with ``format.parse`` naming each
    column's type; left as it is when small, already formatted, or not flat (a column of mixed
    or nested values, an empty text that CSV would read back as null)."""
    values = entry.get("values")
    if (
        not isinstance(values, list)
        or len(values) < CSV_ROWS
        or entry.get("format")
        or not all(isinstance(row, dict) for row in values)
    ):
        return entry
    columns = list(dict.fromkeys(key for row in values for key in row))
    kinds = {c: _kind([row.get(c) for row in values]) for c in columns}
    if None in kinds.values():
        return entry
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_cell(row.get(c)) for c in columns] for row in values)
    return {**entry, "values": out.getvalue(), "format": {"type": "csv", "parse": kinds}}


def _rows(vega: dict[str, Any]) -> int:
    """Inline data rows of a Vega spec (row objects, or packed CSV lines after a header)."""
    rows = 0
    for entry in vega.get("data", []):
        values = entry.get("values")
        if isinstance(values, list):
            rows += len(values)
        elif isinstance(values, str):
            rows += max(values.count("\n") - 1, 0)
    return rows


def static_image(vega: dict[str, Any]) -> dict[str, str]:
    """The chart drawn offline: ``{"image/svg+xml": svg}``, or a PNG (base64) for a chart of
    many rows, or when the SVG is large and the PNG smaller."""
    import vl_convert as vlc

    if _rows(vega) > PNG_ROWS:
        return {"image/png": base64.b64encode(vlc.vega_to_png(vega, scale=1)).decode("ascii")}
    svg = vlc.vega_to_svg(vega)
    if len(svg) <= SVG_LIMIT:
        return {"image/svg+xml": svg}
    png = base64.b64encode(vlc.vega_to_png(vega, scale=1)).decode("ascii")
    return {"image/png": png} if len(png) < len(svg) else {"image/svg+xml": svg}


def chart_bundle(chart: alt.TopLevelMixin, *, image: bool = True) -> dict[str, Any]:
    """The MIME bundle of a chart: Vega, a static image (unless ``image=False``), its title."""
    vega = vega_spec(chart_spec(chart, validate=False))
    title = chart_title(vega)
    bundle: dict[str, Any] = {VEGA_MIME: vega}
    if image:
        bundle |= static_image(vega)
    bundle["text/plain"] = f"<chart: {title}>" if title else "<chart>"
    return bundle
