"""Every headline number and name agrees across the CLI text, its JSON, the HTML report and the
executed notebook.

Each case is a set of run directories: the sample incident (``data/incident``: TP8, PP8 and the
remedied PP8, one model on one machine) and pairs of scenarios of the independent family
(``helpers.scenarios``), which serve different models on different machines, so their headline
must carry that caveat. Each case is rendered once (papermill and nbconvert are slow) and read
four ways: ``ppscope diagnose`` and ``ppscope scaling`` as text, ``ppscope diagnose --json``
and ``ppscope scaling --json``, the report's HTML with its JSON sidecar, and the notebook the
report executed. What must agree: the verdict (and its caveat), the output tok/s per layout and
concurrency, every finding's title (its slot figures and the load it names), the layout, the
GPU name and count of every run; no text names a phase by its index.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers import SAMPLE
from helpers.scenarios import build

from toolkit.cli.main import main
from toolkit.report.render import render

CASES: dict[str, tuple[str, ...]] = {
    "sample": ("tp8", "pp8", "pp8-fixed"),
    "pp4-llama-vs-pp8-qwen": ("pp4-stage-imbalance", "pp8-packed"),
    "tp8-llama405b-vs-pp8-deepseek": ("tp8-healthy-high", "pp8-several-causes"),
}
"""Case → its runs: directories of the sample, else scenario names."""


@dataclass
class Formats:
    """One case read four ways."""

    text: str  # ppscope diagnose, then ppscope scaling
    cli: dict[str, Any]  # ppscope diagnose --json
    scaling: dict[str, Any]  # ppscope scaling --json
    sidecar: dict[str, Any]  # the report's JSON
    page: str  # the report's HTML, entities decoded
    notebook: str  # every output of the executed notebook, entities decoded
    charts: list[dict[str, Any]]  # the notebook's vega-lite specs


def _notebook(path: Path) -> tuple[str, list[dict[str, Any]]]:
    nb = nbformat.read(path, as_version=4)
    texts, charts = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                texts.append(str(out["text"]))
            for mime, data in out.get("data", {}).items():
                if "vega" in mime and isinstance(data, dict):
                    charts.append(data)
                elif isinstance(data, str):
                    texts.append(data)
    return html.unescape("\n".join(texts)), charts


def _titles(spec: Any) -> Iterator[str]:
    """Every title text in a vega-lite spec, nested charts included."""
    if isinstance(spec, dict):
        title = spec.get("title")
        if isinstance(title, str):
            yield title
        elif isinstance(title, dict) and isinstance(title.get("text"), str):
            yield title["text"]
        for value in spec.values():
            yield from _titles(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _titles(value)


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Formats]:
    """Every case rendered and read once for the module."""
    root = tmp_path_factory.mktemp("consistency")
    out: dict[str, Formats] = {}
    for case, names in CASES.items():
        if case == "sample":
            dirs = [SAMPLE / n for n in names]
        else:
            dirs = [build(n, root / case / n) for n in names]
        paths = [str(d) for d in dirs]
        out[case] = _read(case, paths, root / case)
    return out


def _read(case: str, paths: list[str], where: Path) -> Formats:
    def cli(*args: str) -> str:
        buffer = StringIO()
        with redirect_stdout(buffer):
            assert main(list(args)) == 0, args
        return buffer.getvalue()

    text = cli("diagnose", "-q", *paths) + "\n" + cli("scaling", *paths)
    report = render("postmortem", {"runs": ",".join(paths)}, where / f"{case}.html")
    notebook, charts = _notebook(report.notebook)
    return Formats(
        text=text,
        cli=json.loads(cli("diagnose", "-q", "--json", *paths)),
        scaling=json.loads(cli("scaling", "--json", *paths)),
        sidecar=json.loads(report.sidecar.read_text(encoding="utf-8")),
        page=html.unescape(report.html.read_text(encoding="utf-8")),
        notebook=notebook,
        charts=charts,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_the_verdict_is_one_sentence_in_every_format(cases: dict[str, Formats], case: str) -> None:
    f = cases[case]
    verdict = f.cli["verdict"]
    assert "delivers" in verdict and f.scaling["gap"]  # every case compares two layouts
    assert f.sidecar["summary"]["verdict"] == verdict
    assert f.sidecar["views"]["verdict"] == verdict  # the scaling section's record
    assert f.scaling["verdict"] == verdict  # ppscope scaling --json
    assert f.text.count(f"verdict: {verdict}") == 2  # the first line of diagnose and scaling
    assert verdict in f.page and verdict in f.notebook
    titles = [t for spec in f.charts for t in _titles(spec)]
    assert verdict in titles, "the throughput chart's title is the verdict"


@pytest.mark.parametrize("case", [c for c in CASES if c != "sample"])
def test_a_comparison_across_models_and_machines_says_so_in_its_headline(
    cases: dict[str, Formats], case: str
) -> None:
    f = cases[case]
    verdict = f.cli["verdict"]
    kinds = {"models", "models and machines"}  # the same machine kind (H200) is no caveat
    said = re.search(r", across different (.+?) \(the gap compares them too", verdict)
    assert said and said.group(1) in kinds, verdict
    assert verdict.endswith("(the gap compares them too, not only the layouts).")


def test_the_sample_compares_like_for_like(cases: dict[str, Formats]) -> None:
    assert "across different" not in cases["sample"].cli["verdict"]


@pytest.mark.parametrize("case", list(CASES))
def test_tok_s_per_layout_and_concurrency_agree(cases: dict[str, Formats], case: str) -> None:
    f = cases[case]
    report = {
        (r["label"], r["concurrency"]): r["output_tok_s"] for r in f.sidecar["views"]["scaling"]
    }
    cli = {
        (label, r["concurrency"]): r["output_tok_s"]
        for label, rows in f.scaling["layouts"].items()
        for r in rows
    }
    assert report.keys() == cli.keys()
    for key, value in report.items():
        assert cli[key] == pytest.approx(value, abs=1e-3), key
    # the summary's gap table (what the first screen shows) and the CLI's table, as printed
    for row in f.sidecar["summary"]["gap"]:
        label = row["concurrency"].removesuffix(" tok/s")
        for c, shown in row.items():
            if c == "concurrency" or (label, int(c)) not in report or shown == "—":
                continue
            assert shown == f"{report[(label, int(c))]:,.0f}", (label, c)
            assert shown in f.page and f"{report[(label, int(c))]:.1f}" in f.text


@pytest.mark.parametrize("case", list(CASES))
def test_every_finding_title_agrees(cases: dict[str, Formats], case: str) -> None:
    """A title holds the finding's key figures (slots, loads, stages): the CLI, its JSON, the
    sidecar, the page and the notebook state the same ones."""
    f = cases[case]
    cli = sorted((x["run"], x["id"], x["title"]) for x in f.cli["findings"])
    report = sorted((x["run"], x["id"], x["title"]) for x in f.sidecar["findings"])
    assert cli == report and cli
    for _, _, title in cli:
        assert title in f.text and title in f.page and title in f.notebook, title
    for x in f.cli["findings"]:  # every summary reaches the page whole, to its last sentence
        last = x["summary"].rstrip()[-60:]
        assert last in f.page and last in f.notebook, (x["id"], last)
    for x in f.cli["findings"]:
        for text in (x["title"], x["summary"]):
            assert not re.search(r"\bphase \d", text), (x["id"], text)
            slots = re.search(r"~(\d+) of (\d+) slots", text)
            if slots:
                assert int(slots.group(1)) <= int(slots.group(2)), text


@pytest.mark.parametrize("case", list(CASES))
def test_layout_and_gpus_of_every_run_agree(cases: dict[str, Formats], case: str) -> None:
    f = cases[case]
    header = {r["run"]: r for r in f.sidecar["views"]["runs"]}
    assert [r["label"] for r in f.cli["runs"]] == list(header)
    for run in f.cli["runs"]:
        row, machine = header[run["label"]], run["hardware"]
        assert (row["hardware"], row["GPUs"]) == (machine["gpu"], machine["gpus"])
        assert machine["gpu"] and not re.match(r"\d+\s*[x×]", machine["gpu"])
        described = f"{machine['gpus']}× {machine['gpu']}"
        assert described in " ".join(f.text.split())  # a long line wraps: compare unwrapped
        assert machine["gpu"] in f.page and machine["gpu"] in f.notebook
        assert f"× {machine['gpus']}×" not in f.text
        # the layout as the report's run table and the CLI's run line describe it
        assert f"layout {row['layout']} (from {row['layout from']})" in " ".join(f.text.split())
        layout = run["layout"]
        for size in ("tp", "pp"):
            if layout[size] > 1:
                assert f"{size.upper()}{layout[size]}" in row["layout"], (row, layout)
