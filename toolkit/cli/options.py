"""The command line's shared vocabulary: every flag that several commands take, declared once.

``-o/--output`` writes what a command produces to a file, ``--json`` prints one JSON object,
``-q/--quiet`` silences progress, and run directories are always several (``RUN_DIR...``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_json", "add_output", "add_quiet", "add_run_dirs"]


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_output(
    parser: argparse.ArgumentParser,
    *,
    required: bool = False,
    what: str = "the output",
    metavar: str = "FILE",
    default: Path | None = None,
) -> None:
    """``-o/--output``: where the command writes ``what``. Without ``default`` and unless
    ``required``, the command prints it instead (the help says so)."""
    printed = "" if required or default is not None else " instead of printing it"
    into = f" (default {default})" if default is not None else ""
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=required,
        default=default,
        metavar=metavar,
        help=f"write {what} to {metavar}{printed}{into}",
    )


def add_quiet(
    parser: argparse.ArgumentParser, *, what: str = "no progress line while files are read"
) -> None:
    """``-q/--quiet``: ``what`` it silences, in the words of the command."""
    parser.add_argument("-q", "--quiet", action="store_true", help=what)


def add_run_dirs(parser: argparse.ArgumentParser, *, minimum: int = 1) -> None:
    parser.add_argument(
        "paths",
        nargs="+" if minimum else "*",
        type=Path,
        metavar="RUN_DIR",
        help="run directories: a server log with what was measured against it "
        "('-': one file from standard input)",
    )
    parser.set_defaults(stdin_as="run")
