"""What the server says about itself: ``/metrics`` every second and ``/server_info``.

``metrics.jsonl`` holds one JSON object per scrape, ``{"ts": local time, "text": the raw
Prometheus exposition}``: the text is kept whole (every label, every histogram bucket) so any
later reader parses it with a real exposition parser. ``server_info.jsonl`` holds one object
per call, ``{"ts", "phase", "when", "endpoint", "info"}``: ``/server_info`` (SGLang ≥ 0.5.23),
else ``/get_server_info`` (older releases). The answer holds the server's arguments: values of
secret-bearing keys (``api_key``, ``admin_api_key``, ``hf_token``, passwords) are written as
``[redacted]``, so the run directory can be shared.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from toolkit.capture.clock import iso, now
from toolkit.capture.halt import Halt
from toolkit.errors import CaptureError
from toolkit.load.secrets import REDACTED, is_secret_key

__all__ = ["MetricsPoller", "ServerInfo", "fetch", "redacted"]

PERIOD_S = 1.0
"""Time between two ``/metrics`` scrapes."""
TIMEOUT_S = 5.0
"""Longest wait for one HTTP answer."""
INFO_PATHS = ("/server_info", "/get_server_info")


def redacted(value: Any) -> Any:
    """``value`` with every non-empty string under a secret-bearing key replaced.

    >>> redacted({"api_key": "sk-1", "max_total_num_tokens": 5, "x": [{"hf_token": "hf_a"}]})
    {'api_key': '[redacted]', 'max_total_num_tokens': 5, 'x': [{'hf_token': '[redacted]'}]}
    """
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(v, str) and v and is_secret_key(str(k)) else redacted(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def fetch(url: str, timeout_s: float = TIMEOUT_S) -> tuple[int, bytes]:
    """(status, body) of a GET; status 0 when the server could not be reached or its answer
    was not whole (shorter than its ``Content-Length``, a broken status line)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return 0, b""


class ServerInfo:
    """``/server_info`` calls of one capture, appended to ``server_info.jsonl``."""

    def __init__(self, base_url: str, path: Path) -> None:
        self.base_url = base_url.rstrip("/")
        self.path = path
        self.endpoint: str | None = None
        self.latest: dict[str, Any] | None = None

    def check(self) -> dict[str, Any]:
        """The server's answer, not recorded; a ``CaptureError`` when it answers neither
        endpoint (checked before anything is started or written)."""
        info = self._ask()
        if info is None:
            raise CaptureError(
                f"{self.base_url}: no answer from /server_info or /get_server_info "
                "(is the SGLang server up, and is --server its http address?)"
            )
        return info

    def record(self, phase: int | None, when: str) -> dict[str, Any] | None:
        """Ask the server and append its answer; None when it did not answer."""
        info = self._ask()
        if info is None:
            return None
        entry = {"ts": iso(now()), "phase": phase, "when": when, "endpoint": self.endpoint}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry | {"info": redacted(info)}) + "\n")
        return info

    def _ask(self) -> dict[str, Any] | None:
        paths = [self.endpoint] if self.endpoint else list(INFO_PATHS)
        for endpoint in paths:
            status, body = fetch(self.base_url + endpoint)
            if status != 200:
                continue
            try:
                info = json.loads(body)
            except (ValueError, RecursionError):
                continue
            if isinstance(info, dict):
                self.endpoint, self.latest = endpoint, info
                return info
        return None


class MetricsPoller(threading.Thread):
    """Scrapes ``/metrics`` every ``PERIOD_S`` into ``metrics.jsonl`` until stopped.

    A failed scrape (no answer, a cut answer, an error status) is counted and the next one
    tried; the first failure is said at once. A server without ``/metrics`` (404 on the first
    try) is said and left alone. A write that fails (a full disk) stops the capture through
    ``halt``.
    """

    def __init__(
        self,
        base_url: str,
        path: Path,
        *,
        say: Callable[[str], None] = lambda _: None,
        halt: Halt | None = None,
    ) -> None:
        super().__init__(daemon=True, name="metrics")
        self.url = base_url.rstrip("/") + "/metrics"
        self.path = path
        self.say = say
        self.halt = halt
        self.scrapes = 0
        self.failures = 0
        self.disabled = False  # the server has no /metrics (started without --enable-metrics)
        self._done = threading.Event()

    @property
    def attempts(self) -> int:
        return self.scrapes + self.failures

    def failures_so_far(self) -> int | None:
        """Failed scrapes until now; None when the server has no ``/metrics``."""
        return None if self.disabled else self.failures

    def run(self) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as sink:
                self._loop(sink)
        except OSError as e:
            if self.halt is None:
                raise
            self.halt.stop(e)

    def _loop(self, sink: IO[str]) -> None:
        while True:
            started = now()
            status, body = fetch(self.url, timeout_s=min(TIMEOUT_S, 2 * PERIOD_S))
            if status == 404 and not self.scrapes:
                self.disabled = True
                self.say("the server has no /metrics (start it with --enable-metrics)")
                return
            if status == 200:
                text = body.decode("utf-8", "replace")
                sink.write(json.dumps({"ts": iso(started), "text": text}) + "\n")
                sink.flush()
                self.scrapes += 1
            else:
                self.failures += 1
                if self.failures == 1:
                    why = f"HTTP {status}" if status else "no whole answer"
                    self.say(f"metrics: /metrics failed ({why}); trying again every second")
            spent = (now() - started).total_seconds()
            if self._done.wait(max(0.0, PERIOD_S - spent)):
                return

    def finish(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(timeout=2 * TIMEOUT_S)
