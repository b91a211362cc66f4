"""The run's wall clock and the timestamp formats of the files that print it.

Every synthetic time is seconds after the launch; ``START`` pins the launch to a fixed date so
no output depends on when it was generated.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["HOST", "START", "journal_ts", "moment", "sglang_ts", "smi_ts"]

START = datetime(2026, 5, 25, 21, 40, 21, 250000)
HOST = "gpu-node-1"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def moment(t: float) -> datetime:
    """The wall-clock time ``t`` seconds after the launch (microsecond resolution)."""
    return START + timedelta(microseconds=round(t * 1e6))


def sglang_ts(t: float) -> str:
    """SGLang's ``%Y-%m-%d %H:%M:%S`` (no milliseconds without ``SGLANG_LOG_MS``)."""
    return moment(t).strftime("%Y-%m-%d %H:%M:%S")


def journal_ts(t: float) -> str:
    """``journalctl -o short``: ``%b %e %H:%M:%S``, the day padded with a space."""
    m = moment(t)
    return f"{_MONTHS[m.month - 1]} {m.day:2d} {m:%H:%M:%S}"


def smi_ts(t: float) -> str:
    """nvidia-smi's ``YYYY/MM/DD HH:MM:SS.msec``."""
    m = moment(t)
    return f"{m:%Y/%m/%d %H:%M:%S}.{m.microsecond // 1000:03d}"
