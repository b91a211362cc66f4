"""Reports: a parameterized notebook executed by papermill, exported as one offline HTML file.

``render`` runs a notebook of ``notebooks/`` (or any path) in a fresh kernel of this
interpreter, then writes

- ``NAME.html``: self-contained. The vega bundle is inlined once in the head (the nbconvert
  template ``templates/offline`` drops require.js, MathJax and mermaid), charts are a ``<div>``
  and a call each, code inputs are hidden unless ``with_code``.
- ``NAME.json``: the sidecar: summary, findings, gap table, parameters, provenance and every
  record the notebook's views emitted.
- ``NAME.ipynb``: the executed notebook. Each chart is a Vega part (JupyterLab draws it, no
  trust needed) and a static image (GitHub, nbviewer, any reader without JavaScript).

Secrets are redacted by default (see ``toolkit.report.redact``). When a cell fails, ``render``
writes the partial notebook as ``NAME.ipynb`` and raises ``CellError`` naming the cell.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkit._version import __version__
from toolkit.errors import ToolkitError
from toolkit.report.context import (
    ENV_FULL_PATHS,
    ENV_PROGRESS,
    ENV_PROVENANCE,
    ENV_REDACT,
    ENV_REPORT,
    RECORD_MIME,
)
from toolkit.report.offline import bundle_html, external_refs, inline_charts
from toolkit.report.paths import common_root, split_runs, strip_root
from toolkit.report.progress import bars_wanted, drop_progress, hash_bar
from toolkit.report.provenance import input_files, provenance
from toolkit.report.redact import (
    redact_html,
    redact_text,
    redact_value,
    scrub,
    walk_strings,
)
from toolkit.report.runs import resolve_run_dir
from toolkit.report.view import STYLE
from toolkit.schema.jsonable import to_json

__all__ = [
    "NOTEBOOKS",
    "TEMPLATES",
    "CellError",
    "Report",
    "ReportError",
    "notebook_parameters",
    "notebook_path",
    "render",
]


def __getattr__(name: str) -> Any:
    # ``setup`` (charts, altair) is what a notebook's kernel needs; the rendering process
    # does not import it.
    if name == "setup":
        from toolkit.report.sections import setup

        return setup
    raise AttributeError(name)


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
TEMPLATES = Path(__file__).resolve().parent / "templates"
KERNEL = "python3"
CELL_TIMEOUT_S = 3600
"""A cell still running after this long fails the render (a hung kernel must not hang CI);
parsing a multi-GB log takes minutes, not an hour. ``PPSCOPE_CELL_TIMEOUT_S`` overrides it."""


def _cell_timeout_s() -> int:
    value = os.environ.get("PPSCOPE_CELL_TIMEOUT_S", "")
    return int(value) if value.isdigit() and int(value) > 0 else CELL_TIMEOUT_S


class ReportError(ToolkitError):
    """A report could not be rendered (bad notebook, parameter or output)."""


class CellError(ReportError):
    """A notebook cell raised; the partial notebook was written to ``partial``."""

    def __init__(
        self, notebook: str, cell: int, section: str | None, error: str, partial: Path
    ) -> None:
        where = f"cell {cell}" + (f" (section {section!r})" if section else "")
        super().__init__(f"{notebook}: {where} failed: {error}; partial notebook: {partial}")
        self.notebook, self.cell, self.section, self.error, self.partial = (
            notebook,
            cell,
            section,
            error,
            partial,
        )


@dataclass
class Report:
    """What ``render`` wrote and how long it took."""

    html: Path
    sidecar: Path
    notebook: Path
    size_bytes: int
    seconds: float
    sidecar_data: dict[str, Any] = field(repr=False)


def notebook_path(notebook: str | Path) -> Path:
    """A notebook by path, or by name in ``notebooks/`` (``postmortem`` → its ``.ipynb``)."""
    path = Path(notebook)
    if path.suffix == ".ipynb" and path.is_file():
        return path
    named = NOTEBOOKS / (path.name if path.suffix == ".ipynb" else f"{path.name}.ipynb")
    if named.is_file():
        return named
    have = ", ".join(sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
    raise ReportError(f"no notebook {str(notebook)!r} (have: {have})")


def notebook_parameters(notebook: str | Path) -> dict[str, dict[str, Any]]:
    """The parameters a notebook declares: name → ``{"type", "default", "help"}``."""
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(notebook_path(notebook), as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    out: dict[str, dict[str, Any]] = {}
    # the translator is the parser behind ``papermill --help-notebook``
    for p in PythonTranslator.inspect(cell) if cell is not None else []:
        try:
            default = ast.literal_eval(p.default)
        except (ValueError, SyntaxError):
            default = p.default
        out[p.name] = {"type": p.inferred_type_name, "default": default, "help": p.help}
    return out


def _coerce(name: str, value: Any, kind: str) -> Any:
    """A parameter given as text (``-p key value``) in the type the notebook declares."""
    if not isinstance(value, str):
        return value
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
    except ValueError:
        raise ReportError(f"parameter {name} must be {kind}, not {value!r}") from None
    if kind in ("list", "dict", "tuple"):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ReportError(f"parameter {name} must be a {kind} literal: {value!r}") from None
    return value


def _resolve_params(
    declared: Mapping[str, dict[str, Any]], params: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(given, coerced to the declared types; all parameters with defaults filled in)."""
    unknown = [k for k in params if k not in declared]
    if unknown:
        raise ReportError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} "
            f"(the notebook takes: {', '.join(declared) or 'none'})"
        )
    given = {k: _coerce(k, v, declared[k]["type"]) for k, v in params.items()}
    return given, {k: given.get(k, d["default"]) for k, d in declared.items()}


