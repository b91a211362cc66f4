"""Provenance: what a report was made from, so a reader can check it is the data they think.

``provenance`` lists the ppscope version, the parameters, every input file with its size and
sha256, and the render time; ``provenance_html`` shows it as a small table. Paths are relative
to the common folder of the run directories (``pp8/server.log``), so a shared report names
no one's home directory; ``full_paths`` keeps them absolute.
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkit._version import __version__
from toolkit.load.inputs import check_input
from toolkit.report.paths import common_root, join_runs, shown_path
from toolkit.report.redact import escape

__all__ = ["file_sha256", "input_files", "provenance", "provenance_html"]

_CHUNK = 1 << 20


def file_sha256(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks; ``progress(n)`` after each chunk."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return digest.hexdigest()


def input_files(run_dirs: Iterable[str | Path]) -> list[Path]:
    """Every file of the run directories, sorted; hidden entries (caches) are skipped."""
    files: list[Path] = []
    for run in run_dirs:
        root = Path(run)
        if root.is_file():
            files.append(check_input(root))
            continue
        for path in sorted(root.rglob("*")):
            hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
            if path.is_file() and not hidden:
                files.append(check_input(path))
    return files


def provenance(
    run_dirs: Iterable[str | Path],
    params: Mapping[str, Any],
    *,
    notebook: str | None = None,
    rendered_at: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    full_paths: bool = False,
) -> dict[str, Any]:
    """The provenance record of a report (JSON-ready).

    Input files and the ``runs`` parameter are shown relative to the common folder of the run
    directories (``full_paths``: absolute), so a shared report names no machine's directories.
    """
    when = rendered_at or datetime.now(UTC)
    run_dirs = [Path(d) for d in run_dirs]
    root = None if full_paths else common_root(run_dirs)
    files = [
        {
            "path": shown_path(path, root, full=full_paths),
            "size_bytes": path.stat().st_size,
            "sha256": file_sha256(path, progress),
        }
        for path in input_files(run_dirs)
    ]
    shown = dict(params)
    if run_dirs and "runs" in shown:
        shown["runs"] = join_runs(shown_path(d, root, full=full_paths) for d in run_dirs)
    return {
        "ppscope_version": __version__,
        "python": platform.python_version(),
        "notebook": notebook,
        "parameters": shown,
        "inputs": files,
        "paths": "absolute" if full_paths else "relative to the folder that holds the runs",
        "rendered_at": when.isoformat(timespec="seconds"),
    }


def provenance_html(record: Mapping[str, Any]) -> str:
    """A provenance record as an HTML block (every value escaped)."""
    params = record.get("parameters") or {}
    rows = "".join(
        f"<tr><td><code>{escape(k)}</code></td><td><code>{escape(v)}</code></td></tr>"
        for k, v in params.items()
    )
    inputs = "".join(
        f"<tr><td><code>{escape(f['path'])}</code></td>"
        f"<td style='text-align:right'>{f['size_bytes']:,}</td>"
        f"<td><code>{escape(f['sha256'])}</code></td></tr>"
        for f in record.get("inputs", [])
    )
    notebook = record.get("notebook")
    return (
        '<div class="ppscope-provenance">'
        f"<p>ppscope {escape(record.get('ppscope_version'))}, Python {escape(record.get('python'))}"
        + (f", notebook <code>{escape(notebook)}</code>" if notebook else "")
        + f", rendered {escape(record.get('rendered_at'))}.</p>"
        "<table><thead><tr><th>parameter</th><th>value</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        "<table><thead><tr><th>input file</th><th>bytes</th><th>sha256</th></tr></thead>"
        f"<tbody>{inputs or '<tr><td colspan=3>no input files</td></tr>'}</tbody></table>"
        "</div>"
    )
