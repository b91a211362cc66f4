"""``-`` reads standard input: spooled once, told by content (compressed or not), named
``<stdin>`` in every message and output, never the temporary path; empty input is an error."""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.cli.stdin import STDIN, spool

LOG = TEST_DATA / "sglang" / "v0.5.23-pp8.log"
TRACE = TEST_DATA / "gpu" / "smi-8gpu-loop.csv"
PACKED = TEST_DATA / "compressed"


class _Pipe(io.TextIOWrapper):
    """Standard input fed from bytes, not a terminal."""

    def isatty(self) -> bool:
        return False


@pytest.fixture
def spools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the spooled copies go (checked empty afterwards)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _pipe(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", _Pipe(io.BytesIO(data)))


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("src", "plain"),
    [
        (LOG, LOG),
        (PACKED / "server.log.zst", LOG),
        (PACKED / "server-streams.log.xz", LOG),
        (PACKED / "server.log.bz2", LOG),
        (PACKED / "smi-8gpu-loop.csv.zst", TRACE),
        (TRACE, TRACE),
    ],
)
def test_parse_reads_stdin_as_the_file(
    src: Path, plain: Path, spools: Path, capsys, monkeypatch, tmp_path: Path
) -> None:
    _pipe(monkeypatch, src.read_bytes())
    code, piped = _json(capsys, ["parse", "-", "--json", "--no-cache", "-q"])
    copy = tmp_path / "given.log"
    shutil.copyfile(plain, copy)
    _, direct = _json(capsys, ["parse", str(copy), "--json", "--no-cache", "-q"])
    assert code == 0
    (entry,) = piped["files"]
    assert entry["path"] == STDIN
    assert json.dumps(piped).replace(STDIN, "X") == json.dumps(direct).replace(str(copy), "X")
    assert not list(spools.iterdir())  # the spooled copy is gone


def test_diagnose_and_its_json_name_stdin_only(spools: Path, capsys, monkeypatch) -> None:
    _pipe(monkeypatch, LOG.read_bytes())
    assert main(["diagnose", "-", "-q"]) == 0
    text = capsys.readouterr()
    assert text.out.splitlines()[0].startswith("PP8  (<stdin>)")
    assert str(spools) not in text.out + text.err
    _pipe(monkeypatch, LOG.read_bytes())
    _, document = _json(capsys, ["diagnose", "-", "--json", "-q"])
    assert str(spools) not in json.dumps(document)
    assert document["findings"]


def test_output_file_names_stdin(spools: Path, capsys, monkeypatch, tmp_path: Path) -> None:
    _pipe(monkeypatch, LOG.read_bytes())
    out = tmp_path / "parse.json"
    assert main(["parse", "-", "--json", "-o", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["files"][0]["path"] == STDIN
    assert str(spools) not in capsys.readouterr().err


def test_strict_errors_point_at_stdin_lines(spools: Path, capsys, monkeypatch) -> None:
    bad = b"[2026-05-01 10:08:03] Decode batch. #running-req: x, #token: 1, token usage: 0.1\n"
    _pipe(monkeypatch, LOG.read_bytes() + bad)
    assert main(["parse", "-", "--strict", "-q", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ppscope: {STDIN}:{len(LOG.read_bytes().splitlines()) + 1}: ")
    assert str(spools) not in err


def test_unsupported_compression_on_stdin_is_named(spools: Path, capsys, monkeypatch) -> None:
    _pipe(monkeypatch, (PACKED / "server.log.lz4").read_bytes())
    assert main(["parse", "-", "-q"]) == 1
    out = capsys.readouterr().out
    assert f"{STDIN}: lz4 data is not supported" in out
    assert str(spools) not in out


def test_empty_stdin_is_a_clear_error(spools: Path, capsys, monkeypatch) -> None:
    _pipe(monkeypatch, b"")
    assert main(["parse", "-"]) == 2
    assert capsys.readouterr().err.startswith(f"ppscope: {STDIN}: standard input is empty")
    assert not list(spools.iterdir())


def test_a_terminal_or_a_second_dash_is_refused(spools: Path, capsys, monkeypatch) -> None:
    class _Terminal(_Pipe):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(b"x\n")))
    assert main(["diagnose", "-"]) == 2
    assert "standard input is a terminal" in capsys.readouterr().err
    _pipe(monkeypatch, LOG.read_bytes())
    assert main(["scaling", "-", "-"]) == 2
    assert "'-' given 2 times" in capsys.readouterr().err


def test_a_dash_beside_files_replaces_only_itself(spools: Path, capsys, monkeypatch) -> None:
    _pipe(monkeypatch, TRACE.read_bytes())
    code, document = _json(capsys, ["parse", str(LOG), "-", "--json", "-q", "--no-cache"])
    assert code == 0
    assert [f["path"] for f in document["files"]] == [str(LOG), STDIN]
    assert [f["format"] for f in document["files"]] == ["sglang-log", "nvidia-smi-csv"]


def test_spool_copies_in_bounded_blocks(tmp_path: Path) -> None:
    sizes: list[int] = []

    class _Source(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            sizes.append(n if n is not None else -1)
            return super().read(n)

    data = b"x" * (3 << 20) + b"\n"
    source = _Source(data)
    out = spool(source, tmp_path)
    assert out.name == STDIN and out.read_bytes() == data
    assert sizes and all(0 < n <= 1 << 20 for n in sizes)


def test_scaling_reads_results_from_stdin(spools: Path, capsys, monkeypatch) -> None:
    _pipe(monkeypatch, (PACKED / "v0.5.5.jsonl.xz").read_bytes())
    code, document = _json(capsys, ["scaling", "-", "--json"])
    assert code == 0 and list(document["layouts"]) == ["PP8"]
    assert document["layouts"]["PP8"][0] == {"concurrency": 1, "output_tok_s": 34.3,
                                             "efficiency": 1.0}  # fmt: skip


def test_ingest_refuses_stdin(spools: Path, capsys, monkeypatch, tmp_path: Path) -> None:
    _pipe(monkeypatch, LOG.read_bytes())
    assert main(["ingest", "-", "-o", str(tmp_path / "ds")]) == 2
    assert "'-' is not an input of ingest" in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


def test_stdin_is_not_cached(spools: Path, capsys, monkeypatch, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PPSCOPE_CACHE_DIR", str(cache))
    _pipe(monkeypatch, LOG.read_bytes())
    assert main(["parse", "-", "-q"]) == 0  # no --no-cache: the spooled copy is gone after
    _pipe(monkeypatch, LOG.read_bytes())
    assert main(["diagnose", "-", "-q"]) == 0
    assert not cache.exists() or not any(p.name.startswith(STDIN) for p in cache.iterdir())
    shutil.copyfile(LOG, tmp_path / "server.log")
    assert main(["parse", str(tmp_path / "server.log"), "-q"]) == 0
    assert any(p.name.startswith("server.log.") for p in cache.iterdir())  # files are
