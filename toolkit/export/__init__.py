"""Exports of ppscope's analyses to other tools' formats.

- ``chrome_trace`` / ``write_chrome_trace``: the stage timeline as Chrome trace JSON, which
  ui.perfetto.dev and chrome://tracing open.
"""

from __future__ import annotations

from toolkit.export.perfetto import chrome_trace, write_chrome_trace

__all__ = ["chrome_trace", "write_chrome_trace"]
