"""``load_bench``: benchmark results of every client in one declared table.

Formats are recognized from content (``sniff_bench_format``), never from file names; each is
an entry of ``toolkit.load.bench.FORMATS`` with its reader module (``sglang``, ``vllm``,
``nvidia``, ``aiperf``, ``sweep_csv``). A path may be a run directory: its ``run.toml`` gives
the layout label and launch command, and a server log inside it (read with
``load_sglang_log``) gives tp/pp when the results do not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError, ToolkitError, UnknownFormat
from toolkit.load import text as lines_io
from toolkit.load.bench import FORMATS, sniff_bench_format
from toolkit.load.bench.collect import BenchResults, Collector
from toolkit.load.bench.context import RunContext, walk
from toolkit.load.bench.format import Format, Options
from toolkit.load.bench.sweep_csv import BENCH_CSV, looks_tabular
from toolkit.load.inputs import check_input

__all__ = ["BenchResults", "load_bench", "sniff_bench_format", "summarize_bench_file"]


def load_bench(
    paths: str | Path | Iterable[str | Path],
    *,
    mapping: dict[str, str] | None = None,
    label: str | None = None,
    concurrency: dict[str, int] | None = None,
    cache: bool = True,
    step: Callable[[str], AbstractContextManager[object]] | None = None,
) -> BenchResults:
    """Read benchmark results of any supported client into one table.

    Parameters
    ----------
    paths
        Result files and/or run directories (searched recursively). Files that hold no
        benchmark result are skipped and listed in ``skipped``; when nothing else loads, the
        error about a named file is raised instead.
    mapping
        For generic CSVs: ``{column: csv_header}``, e.g. ``{"output_tok_s": "Gen tok/s",
        "concurrency": "Users"}``; overrides the guesses by name.
    label
        Layout label for every run loaded, overriding what the files and run.toml say.
    concurrency
        ``{file name or path: N}``: the concurrency of every run of that file, for results that
        configured no cap (``concurrency_from`` is then ``argument``).
    cache
        Passed to ``load_sglang_log`` when a run directory's server log is read for tp/pp.
    step
        Called with each path's name around its reading (a progress line).

    Returns
    -------
    BenchResults
        ``runs`` (one row per run; repeats stay separate rows) and ``requests``.

    Raises
    ------
    ToolkitError
        No path given, a path that does not exist, or nothing readable in any of them.
    ParseError
        A result file whose content is broken (with its line), or a CSV named explicitly
        whose columns match nothing, when nothing else loads (the message lists them).
    UnknownFormat
        The only file named is not a benchmark result.
    """
    items = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not items:
        raise ToolkitError("no benchmark files or run directories given")
    collector = Collector(mapping=mapping, label=label, concurrency=dict(concurrency or {}))
    for item in items:
        if not item.exists():
            raise ToolkitError(f"{item}: no such file or directory")
        with (step or _no_step)(str(item)):
            _read(collector, item, mapping, cache)
    collector.merge_exports()
    return collector.results(", ".join(str(p) for p in items))


def _no_step(name: str) -> AbstractContextManager[object]:
    return nullcontext()


def _read(collector: Collector, item: Path, mapping: dict[str, str] | None, cache: bool) -> None:
    """The runs of one path (a result file, or every result under a run directory)."""
    if item.is_dir():
        context = RunContext(item, True, cache)
        for path in walk(item):
            fmt = FORMATS.get(sniff_bench_format(path) or "")
            if fmt is None:
                collector.skipped.append({"path": str(path), "reason": "no benchmark result"})
                continue
            _add(collector, path, fmt, context)
    else:
        fmt = FORMATS.get(sniff_bench_format(item) or "")
        if fmt is not None:
            _add(collector, item, fmt, RunContext(item.parent, False, cache))
            return
        # A named file that is no known result: a table is tried as a sweep CSV, whose
        # reader says which columns it found. Among other results (a shell glob over run
        # directories) such files are skipped; alone, their error is the answer.
        try:
            head = lines_io.head_lines(item, n=50)
            if not (mapping or looks_tabular(head)):
                raise UnknownFormat(item, "not a benchmark result this version reads")
            context = RunContext(item.parent, False, cache)
            collector.add(item, BENCH_CSV.name, BENCH_CSV.load, context)
        except (ParseError, UnknownFormat) as e:
            collector.failed.append(e)
            collector.skipped.append({"path": str(item), "reason": str(e)})


def _add(collector: Collector, path: Path, fmt: Format, context: RunContext) -> None:
    """The runs of one result file; a broken file is damage, and the others are still read
    (alone, its error is the answer: ``Collector.results`` raises it)."""
    try:
        collector.add(path, fmt.name, fmt.load, context)
    except (ParseError, UnknownFormat) as e:
        collector.failed.append(e)
        collector.damaged.append(e)
        collector.skipped.append({"path": str(path), "reason": str(e)})


def summarize_bench_file(
    path: str | Path,
    *,
    mapping: dict[str, str] | None = None,
    cache: bool = True,
    strict: bool = False,
) -> dict[str, Any]:
    """The ``ppscope parse --json`` entry of a result file: path, format, runs, layouts.

    Raises
    ------
    UnknownFormat
        When the file is none of the benchmark formats.
    ParseError
        With ``strict``, at the file's first damaged line (else it is listed under
        ``damaged``); when no line of it holds a run, at its first damaged line.
    """
    path = check_input(path)
    fmt = FORMATS.get(sniff_bench_format(path) or "")
    if fmt is None:
        raise UnknownFormat(path, "not a benchmark result this version reads")
    return fmt.summarize(path, Options(mapping, cache, strict))
