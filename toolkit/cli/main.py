"""The ``ppscope`` command line: argparse only; each command lives in a module of its own."""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from types import ModuleType

from toolkit._version import __version__
from toolkit.cli.output import fail
from toolkit.cli.stdin import stdin_inputs
from toolkit.errors import ToolkitError

COMMAND_NAMES: tuple[str, ...] = (
    "parse",
    "scaling",
    "model",
    "diagnose",
    "diff",
    "timeline",
    "report",
    "capture",
    "demo",
    "ingest",
    "cache",
)
"""Each command is the module ``toolkit.cli.<name>``, with ``NAME``, ``HELP``, ``EXAMPLES``,
``add_arguments(parser)`` and ``run(args)``; a command line imports only the one it runs."""


def command_module(name: str) -> ModuleType:
    """The module of one command."""
    return importlib.import_module(f"toolkit.cli.{name}")


def __getattr__(name: str) -> tuple[ModuleType, ...]:
    if name == "COMMANDS":  # every command's module, imported on request
        return tuple(command_module(n) for n in COMMAND_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DESCRIPTION = """\
Why does this parallel layout not scale? ppscope reads SGLang server logs, GPU traces and
benchmark results, checks the usual hypotheses with evidence, and renders offline postmortems.
"""
EPILOG = """\
examples:
  ppscope parse server.log
  ppscope diagnose runs/tp8 runs/pp8
  ppscope report runs/tp8 runs/pp8 -o reports/postmortem.html

'ppscope COMMAND --help' shows a command's options and examples.

exit codes:
  0    done
  1    partly done: an input among several could not be read (named on stderr), or a
       notebook cell or a capture phase failed
  2    bad input: nothing could be read, or an option is wrong
  3    diagnose --fail-on: a finding at or above that severity (listed on stderr)
  130  capture stopped early (Ctrl-C, SIGTERM)
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command (or of ``only``), with examples in each ``--help``."""
    parser = argparse.ArgumentParser(
        prog="ppscope",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ppscope {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (command_module(n) for n in COMMAND_NAMES if only in (None, n)):
        sub = commands.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.HELP[0].upper() + command.HELP[1:] + ".",
            epilog=command.EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 done, 1 partly done: an input among
    several unreadable, a failed notebook cell or capture phase; 2 bad input; 3 ``diagnose
    --fail-on`` found a finding that severe; 130 ``capture`` stopped early, 129 by SIGHUP)."""
    warnings.formatwarning = _warning_line
    words = sys.argv[1:] if argv is None else argv
    named = words[0] if words and words[0] in COMMAND_NAMES else None
    args = build_parser(only=named).parse_args(words)
    try:
        with stdin_inputs(args) as given:  # ``-``: standard input, shown as <stdin>
            return _run(given)
    except ToolkitError as e:  # standard input could not be read
        return fail(e)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except ToolkitError as e:
        return fail(e)
    except BrokenPipeError:
        return 0
    except OSError as e:  # a file that vanished or an output that cannot be written
        where = f"{e.filename}: " if e.filename else ""
        return fail(f"{where}{(e.strerror or str(e)).lower()}")


_python_warning = warnings.formatwarning


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """ppscope's own warnings as one line, without the source line Python adds."""
    if category.__module__.startswith("toolkit."):
        return f"ppscope: warning: {message}\n"
    return _python_warning(message, category, filename, lineno, line)


if __name__ == "__main__":
    raise SystemExit(main())
