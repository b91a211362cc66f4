"""Recording a run directory from a live SGLang server, on one clock.

``capture`` follows the server log from the capture's start (``sources``), samples the GPUs
(``gpu``), scrapes ``/metrics`` every second and asks ``/server_info`` around each phase
(``metrics``), runs a concurrency sweep whose phase times go to ``phases.jsonl`` (``sweep``),
and writes ``run.toml`` (``writer``). The server, the benchmark and the log source are checked
before anything is recorded (``preflight``). Child processes (``processes``) are stopped on
every exit path; a Ctrl-C, SIGTERM, SIGHUP or a full disk seen by any thread (``halt``) leaves
a valid partial run.
"""

from __future__ import annotations

from toolkit.capture.session import CaptureOptions, CaptureResult, capture

__all__ = ["CaptureOptions", "CaptureResult", "capture"]
