"""JSON lines as ppscope's capture and SGLang's tools write them: one object a line.

``first_record`` serves the sniffers (the first line that is an object, past damaged ones),
``json_object`` the readers, and ``local_time`` the times a capture writes: ISO, local to the
capture host, without a zone.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError
from toolkit.load.inputs import head_lines

__all__ = ["check_text", "first_record", "json_object", "local_time", "lone_surrogate"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


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
    """The first line among the first ``n`` of a file (decompressed) that is a JSON object,
    and that object; else the first non-blank line and None; None when all are blank.

    A damaged first line (no JSON) does not hide the records after it from a sniffer: their
    reader names it.
    """
    lines = [x for x in head_lines(path, n=n) if x.strip()]
    found = ((x, json_object(x)) for x in lines)
    return next((f for f in found if f[1] is not None), None) or (
        (lines[0], None) if lines else None
    )


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


def lone_surrogate(text: str, value: Any) -> str | None:
    """Why ``value`` (the JSON of ``text``) is no text: a string holding a lone UTF-16
    surrogate (``\\ud800`` without its pair), which no table can hold; None when it has none.

    Only text that spells a surrogate escape is walked: the check costs nothing otherwise.

    >>> lone_surrogate('{"a": "x\\\\ud800"}', json.loads('{"a": "x\\\\ud800"}'))
    'a lone surrogate escape (\\\\ud800) in a string is no text'
    """
    first = _ESCAPE.search(text)
    if first is None:
        return None
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return f"a lone surrogate escape ({first.group(0)}) in a string is no text"
        elif isinstance(node, dict):
            stack += [*node.keys(), *node.values()]
        elif isinstance(node, list):
            stack += node
    return None


def check_text(text: str, value: Any, path: str | Path, lineno: int | None = None) -> None:
    """Raise ``ParseError`` at the escape's line when ``lone_surrogate`` finds one."""
    reason = lone_surrogate(text, value)
    if reason is not None:
        first = _ESCAPE.search(text)
        at = first.start() if first is not None else 0
        raise ParseError(
            path, lineno if lineno is not None else text.count("\n", 0, at) + 1, reason
        )
