"""``server-restart``: a launch ended in a crash and the server started again.

When a run directory holds several launches, each is diagnosed on its own
(``RunAnalysis.launches``). A launch whose last batch line is followed by an error before the
next start in its log (or before the log ends) crashed: the note names the last error line, so
the reader knows why the sweep it served stops there and what the next launch is.
"""

from __future__ import annotations

import polars as pl

from toolkit.diagnose.finding import Finding
from toolkit.run_analysis import RunAnalysis

__all__ = ["server_restart"]


def server_restart(ctx: RunAnalysis) -> Finding | None:
    """The launch crashed: when, its last error line, and the launch that followed."""
    end = ctx.ending
    if end is None or end["ended"] != "crash" or end["error"] is None:
        return None
    error = end["error"]
    then = (
        f"the server was started again (launch {end['next']})"
        if end["next"] is not None
        else "the log ends there"
    )
    at = f"{end['at']:%Y-%m-%d %H:%M:%S}" if end["at"] is not None else "an unknown time"
    return Finding(
        id="server-restart",
        severity="info",
        title=f"The server crashed at {at}: {_short(error['line'])}",
        summary=(
            f"This launch ended in an error at {at} ({error['where']}: {error['line']}); "
            f"{then}. Its findings describe the time before the crash; results measured after "
            "it belong to the next launch."
        ),
        evidence=pl.DataFrame(
            [
                {
                    "launch": ctx.launch_name,
                    "ended_at": end["at"],
                    "error_at": error["where"],
                    "last_error": error["line"],
                    "next_launch": end["next"],
                }
            ],
            schema={
                "launch": pl.String,
                "ended_at": pl.Datetime("ms"),
                "error_at": pl.String,
                "last_error": pl.String,
                "next_launch": pl.Int64,
            },
        ),
        remedy=(
            "Read the error's traceback in the log (the line named); fix its cause before "
            "comparing the launches' numbers."
        ),
    )


def _short(line: str, width: int = 80) -> str:
    line = " ".join(str(line).split())
    return line if len(line) <= width else line[: width - 1] + "…"
