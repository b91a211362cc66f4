"""Progress bars stay out of the kept notebook, and are drawn only on a terminal."""

from __future__ import annotations

import io

import nbformat
import pytest

from toolkit.report.progress import bars_wanted, drop_progress

# What tqdm leaves in a cell's outputs: its text bar on stderr (redrawn with carriage returns,
# a stale "0%|" when it was never closed) and, under tqdm.auto in a kernel, its widget.
TEXT_BAR = "\r  0%|          | 0/3 [00:00<?, ?it/s]\r 67%|██████▋   | 2/3 [00:01<00:00,  1.9it/s]"
WIDGET = {
    "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2},
    "text/plain": "  0%|          | 0/112640 [00:00<?, ?B/s]",
}


def test_progress_outputs_are_dropped_and_the_rest_kept() -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("run_set = load_runs(runs)")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text=TEXT_BAR),
        nbformat.v4.new_output("display_data", data=WIDGET),
        nbformat.v4.new_output(
            "stream", name="stderr", text=TEXT_BAR + "\nwarning: 3 lines not typed\n"
        ),
        nbformat.v4.new_output("stream", name="stdout", text="3 runs loaded\n"),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# runs"), cell]
    assert drop_progress(nb) == 2
    texts = [o.get("text", "") for o in cell.outputs]
    assert texts == ["warning: 3 lines not typed\n", "3 runs loaded\n"]
    assert "%|" not in nbformat.writes(nb)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not bars_wanted(True)
    monkeypatch.setattr("sys.stderr", _Tty())
    assert bars_wanted(True) and not bars_wanted(False)
