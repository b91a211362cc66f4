"""``ppscope capture --profile STEPS``: one PyTorch profile of each phase, taken in its middle.

The server profiles itself: ``POST /start_profile`` with ``output_dir``, ``num_steps`` and
``activities`` (SGLang stops after that many steps and writes one Chrome trace per rank into
the folder, on the server's file system). The request goes out once half the phase's requests
have finished, as the server's ``sglang:num_requests_total`` counter tells; a server without
``/metrics`` is asked after half the previous phase's length (the first phase: after
``FIRST_WAIT_S``). A phase that ends first is not profiled.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from toolkit.capture.metrics import TIMEOUT_S, fetch
from toolkit.load.profile import PROFILE_DIR

__all__ = ["FIRST_WAIT_S", "profile_folder", "profiling", "start_profile"]

FIRST_WAIT_S = 10.0
"""Wait before profiling the first phase of a server without ``/metrics``."""
ACTIVITIES = ("CPU", "GPU")
_POLL_S = 0.2
_SERVED = re.compile(r"^sglang:num_requests_total(?:\{[^}]*\})?\s+(\S+)", re.M)


def profile_folder(run_dir: Path, phase: int, concurrency: int) -> Path:
    """Where a phase's traces go: ``RUN_DIR/profile/phase-<i>-c<concurrency>``."""
    return run_dir / PROFILE_DIR / f"phase-{phase}-c{concurrency}"


def start_profile(url: str, output_dir: Path, steps: int) -> str | None:
    """Ask the server to profile ``steps`` steps into ``output_dir``; None when it agreed, else
    why not."""
    body = {"output_dir": str(output_dir), "num_steps": steps, "activities": list(ACTIVITIES)}
    request = urllib.request.Request(
        url + "/start_profile",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S * 6) as answer:
            answer.read()
            return None
    except urllib.error.HTTPError as e:
        return f"the server answered {e.code} to /start_profile"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return f"/start_profile failed ({e})"


def _served(url: str) -> float | None:
    """Requests the server has finished (its ``num_requests_total`` counters), or None."""
    status, body = fetch(url + "/metrics")
    if status != 200:
        return None
    values = _SERVED.findall(body.decode("utf-8", "replace"))
    try:
        return sum(float(v) for v in values) if values else None
    except ValueError:
        return None


@contextmanager
def profiling(
    url: str,
    output_dir: Path,
    steps: int | None,
    *,
    half: int,
    fallback_s: float,
    say: Callable[[str], None],
) -> Iterator[None]:
    """While the body (a phase) runs, ask for a profile once ``half`` requests finished
    (or after ``fallback_s`` without ``/metrics``); nothing when ``steps`` is None."""
    if steps is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        started = time.monotonic()
        first = _served(url)
        while not done.wait(_POLL_S):
            now = _served(url) if first is not None else None
            due = now - first >= half if now is not None and first is not None else False
            if first is None and time.monotonic() - started >= fallback_s:
                due = True
            if due:
                problem = start_profile(url, output_dir, steps)
                say(problem or f"profiling {steps} steps → {output_dir.name}")
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=TIMEOUT_S * 7)
