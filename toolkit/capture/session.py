"""One capture from start to end: followers started, the sweep run, everything stopped.

Whatever ends a capture (the sweep done, a phase that failed, Ctrl-C, SIGTERM, SIGHUP, a full
disk, an error), every child process is stopped, every file is flushed and ``run.toml`` is
written (unless the disk has no room even for it), so the run directory is valid and complete up
to that moment.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.capture.clock import now
from toolkit.capture.gpu import GpuSampler, gpu_tool, record_inventory, start_sampler
from toolkit.capture.halt import Halt, describe, is_disk_full
from toolkit.capture.metrics import MetricsPoller, ServerInfo
from toolkit.capture.preflight import preflight
from toolkit.capture.processes import Children
from toolkit.capture.profile import FIRST_WAIT_S, profile_folder, profiling
from toolkit.capture.sources import LogSource, follow_log
from toolkit.capture.sweep import (
    Phase,
    bench_argv,
    client_tail,
    default_num_prompts,
    run_phase,
)
from toolkit.capture.writer import (
    command_of,
    hardware_of,
    interconnect_of,
    label_of,
    model_of,
    write_run_toml,
)
from toolkit.errors import CaptureError

__all__ = ["CaptureOptions", "CaptureResult", "capture"]

LOG_FILE = "server.log"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a capture: Ctrl-C, ``kill``, and a closed terminal or ssh link."""


@dataclass(frozen=True)
class CaptureOptions:
    """What to capture, as ``ppscope capture`` takes it."""

    run_dir: Path
    server: str
    concurrency: Sequence[int]
    log: tuple[str, str] | None = None  # (kind, name): ("journal", "sglang.service")
    log_from_start: bool = False  # the whole log (with the server's start), not from now on
    bench_cmd: str | None = None
    bench_args: str | None = None
    num_prompts: int | None = None
    label: str | None = None
    pause_s: float = 5.0
    profile_steps: int | None = None  # a torch profile of this many steps in each phase


@dataclass
class CaptureResult:
    """What a capture recorded."""

    run_dir: Path
    phases: list[Phase] = field(default_factory=list)
    interrupted: bool = False
    failed: Phase | None = None
    files: list[str] = field(default_factory=list)
    error: str | None = None  # what stopped it or what could not be written (a full disk)

    @property
    def complete(self) -> bool:
        return not self.interrupted and self.failed is None and self.error is None


def capture(options: CaptureOptions, say: Callable[[str], None] = lambda _: None) -> CaptureResult:
    """Record a run directory: the server log, GPU telemetry, metrics and a concurrency sweep.

    ``say`` receives one line per step (progress). A Ctrl-C (``KeyboardInterrupt``) ends the
    capture early: the result says so and the directory holds everything recorded until then.
    A full disk ends it too, from any thread: ``error`` then says what could not be written.

    Raises
    ------
    CaptureError
        Before anything is recorded: one line per problem found (the server does not answer,
        the run directory holds files already, the benchmark or the log source is missing).
    """
    url = options.server.rstrip("/")
    run_dir = options.run_dir
    info = ServerInfo(url, run_dir / "server_info.jsonl")
    first = preflight(options, info)
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"server {url} answers {info.endpoint}; recording into {run_dir}")
    result = CaptureResult(run_dir)
    halt = Halt()
    children = Children()
    source: LogSource | None = None
    sampler: GpuSampler | None = None
    poller: MetricsPoller | None = None
    inventory: dict[str, Path] = {}
    try:
        info.record(None, "start")
        if options.log is not None:
            source = follow_log(
                *options.log,
                run_dir / LOG_FILE,
                children,
                from_start=options.log_from_start,
                halt=halt,
            )
            say(f"server log: {source.description} → {LOG_FILE}")
        else:
            say("no server log source given: the run will hold no SGLang log")
        tool = gpu_tool()
        if tool is None:
            say("no nvidia-smi or dcgmi on PATH: no GPU trace")
        else:
            inventory = record_inventory(run_dir, children)
            sampler = start_sampler(tool, run_dir, children, halt=halt)
            say(f"gpu: {tool} every 100 ms → {sampler.path.name}")
        poller = MetricsPoller(url, run_dir / "metrics.jsonl", say=say, halt=halt)
        poller.start()
        _sweep(options, url, run_dir.resolve(), info, children, result, say, halt, poller)
    except KeyboardInterrupt:
        result.interrupted = True
        say("interrupted: stopping and writing what was recorded")
    except (OSError, CaptureError) as e:
        if halt.error is None and not (isinstance(e, OSError) and is_disk_full(e)):
            raise
        result.interrupted = True
        result.error = halt.error or describe(e)
        say(f"{result.error}: stopping and writing what was recorded")
    finally:
        with _no_interrupts():
            _stop(poller, sampler, source, children, run_dir, say)
            if halt.error is not None and result.error is None:  # after the last phase
                result.error = halt.error
                say(f"{halt.error}: the files stop there")
            error = _finish(options, info, first, inventory, source, sampler)
            if error is not None:
                result.error = result.error or error
                say(f"{error}: run.toml not written")
    result.files = sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("."))
    return result


