"""The one look every ppscope chart shares: readable type, a colour-blind-safe palette.

The palette is Okabe & Ito's (distinguishable under the common colour-vision deficiencies),
with yellow last because it is faint on white. Charts also set their colour scale explicitly
(``color_scale``) so a layout keeps its colour across charts whatever theme is active.
Importing this module changes no setting of altair: ``applied()`` uses the theme for the
moment a chart becomes a spec, and only when the user has not enabled a theme of their own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import altair as alt

NAME = "ppscope"
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)
FONT = "Inter, 'Helvetica Neue', Arial, sans-serif"
MUTED = "#595959"  # reference lines and notes: dark enough for 7:1 contrast on white
WIDTH, HEIGHT = 760, 320
"""Plot area in pixels: with its axis and legend a chart spans most of a report page or a
JupyterLab notebook on a laptop screen."""


def config() -> alt.theme.ThemeConfig:
    """The theme as a Vega-Lite config."""
    return alt.theme.ThemeConfig(
        config={
            "font": FONT,
            "range": {"category": list(PALETTE)},
            "view": {"continuousWidth": WIDTH, "continuousHeight": HEIGHT, "stroke": None},
            "title": {
                "fontSize": 15,
                "fontWeight": 600,
                "anchor": "start",
                "subtitleFontSize": 12,
                "subtitleColor": MUTED,
                "offset": 12,
            },
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "titleFontWeight": 500,
                "gridColor": "#e8e8e8",
                "domainColor": "#888888",
                "tickColor": "#888888",
            },
            "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "right"},
            "line": {"strokeWidth": 2.5},
            "point": {"size": 70, "filled": True},
            "text": {"fontSize": 12},
        }
    )


@contextmanager
def applied() -> Iterator[None]:
    """The ppscope theme for the ``with`` block, unless another theme than altair's default is
    active (a user's choice wins); altair's previous theme is restored afterwards."""
    if alt.theme.active != "default":
        yield
        return
    if NAME not in alt.theme.names():
        alt.theme.register(NAME, enable=False)(config)
    with alt.theme.enable(NAME):
        yield


def color_scale(labels: Sequence[str]) -> alt.Scale:
    """A fixed layout → colour mapping, in the order the labels are given."""
    domain = list(dict.fromkeys(labels))
    return alt.Scale(domain=domain, range=[PALETTE[i % len(PALETTE)] for i in range(len(domain))])


def log2_scale() -> alt.Scale:
    """Concurrency axis: doublings equally spaced."""
    return alt.Scale(type="log", base=2)