def _run_dirs(resolved: Mapping[str, Any]) -> list[Path]:
    runs = resolved.get("runs")
    if not runs:
        return []
    try:
        return [resolve_run_dir(s) for s in split_runs(runs)]
    except ToolkitError as e:
        raise ReportError(str(e)) from None


@contextlib.contextmanager
def _kernel_env(extra: Mapping[str, str]) -> Iterator[None]:
    """A ``python3`` kernelspec for this interpreter, found first through ``JUPYTER_PATH``.

    Nothing is registered globally: a clean machine (CI) has no user kernelspec, and a user's
    ``python3`` may be another Python without ppscope.
    """
    with tempfile.TemporaryDirectory(prefix="ppscope-kernel-") as tmp:
        spec = Path(tmp) / "kernels" / KERNEL
        spec.mkdir(parents=True)
        kernel = {
            "argv": [
                sys.executable,
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                # the TCP-without-encryption notice on every start is noise in a batch job
                "--IPKernelApp.log_level=ERROR",
                # output at the file-descriptor level (progress bars on sys.__stderr__, C
                # libraries) goes to the terminal of the render, not into the report
                "--IPKernelApp.capture_fd_output=False",
            ],
            "display_name": "Python 3 (ppscope)",
            "language": "python",
        }
        (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
        old = {k: os.environ.get(k) for k in ("JUPYTER_PATH", *extra)}
        paths = [tmp, *(p for p in [old["JUPYTER_PATH"]] if p)]
        os.environ["JUPYTER_PATH"] = os.pathsep.join(paths)
        os.environ.update(extra)
        try:
            yield
        finally:
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"ppscope: {text}", file=sys.stderr, flush=True)


def _secrets(run_dirs: Sequence[Path]) -> set[str]:
    """Secret values in the runs' inputs (``Run.secrets``; the log is cached by now)."""
    from toolkit.load.run import load_run

    found: set[str] = set()
    for directory in run_dirs:
        try:
            found |= load_run(directory).secrets
        except ToolkitError:
            continue  # the notebook reported what it could not read
    return found


