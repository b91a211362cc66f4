"""DCGM's value conventions, shared by ``dcgmi dmon`` (``dcgmi.py``) and dcgm-exporter
(``exporter.py``).

DCGM writes a "blank" sentinel where a field has no value; the base values and base+1..3 mean
no value / not found / not supported / no permission. They become null and are counted in
``unavailable`` as unsupported. DCGM's profiling fields (``DCGM_FI_PROF_*``, ``SMACT``…) are
ratios 0–1 even where the help text says "(in %)"; ``fields.py`` scales each to its column.
"""

from __future__ import annotations

import polars as pl

from toolkit.load.gpu.cells import value_kind

BLANKS = (0x7FFFFFF0, 0x7FFFFFFFFFFFFFF0, 140737488355328.0)
"""Bases of DCGM's blank values for 32-bit, 64-bit and double fields."""


def is_blank(value: float) -> bool:
    """True for one of DCGM's blank sentinels."""
    return any(base <= value <= base + 3 for base in BLANKS)


def not_blank(value: pl.Expr) -> pl.Expr:
    """True where a number is a value: finite and no blank sentinel."""
    ok = value.is_not_null() & value.is_finite()
    for base in BLANKS:
        ok = ok & ~value.is_between(base, base + 3)
    return ok


def cell_kind(value: pl.Expr) -> pl.Expr:
    """The ``unavailable`` kind of a printed cell: blanks and NaN are unsupported."""
    blank = value.str.starts_with("DCGM blank") | (value == "NaN")
    return pl.when(blank).then(pl.lit("unsupported")).otherwise(value_kind(value))
