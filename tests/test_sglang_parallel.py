"""Big files are typed in byte ranges by worker processes: the result equals one pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import load_sglang_log
from toolkit.load import sglang_store

FIXTURES = Path(__file__).parent / "data" / "sglang"


@pytest.mark.parametrize("name", ["messy.log", "journald-short.log", "bad-input.log"])
def test_parts_equal_one_pass(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    whole = load_sglang_log(FIXTURES / name, cache=False)
    monkeypatch.setattr(sglang_store, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(sglang_store, "PART_BYTES", 700)  # a few lines per part
    split = load_sglang_log(FIXTURES / name, cache=False)
    assert len(split.sources[0].parts) > 3
    assert split.events.equals(whole.events)
    assert split.batches.equals(whole.batches)
    assert split.coverage() == whole.coverage()
    assert [la.server_args for la in split.launches] == [la.server_args for la in whole.launches]
