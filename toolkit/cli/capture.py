"""``ppscope capture``: record a run directory from a live SGLang server, on one clock.

Follows the server log from now on, samples the GPUs, scrapes ``/metrics`` every second, asks
``/server_info`` before and after each phase, runs one benchmark per concurrency and writes the
phases' times, then ``run.toml``. Before recording anything it checks the server, the
benchmark and the log source, and names every problem (one line each). Progress goes to
stderr. Exit codes: 0 the sweep ran through; 1 a phase failed (its benchmark failed, or no
request completed: the sweep stopped there) or the disk filled up (one error line); 2 bad input
(nothing recorded); 130 stopped by Ctrl-C or SIGTERM; 129 stopped by SIGHUP (a closed terminal
or ssh link). A second signal while stopping is ignored. Every exit leaves a valid run
directory and no child running.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from types import FrameType

from toolkit.capture import CaptureOptions, capture
from toolkit.capture.session import STOP_SIGNALS
from toolkit.cli.options import add_output, add_quiet
from toolkit.cli.output import fail
from toolkit.errors import CaptureError, ToolkitError

NAME = "capture"
HELP = "record a run directory from a live SGLang server: log, GPUs, metrics, a sweep"
EXAMPLES = """\
examples:
  ppscope capture -o runs/pp8 --server http://localhost:30000 --journal sglang
  ppscope capture -o runs/tp8 --server http://localhost:30000 --log server.log
  ppscope capture -o runs/pp8 --server http://localhost:30000 --docker sglang --concurrency 1,8,32
  ppscope capture -o runs/pp8 --server http://localhost:30000 --kubectl sglang-0 -q
  ppscope capture -o runs/pp8 --server http://localhost:30000 --bench-cmd ./bench.sh
  ppscope capture -o runs/pp8 --server http://localhost:30000 --log server.log --profile 20
"""
DEFAULT_CONCURRENCY = "1,4,16,64"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output(parser, required=True, what="the run", metavar="RUN_DIR")
    parser.add_argument(
        "--server", required=True, metavar="URL",
        help="the SGLang server's http address (http://HOST:PORT)",
    )  # fmt: skip
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--log", metavar="FILE", help="follow this log file (like tail -F)")
    source.add_argument("--journal", metavar="UNIT", help="follow journalctl -u UNIT")
    source.add_argument("--docker", metavar="NAME", help="follow docker logs of a container")
    source.add_argument("--kubectl", metavar="POD", help="follow kubectl logs of a pod")
    parser.add_argument(
        "--from-start", action="store_true",
        help="take the log from its beginning (the file, the container's or pod's log, the "
        "unit's lines of this boot), so it holds the server's start and its server_args",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=_concurrency, default=_concurrency(DEFAULT_CONCURRENCY),
        metavar="LIST", help=f"one phase per value, in order (default {DEFAULT_CONCURRENCY})",
    )  # fmt: skip
    parser.add_argument(
        "--num-prompts", type=_positive, metavar="N",
        help="requests per phase (default four times the concurrency, at least 16)",
    )  # fmt: skip
    parser.add_argument(
        "--bench-cmd", metavar="CMD",
        help="the benchmark of one phase instead of sglang.bench_serving; {concurrency}, "
        "{num_prompts}, {url}, {output} (RUN_DIR/bench.jsonl) and {run_dir} are filled in",
    )  # fmt: skip
    parser.add_argument(
        "--bench-args", metavar="ARGS",
        help='more arguments for each phase\'s benchmark ("--random-input-len 1024")',
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=_positive, metavar="STEPS",
        help="ask the server (POST /start_profile) for a PyTorch profile of STEPS steps in the "
        "middle of each phase, into RUN_DIR/profile/phase-<i>-c<concurrency>",
    )  # fmt: skip
    parser.add_argument("--label", help="the run's label in run.toml (default from /server_info)")
    parser.add_argument(
        "--pause", type=_seconds, default=5.0, metavar="SECONDS",
        help="idle time between phases (default 5)",
    )  # fmt: skip
    add_quiet(parser, what="no 'capture:' line on stderr for each step of the capture")


def run(args: argparse.Namespace) -> int:
    log = next(
        ((kind, getattr(args, kind)) for kind in ("log", "journal", "docker", "kubectl")
         if getattr(args, kind)),
        None,
    )  # fmt: skip
    if args.from_start and log is None:
        raise ToolkitError(
            "--from-start needs a log source (--log, --journal, --docker, --kubectl)"
        )
    if args.pause < 0:
        raise ToolkitError(f"--pause must not be negative, not {args.pause}")
    options = CaptureOptions(
        run_dir=args.output,
        server=args.server,
        concurrency=args.concurrency,
        log=log,
        log_from_start=args.from_start,
        bench_cmd=args.bench_cmd,
        bench_args=args.bench_args,
        num_prompts=args.num_prompts,
        label=args.label,
        pause_s=args.pause,
        profile_steps=args.profile,
    )

    def say(line: str) -> None:
        if not args.quiet:
            with contextlib.suppress(OSError):  # a terminal gone with SIGHUP
                print(f"capture: {line}", file=sys.stderr, flush=True)

    # Ctrl-C, SIGTERM and SIGHUP stop the capture, even where SIGINT came in ignored (a job
    # started in the background by a script); a second one while it stops changes nothing.
    stop = _Stop()
    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        result = capture(options, say)
    except KeyboardInterrupt:  # before anything was started or written
        say("interrupted before the capture started")
        return stop.exit_code
    except CaptureError as e:  # nothing recorded: every problem on a line of its own
        for problem in str(e).splitlines():
            fail(problem)
        return 2
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    say(f"wrote {result.run_dir}: {', '.join(result.files)}")
    if result.error is not None:
        with contextlib.suppress(OSError):
            fail(f"capture stopped: {result.error}")
        return 1
    if result.interrupted:
        return stop.exit_code
    return 0 if result.failed is None else 1


class _Stop:
    """The signal handler: the first signal stops the capture (``KeyboardInterrupt``), later
    ones are ignored so the cleanup runs to its end."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        """128 + the signal's number for SIGHUP; 130 for Ctrl-C and SIGTERM (as before)."""
        return 129 if self.signum == signal.SIGHUP else 130


def _concurrency(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"each concurrency must be 1 or more: {text!r}")
    return values


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 3600:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be 0 to 3600 seconds: {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value
