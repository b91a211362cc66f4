"""A streaming reader of one Chrome-trace JSON object: its top-level keys one by one, and the
``traceEvents`` array one event object at a time.

A trace of hundreds of MB is never held whole: the decompressed text goes through a buffer of a
few MB, and each value is decoded with ``json.JSONDecoder.raw_decode`` where it starts. A value
longer than ``MAX_VALUE`` characters, or text that is no JSON, is damage (``ParseError`` with
the line and the event index); text that ends inside the object (a capture killed while it
wrote, a gzip stream cut short) is a cut: what came before is kept and ``Scanner.cut`` says
where it ended.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError
from toolkit.load import compression

__all__ = ["MAX_VALUE", "Scanner"]

MAX_VALUE = 8 << 20
"""Characters one value (an event, ``deviceProperties``) may take; a longer one is damage."""
_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")


class _Cut(Exception):
    """The text ended inside the object."""


class Scanner:
    """Iterate ``items()``: ``("meta", key, value)`` for each top-level key but the events,
    ``("event", index, object)`` for each element of ``traceEvents``.

    Raises
    ------
    ParseError
        Text that is no trace object, a value beyond ``MAX_VALUE``, or invalid JSON.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.cut: str | None = None  # why the text ended early, if it did
        self.events = 0
        self._stream = compression.Stream(self.path)
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self._json = json.JSONDecoder()
        self._buf = ""
        self._i = 0
        self._eof = False
        self._line = 1  # line of ``_buf[0]``

    # ------------------------------------------------------------------ buffer
    def _fill(self) -> bool:
        """Read more text; False at the end of the file."""
        if self._eof:
            return False
        if self._i > _CHUNK:  # drop what was read, counting its lines
            self._line += self._buf.count("\n", 0, self._i)
            self._buf, self._i = self._buf[self._i :], 0
        data = self._stream.read(_CHUNK)
        if not data:
            self._eof = True
            self._buf += self._decode(b"", final=True)
            return False
        self._buf += self._decode(data)
        return True

    def _lineno(self) -> int:
        return self._line + self._buf.count("\n", 0, self._i)

    def _fail(self, reason: str) -> ParseError:
        line = self._buf[self._i : self._i + 120].split("\n", 1)[0]
        return ParseError(self.path, self._lineno(), reason, line or None)

    def _skip(self) -> str:
        """The next non-blank character (not consumed); raises ``_Cut`` at the end."""
        while True:
            self._i = _WS.match(self._buf, self._i).end()
            if self._i < len(self._buf):
                return self._buf[self._i]
            if not self._fill():
                raise _Cut

    def _expect(self, chars: str, what: str) -> str:
        c = self._skip()
        if c not in chars:
            raise self._fail(f"expected {what}, found {c!r}")
        self._i += 1
        return c

    def _value(self, what: str) -> Any:
        """Decode the JSON value at the cursor, reading more text until it is whole."""
        self._skip()
        while True:
            try:
                value, end = self._json.raw_decode(self._buf, self._i)
            except RecursionError:
                raise self._fail(f"{what} is nested too deep") from None
            except json.JSONDecodeError as e:
                # Text that fails well before the end of what was read is damage whatever
                # follows; failing at the end (or in a string that runs to it) wants more text,
                # and at the end of the file it is a cut.
                unterminated = e.msg.startswith("Unterminated string")
                if self._eof:
                    if unterminated or e.pos >= len(self._buf.rstrip()):
                        raise _Cut from None
                    raise self._fail(f"{what} is no valid JSON ({e.msg})") from None
                open_end = unterminated or len(self._buf) - e.pos <= 64
                if not open_end or len(self._buf) - self._i > MAX_VALUE:
                    raise self._fail(f"{what} is no valid JSON ({e.msg})") from None
                self._fill()
                continue
            if end == len(self._buf) and self._fill():
                continue  # a number may go on in the next block
            self._i = end
            return value

    # ------------------------------------------------------------------ items
    def items(self) -> Iterator[tuple[str, Any, Any]]:
        try:
            yield from self._object()
        except _Cut:
            where = f"line {self._lineno()}, after {self.events} events"
            problem = self._stream.problem
            self.cut = (problem.split(";")[0] + f" ({where})") if problem else None
            self.cut = self.cut or f"the trace ends early at {where}: the file was cut"
        finally:
            self._stream.close()

    def _object(self) -> Iterator[tuple[str, Any, Any]]:
        try:
            self._expect("{", "a JSON object (a PyTorch profiler trace)")
        except _Cut:
            raise self._fail("empty file: no trace object") from None
        while True:
            c = self._skip()
            if c == "}":
                return
            key = self._value("a key")
            if not isinstance(key, str):
                raise self._fail(f"expected a key, found {key!r}")
            self._expect(":", "':' after a key")
            if key == "traceEvents":
                yield from self._events()
            else:
                yield "meta", key, self._value(f"the value of {key!r}")
            if self._expect(",}", "',' or '}' between keys") == "}":
                return

    def _events(self) -> Iterator[tuple[str, Any, Any]]:
        self._expect("[", "the traceEvents array")
        if self._skip() == "]":
            self._i += 1
            return
        while True:
            event = self._value(f"event {self.events}")
            yield "event", self.events, event
            self.events += 1
            if self._expect(",]", "',' or ']' between events") == "]":
                return
