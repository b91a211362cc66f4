"""Compressed inputs: gzip, zstd, xz and bzip2 are told by their bytes and read as the plain
file; a cut or damaged stream is read as far as it goes with a note; other compressions and
archives are a declared error naming the file and the format, never text."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import resource
import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest
import zstandard
from helpers import TEST_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError, UnknownFormat, UnsupportedCompression
from toolkit.load import compression
from toolkit.load.bench.results import load_bench
from toolkit.load.gpu.trace import load_gpu_trace
from toolkit.load.inputs import head_lines
from toolkit.load.phase_marks import load_phase_marks
from toolkit.load.run import load_run
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sniff import sniff

PACKED = TEST_DATA / "compressed"
LOG = TEST_DATA / "sglang" / "v0.5.23-pp8.log"
TRACE = TEST_DATA / "gpu" / "smi-8gpu-loop.csv"
BENCH = TEST_DATA / "bench" / "sglang" / "v0.5.5.jsonl"
CODECS = {"zst": "zstd", "xz": "xz", "bz2": "bzip2"}
PACK = {
    "gzip": gzip.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
    "xz": lzma.compress,
    "bzip2": bz2.compress,
}


def _neutral(src: Path, tmp_path: Path, name: str = "input.dat") -> Path:
    """``src`` under a name that says nothing about its content."""
    out = tmp_path / name
    shutil.copyfile(src, out)
    return out


def _no_source(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop([c for c in ("source", "path") if c in frame.columns])


@pytest.mark.parametrize("suffix", sorted(CODECS))
def test_codec_is_told_by_bytes_not_name(suffix: str, tmp_path: Path) -> None:
    path = _neutral(PACKED / f"server.log.{suffix}", tmp_path)
    assert compression.codec_of(path).name == CODECS[suffix]
    assert compression.codec_of(LOG) is None
    assert head_lines(path, n=3) == head_lines(LOG, n=3)


@pytest.mark.parametrize("name", ["server.log.zst", "server.log.xz", "server.log.bz2",
                                  "server-frames.log.zst", "server-streams.log.xz"])  # fmt: skip
def test_server_log_reads_as_the_plain_file(name: str, tmp_path: Path) -> None:
    path = _neutral(PACKED / name, tmp_path)
    assert sniff(path) == "sglang-log"
    plain = load_sglang_log(LOG, cache=False)
    packed = load_sglang_log(path, cache=False)
    assert packed.sources[0].problems == ()
    assert packed.counts == plain.counts
    assert _no_source(packed.batches).equals(_no_source(plain.batches))
    assert _no_source(packed.events).equals(_no_source(plain.events))


@pytest.mark.parametrize("suffix", sorted(CODECS))
def test_gpu_trace_reads_as_the_plain_file(suffix: str, tmp_path: Path) -> None:
    path = _neutral(PACKED / f"smi-8gpu-loop.csv.{suffix}", tmp_path)
    assert sniff(path) == "nvidia-smi-csv"
    plain = load_gpu_trace(TRACE, cache=False)
    packed = load_gpu_trace(path, cache=False)
    assert _no_source(packed.samples).equals(_no_source(plain.samples))
    assert packed.summary()[0]["notes"] == plain.summary()[0]["notes"]


@pytest.mark.parametrize("suffix", sorted(CODECS))
def test_bench_results_read_as_the_plain_file(suffix: str, tmp_path: Path) -> None:
    path = _neutral(PACKED / f"v0.5.5.jsonl.{suffix}", tmp_path)
    assert sniff(path) == sniff(BENCH)
    plain = load_bench(BENCH, cache=False).runs
    packed = load_bench(path, cache=False).runs
    assert _no_source(packed).equals(_no_source(plain))


@pytest.mark.parametrize("codec", sorted(PACK))
def test_a_cut_stream_keeps_what_it_held_with_a_note(codec: str, tmp_path: Path) -> None:
    text = LOG.read_bytes() * 100  # bzip2 decodes whole 900 kB blocks: two of them
    blob = PACK[codec](text)
    path = tmp_path / "cut.log"
    path.write_bytes(blob[:-40])  # the last block is lost
    log = load_sglang_log(path, cache=False)
    assert 0 < log.batches.height < load_sglang_log(LOG, cache=False).batches.height * 100
    assert log.sources[0].problems == (
        f"{codec} stream ends early: the file was cut; read what it held",
    )
    copy, note = compression.plain_copy(path, tmp_path)
    assert text.startswith(copy.read_bytes()) and note == log.sources[0].problems[0]


@pytest.mark.parametrize("codec", ["gzip", "xz", "zstd"])
def test_a_cut_gpu_trace_keeps_its_whole_rows_with_a_note(codec: str, tmp_path: Path) -> None:
    blob = PACK[codec](TRACE.read_bytes() * 40)  # zstd decodes whole 128 kB blocks
    path = tmp_path / "trace"
    path.write_bytes(blob[: len(blob) - 12])
    trace = load_gpu_trace(path, cache=False)
    assert trace.samples.height >= 24
    assert any("ends early" in n for n in trace.summary()[0]["notes"])


def test_a_bzip2_trace_cut_inside_its_only_block_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "trace"
    path.write_bytes(bz2.compress(TRACE.read_bytes())[:-12])  # bzip2 decodes whole blocks
    with pytest.raises(UnknownFormat) as caught:
        load_gpu_trace(path, cache=False)
    assert str(caught.value) == (
        f"{path}: nothing could be read: bzip2 stream ends early: the file was cut"
    )


@pytest.mark.parametrize("codec", sorted(PACK))
def test_trailing_bytes_and_damage_are_noted(codec: str, tmp_path: Path) -> None:
    text = LOG.read_bytes()
    path = tmp_path / "tail.log"
    path.write_bytes(PACK[codec](text) + b"not compressed at all\n")
    copy, note = compression.plain_copy(path, tmp_path / "")
    assert copy.read_bytes() == text
    assert note == f"bytes after the end of the {codec} data are not {codec}; ignored"
    damaged = bytearray(PACK[codec](text * 50))
    middle = len(damaged) // 2
    damaged[middle : middle + 64] = bytes(b ^ 0x5A for b in damaged[middle : middle + 64])
    path.write_bytes(bytes(damaged))
    log = load_sglang_log(path, cache=False)
    assert any(f"{codec} data is corrupt" in p or "ends early" in p
               for p in log.sources[0].problems)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("server.log.lz4", "lz4 data"),
        ("server.log.zip", "a zip archive"),
        ("logs.tar", "a tar archive"),
        ("logs.tar.gz", "a tar archive inside gzip"),
    ],
)
def test_unsupported_formats_are_named(name: str, kind: str, tmp_path: Path) -> None:
    path = _neutral(PACKED / name, tmp_path)
    for reader in (sniff, lambda p: load_sglang_log(p, cache=False),
                   lambda p: load_gpu_trace(p, cache=False)):  # fmt: skip
        with pytest.raises(UnsupportedCompression) as caught:
            reader(path)
        assert caught.value.kind == kind
        assert str(caught.value).startswith(f"{path}: {kind} is not supported")
        assert isinstance(caught.value, UnknownFormat)


def test_7z_and_nested_compression_are_refused(tmp_path: Path) -> None:
    seven = tmp_path / "a"
    # a 7z signature header: magic, version 0.4, start-header CRC and next-header fields
    seven.write_bytes(b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(24) + b"\x01\x04\x06\x00")
    with pytest.raises(UnsupportedCompression, match="a 7z archive is not supported"):
        sniff(seven)
    nested = tmp_path / "b"
    nested.write_bytes(gzip.compress((PACKED / "server.log.zst").read_bytes()))
    with pytest.raises(UnsupportedCompression, match="zstd data inside gzip"):
        load_sglang_log(nested, cache=False)


def test_text_that_starts_like_a_magic_is_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.log"
    path.write_text("BZh9 is how bzip2 files start\nx^2 is not zlib\n")
    assert compression.codec_of(path) is None
    assert head_lines(path) == ["BZh9 is how bzip2 files start", "x^2 is not zlib"]
    path.write_text("x" * 257 + "ustar is a word here\n")  # where a tar header says ustar
    assert compression.codec_of(path) is None


def test_a_posix_tar_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        tar.add(LOG, arcname="server.log")
    with pytest.raises(UnsupportedCompression, match="a tar archive is not supported"):
        sniff(path)


def test_a_zstd_bomb_is_read_in_bounded_memory(tmp_path: Path) -> None:
    size = 512 << 20
    path = tmp_path / "zeros.zst"
    with path.open("wb") as f, zstandard.ZstdCompressor(level=3).stream_writer(f) as w:
        block = bytes(1 << 20)
        for _ in range(size >> 20):
            w.write(block)
    assert path.stat().st_size < 1 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    total = 0
    with compression.Stream(path) as stream:
        while block := stream.read(4 << 20):
            assert len(block) <= 4 << 20
            total += len(block)
        assert stream.problem is None
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert total == size
    assert grown_mib < 128


@given(data=st.data(), codec=st.sampled_from(sorted(PACK)))
def test_any_prefix_loads_with_a_note_or_raises_the_declared_error(
    data: st.DataObject, codec: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blob = PACK[codec](LOG.read_bytes())
    cut = data.draw(st.integers(0, len(blob)), label="prefix")
    path = tmp_path_factory.mktemp("prefix") / "server.log"
    path.write_bytes(blob[:cut])
    try:
        log = load_sglang_log(path, cache=False)
    except ToolkitError as e:
        assert str(e).startswith(str(path))
        return
    problems = log.sources[0].problems
    recognized = compression.codec_of(path) is not None
    if cut == len(blob):
        assert problems == ()
    elif recognized:
        assert problems and codec in problems[0]
    else:  # too short to carry the magic: read as the (binary) text it is
        assert log.coverage()["lines"] == len(blob[:cut].split(b"\n")) - (
            blob[:cut].endswith(b"\n") or not cut
        )


def test_bench_results_cut_inside_the_first_block_say_so(tmp_path: Path) -> None:
    path = tmp_path / "results"
    path.write_bytes(PACK["zstd"](BENCH.read_bytes())[:-30])  # one block: nothing decodes
    with pytest.raises(UnknownFormat, match="nothing could be read: zstd stream ends early"):
        load_bench(path, cache=False)


@pytest.mark.parametrize("codec", sorted(PACK))
def test_phase_files_and_model_configs_are_read_compressed(codec: str, tmp_path: Path) -> None:
    phases = tmp_path / "run" / "phases.jsonl"
    phases.parent.mkdir()
    record = {"phase": 0, "concurrency": 4, "num_prompts": 16, "exit_code": 0, "results": 1}
    record |= {"start": "2026-05-01T10:08:10", "end": "2026-05-01T10:09:10", "command": "x"}
    phases.write_bytes(PACK[codec](json.dumps(record).encode() + b"\n"))
    marks = load_phase_marks([phases])
    assert marks["concurrency"].to_list() == [4]
    config = {"model_type": "llama", "num_hidden_layers": 80, "hidden_size": 8192}
    (tmp_path / "run" / "config.json").write_bytes(PACK[codec](json.dumps(config).encode()))
    shutil.copy(LOG, tmp_path / "run" / "server.log")
    run = load_run(tmp_path / "run", cache=False)
    assert run.files["ppscope-phases"] == [phases]
    assert run.model_config == config


def test_a_zstd_frame_with_a_huge_window_says_how_to_read_it(tmp_path: Path) -> None:
    path = tmp_path / "long.zst"
    # a frame header asking for a 2 GiB window (zstd --long=31), then an empty last raw block
    path.write_bytes(b"\x28\xb5\x2f\xfd\x00" + bytes([21 << 3]) + b"\x01\x00\x00")
    with pytest.raises(UnknownFormat) as caught:
        sniff(path)
    assert str(caught.value) == (
        f"{path}: nothing could be read: zstd data needs a window over 128 MiB (made with zstd "
        "--long: decompress it with zstd -d --long=31 first)"
    )


def test_bounded_lines_skip_an_over_long_line_in_pieces(tmp_path: Path) -> None:
    """A line longer than the limit gives its head and ``whole`` False, the lines after it are
    numbered on; a cut gzip stream ends with its problem stated."""
    body = b"short\n" + b"x" * 5000 + b"\nafter\nlast"
    path = tmp_path / "lines.gz"
    path.write_bytes(gzip.compress(body))
    with compression.Stream(path) as stream:
        got = [(n, raw[:6], w) for n, raw, w in compression.bounded_lines(stream, 100)]
        assert stream.problem is None
    assert got == [(1, b"short\n", True), (2, b"xxxxxx", False), (3, b"after\n", True),
                   (4, b"last", True)]  # fmt: skip
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(body * 200)[:-40])
    with compression.Stream(cut) as stream:
        assert sum(1 for _ in compression.bounded_lines(stream, 100)) > 1
        assert stream.problem
