"""A series printed twice in one scrape is read once: no restart, no doubled rate; copies that
disagree are left out and counted, or a ParseError with ``strict``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.prometheus import load_metrics

SNAPSHOTS = TEST_DATA / "prometheus" / "metrics.jsonl"


def _doubled(path: Path, change: bool = False) -> Path:
    """The snapshots with every sample line printed twice (the copy's value changed when
    ``change``)."""
    out = []
    for line in SNAPSHOTS.read_text().splitlines():
        record = json.loads(line)
        lines = []
        for sample in record["text"].split("\n"):
            lines.append(sample)
            if sample and not sample.startswith("#"):
                name, _, value = sample.rpartition(" ")
                lines.append(f"{name} {float(value) + 1}" if change else sample)
        out.append(json.dumps({**record, "text": "\n".join(lines)}))
    path.write_text("\n".join(out) + "\n")
    return path


def _table(path: Path) -> pl.DataFrame:
    return load_metrics([path]).samples.drop("source")


def test_identical_copies_read_as_one(tmp_path: Path) -> None:
    doubled = _doubled(tmp_path / "metrics.jsonl")
    assert _table(doubled).equals(_table(SNAPSHOTS))
    once = load_metrics([SNAPSHOTS]).notes
    twice = load_metrics([doubled]).notes
    resets = [n for n in twice if "server restart" in n]
    assert resets == [n for n in once if "server restart" in n]
    [note] = [n for n in twice if "printed twice" in n]
    # every sample line the reader keeps (buckets and _created lines it leaves out) came twice
    left_out = sum(int(n.split()[0]) for n in once if "left out" in n)
    assert note.startswith(f"{_samples(SNAPSHOTS) - left_out} samples printed twice")


def _samples(path: Path) -> int:
    text = "\n".join(json.loads(line)["text"] for line in path.read_text().splitlines())
    return sum(1 for s in text.split("\n") if s and not s.startswith("#"))


def test_copies_that_disagree_are_left_out_and_counted(tmp_path: Path) -> None:
    doubled = _doubled(tmp_path / "metrics.jsonl", change=True)
    metrics = load_metrics([doubled])
    [note] = [n for n in metrics.notes if "different values" in n]
    assert "metrics.jsonl:" in note
    # nothing of a disagreeing series is read as an interval: no doubled rate, no restart
    assert not [n for n in metrics.notes if "server restart" in n]
    with pytest.raises(ParseError, match="printed again in one scrape"):
        load_metrics([doubled], strict=True)
