"""``View``: what one report section shows, and the safe HTML pieces it is made of.

A view holds HTML strings (escaped when made), altair charts and polars frames (escaped when
shown) in display order, plus a JSON-ready ``record`` for the report's sidecar. Text from logs
and configs goes through ``clean`` (secrets out unless ``--no-redact``) and ``escape``; notes,
paragraphs, every text cell of a table and every string of the record are cleaned again when
shown, so a section that forgets cannot leak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from toolkit.report.context import RECORD_MIME, in_report, redacting
from toolkit.report.redact import escape, redact_text, redact_value, walk_strings
from toolkit.schema.jsonable import jsonable

if TYPE_CHECKING:  # altair costs seconds to import: only where charts are made
    import altair as alt

__all__ = [
    "MAX_COLUMNS",
    "STYLE",
    "Table",
    "View",
    "clean",
    "clean_frame",
    "jsonable",
    "note",
    "para",
    "table_html",
]

MAX_COLUMNS = 8
"""A table with more columns shows its key columns, the rest behind a toggle."""

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
.ppscope-wide{overflow-x:auto;max-width:100%}
details.ppscope-more>summary{cursor:pointer;color:#0072B2;font-size:12px;margin:2px 0 8px}
.ppscope-summary{border:1px solid #d0d0d0;border-radius:6px;background:#fbfbfb;
padding:10px 16px;margin:8px 0 16px}
.ppscope-summary .ppscope-banner{margin:0 0 8px;padding:4px 10px}
.ppscope-verdict{font-size:17px;font-weight:600;margin:4px 0 8px}
.ppscope-verdicts{margin:6px 0;padding-left:20px}
.ppscope-verdicts li{margin:2px 0}
.ppscope-sev{display:inline-block;min-width:58px;text-align:center;border-radius:3px;
font-size:11px;font-weight:700;color:#fff;background:#0072B2;margin-right:4px}
.ppscope-sev.sev-high{background:#D55E00}
.ppscope-sev.sev-medium{background:#B07A00}
.ppscope-provenance table{border-collapse:collapse;font-size:12px;margin:6px 0}
.ppscope-provenance.ppscope-provenance td,.ppscope-provenance.ppscope-provenance th{
border-bottom:1px solid #ddd;padding:2px 8px;text-align:left}
</style>"""


@dataclass
class Table:
    """A frame shown with its ``key`` columns first and the rest behind a toggle."""

    frame: pl.DataFrame
    key: tuple[str, ...] = ()
    max_rows: int = 40

    def html(self) -> str:
        return table_html(self.frame, self.max_rows, key=self.key or None)


def _html(item: Any) -> str:
    if isinstance(item, pl.DataFrame):
        return table_html(item)
    if isinstance(item, Table):
        return item.html()
    return item


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
        return "".join(_html(i) for i in self.items if isinstance(i, str | pl.DataFrame | Table))

    def _ipython_display_(self) -> None:
        self.show()

    def show(self, *, image: bool = True) -> None:
        """Display the view: HTML pieces as they are, each chart as its MIME bundle (a Vega part
        and, unless ``image=False``, a static image; ``toolkit.report.display``)."""
        from IPython.display import HTML, display

        pending: list[str] = []
        for item in self.items:
            if _is_chart(item):
                if pending:
                    display(HTML("".join(pending)))
                    pending = []
                from toolkit.report.display import chart_bundle  # imports altair

                display(chart_bundle(item, image=image), raw=True)
            else:
                pending.append(_html(item))
        if pending:
            display(HTML("".join(pending)))
        if self.record and in_report():
            record = walk_strings(jsonable(self.record), clean)
            display({RECORD_MIME: record, "text/plain": ""}, raw=True)


def note(text: str) -> str:
    """A visible note (escaped): why a section shows less than it could."""
    return f'<div class="ppscope-note">{escape(clean(text))}</div>'


def para(text: str) -> str:
    """A paragraph of plain text, cleaned and escaped."""
    return f"<p>{escape(clean(text))}</p>"


def table_html(frame: pl.DataFrame, max_rows: int = 40, *, key: Sequence[str] | None = None) -> str:
    """An HTML table of a frame with every cell escaped (text cells cleaned of secrets);
    long frames are cut with a note.

    A frame wider than ``MAX_COLUMNS`` (or given ``key`` columns) shows the key columns (by
    default the first ``MAX_COLUMNS - 1``) and every column behind an "all columns" toggle.
    """
    if key is None and frame.width > MAX_COLUMNS:
        key = frame.columns[: MAX_COLUMNS - 1]
    if key is None or set(frame.columns) <= set(key):
        return _plain_table(frame, max_rows)
    shown = [c for c in key if c in frame.columns]
    return (
        _plain_table(frame.select(shown), max_rows)
        + '<details class="ppscope-more"><summary>'
        + f"all {frame.width} columns</summary>"
        + f'<div class="ppscope-wide">{_plain_table(frame, max_rows)}</div></details>'
    )


def _plain_table(frame: pl.DataFrame, max_rows: int) -> str:
    shown = frame.head(max_rows)
    head = "".join(f"<th>{escape(clean(c))}</th>" for c in shown.columns)
    numeric = [dt.is_numeric() for dt in shown.dtypes]
    body = []
    for row in shown.iter_rows():
        cells = "".join(
            f'<td class="num">{_fmt(v)}</td>' if num else f"<td>{escape(clean(_fmt(v)))}</td>"
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
    """Every text of a frame through the redactor, row by row (``redact_value``: a row that
    names a secret setting has its values replaced) unless redaction is off."""
    if not redacting() or not any(dt == pl.String for dt in frame.schema.values()):
        return frame
    return pl.DataFrame(redact_value(frame.to_dicts()), schema=frame.schema, orient="row")


def _is_chart(item: Any) -> bool:
    """An altair chart (altair is only imported when some item could be one)."""
    if isinstance(item, str | pl.DataFrame):
        return False
    import altair as alt

    return isinstance(item, alt.TopLevelMixin)
