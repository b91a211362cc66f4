"""What the fuzz families share: their budget, byte mutations of real fixtures, hostile JSON.

The suite runs each fuzz test on a few examples (``budget(n)``); ``make fuzz`` runs them under
the ``fuzz`` hypothesis profile (``HYPOTHESIS_PROFILE=fuzz``), or with
``PPSCOPE_FUZZ_EXAMPLES=N`` examples each.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "HOSTILE",
    "budget",
    "count_lines",
    "hostile_json",
    "json_values",
    "mutated",
    "seeds",
]


def budget(n: int) -> settings:
    """``n`` examples in the suite; the fuzz profile's (or ``PPSCOPE_FUZZ_EXAMPLES``) otherwise."""
    given = os.environ.get("PPSCOPE_FUZZ_EXAMPLES")
    if given:
        n = int(given)
    elif os.environ.get("HYPOTHESIS_PROFILE") == "fuzz":
        n = settings.default.max_examples
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
        ],
    )


HOSTILE: tuple[bytes, ...] = (
    b"\r",
    b"\r\r\n",
    b"\r\n",
    b"\n",
    b"\n\n",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1e",
    b"\xc2\x85",
    "\u2028".encode(),
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\x1b[31m",
    b",",
    b", ",
    b";",
    b"\t",
    b" ",
    b"#",
    b"-",
    b'"',
    b"'",
    b"[",
    b"{",
    b"}",
    b"]",
    b"[" * 3000,
    b"{" * 1500,
    b"9" * 5000,
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1e400",
    b"NaN",
    b"Infinity",
    b"-inf",
    b"null",
    b"true",
    b"[N/A]",
    b"x" * 70_000,
)
"""Bytes that broke parsers before: line terminators ``str.splitlines`` splits on, deep
nesting, integers beyond 64 bits or of thousands of digits, non-finite numbers, huge fields."""


def seeds(*folders: Path, suffixes: Sequence[str] = ()) -> list[bytes]:
    """The bytes of every fixture file under ``folders`` (optionally only these suffixes)."""
    out = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            wanted = not suffixes or path.suffix in suffixes
            if wanted and path.is_file() and path.name != "README.md":
                out.append(path.read_bytes())
    return out


@st.composite
def mutated(draw: st.DrawFn, corpus: Sequence[bytes]) -> bytes:
    """A fixture with a few byte-level edits: hostile insertions, flips, cuts, repeated lines."""
    data = bytearray(draw(st.sampled_from(list(corpus))))
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(("insert", "replace", "flip", "delete", "cut", "dup", "terms")))
        pos = draw(st.integers(0, len(data)))
        if op == "insert":
            data[pos:pos] = draw(st.sampled_from(HOSTILE))
        elif op == "replace":
            end = min(len(data), pos + draw(st.integers(1, 16)))
            data[pos:end] = draw(st.sampled_from(HOSTILE))
        elif op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 64))]
        elif op == "cut":
            del data[pos:]
        elif op == "dup":
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            line = bytes(data[start : (len(data) if end < 0 else end + 1)])
            data[start:start] = line * draw(st.integers(1, 3))
        elif op == "terms":  # every line terminator replaced by another one
            term = draw(st.sampled_from((b"\r\n", b"\r\r\n", b"\n\x0b", b"\n\xe2\x80\xa8")))
            data = bytearray(bytes(data).replace(b"\n", term))
    return bytes(data)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value, of any type, with integers past 64 bits and non-finite floats."""


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:4]):
            out += _paths(value, (*prefix, i))
    return out


def _set(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node[path[0]] = _set(node[path[0]], path[1:], value)
    return node


@st.composite
def hostile_json(draw: st.DrawFn, documents: Sequence[Any]) -> Any:
    """A real JSON document with a few of its values (or keys' values) of another type."""
    doc = json.loads(json.dumps(draw(st.sampled_from(list(documents)))))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        doc = _set(doc, draw(st.sampled_from(paths)), draw(json_values))
    return doc


def count_lines(data: bytes) -> int:
    """Physical lines of a file: ``\\n`` ends a line; a last line without one counts too."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def sprinkled(draw: st.DrawFn, line: bytes, noise: st.SearchStrategy[bytes]) -> bytes:
    """``line`` with up to two pieces of ``noise`` put in at drawn places (each replacing up to
    three bytes there), kept one line: what probes a parser's edges byte by byte."""
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(line)))
        cut = draw(st.integers(0, 3))
        line = line[:at] + draw(noise) + line[at + cut :]
    return line.replace(b"\n", b" ")
