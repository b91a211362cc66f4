"""The two-run incident the report tests build (``helpers.report_runs``) loads as described."""

from __future__ import annotations

from pathlib import Path

from helpers.report_runs import API_KEY, SCRIPT, make_runs

import toolkit


def test_the_runs_load(tmp_path: Path) -> None:
    tp8, pp8 = make_runs(tmp_path)
    a, b = toolkit.load_run(tp8), toolkit.load_run(pp8)
    assert (a.label, b.label) == ("TP8", "PP8")
    assert a.launch is not None and a.launch.server_args["api_key"] == API_KEY
    assert a.log is not None and a.log.batches.height == 90
    assert SCRIPT in a.log.errors["summary"].to_list()[0]
    assert b.config.synthetic and b.bench is not None