def _clean_notebook(
    nb: Any, secrets: set[str], redact: bool, root: Path | None = None
) -> dict[str, Any]:
    """Take the sidecar records out of the outputs; redact what the notebook shows and take
    the runs' absolute ``root`` off every path in it.

    Every string of every output goes through the scanner (HTML outputs between their tags),
    whatever the section did before: the executed notebook, its HTML and the sidecar all
    come from here.
    """

    def text(s: str) -> str:
        return strip_root(redact_text(s, secrets) if redact else s, root)

    def markup(s: str) -> str:
        return strip_root(redact_html(s, secrets) if redact else s, root)

    records: dict[str, Any] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if RECORD_MIME in data:
                records.update(data[RECORD_MIME])
                continue
            kept.append(out)
        cell.outputs = kept
        if not redact and root is None:
            continue
        cell.source = text(cell.source)
        for out in cell.outputs:
            if out.get("output_type") == "stream":
                out["text"] = text(out["text"])
            elif out.get("output_type") == "error":
                out["evalue"] = text(out["evalue"])
                out["traceback"] = [text(t) for t in out["traceback"]]
            elif "data" in out:
                out["data"] = {
                    mime: value
                    if mime.startswith("image/") and "svg" not in mime  # base64 pixels
                    else walk_strings(
                        value, markup if mime in ("text/html", "image/svg+xml") else text
                    )
                    for mime, value in out["data"].items()
                }
    papermill_meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        papermill_meta.pop(key, None)  # temp and machine paths mean nothing to a reader
    if "parameters" in papermill_meta:
        papermill_meta["parameters"] = walk_strings(papermill_meta["parameters"], text)
    return walk_strings(records, text)


_PAPERMILL_TAGS = {"injected-parameters", "papermill-error-cell-tag"}


def _failed_cell(nb: Any) -> tuple[int, str | None]:
    """The failing cell as the notebook's author numbers it (1-based, papermill's own cells not
    counted) and the markdown heading above it, the way a reader finds it."""
    own = [c for c in nb.cells if not _PAPERMILL_TAGS & set(c.metadata.get("tags", []))]
    state = [c.metadata.get("papermill", {}) for c in own]
    index = next(
        (i for i, m in enumerate(state) if m.get("exception") or m.get("status") == "running"),
        len(own) - 1,
    )
    for cell in reversed(own[:index]):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return index + 1, line.lstrip("#").strip()
    return index + 1, None


def _export_html(nb: Any, with_code: bool, title: str) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="offline",
        extra_template_basedirs=[str(TEMPLATES)],
        exclude_input=not with_code,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    page = inline_charts(nb)
    page.metadata["title"] = title
    body, _ = exporter.from_notebook_node(page, resources={"ppscope_head": STYLE + bundle_html()})
    return body


