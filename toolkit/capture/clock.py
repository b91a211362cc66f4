"""The capture's clock, and how far the server log's clock is from it.

Everything a capture writes (phase times, metric snapshots, ``nvidia-smi`` rows) is in the
capture host's local time without a zone, the clock ``nvidia-smi`` prints. The server log
carries SGLang's own time, which is the server's local time: in a container that is often UTC.
``LogClock`` compares each log line's SGLang time with the moment the capture read the line;
the largest difference is the log clock's lead (a line is never read before it is written).
"""

from __future__ import annotations

import re
import threading
from datetime import datetime

__all__ = ["LogClock", "iso", "now"]

_SGLANG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)(?: [A-Z_]+\d+)*\]")

MIN_OFFSET_S = 2.0
"""A log clock off the capture's by less than this is within SGLang's one-second resolution
and the time a line takes to be read."""


def now() -> datetime:
    """The capture host's local time, without a zone."""
    return datetime.now()


def iso(t: datetime) -> str:
    """``2025-05-25T21:40:21.123``: local time to the millisecond."""
    return t.isoformat(timespec="milliseconds")


def line_time(line: str) -> datetime | None:
    """The SGLang time of a log line (``[2025-05-25 21:40:21 PP0] ...``, after any wrapper)."""
    m = _SGLANG_TIME.search(line)
    if m is None:
        return None
    try:
        return datetime.fromisoformat(m.group(1))
    except ValueError:
        return None


class LogClock:
    """The server log's clock relative to the capture's, from the lines read so far."""

    def __init__(self) -> None:
        self._lead: float | None = None
        self._lock = threading.Lock()
        self.lines = 0

    def seen(self, line: str, read_at: datetime) -> None:
        """Note one line and the local time it was read."""
        t = line_time(line)
        with self._lock:
            self.lines += 1
            if t is None:
                return
            lead = (t - read_at).total_seconds()
            if self._lead is None or lead > self._lead:
                self._lead = lead

    @property
    def offset_s(self) -> float | None:
        """Seconds to add to the capture's times to put them on the log's clock; None when
        no line told, 0 when the two agree within ``MIN_OFFSET_S``."""
        with self._lock:
            lead = self._lead
        if lead is None:
            return None
        return round(lead, 1) if abs(lead) >= MIN_OFFSET_S else 0.0
