"""Every notebook run in a real JupyterLab, as a user who runs ``make lab`` would see it.

One ``jupyter lab`` serves the session (headless, a free port, copies of ``notebooks/`` next to
``data/``); each notebook is opened in the shared headless Chromium, all its cells are run
through JupyterLab's own command, and then:

- every chart output is drawn by JupyterLab's Vega extension (an ``svg`` or ``canvas`` in each,
  never the static image, which is for readers without JavaScript);
- no cell shows an error;
- each explorer has its controls, and changing one redraws its view.

The executed notebook ``ppscope report`` keeps is opened too, as a reader would open a saved
notebook: untrusted, nothing run; JupyterLab must still draw every chart from its Vega part.

Screenshots of each notebook are saved under the session's temp dir. Skipped without Chromium.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cdp import Browser, Page
from helpers.lab import Lab
from helpers.report_runs import NAMES

from toolkit.report.display import VEGA_MIME
from toolkit.report.render import Report

NOTEBOOK = "jupyterapp.shell.currentWidget"
KERNEL_IDLE = (
    f"(() => {{ const nb = {NOTEBOOK}; const s = nb && nb.context && nb.context.sessionContext;"
    " const k = s && s.session && s.session.kernel; return !!k && k.status === 'idle'; })()"
)
ALL_RAN = (
    f"(() => {{ const nb = {NOTEBOOK}; const k = nb.context.sessionContext.session.kernel;"
    " const cells = nb.content.widgets.filter(c => c.model.type === 'code');"
    " return k.status === 'idle' && cells.every(c => c.model.executionCount !== null); })()"
)
OUTPUTS = (
    f"(() => {{ const out = []; {NOTEBOOK}.content.widgets.forEach((c, i) => {{"
    " if (c.model.type !== 'code') return; const o = c.model.outputs;"
    " for (let j = 0; j < o.length; j++) { const m = o.get(j).toJSON();"
    " out.push({cell: i, type: m.output_type, mimes: Object.keys(m.data || {}),"
    " name: m.name || null, text: m.ename ? m.ename + ': ' + m.evalue : (m.text || '')}); }"
    " }); return out; })()"
)
CHARTS = (
    "[...document.querySelectorAll('.jp-Notebook .jp-RenderedVegaCommon5')]"
    ".map(e => !!e.querySelector('svg, canvas'))"
)
EXPLORERS = (
    "[...document.querySelectorAll('.jp-Notebook .widget-vbox')]"
    ".filter(b => b.querySelector(':scope > .widget-output'))"
)

# per notebook: how a user changes one control of each explorer (JavaScript run on the
# explorer's element ``box``), in the order the explorers appear
CHANGES: dict[str, list[str]] = {
    "scaling_gap": [
        "pick(box, 'select', 'scaling efficiency')",
        "type(box, '.widget-readout', '8')",
    ],
    "stage_timeline": ["pick(box, 'select', 'TP8')"],
    "config_diff": ["box.querySelector('input[type=checkbox]').click()"],
    "gpu_trace": ["pick(box, 'select', 'power_w')"],
}
HELPERS = """
window.pick = (box, selector, value) => {
  const el = [...box.querySelectorAll(selector)].find(
    s => [...s.options].some(o => o.textContent === value || o.value === value));
  const option = [...el.options].find(o => o.textContent === value || o.value === value);
  el.value = option.value;
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return true;
};
window.type = (box, selector, value) => {
  const el = box.querySelector(selector);
  el.focus();
  el.textContent = value;
  return true;  // the Enter key comes from the protocol, as a real key press
};
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Lab]:
    """One JupyterLab for every notebook of the module (``browser`` first: without Chromium
    the module is skipped before a server starts)."""
    server = Lab.start(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()


def _shut_kernels(lab: Lab) -> None:
    """Stop every kernel the notebook started, so the next one runs alone."""
    headers = {"Authorization": f"token {lab.token}"}
    with urllib.request.urlopen(
        urllib.request.Request(f"{lab.base}/api/sessions", headers=headers), timeout=30
    ) as answer:
        sessions = json.load(answer)
    for session in sessions:
        request = urllib.request.Request(
            f"{lab.base}/api/sessions/{session['id']}", method="DELETE", headers=headers
        )
        urllib.request.urlopen(request, timeout=30).close()


def _drawn_signature(index: int) -> str:
    """JavaScript: a hash of what explorer ``index`` shows (canvas pixels, SVG, text), or ''
    while no chart is drawn in it."""
    return (
        f"(() => {{ const o = {EXPLORERS}[{index}].querySelector('.widget-output');"
        " if (!o.querySelector('svg, canvas')) return '';"
        " const parts = [...o.querySelectorAll('canvas')].map(c => c.toDataURL())"
        ".concat([...o.querySelectorAll('svg')].map(s => s.outerHTML), [o.textContent]);"
        " let h = 0; for (const ch of parts.join('|')) h = (h * 31 + ch.charCodeAt(0)) | 0;"
        " return String(h); })()"
    )


def _run_notebook(page: Page, lab: Lab, name: str) -> list[dict[str, Any]]:
    page.goto(lab.url(name), timeout=120)
    page.wait_for(f"window.jupyterapp && {KERNEL_IDLE}", timeout=180, what="the kernel")
    page.evaluate("jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for(ALL_RAN, timeout=600, what=f"every cell of {name} to run")
    # charts draw asynchronously after their output arrives
    page.wait_for(f"{CHARTS}.every(Boolean)", timeout=60, what="every chart to draw")
    return page.evaluate(OUTPUTS)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_in_jupyterlab(name: str, lab: Lab, browser: Browser, shots: Path) -> None:
    with browser.page(1400, 900) as page:
        try:
            outputs = _run_notebook(page, lab, name)
            page.evaluate("jupyterapp.commands.execute('application:toggle-left-area')")
            page.screenshot(shots / f"lab-{name}.png")

            errors = [o for o in outputs if o["type"] == "error"]
            assert errors == [], errors
            stderr = [o["text"] for o in outputs if o["name"] == "stderr"]
            assert not any("Traceback" in t or "Error" in t for t in stderr), stderr

            charts = [o for o in outputs if VEGA_MIME in o["mimes"]]
            drawn = page.evaluate(CHARTS)
            assert charts or name in CHANGES, "a notebook without explorers shows charts"
            assert len(drawn) >= len(charts) and all(drawn), (len(charts), drawn)
            fallback = page.evaluate(
                "document.querySelectorAll('.jp-Notebook .jp-RenderedSVG,"
                " .jp-Notebook .jp-RenderedImage').length"
            )
            assert fallback == 0, "JupyterLab draws the Vega part, not the static image"

            changes = CHANGES.get(name, [])
            boxes = page.evaluate(f"{EXPLORERS}.length")
            assert boxes == len(changes), f"{name}: {boxes} explorer(s)"
            page.evaluate(HELPERS)
            for index, change in enumerate(changes):
                controls = page.evaluate(
                    f"{EXPLORERS}[{index}].querySelectorAll("
                    "'select, input, .widget-readout, .widget-text').length"
                )
                assert controls >= 1, f"explorer {index} of {name} has no controls"
                before = page.evaluate(_drawn_signature(index))
                assert before, f"explorer {index} of {name} shows no chart"
                page.evaluate(f"(() => {{ const box = {EXPLORERS}[{index}]; return {change}; }})()")
                if "type(" in change:
                    page.key("Enter", "Enter", 13)
                redrawn = (
                    f"(s => s !== '' && s !== {json.dumps(before)})({_drawn_signature(index)})"
                )
                page.wait_for(redrawn, timeout=120, what=f"explorer {index} of {name} to redraw")
            page.screenshot(shots / f"lab-{name}-after.png")
            console = [c for c in page.console() if c.startswith(("error", "exception"))]
            assert console == [], console
        finally:
            _shut_kernels(lab)


def test_a_saved_notebook_draws_without_running(
    lab: Lab, browser: Browser, rendered: dict[str, Report], shots: Path
) -> None:
    saved = lab.root / "notebooks" / "saved-postmortem.ipynb"
    saved.write_bytes(rendered["postmortem"].notebook.read_bytes())
    with browser.page(1400, 900) as page:
        try:
            page.goto(lab.url(saved.stem), timeout=120)
            page.wait_for(
                f"!!(window.jupyterapp && {NOTEBOOK} && {NOTEBOOK}.context.isReady)",
                timeout=120,
                what="the saved notebook to open",
            )
            outputs = page.evaluate(OUTPUTS)
            charts = [o for o in outputs if VEGA_MIME in o["mimes"]]
            page.wait_for(
                f"(d => d.length >= {len(charts)} && d.every(Boolean))({CHARTS})",
                timeout=60,
                what="every saved chart to draw",
            )
            assert charts and not page.evaluate(f"{NOTEBOOK}.context.model.cells.get(0).trusted"), (
                "a saved notebook opens untrusted"
            )
            page.screenshot(shots / "lab-saved-postmortem.png")
        finally:
            _shut_kernels(lab)
