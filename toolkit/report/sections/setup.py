"""The notebook's first call: the style of notes and tables, and nothing else.

Charts need no setup: a ``View`` shows each as a Vega part that JupyterLab draws and a static
image (``toolkit.report.display``). No setting of altair is changed here, so a user's own
charts in the same kernel render as altair would render them anyway.
"""

from __future__ import annotations

from toolkit.report.context import in_report
from toolkit.report.view import STYLE

__all__ = ["setup"]


def setup() -> None:
    """Show the style of ppscope's notes and tables (a rendered report has it in its head)."""
    if in_report():
        return
    try:
        from IPython.display import HTML, display
    except ImportError:
        return
    display(HTML(STYLE))
