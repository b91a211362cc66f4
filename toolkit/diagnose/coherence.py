"""``input-mismatch``: inputs of a run that do not belong together, and what was done with them.

A finding is only as right as the run it describes. Before any rule compares stages or reads a
trace, the run is narrowed to one server start and the measurements inside its span
(``Run.launch_choice``); a second launch, a log of another server, a GPU trace from another time
or on a shifted clock are named here instead of being mixed into a finding.
"""

from __future__ import annotations

import polars as pl

from toolkit.diagnose.finding import Finding
from toolkit.run_analysis import RunAnalysis

__all__ = ["input_mismatch"]


def input_mismatch(ctx: RunAnalysis) -> Finding | None:
    """The run's inputs disagree in time or source: say which, and which were used."""
    notes = ctx.mismatches
    if not notes:
        return None
    kinds = ", ".join(dict.fromkeys(n["input"] for n in notes))
    return Finding(
        id="input-mismatch",
        severity="info",
        title=f"Inputs that do not belong together: {kinds}",
        summary=" ".join(f"{n['input']} ({n['files']}): {n['detail']}." for n in notes),
        evidence=pl.DataFrame(
            notes, schema={"input": pl.String, "files": pl.String, "detail": pl.String}
        ),
        remedy=(
            "Keep one server start and the measurements taken against it in a run directory; "
            "set clock_offset_s in run.toml when a trace's clock is off."
        ),
    )
