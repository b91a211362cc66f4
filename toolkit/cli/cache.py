"""``ppscope cache``: what the line cache holds, and clearing it.

The cache keeps typed lines as Parquet, raw text included, in ``.ppscope-cache`` beside each
input and in ``~/.cache/ppscope``. ``info`` lists each cache directory (entries, bytes, the
inputs they came from, the ``PPSCOPE_CACHE_MAX`` limit); ``clear`` removes the entries and the
leftovers of killed builds.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from toolkit.cli.options import add_json, add_output
from toolkit.cli.output import aligned, emit, to_json
from toolkit.load import cache as cache_io

NAME = "cache"
HELP = "show or clear the cache of typed log lines"
EXAMPLES = """\
examples:
  ppscope cache info                       the user cache and ./.ppscope-cache
  ppscope cache info runs/pp8 --json       the cache beside the logs of a run directory
  ppscope cache clear runs/pp8             remove what is cached there
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=["info", "clear"], help="info: show the entries; clear: remove them"
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="inputs or folders whose .ppscope-cache to use (default: ~/.cache/ppscope and ./)",
    )
    add_json(parser)
    add_output(parser)


def roots(paths: list[Path]) -> list[Path]:
    """The cache directories of some inputs or folders (default: the user's and ``./``)."""
    if not paths:
        found = [cache_io.user_cache(), Path(cache_io.CACHE_NAME)]
    else:
        found = [
            (p if p.is_dir() else p.parent) / cache_io.CACHE_NAME
            if p.name != cache_io.CACHE_NAME
            else p
            for p in paths
        ]
    return list(dict.fromkeys(r for r in found if r.is_dir()))


def describe(root: Path) -> dict[str, Any]:
    entries = cache_io.entries(root)
    return {
        "path": str(root),
        "entries": len(entries),
        "bytes": sum(e.bytes for e in entries),
        "limit": cache_io.cache_max(),
        "sources": sorted({e.source for e in entries if e.source}),
    }


def run(args: argparse.Namespace) -> int:
    caches = [describe(root) for root in roots(args.paths)]
    if args.action == "clear":
        for c in caches:
            c["freed"] = cache_io.clear(Path(c["path"]))
    if args.json:
        emit(to_json({"caches": caches}), args.output)
        return 0
    if not caches:
        emit("no cache directory found", args.output)
        return 0
    cleared = args.action == "clear"
    header = ["cache", "entries", "MB", "limit MB"] + (["freed MB"] if cleared else [])
    rows = [
        [c["path"], str(c["entries"]), f"{c['bytes'] / 1e6:.1f}", f"{c['limit'] / 1e6:.0f}"]
        + ([f"{c['freed'] / 1e6:.1f}"] if cleared else [])
        for c in caches
    ]
    note = "entries hold the raw text of the logs they came from"
    emit("\n".join([*aligned(header, rows), note]), args.output)
    return 0
