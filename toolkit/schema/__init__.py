"""Declared tables: every column ppscope produces, its type, and one line saying what it means.

One module per source family (``sglang``, ``gpu``, ``bench``). Column names carry their units
(``_tok_s``, ``_pct``, ``_gb``, ``_s``). Fields a format version does not print are null,
never guessed.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl


class Column(NamedTuple):
    name: str
    dtype: pl.DataType
    doc: str


def schema_of(columns: tuple[Column, ...]) -> pl.Schema:
    """The polars schema of a declared table."""
    return pl.Schema({c.name: c.dtype for c in columns})


def glossary(columns: tuple[Column, ...]) -> dict[str, str]:
    """Column name → one-line meaning."""
    return {c.name: c.doc for c in columns}
