"""Server-side request records: the metrics export, ``ReqTimeStats`` and ``Finish:`` lines.

``load_server_requests`` reads the JSON-lines files the server writes per request;
``log_requests`` types the request lines inside a server log (``SGLangLog.requests``).
Both give ``schema.requests.SERVER_REQUESTS``.
"""

from __future__ import annotations

from toolkit.load.requests.export import (
    REQUESTS_FORMAT,
    RequestFile,
    is_request_file,
    load_server_requests,
)
from toolkit.load.requests.log_lines import is_request_line, line_kind, log_requests

__all__ = [
    "REQUESTS_FORMAT",
    "RequestFile",
    "is_request_file",
    "is_request_line",
    "line_kind",
    "load_server_requests",
    "log_requests",
]
