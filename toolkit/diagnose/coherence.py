"""``input-mismatch``: inputs of a run that do not belong together or were read only in part
(damaged lines left out, ``load.damage``), and what was done with them.

A finding is only as right as the run it describes. Before any rule compares stages or reads a
trace, the run is narrowed to one server start and the measurements inside its span
(``Run.launch_choice``); a second launch, a log of another server, a GPU trace from another time
or on a shifted clock are named here instead of being mixed into a finding.
"""

from __future__ import annotations

import polars as pl

from toolkit.diagnose.finding import Finding
from toolkit.load.damage import damaged_kind
from toolkit.run_analysis import RunAnalysis

__all__ = ["input_mismatch"]


def input_mismatch(ctx: RunAnalysis) -> Finding | None:
    """The run's inputs disagree in time or source, or were read only in part: say which,
    and what was used."""
    notes = ctx.mismatches
    if not notes:
        return None
    kinds = list(dict.fromkeys(n["input"] for n in notes))
    apart = [k for k in kinds if damaged_kind(k) is None]
    partial = [damaged_kind(k) for k in kinds if damaged_kind(k) is not None]
    titles, remedies = [], []
    if apart:
        titles.append(f"inputs that do not belong together: {', '.join(apart)}")
        remedies.append(
            "Keep one server start and the measurements taken against it in a run directory; "
            "set clock_offset_s in run.toml when a trace's clock is off."
        )
    if partial:
        titles.append(f"inputs read only in part: {', '.join(map(str, partial))}")
        remedies.append(
            "The damaged lines named were left out and every readable line was used; "
            "repair or re-record them to count them too."
        )
    title = "; ".join(titles)
    return Finding(
        id="input-mismatch",
        severity="info",
        title=title[0].upper() + title[1:],
        summary=" ".join(f"{n['input']} ({n['files']}): {n['detail']}." for n in notes),
        evidence=pl.DataFrame(
            notes, schema={"input": pl.String, "files": pl.String, "detail": pl.String}
        ),
        remedy=" ".join(remedies),
    )
