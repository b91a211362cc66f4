"""What ``ppscope scaling`` did with every input it read: used, skipped (why, and the flag that
fixes it) or grouped with others, so nothing drops out of a table without a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load.bench.results import BenchResults

__all__ = ["account", "account_lines"]

SHOWN = 6
"""Names listed in one line of the text before the rest are counted."""


def _why_not(row: dict[str, Any]) -> tuple[str, str | None]:
    """Why a run has no point on the curve, and the flag that gives it one (None: no flag)."""
    name = Path(str(row["source"])).name
    if row.get("concurrency") is None or row["concurrency"] < 1:
        return (
            "no concurrency: no cap, no `c32`-style label and no measured requests in flight",
            f"--concurrency {name}=N",
        )
    return "no output tok/s in the result", None


def account(
    results: BenchResults, groups: Sequence[dict[str, Any]], missing: Sequence[str] = ()
) -> dict[str, Any]:
    """Every input of a scaling command and what became of it.

    Returns
    -------
    dict
        ``files``: one record per result file (``path``, ``format``, ``runs``, ``used``);
        ``skipped``: runs and paths left out (``path``, ``entry`` or null, ``reason``,
        ``fix`` or null); ``rate_driven``: runs without a cap, at the concurrency they
        measured (``path``, ``entry``, ``request_rate``, ``concurrency_observed``,
        ``concurrency``); ``groups``: labels split by server or grouped on a guess
        (``split_servers``).
    """
    runs = results.runs
    usable = (
        pl.col("label").is_not_null()
        & (pl.col("concurrency") > 0)
        & pl.col("output_tok_s").is_not_null()
        & pl.col("output_tok_s").is_finite()
    )
    used = runs.filter(usable)
    skipped: list[dict[str, Any]] = [
        {"path": p, "entry": None, "reason": "no such file or directory", "fix": None}
        for p in missing
    ]
    for row in runs.filter(~usable.fill_null(False)).iter_rows(named=True):
        reason, fix = _why_not(row)
        skipped.append({"path": row["source"], "entry": row["entry"], "reason": reason, "fix": fix})
    for item in results.skipped:
        skipped.append({"path": item["path"], "entry": None, "reason": item["reason"], "fix": None})
    files = [
        {
            "path": f["path"],
            "format": f["format"],
            "runs": f["runs"],
            "used": used.filter(pl.col("source") == f["path"]).height,
        }
        for f in results.files
    ]
    rate = used.filter(pl.col("concurrency_from") == "observed")
    rate_driven = rate.select(
        pl.col("source").alias("path"),
        "entry",
        "request_rate",
        "concurrency_observed",
        "concurrency",
    ).to_dicts()
    return {"files": files, "skipped": skipped, "rate_driven": rate_driven, "groups": list(groups)}


def _short(path: str) -> str:
    """A file by its folder and name (``pp8/server.log``): enough to tell run directories apart."""
    return "/".join(Path(path).parts[-2:]) or path


def _names(paths: Sequence[str]) -> str:
    names = [_short(p) for p in paths]
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def account_lines(record: dict[str, Any]) -> list[str]:
    """The text of ``account``'s record: rate-driven runs, groups, and what was skipped."""
    lines = []
    rate = record["rate_driven"]
    if rate:
        shown = [
            _short(r["path"])
            + ("" if r["entry"] == 0 else f" run {r['entry'] + 1}")
            + f" at {_rate(r['request_rate'])}: {r['concurrency_observed']:.1f} in flight"
            for r in rate[:SHOWN]
        ]
        more = f" and {len(rate) - SHOWN} more" if len(rate) > SHOWN else ""
        lines.append("rate-driven (no cap set), at the mean in flight measured: "
                     + "; ".join(shown) + more)  # fmt: skip
    for group in record["groups"]:
        if group["how"] == "split":
            lines.append(
                f"{group['label']!r} held runs of different servers, kept apart as "
                + ", ".join(group["labels"])
            )
        else:
            lines.append(
                f"grouped as one server {group['label']!r} (nothing in them names a model or "
                f"layout; a run directory with a run.toml label sets one): "
                + _names(group["sources"])
            )
    problems = [s for s in record["skipped"] if s["fix"] or s["entry"] is not None]
    for s in problems[:SHOWN]:
        run = "" if s["entry"] is None else f" run {s['entry'] + 1}"
        fix = f"; give {s['fix']}" if s["fix"] else ""
        lines.append(f"skipped {_short(s['path'])}{run}: {s['reason']}{fix}")
    if len(problems) > SHOWN:
        lines.append(f"skipped {len(problems) - SHOWN} more runs (--json lists them)")
    missing = [s["path"] for s in record["skipped"] if s["reason"] == "no such file or directory"]
    if missing:
        lines.append("skipped, no such file or directory: " + _names(missing))
    others = [
        s["path"]
        for s in record["skipped"]
        if not (s["fix"] or s["entry"] is not None) and s["path"] not in missing
    ]
    if others:
        lines.append("not benchmark results: " + _names(others))
    return lines


def _rate(value: float | None) -> str:
    if value is None:
        return "an unstated rate"
    return "all at once" if value == float("inf") else f"{value:g} req/s"
