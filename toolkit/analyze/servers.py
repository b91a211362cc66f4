"""Which benchmark runs measured the same server, so that a scaling curve never spans two.

A layout label alone does not say it: two result files named by nothing share the label
``unknown``, and two runs labelled ``TP8`` may have served different models. Runs under one
label are one server only when what they state of it agrees: the model and the parallel sizes
(a fact one run leaves unstated is no difference), and for runs that state neither, the folder
they were read from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["IDENTITY", "split_servers"]

IDENTITY: tuple[str, ...] = ("model", "tp", "pp", "dp", "ep")
"""Columns of the runs table that name the server a run measured."""


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    """What a run states of its server; for a run that states nothing, its folder."""
    stated = {k: row[k] for k in IDENTITY if row.get(k) is not None}
    return stated or {"folder": str(Path(str(row["source"])).parent)}


def _servers(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Runs of one label grouped by server: a run joins the first group none of whose known
    facts it contradicts (an unknown fact is no difference), else starts a new one."""
    groups: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for row in rows:
        facts = _identity(row)
        for known, members in groups:
            if all(known.get(k, v) == v for k, v in facts.items()):
                known.update(facts)
                members.append(row)
                break
        else:
            groups.append((dict(facts), [row]))
    return groups


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
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(str(row["label"]), []).append(row)
    for label, members in by_label.items():
        servers = _servers(members)
        if len(servers) == 1:
            files = sorted({str(r["source"]) for r in members})
            anonymous = all(r.get(k) is None for r in members for k in IDENTITY)
            if len(files) > 1 and anonymous and members[0].get("label_from") is None:
                notes.append(
                    {"label": label, "labels": [label], "sources": files, "how": "guessed"}
                )
            continue
        names: list[str] = []
        for _, group in servers:
            name = f"{label} ({_name(group[0])})"
            while name in taken or name in names:
                name += "'"
            names.append(name)
            for row in group:
                row["label"] = name
        sources = sorted({str(r["source"]) for r in members})
        notes.append({"label": label, "labels": names, "sources": sources, "how": "split"})
    return pl.DataFrame(rows, schema=runs.schema, orient="row"), notes
