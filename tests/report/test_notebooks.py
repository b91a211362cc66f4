"""Every notebook executed through ``toolkit.report.render`` (papermill, nbconvert), once each.

The notebooks run on ``data/incident/`` with their defaults (``rendered`` in ``conftest``,
shared with the browser tests); the small two-run incident goes through the command line. The
committed notebooks are checked as files: outputs stripped, the first cell tagged
``parameters`` with help on every line.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import papermill
import pytest
from helpers import REPO
from helpers.report_runs import API_KEY, CMD_KEY, FREE_TEXT, INCIDENT, NAMES, SCRIPT, make_runs

from toolkit.cli.main import main
from toolkit.report.display import IMAGE_MIMES, VEGA_MIME
from toolkit.report.offline import external_refs
from toolkit.report.render import CellError, Report, ReportError, render

NOTEBOOKS = REPO / "notebooks"
BUNDLE_MARK = "window.vegaEmbed=$"  # the bundle's own assignment: once per file


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def postmortem(tmp_path_factory: pytest.TempPathFactory, runs: list[Path]) -> Path:
    """The postmortem of the small runs through the CLI body (redaction on by default)."""
    out = tmp_path_factory.mktemp("cli") / "small.html"
    assert main(["report", *map(str, runs), "-o", str(out), "-q", "-p", "max_points", "2000"]) == 0
    return out


# ── the committed notebooks ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stripped_and_parameterized(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    for line in first.source.splitlines():
        # papermill skips a line with a second "=" (in the help, say) with only a warning
        assert re.fullmatch(r"\w+: \w+ = [^=]+  # [^=]+", line), line
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
            assert not re.search(r"^\s*(def|class) ", cell.source, re.M), (
                "logic belongs in toolkit/"
            )
    text = (NOTEBOOKS / f"{name}.ipynb").read_text()
    assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text


@pytest.mark.parametrize("name", NAMES)
def test_papermill_reads_the_parameters(name: str) -> None:
    declared = papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb"))
    assert "runs" in declared and "data/incident/" in declared["runs"]["default"]
    assert all(p["help"] for p in declared.values())


# ── rendered reports ─────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", NAMES)
def test_notebook_renders_self_contained(name: str, rendered: dict[str, Report]) -> None:
    report = rendered[name]
    html = report.html.read_text()
    assert html.count(BUNDLE_MARK) == 1, "the vega bundle is inlined exactly once"
    assert external_refs(html) == []
    assert "require.js" not in html and "mathjax" not in html.lower()
    assert html.count('class="ppscope-chart"') >= 1
    assert "hl-ipython3" not in html, "code inputs are hidden by default"
    assert "application/vnd.ppscope.record" not in html
    data = json.loads(report.sidecar.read_text())
    assert data["notebook"] == name and data["params"]["runs"]
    if INCIDENT.is_dir():  # relative run directories: the report names no machine's paths
        root = str(NOTEBOOKS.parent.resolve())
        assert root not in html and root not in report.sidecar.read_text()
    for file in data["provenance"]["inputs"]:
        assert re.fullmatch(r"[0-9a-f]{64}", file["sha256"]) and file["size_bytes"] >= 0


@pytest.mark.parametrize("name", NAMES)
def test_kept_notebook_shows_every_chart_without_javascript(
    name: str, rendered: dict[str, Report]
) -> None:
    """The executed notebook beside the report: each chart a Vega part (JupyterLab) and an
    image (GitHub, nbviewer); the HTML draws the live chart and embeds no image."""
    nb = nbformat.read(rendered[name].notebook, as_version=4)
    nbformat.validate(nb)
    charts = [
        out.data
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if VEGA_MIME in out.get("data", {})
    ]
    assert charts
    for data in charts:
        assert set(data) & set(IMAGE_MIMES), "an image for readers without JavaScript"
        assert "text/html" not in data, "JupyterLab must pick the Vega part"
    html = rendered[name].html.read_text()
    assert html.count('class="ppscope-chart"') == len(charts)
    assert 'class="jp-RenderedSVG' not in html and 'class="jp-RenderedImage' not in html


def test_render_leaves_altair_as_it_was(tmp_path: Path) -> None:
    """Neither the kernel (setup, views) nor the calling process end with an altair setting
    changed."""
    import altair as alt

    state = lambda: [alt.renderers.active, alt.theme.active, alt.data_transformers.active]  # noqa: E731
    before = state()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('runs: str = ""  # nothing')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "import altair as alt\n"
            "state = lambda: [alt.renderers.active, alt.theme.active,\n"
            "                 alt.data_transformers.active]\n"
            "before = state()\n"
            "import toolkit.report.sections as views\n"
            "views.setup()\n"
            "views.View('x', [alt.Chart(alt.Data(values=[{'x': 1}])).mark_point()])"
        ),
        nbformat.v4.new_code_cell("assert state() == before, state()\nprint(*state())"),
    ]
    path = tmp_path / "state.ipynb"
    nbformat.write(nb, path)
    report = render(path, {}, tmp_path / "state.html")
    assert state() == before
    kept = nbformat.read(report.notebook, as_version=4)
    assert kept.cells[2].outputs[0]["text"].split() == ["default", "default", "default"]


def test_postmortem_sidecar(rendered: dict[str, Report]) -> None:
    data = rendered["postmortem"].sidecar_data
    assert {"summary", "findings", "gap", "params", "provenance"} <= set(data)
    assert data["gap"] and {"concurrency", "ratio", "leader"} <= set(data["gap"][0])
    assert data["provenance"]["ppscope_version"] and data["provenance"]["inputs"]
    assert {"model", "kv", "config_diff"} <= set(data["views"])


def test_postmortem_sections_in_order(rendered: dict[str, Report]) -> None:
    html = rendered["postmortem"].html.read_text()
    headings = re.findall(r"<h2[^>]*>([^<]+)", html)
    wanted = ["Summary", "Runs", "Findings", "The scaling gap", "Expected vs observed",
              "Slot occupancy", "Stage timeline and GPU utilization", "CUDA graph coverage",
              "KV pressure", "Requests on the server", "Config diff", "Warnings and errors",
              "Glossary", "Provenance"]  # fmt: skip
    assert [h for h in headings if h in wanted] == wanted


def test_summary_comes_before_the_run_table(rendered: dict[str, Report]) -> None:
    html = rendered["postmortem"].html.read_text()
    summary = html.index('class="ppscope-summary"')
    assert summary < html.index('class="ppscope-verdict"') < html.index("<th>run</th>")
    data = rendered["postmortem"].sidecar_data
    assert data["summary"]["verdict"] and data["summary"]["gap"]


def test_report_is_small(rendered: dict[str, Report]) -> None:
    # ≤ 3 MB for the demo (a 0.9 MB bundle plus downsampled data)
    assert rendered["postmortem"].size_bytes <= 3_000_000


# ── redaction and escaping ───────────────────────────────────────────────────────────────────


def test_api_key_appears_nowhere(postmortem: Path) -> None:
    html = postmortem.read_text()
    sidecar = postmortem.with_suffix(".json").read_text()
    for text in (html, sidecar):
        assert API_KEY not in text
        assert CMD_KEY not in text
        assert "sk-ppscope" not in text
    assert "[redacted]" in html


def test_free_text_secrets_appear_nowhere(postmortem: Path) -> None:
    html = postmortem.read_text()
    sidecar = postmortem.with_suffix(".json").read_text()
    assert "retrying with api_key=" in html, "the log lines are shown, their secrets are not"
    for secret in FREE_TEXT.values():
        assert secret not in html and secret not in sidecar


def test_kept_notebook_is_redacted(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('runs: str = ""  # nothing')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "from IPython.display import HTML, display\n"
            "print('ERROR: password=kept-pw-7777')\n"
            "display(HTML('<p>Authorization: Bearer kept-bearer-8888</p>'))"
        ),
        nbformat.v4.new_code_cell("raise ValueError('retrying with api_key=kept-key-9999')"),
    ]
    path = tmp_path / "leaky.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CellError) as err:
        render(path, {}, tmp_path / "leaky.html")
    kept = err.value.partial.read_text()
    for secret in ("kept-pw-7777", "kept-bearer-8888", "kept-key-9999"):
        assert secret not in kept and secret not in str(err.value)


def test_shared_report_names_no_local_path(postmortem: Path, runs: list[Path]) -> None:
    root = runs[0].parent.as_posix()
    html, sidecar = postmortem.read_text(), postmortem.with_suffix(".json").read_text()
    assert root not in html and root not in sidecar
    data = json.loads(sidecar)
    assert {f["path"].split("/")[0] for f in data["provenance"]["inputs"]} == {"tp8", "pp8"}
    assert data["params"]["runs"] == data["provenance"]["parameters"]["runs"] == "tp8,pp8"
    assert [r["directory"] for r in data["views"]["runs"]] == ["tp8", "pp8"]


def test_full_paths_and_directory_names_with_commas(tmp_path: Path, runs: list[Path]) -> None:
    odd = tmp_path / "pp8,fixed"
    shutil.copytree(runs[1], odd)
    out = tmp_path / "full.html"
    argv = ["report", str(odd), str(runs[0]), "-o", str(out), "-q", "--notebook", "config_diff"]
    assert main([*argv, "--full-paths"]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["params"]["runs"] == json.dumps([odd.as_posix(), runs[0].as_posix()])
    assert (odd / "server.log").as_posix() in [f["path"] for f in data["provenance"]["inputs"]]


def test_terminal_progress_stays_out_of_the_report(postmortem: Path) -> None:
    html = postmortem.read_text()
    assert "B/s]" not in html and "cell/s" not in html


def test_log_text_is_escaped(postmortem: Path) -> None:
    html = postmortem.read_text()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(" in html


def test_synthetic_banner(postmortem: Path) -> None:
    assert 'class="ppscope-banner"' in postmortem.read_text()


def test_no_redact_keeps_the_key(tmp_path: Path, runs: list[Path]) -> None:
    report = render(
        "config_diff",
        {"runs": ",".join(map(str, runs)), "contains": "api_key"},
        tmp_path / "open.html",
        redact=False,
        with_code=True,
    )
    html = report.html.read_text()
    assert API_KEY in html
    assert "hl-ipython3" in html, "--with-code shows the code"


# ── failures ─────────────────────────────────────────────────────────────────────────────────


def test_failing_cell_names_the_cell_and_keeps_the_notebook(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('runs: str = ""  # nothing')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_markdown_cell("## Broken section"),
        nbformat.v4.new_code_cell("raise ValueError('no such thing')"),
    ]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "reports" / "broken.html"
    with pytest.raises(CellError) as err:
        render(path, {}, out)
    assert err.value.cell == 3 and err.value.section == "Broken section"
    assert "cell 3 (section 'Broken section')" in str(err.value)
    assert "ValueError: no such thing" in str(err.value)
    assert err.value.partial == out.with_suffix(".ipynb") and err.value.partial.is_file()
    assert not out.exists()


def test_unknown_parameter_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="unknown parameter"):
        render("postmortem", {"rnus": "x"}, tmp_path / "x.html")
    with pytest.raises(ReportError, match="must be int"):
        render("postmortem", {"max_points": "many"}, tmp_path / "x.html")


def test_cli_rejects_bad_input(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "x.html")]) == 2
    assert main(["report", "-o", str(tmp_path / "x.pdf")]) == 2
    assert (
        main(["report", str(tmp_path), "-o", str(tmp_path / "x.html"), "--notebook", "nope"]) == 2
    )


def test_hung_cell_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPSCOPE_CELL_TIMEOUT_S", "2")
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('runs: str = ""  # nothing')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("import time\ntime.sleep(60)")]
    path = tmp_path / "hung.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CellError, match="still running after 2 s") as err:
        render(path, {}, tmp_path / "hung.html")
    assert err.value.cell == 2 and err.value.partial.is_file()
