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
) -> None:
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=required,
        metavar=metavar,
        help=f"write {what} to {metavar}" + ("" if required else " instead of printing it"),
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress line while files are read"
    )


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
