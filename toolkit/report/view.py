"""``View``: what one report section shows, and the safe HTML pieces it is made of.

A view holds HTML strings (escaped when made), altair charts and polars frames (escaped when
shown) in display order, plus a JSON-ready ``record`` for the report's sidecar. Text from logs
and configs goes through ``clean`` (secrets out unless ``--no-redact``) and ``escape``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from toolkit.report.context import RECORD_MIME, in_report, redacting
from toolkit.report.redact import escape, redact_text
from toolkit.schema.jsonable import jsonable

if TYPE_CHECKING:  # altair costs seconds to import: only where charts are made
    import altair as alt

__all__ = ["STYLE", "View", "clean", "clean_frame", "jsonable", "note", "para", "table_html"]

# Table rules name the class twice: JupyterLab right-aligns every cell with a
# ``:not(.jp-RenderedMarkdown)`` rule that a single class does not outrank.
STYLE = """<style>
.ppscope-note{border-left:4px solid #999;background:#f6f6f6;padding:6px 10px;margin:6px 0}
.ppscope-banner{border:2px solid #D55E00;background:#fff3ec;padding:8px 12px;margin:8px 0;
font-weight:600}
.ppscope-finding{border-left:6px solid #888;padding:4px 12px;margin:14px 0}
.ppscope-finding.sev-1{border-color:#D55E00}
.ppscope-finding.sev-2{border-color:#E69F00}
.ppscope-finding.sev-3,.ppscope-finding.sev-4{border-color:#0072B2}
.ppscope-table{border-collapse:collapse;font-size:12px;margin:6px 0}
.ppscope-table.ppscope-table th,.ppscope-table.ppscope-table td{border-bottom:1px solid #ddd;
padding:2px 8px;text-align:left;vertical-align:top}
.ppscope-table.ppscope-table td.num{text-align:right;font-variant-numeric:tabular-nums}
.ppscope-provenance table{border-collapse:collapse;font-size:12px;margin:6px 0}
.ppscope-provenance.ppscope-provenance td,.ppscope-provenance.ppscope-provenance th{
border-bottom:1px solid #ddd;padding:2px 8px;text-align:left}
</style>"""


@dataclass
class View:
    """What one section shows: safe HTML, charts and tables in order, plus a sidecar record.

    ``items`` holds HTML strings (already escaped), altair charts and polars frames (escaped
    when shown). ``record`` is JSON-ready and goes to the report's sidecar.
    """

    key: str
    items: list[Any] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def charts(self) -> list[alt.TopLevelMixin]:
        return [i for i in self.items if _is_chart(i)]

    @property
    def chart(self) -> alt.TopLevelMixin | None:
        """The first chart, or None."""
        return self.charts[0] if self.charts else None

    @property
    def notes(self) -> list[str]:
        return [
            i
            for i in self.items
            if isinstance(i, str) and i.startswith('<div class="ppscope-note"')
        ]

    def html(self) -> str:
        """The view's HTML without its charts (tables and notes), for tests and exports."""
        return "".join(
            table_html(i) if isinstance(i, pl.DataFrame) else i
            for i in self.items
            if isinstance(i, str | pl.DataFrame)
        )

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        pending: list[str] = []
        for item in self.items:
            if _is_chart(item):
                if pending:
                    display(HTML("".join(pending)))
                    pending = []
                display(item)
            else:
                pending.append(table_html(item) if isinstance(item, pl.DataFrame) else item)
        if pending:
            display(HTML("".join(pending)))
        if self.record and in_report():
            display({RECORD_MIME: jsonable(self.record), "text/plain": ""}, raw=True)


def note(text: str) -> str:
    """A visible note (escaped): why a section shows less than it could."""
    return f'<div class="ppscope-note">{escape(text)}</div>'


def para(text: str) -> str:
    """A paragraph of plain text, escaped."""
    return f"<p>{escape(text)}</p>"


def table_html(frame: pl.DataFrame, max_rows: int = 40) -> str:
    """An HTML table of a frame with every cell escaped; long frames are cut with a note."""
    shown = frame.head(max_rows)
    head = "".join(f"<th>{escape(c)}</th>" for c in shown.columns)
    numeric = [dt.is_numeric() for dt in shown.dtypes]
    body = []
    for row in shown.iter_rows():
        cells = "".join(
            f'<td class="num">{_fmt(v)}</td>' if num else f"<td>{escape(_fmt(v))}</td>"
            for v, num in zip(row, numeric, strict=True)
        )
        body.append(f"<tr>{cells}</tr>")
    more = (
        f'<div class="ppscope-note">first {max_rows} of {frame.height} rows</div>'
        if frame.height > max_rows
        else ""
    )
    return (
        f'<table class="ppscope-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if abs(value) < 5e-4:
            return "0"  # a calibration residual of 4e-14 is zero
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def clean(text: Any) -> str:
    """Log or config text as it may be shown: secrets out unless redaction is off."""
    s = "" if text is None else str(text)
    return redact_text(s) if redacting() else s


def clean_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """Every text column of a frame through ``clean``."""
    if not redacting():
        return frame
    strings = [n for n, dt in frame.schema.items() if dt == pl.String]
    return frame.with_columns(
        pl.col(n).map_elements(redact_text, return_dtype=pl.String) for n in strings
    )


def _is_chart(item: Any) -> bool:
    """An altair chart (altair is only imported when some item could be one)."""
    if isinstance(item, str | pl.DataFrame):
        return False
    import altair as alt

    return isinstance(item, alt.TopLevelMixin)
