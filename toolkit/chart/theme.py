"""The one look every ppscope chart shares: readable type, a colour-blind-safe palette.

The palette is Okabe & Ito's (distinguishable under the common colour-vision deficiencies),
with yellow last because it is faint on white. Charts also set their colour scale explicitly
(``color_scale``) so a layout keeps its colour across charts whatever theme is active.
Importing this module registers the theme and enables it unless the user chose another one.
"""

from __future__ import annotations

from collections.abc import Sequence

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
WIDTH, HEIGHT = 520, 320


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


def enable() -> None:
    """Register the theme and make it the active one."""
    alt.theme.register(NAME, enable=True)(config)


def color_scale(labels: Sequence[str]) -> alt.Scale:
    """A fixed layout → colour mapping, in the order the labels are given."""
    domain = list(dict.fromkeys(labels))
    return alt.Scale(domain=domain, range=[PALETTE[i % len(PALETTE)] for i in range(len(domain))])


def log2_scale() -> alt.Scale:
    """Concurrency axis: doublings equally spaced."""
    return alt.Scale(type="log", base=2)


alt.theme.register(NAME, enable=False)(config)
if alt.theme.active == "default":
    alt.theme.enable(NAME)
