"""The typed-line cache: its key follows the declared columns and the code that types them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from toolkit.load.sglang import batch_line, store
from toolkit.load.sglang.log import load_sglang_log
from toolkit.schema import sglang as sglang_schema

LINES = (
    "[2026-05-25 21:40:21 PP0] Decode batch, #running-req: 8, #token: 10, token usage: 0.10, "
    "#foo-req: 3, cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0\n"
    "[2026-05-25 21:40:22 PP0] Decode batch, #running-req: 8, #token: 12, token usage: 0.12, "
    "#foo-req: 5, cuda graph: True, gen throughput (token/s): 250.00, #queue-req: 1\n"
)
FOO = sglang_schema.BatchField("#foo-req", "foo_req", pl.Int64(), "a field a new SGLang prints")

pytestmark = pytest.mark.usefixtures("cache_beside_input")


def _add_foo_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """What adding a batch-line field to the schema does: declared, keyed, typed."""
    monkeypatch.setattr(sglang_schema, "BATCH_FIELDS", (*sglang_schema.BATCH_FIELDS, FOO))
    monkeypatch.setitem(sglang_schema.BATCHES, FOO.column, FOO.dtype)
    monkeypatch.setitem(batch_line.KEY_COLUMN, FOO.key, FOO)


def _entries(tmp_path: Path) -> set[str]:
    return {p.parent.name for p in (tmp_path / ".ppscope-cache").glob("*/manifest.json")}


def test_a_new_field_is_never_served_from_an_old_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "server.log"
    path.write_text(LINES)
    before = load_sglang_log(path).batches
    assert "foo_req" not in before.columns
    assert before.get_column("extra").str.contains("#foo-req").all()
    old = _entries(tmp_path)
    assert len(old) == 1

    _add_foo_field(monkeypatch)
    after = load_sglang_log(path).batches
    assert _entries(tmp_path) - old, "the store was not rebuilt"
    assert after.schema["foo_req"] == pl.Int64
    assert after.get_column("foo_req").to_list() == [3, 5]
    assert after.get_column("extra").null_count() == after.height

    again = load_sglang_log(path).batches  # the new entry is the one read from now on
    assert len(_entries(tmp_path)) == 2
    assert again.equals(after)


def test_the_key_follows_names_and_types(monkeypatch: pytest.MonkeyPatch) -> None:
    version = store.store_version()
    monkeypatch.setitem(sglang_schema.BATCHES, "token", pl.Float64())
    assert store.store_version() != version
    monkeypatch.undo()
    assert store.store_version() == version
    monkeypatch.setattr(sglang_schema, "BATCH_FIELDS", sglang_schema.BATCH_FIELDS[:-1])
    assert store.store_version() != version


def test_the_code_version_covers_what_shapes_the_store() -> None:
    modules = store.store_modules()
    assert {
        "toolkit.load.sglang.store",
        "toolkit.load.sglang.plan",
        "toolkit.load.sglang.batch_line",
        "toolkit.load.sglang.wrappers",
        "toolkit.load.text",
        "toolkit.schema",
        "toolkit.schema.sglang",
    } <= modules
    # Tables built from the store on read do not invalidate it.
    assert not {"toolkit.load.sglang.log", "toolkit.load.sglang.launches"} & modules
    assert all(m.startswith(("toolkit.load", "toolkit.schema")) for m in modules)
    assert len(store.code_version()) == 16
