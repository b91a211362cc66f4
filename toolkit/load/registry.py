"""What a file format is to ppscope: a name, a detector, a loader and a summarizer.

The GPU and benchmark packages each keep a ``FORMATS`` registry of these, in the order their
detectors are asked; adding a format is one module (which exports its ``Format``) and one
registry line. What ``detect`` sees (a family's ``Peek``) and what ``load`` takes (its
``Options``) and returns belong to the family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

__all__ = ["Format", "first_match"]

PeekT = TypeVar("PeekT")
OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class Format(Generic[PeekT, OptionsT]):
    """One file format.

    Attributes
    ----------
    name
        The format's public name (``nvidia-smi-csv``, ``sglang-bench-jsonl``): in
        ``ppscope parse`` output, ``Run.files`` and ``format`` columns.
    description
        One line: which tool writes it, and how.
    detect
        True when a file's beginning (the family's ``Peek``) is this format. Detectors are
        asked in registry order; the first that says yes names the file.
    load
        ``load(path, options)``: what the file holds, in the family's shape.
    summarize
        ``summarize(path, options)``: the file's ``ppscope parse --json`` entry.
    kind
        The family's split of its formats (``trace``/``companion``, ``file``/``embedded``).
    """

    name: str
    description: str
    detect: Callable[[PeekT], bool]
    load: Callable[[Path, OptionsT], Any]
    summarize: Callable[[Path, OptionsT], dict[str, Any]]
    kind: str


def first_match(formats: Mapping[str, Format[PeekT, Any]], peek: PeekT) -> str | None:
    """The name of the first format whose detector recognizes ``peek``, else None."""
    return next((f.name for f in formats.values() if f.detect(peek)), None)
