"""``config-not-applied``: a flag of the launch command did not take effect.

The command comes from ``run.toml`` (``command = "..."``) or a ``launch_server`` line in the
log; each flag is compared with the logged ServerArgs and, for the values the scheduler
resolves, with its startup summary. Runtime changes count too: one the server refused, and a
launch flag that a runtime change replaced while the run was measured. A parallelism or
scheduling flag that did not take effect
is ``high`` whatever it costs: every number of that run answers a different question than the
one asked.
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.runtime_config import REFUSED_NOTE, runtime_misses
from toolkit.diagnose.finding import Finding
from toolkit.run_analysis import RunAnalysis

__all__ = ["config_not_applied"]

_SEVERITY = {"parallel": "high", "scheduling": "high", "cuda graph": "medium", "memory": "medium"}


def config_not_applied(ctx: RunAnalysis) -> Finding | None:
    """Flags the user asked for that the logged configuration does not show."""
    runtime = runtime_misses(ctx.intended, ctx.server_args, ctx.config_changes, ctx.phases)
    parts = [t for t in (ctx.intended, runtime) if t is not None and t.height]
    if not parts:
        return None
    missed = pl.concat(parts).filter(pl.col("applied") == False)  # noqa: E712 (null = cannot tell)
    if not missed.height:
        return None
    ranks = {"high": 0, "medium": 1, "low": 2}
    severity = min(
        (_SEVERITY.get(g, "low") for g in missed["group"].to_list()), key=ranks.__getitem__
    )
    order = {"parallel": 0, "scheduling": 1, "cuda graph": 2, "memory": 3}
    missed = missed.with_columns(
        _o=pl.col("group").replace_strict(order, default=9, return_dtype=pl.Int64)
    ).sort("_o", maintain_order=True)
    first = missed.row(0, named=True)
    source = ctx.command[1] if ctx.command else "?"
    effective = first["effective"] if first["effective"] is not None else "nothing (no such field)"
    refused = missed["note"].str.starts_with(REFUSED_NOTE).fill_null(False)
    asker = "A runtime change" if refused[0] else f"The launch command ({source})"
    summary = (
        f"{asker} asks for {first['flag']}={first['intended']}, but the "
        f"run used {effective} ({first['note']})."
    )
    if missed.height > 1:
        others = ", ".join(missed["flag"].to_list()[1:6])
        summary += f" Also not applied: {others}."
    if severity == "high":
        summary += (
            " Every measurement of this run describes another configuration than the one asked for."
        )
    return Finding(
        id="config-not-applied",
        severity=severity,
        title=f"{missed.height} setting(s) asked for did not take effect, first {first['flag']}",
        summary=summary,
        evidence=missed.select("flag", "group", "intended", "effective", "note").head(20),
        remedy=(
            "Relaunch with the flags spelled as this SGLang version knows them (e.g. "
            "--pp-async-batch-depth exists from 0.5.7 on) and make sure run.toml's command is "
            "what actually ran; values the scheduler resolves (max_running_requests, the KV "
            "pool) may need more memory to be honoured."
            + (
                " A refused runtime change (/set_internal_state) must stay within the range "
                "the server's warning states; the run kept the value before it."
                if refused.any()
                else ""
            )
        ),
    )