def _stop(
    poller: MetricsPoller | None,
    sampler: GpuSampler | None,
    source: LogSource | None,
    children: Children,
    run_dir: Path,
    say: Callable[[str], None],
) -> None:
    """Stop every follower and child; a step that fails does not keep the next from running,
    and every child is stopped whatever happened."""
    try:
        for step in (
            poller.finish if poller is not None else None,
            (lambda: sampler.stop(children)) if sampler is not None else None,
            source.stop if source is not None else None,
        ):
            if step is not None:
                with contextlib.suppress(Exception):
                    step()
    finally:
        children.stop_all()
    if poller is not None:
        if not poller.scrapes:
            with contextlib.suppress(OSError):
                (run_dir / "metrics.jsonl").unlink(missing_ok=True)
        if poller.failures:
            say(f"metrics: {poller.failures} of {poller.attempts} /metrics scrapes failed")


def _finish(
    options: CaptureOptions,
    info: ServerInfo,
    first: dict[str, Any],
    inventory: dict[str, Path],
    source: LogSource | None,
    sampler: GpuSampler | None,
) -> str | None:
    """Ask the server a last time and write ``run.toml``; what failed (a full disk), if any."""
    with contextlib.suppress(OSError):
        info.record(None, "end")
    config = _config(options, info.latest or first, inventory, source, sampler)
    try:
        write_run_toml(options.run_dir, config)
    except OSError as e:
        if not is_disk_full(e):
            raise
        return describe(e)
    return None


def _sweep(
    options: CaptureOptions,
    url: str,
    run_dir: Path,
    info: ServerInfo,
    children: Children,
    result: CaptureResult,
    say: Callable[[str], None],
    halt: Halt,
    poller: MetricsPoller,
) -> None:
    total = len(options.concurrency)
    spent = 2 * FIRST_WAIT_S  # the first phase of a server without /metrics: profile then
    for i, c in enumerate(options.concurrency):
        if i and options.pause_s > 0 and halt.wait(options.pause_s):
            raise CaptureError("stopped")  # an idle stretch between phases, in every trace
        n = options.num_prompts or default_num_prompts(c)
        argv = bench_argv(
            options.bench_cmd,
            concurrency=c,
            num_prompts=n,
            url=url,
            run_dir=run_dir,
            extra=options.bench_args,
        )
        phase = Phase(i, c, n, argv)
        result.phases.append(phase)
        info.record(i, "before")
        say(f"phase {i + 1}/{total}: concurrency {c}, {n} requests …")
        started = time.monotonic()
        folder = profile_folder(run_dir, i, c)
        with profiling(
            url, folder, options.profile_steps, half=n // 2, fallback_s=spent / 2, say=say
        ):
            run_phase(phase, run_dir, children, halt=halt, errors=poller.failures_so_far)
        info.record(i, "after")
        spent = time.monotonic() - started
        if phase.failed:
            result.failed = phase
            say(f"phase {i + 1}/{total} failed ({phase.reason}); the sweep stops here")
            for line in client_tail(run_dir, c):
                say(f"  {line}")
            return
        done = f"{phase.completed} completed" if phase.completed is not None else ""
        say(
            f"phase {i + 1}/{total}: done in {spent:.0f} s, {phase.results} result(s)"
            + (f", {done}" if done else "")
        )


def _config(
    options: CaptureOptions,
    info: dict[str, Any],
    inventory: dict[str, Path],
    source: LogSource | None,
    sampler: GpuSampler | None,
) -> dict[str, Any]:
    """The keys of ``run.toml``."""
    values: dict[str, Any] = {
        "label": options.label or label_of(info),
        "model": model_of(info),
        "command": command_of(info),
        "hardware": hardware_of(inventory.get("gpus")),
        "interconnect": interconnect_of(inventory.get("topology")),
    }
    offset = source.clock.offset_s if source is not None else None
    if offset:
        values["clock_offset_s"] = offset
    zone = now().astimezone().tzname()
    values["notes"] = (
        f"recorded by ppscope capture from {options.server.rstrip('/')} "
        f"(concurrency {','.join(map(str, options.concurrency))}; capture clock {zone})"
    )
    if sampler is not None and sampler.tool == "dcgmi" and sampler.first_round is not None:
        values["gpu_trace"] = {"interval_s": sampler.interval_s, "start": sampler.first_round}
    return values


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """A second Ctrl-C, SIGTERM or SIGHUP does not cut the cleanup short (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
