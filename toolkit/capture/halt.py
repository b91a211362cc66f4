"""Why a capture must stop early, told from any of its threads.

A follower thread that cannot write (a full disk) must not die with a traceback while the sweep
goes on: it notes the error here and returns; the sweep sees the halt within ``WAIT_S`` and
the capture stops as it does on Ctrl-C, with every child stopped and ``run.toml`` written.
"""

from __future__ import annotations

import threading

from toolkit.load.cache import is_disk_full

__all__ = ["Halt", "describe", "is_disk_full"]


class Halt:
    """A flag any thread sets once, with the first reason given."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.error: str | None = None

    def stop(self, error: OSError | str) -> None:
        """Ask the capture to stop, for ``error`` (an ``OSError`` of a write, or a sentence)."""
        with self._lock:
            if self.error is None:
                self.error = error if isinstance(error, str) else describe(error)
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``; True as soon as the capture must stop."""
        return self._event.wait(timeout_s)


def describe(error: OSError) -> str:
    """``path: no space left on device``: an ``OSError`` in one lowercase line."""
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{(error.strerror or str(error)).lower()}"
