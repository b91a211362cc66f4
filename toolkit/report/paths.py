"""Paths as a shared report shows them, and the ``runs`` parameter that names run directories.

A report travels: its run table, provenance, parameters and sidecar name paths relative to the
common root of the run directories (``tp8``, ``pp8/server.log``), never ``/home/USER/...``;
``ppscope report --full-paths`` keeps them absolute. Where an absolute path still reaches an
output (a message that names a file), ``strip_root`` takes the root off.

``runs`` is one string: directories separated by commas (``a,b``), or a JSON list
(``["runs/a,b", "runs/c"]``) when a name holds a comma; ``split_runs`` reads both and
``join_runs`` writes the plain form whenever it is unambiguous.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from toolkit.errors import ToolkitError

__all__ = ["common_root", "join_runs", "shown_path", "split_runs", "strip_root"]


def split_runs(runs: str | Sequence[str | Path]) -> list[str]:
    """Run directories from a ``runs`` parameter: a list, a JSON list, or ``a,b,c``.

    >>> split_runs("runs/tp8, runs/pp8")
    ['runs/tp8', 'runs/pp8']
    >>> split_runs('["runs/a,b", "runs/c"]')
    ['runs/a,b', 'runs/c']
    """
    if not isinstance(runs, str):
        return [str(r) for r in runs if str(r)]
    text = runs.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            raise ToolkitError(f"runs is not a JSON list of directories: {runs!r}") from None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ToolkitError(f"runs must be a list of directory names: {runs!r}")
        return [i for i in items if i.strip()]
    return [s.strip() for s in text.split(",") if s.strip()]


def join_runs(paths: Iterable[str | Path]) -> str:
    """The ``runs`` parameter for these directories: ``a,b``, or a JSON list when a name holds
    a comma (or would be cut by the plain form).

    >>> join_runs(["runs/tp8", "runs/pp8"])
    'runs/tp8,runs/pp8'
    >>> join_runs(["runs/a,b"])
    '["runs/a,b"]'
    """
    names = [Path(p).as_posix() if isinstance(p, Path) else str(p) for p in paths]
    plain = ",".join(names)
    if not plain.lstrip().startswith("[") and split_runs(plain) == names:
        return plain
    return json.dumps(names, ensure_ascii=False)


def common_root(paths: Iterable[str | Path]) -> Path:
    """The deepest directory that holds every one of ``paths`` (absolute), strictly above each
    run directory so that every run keeps its own name."""
    absolute = [Path(os.path.abspath(p)) for p in paths]
    if not absolute:
        return Path(os.path.abspath("."))
    parents = [p.parent for p in absolute]
    return Path(os.path.commonpath([str(p) for p in parents]))


def shown_path(path: str | Path, root: Path | None, *, full: bool = False) -> str:
    """``path`` as a report shows it: relative to ``root`` (POSIX separators), or absolute
    with ``full``; a path outside ``root`` is shown by its name."""
    absolute = Path(os.path.abspath(path))
    if full or root is None:
        return absolute.as_posix()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.name


def strip_root(text: str, root: Path | None) -> str:
    """``text`` with the absolute ``root`` (and its separator) taken off every path in it."""
    if root is None or root == Path(root.anchor):
        return text  # "/" as the root: nothing machine-specific to take off
    prefix = root.as_posix().rstrip("/") + "/"
    return text.replace(prefix, "")
