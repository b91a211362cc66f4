"""JSON lines as ppscope's capture and SGLang's tools write them: one object a line.

``first_record`` serves the sniffers (the first non-blank line, and that line as an object),
``json_object`` the readers, and ``local_time`` the times a capture writes: ISO, local to the
capture host, without a zone.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.load.inputs import head_lines

__all__ = ["first_record", "json_object", "local_time"]


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` read as one JSON object; None for anything else (other JSON, no JSON, too deep).

    >>> json_object('{"phase": 0}'), json_object("[1]"), json_object('{"cut": ')
    ({'phase': 0}, None, None)
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def first_record(path: str | Path, n: int = 5) -> tuple[str, dict[str, Any] | None] | None:
    """The first non-blank line among the first ``n`` of a file (decompressed) and that line
    as a JSON object (None when it is none); None when those lines are all blank."""
    line = next((x for x in head_lines(path, n=n) if x.strip()), None)
    return None if line is None else (line, json_object(line))


def local_time(value: Any) -> datetime | None:
    """A time a capture wrote (ISO, local to its host, no zone); None for anything else.

    >>> local_time("2025-05-25T21:40:21.123"), local_time("2025-05-25T21:40:21+02:00")
    (datetime.datetime(2025, 5, 25, 21, 40, 21, 123000), None)
    """
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is None else None