def render(
    notebook: str | Path,
    params: Mapping[str, Any] | None,
    out_html: str | Path,
    *,
    with_code: bool = False,
    redact: bool = True,
    progress: bool = False,
    full_paths: bool = False,
) -> Report:
    """Execute ``notebook`` with ``params`` and write ``out_html`` and its ``.json`` sidecar.

    Parameters
    ----------
    notebook
        A notebook path, or a name of ``notebooks/`` (``postmortem``, ``scaling_gap``...).
    params
        Notebook parameters; text values (``-p key value``) are converted to the types the
        parameters cell declares. Unknown names are an error.
    out_html
        The report to write; the sidecar is the same path with ``.json``.
    with_code
        Show code cells (hidden by default).
    redact
        Replace secrets (API keys, tokens, passwords, URL credentials) by ``[redacted]``.
    progress
        Show steps on stderr: a line each, and papermill's and the loaders' bars only when
        stderr is a terminal.
    full_paths
        Show absolute paths; by default every path is relative to the folder that holds the
        run directories, so the report names no one's home directory.

    Raises
    ------
    CellError
        A cell failed; the partial notebook is written next to ``out_html``.
    ReportError
        Unknown notebook or parameter.
    """
    import nbformat
    import papermill
    from nbclient.exceptions import CellTimeoutError
    from papermill.exceptions import PapermillExecutionError

    started = time.perf_counter()
    nb_path = notebook_path(notebook)
    out_html = Path(out_html)
    sidecar = out_html.with_suffix(".json")
    declared = notebook_parameters(nb_path)
    given, resolved = _resolve_params(declared, params or {})
    run_dirs = _run_dirs(resolved)
    root = None if full_paths or not run_dirs else common_root(run_dirs)
    files = input_files(run_dirs)
    bar = hash_bar(progress, files)
    record = provenance(
        run_dirs,
        resolved,
        notebook=nb_path.name,
        rendered_at=datetime.now(UTC),
        progress=bar.update if bar is not None else None,
        full_paths=full_paths,
    )
    if bar is not None:
        bar.close()
    out_html.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ppscope-report-") as tmp:
        prov_path = Path(tmp) / "provenance.json"
        prov_path.write_text(json.dumps(record), encoding="utf-8")
        executed = Path(tmp) / nb_path.name
        env = {
            ENV_REPORT: "1",
            ENV_REDACT: "1" if redact else "0",
            ENV_PROVENANCE: str(prov_path),
            ENV_PROGRESS: "1" if bars_wanted(progress) else "0",  # the loaders' bars
            ENV_FULL_PATHS: "1" if full_paths else "0",
        }
        _say(progress, f"executing {nb_path.name} on {', '.join(map(str, run_dirs)) or '-'}")
        failure: str | None = None
        with _kernel_env(env):
            try:
                papermill.execute_notebook(
                    str(nb_path),
                    str(executed),
                    parameters=given,
                    kernel_name=KERNEL,
                    progress_bar=bars_wanted(progress),
                    start_timeout=120,
                    execution_timeout=_cell_timeout_s(),
                )
            except PapermillExecutionError as e:
                failure = f"{e.ename}: {e.evalue}"
            except CellTimeoutError:
                failure = f"still running after {_cell_timeout_s()} s, stopped"
        if not executed.is_file():  # stopped before papermill saved anything
            raise ReportError(f"{nb_path.name}: {failure or 'the kernel did not start'}")
        nb = nbformat.read(executed, as_version=4)
    drop_progress(nb)  # a bar a library drew in a cell is no part of the report
    secrets = _secrets(run_dirs) if redact else set()
    records = _clean_notebook(nb, secrets, redact, root)
    kept = out_html.with_suffix(".ipynb")
    nbformat.write(nb, kept)
    if failure is not None:
        partial = kept
        error = redact_text(failure, secrets) if redact else failure
        cell, section = _failed_cell(nb)
        raise CellError(nb_path.name, cell, section, error, partial)
    _say(progress, "exporting HTML")
    html = strip_root(_export_html(nb, with_code, out_html.stem), root)
    if redact:
        html = scrub(html, secrets)
    refs = external_refs(html)
    if refs:
        _say(True, f"warning: {out_html.name} loads from the network: {', '.join(refs[:5])}")
    out_html.write_text(html, encoding="utf-8")
    data = {
        "ppscope_version": __version__,
        "notebook": nb_path.stem,
        "report": out_html.name,
        "params": {**resolved, **record["parameters"]},
        "provenance": record,
        "summary": records.pop("summary", None),
        "findings": records.pop("findings", None),
        "skipped": records.pop("skipped", None),
        "gap": records.pop("gap", None),
        "views": records,
    }
    data = walk_strings(
        redact_value(data, secrets) if redact else data, lambda s: strip_root(s, root)
    )
    text = to_json(data)
    sidecar.write_text(scrub(text, secrets) if redact else text, encoding="utf-8")
    seconds = time.perf_counter() - started
    size = out_html.stat().st_size
    _say(progress, f"wrote {out_html} ({size / 1e6:.2f} MB) and {sidecar.name} in {seconds:.1f} s")
    return Report(out_html, sidecar, kept, size, seconds, data)
