"""Which benchmark runs measured the same server, so that a scaling curve never spans two.

A layout label alone does not say it: two result files named by nothing share the label
``unknown``, and two runs labelled ``TP8`` may have served different models. Runs under one
label are one server only when what they state of it agrees: the model, the parallel sizes, and
(for runs that state neither, so that nothing tells them apart) the folder they were read from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["IDENTITY", "split_servers"]

IDENTITY: tuple[str, ...] = ("model", "tp", "pp", "dp", "ep")
"""Columns of the runs table that name the server a run measured."""


def _identity(row: dict[str, Any]) -> tuple[Any, ...]:
    stated = tuple(row.get(k) for k in IDENTITY)
    if all(v is None for v in stated):  # nothing names the server: its folder is the best guess
        return (*stated, str(Path(str(row["source"])).parent))
    return stated


def _name(row: dict[str, Any]) -> str:
    """What sets a server apart in its label: its model, else its sizes, else its folder."""
    if row.get("model"):
        return str(row["model"]).rsplit("/", 1)[-1]
    sizes = [f"{k.upper()}{row[k]}" for k in ("tp", "pp", "dp", "ep") if row.get(k)]
    return "x".join(sizes) if sizes else (Path(str(row["source"])).parent.name or ".")


def split_servers(runs: pl.DataFrame) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """``runs`` relabelled so that one label holds the runs of one server only.

    Parameters
    ----------
    runs
        The ``runs`` table of ``load_bench``.

    Returns
    -------
    (pl.DataFrame, list of dict)
        The table with ``label`` made distinct per server (``unknown (Llama-3-8B)``), and one
        record per label whose runs were grouped as one server on a guess, or split apart:
        ``{"label", "labels", "sources", "how"}`` with ``how`` ``split`` (different servers
        under one label) or ``guessed`` (nothing names the server; grouped by folder).
    """
    rows = runs.to_dicts()
    notes: list[dict[str, Any]] = []
    taken = {str(r["label"]) for r in rows}
    by_label: dict[str, dict[tuple[Any, ...], list[dict[str, Any]]]] = {}
    for row in rows:
        by_label.setdefault(str(row["label"]), {}).setdefault(_identity(row), []).append(row)
    for label, servers in by_label.items():
        if len(servers) == 1:
            (members,) = servers.values()
            files = sorted({str(r["source"]) for r in members})
            anonymous = all(members[0].get(k) is None for k in IDENTITY)
            if len(files) > 1 and anonymous and members[0].get("label_from") is None:
                notes.append(
                    {"label": label, "labels": [label], "sources": files, "how": "guessed"}
                )
            continue
        names: list[str] = []
        for members in servers.values():
            name = f"{label} ({_name(members[0])})"
            while name in taken or name in names:
                name += "'"
            names.append(name)
            for row in members:
                row["label"] = name
        sources = sorted({str(r["source"]) for m in servers.values() for r in m})
        notes.append({"label": label, "labels": names, "sources": sources, "how": "split"})
    return pl.DataFrame(rows, schema=runs.schema, orient="row"), notes
