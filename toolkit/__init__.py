"""ppscope: why a parallel layout does not scale, from SGLang logs, GPU traces and benchmarks.

The facade reads like a table of contents:

- ``load_sglang_log``: SGLang server logs → ``events``, ``batches``, ``launches``, ``http``...
"""

from __future__ import annotations

__version__ = "0.1.0"

from toolkit.errors import ParseError, ToolkitError, UnknownFormat
from toolkit.load.sglang import SGLangLog, load_sglang_log

__all__ = [
    "ParseError",
    "SGLangLog",
    "ToolkitError",
    "UnknownFormat",
    "__version__",
    "load_sglang_log",
]
