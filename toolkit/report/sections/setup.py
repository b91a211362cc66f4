"""The notebook kernel's setup: theme and offline charts."""

from __future__ import annotations

from toolkit.report.context import in_report
from toolkit.report.view import (
    STYLE,
)

__all__ = ["setup"]


_shown_bundle = False


def setup() -> None:
    """Offline charts and the ppscope theme for this kernel.

    In a batch render the nbconvert template inlines the vega bundle once; in a live
    notebook it is shown here, once per kernel, so charts draw without network access.
    """
    global _shown_bundle
    from toolkit.chart import theme
    from toolkit.report import offline as report_render

    theme.enable()
    report_render.enable()
    if in_report() or _shown_bundle:
        return
    try:
        from IPython.display import HTML, display
    except ImportError:
        return
    display(HTML(STYLE + report_render.bundle_html()))
    _shown_bundle = True
