"""Bad input: the loader never crashes outside ParseError and never drops a line silently."""

from __future__ import annotations

import gzip
import math

import pytest

from toolkit import ParseError, ToolkitError, load_sglang_log

DECODE = (
    "[2026-05-25 21:40:{s:02d} PP0] Decode batch, #running-req: 8, #token: 33536, "
    "token usage: 0.10, cuda graph: True, gen throughput (token/s): {g}, #queue-req: 0"
)


def _decode(second: int, gen: str = "248.10") -> str:
    return DECODE.format(s=second, g=gen)


def test_truncated_batch_line_is_kept_and_flagged(write_log) -> None:
    path = write_log(_decode(1) + "\n" + _decode(2)[:80] + "\n")
    log = load_sglang_log(path, cache=False)
    assert log.batches.height == 2
    cut = log.batches.row(1, named=True)
    assert cut["complete"] is False and cut["lineno"] == 2
    assert cut["running_req"] == 8 and cut["token_usage"] is None
    assert log.coverage()["incomplete_batches"] == 1
    with pytest.raises(ParseError) as e:
        load_sglang_log(path, strict=True, cache=False)
    assert f"{path}:2: batch line does not type fully" in str(e.value)


def test_nan_and_inf_values(write_log) -> None:
    log = load_sglang_log(write_log(_decode(1, "nan") + "\n" + _decode(2, "inf") + "\n"))
    gen = log.batches.get_column("gen_tok_s").to_list()
    assert math.isnan(gen[0]) and gen[1] == math.inf
    assert log.batches.get_column("complete").all()


def test_invalid_utf8_and_binary_garbage(write_log) -> None:
    garbage = bytes(range(1, 256)).replace(b"\n", b"")
    content = (
        _decode(1).encode()
        + b"\n"
        + b"[2026-05-25 21:40:02 PP0] weird \xff\xfe bytes\n"
        + garbage
        + b"\n"
        + _decode(3).encode()
        + b"\n"
    )
    path = write_log(content)
    log = load_sglang_log(path, cache=False)
    assert log.events.height == 4
    assert log.batches.height == 2
    cov = log.coverage()
    assert cov["unreadable"] == 2
    assert set(log.other.get_column("lineno")) >= {2, 3} - set(log.errors.get_column("lineno"))
    with pytest.raises(ParseError) as e:
        load_sglang_log(path, strict=True, cache=False)
    assert ":2:" in str(e.value) or ":3:" in str(e.value)


def test_every_control_byte_present_still_reads_every_line(write_log) -> None:
    path = write_log(
        bytes(b for b in range(1, 128) if b != 10) + b"\n\n" + _decode(1).encode() + b"\r\nlast"
    )
    log = load_sglang_log(path, cache=False)
    assert log.events.get_column("kind").to_list() == ["other", "blank", "decode", "other"]
    assert log.batches.get_column("running_req").to_list() == [8]


def test_separator_byte_inside_a_line_does_not_split_it(write_log) -> None:
    path = write_log(_decode(1) + "\x1f tail\n")
    log = load_sglang_log(path, cache=False)
    assert log.events.get_column("message")[0].endswith("\x1f tail")


def test_cut_server_args_dump(write_log) -> None:
    dump = (
        "[2026-05-25 21:40:00] server_args=ServerArgs(model_path='/m', tp_size=1, pp_size=8, pp_asy"
    )
    path = write_log(dump + "\n" + _decode(1) + "\n")
    log = load_sglang_log(path, cache=False)
    (launch,) = log.launches
    assert not launch.complete
    assert launch.server_args == {"model_path": "/m", "tp_size": 1, "pp_size": 8}
    with pytest.raises(ParseError, match="server_args dump is cut"):
        load_sglang_log(path, strict=True, cache=False)


def test_timestamps_going_backwards_keep_file_order(write_log) -> None:
    lines = [_decode(30), "[2026-05-25 21:40:00] server_args=ServerArgs(tp_size=8)", _decode(5)]
    log = load_sglang_log(write_log("\n".join(lines) + "\n"), cache=False)
    assert log.batches.get_column("lineno").to_list() == [1, 3]
    assert log.events.get_column("lineno").to_list() == [1, 2, 3]


def test_empty_and_blank_files(write_log) -> None:
    assert load_sglang_log(write_log(b""), cache=False).events.height == 0
    log = load_sglang_log(write_log("\n\n\r\n"), cache=False)
    assert log.events.height == 3
    assert log.counts == {"blank": 3}


def test_gzip_and_crlf(write_log) -> None:
    text = (_decode(1) + "\r\n" + _decode(2) + "\r\n").encode()
    log = load_sglang_log(write_log(gzip.compress(text), "server.log.gz"), cache=False)
    assert log.batches.get_column("queue_req").to_list() == [0, 0]


def test_cut_gzip_keeps_what_decompressed(write_log) -> None:
    text = "".join(_decode(i % 60) + "\n" for i in range(2000)).encode()
    blob = gzip.compress(text)
    log = load_sglang_log(write_log(blob[: len(blob) // 2], "cut.log.gz"), cache=False)
    assert 0 < log.batches.height < 2000
    assert "cut" in log.sources[0].problems[0]


def test_missing_file_is_a_toolkit_error(tmp_path) -> None:
    with pytest.raises(ToolkitError, match="no such file"):
        load_sglang_log(tmp_path / "absent.log")


def test_server_args_split_by_kubernetes_is_joined(write_log) -> None:
    dump = "server_args=ServerArgs(model_path='/m', tp_size=1, pp_size=8, pp_async_batch_depth=8)"
    stamp = "2026-06-24T17:38:02.436246479+02:00"
    lines = [
        f"{stamp} stderr P [2026-06-24 15:38:02] {dump[:40]}",
        f"{stamp} stderr P {dump[40:70]}",
        f"{stamp} stderr F {dump[70:]}",
        f"{stamp} stderr F [2026-06-24 15:38:03 PP0] Load weight begin. avail mem=90.00 GB",
    ]
    log = load_sglang_log(write_log("\n".join(lines) + "\n"), cache=False)
    (launch,) = log.launches
    assert launch.complete
    assert launch.server_args["pp_async_batch_depth"] == 8
    assert "joined from lines 1-3" in launch.problems[-1]
    assert log.startup.get_column("fact").to_list() == ["load_begin_avail_gb"]


def test_custom_logging_format_with_level_and_source(write_log) -> None:
    lines = [
        "[2026-03-21 03:31:56] INFO engine.py:177: server_args=ServerArgs(tp_size=2, pp_size=4)",
        "[2026-03-21 03:32:56 PP1 TP0] INFO scheduler_metrics_mixin.py:210: " + _decode(1)[26:],
        "[2026-03-21 03:33:56] WARNING server_args.py:901: Pipeline parallelism is incompatible "
        "with overlap schedule.",
    ]
    log = load_sglang_log(write_log("\n".join(lines) + "\n"), cache=False)
    (launch,) = log.launches
    assert launch.server_args == {"tp_size": 2, "pp_size": 4}
    assert log.batches.get_column("running_req").to_list() == [8]
    assert log.events.get_column("level").to_list() == ["INFO", "INFO", "WARNING"]
    assert log.errors.get_column("level").to_list() == ["warning"]


def test_docker_json_file_and_journald_json(write_log) -> None:
    import json

    line = _decode(1)
    docker = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2026-05-25T21:40:01.5Z"})
    log = load_sglang_log(write_log(docker + "\n" + docker + "\n"), cache=False)
    assert log.sources[0].wrapper == "docker-json"
    assert log.batches.get_column("running_req").to_list() == [8, 8]
    assert log.events.get_column("stream").to_list() == ["stderr", "stderr"]

    entry = {
        "__REALTIME_TIMESTAMP": "1779745201000000",
        "_HOSTNAME": "node-1",
        "SYSLOG_IDENTIFIER": "python3",
        "_PID": "85690",
        "MESSAGE": line,
    }
    log = load_sglang_log(write_log(json.dumps(entry) + "\n"), cache=False)
    assert log.sources[0].wrapper == "journald-json"
    assert log.batches.get_column("gen_tok_s").to_list() == [248.1]
    row = log.events.row(0, named=True)
    assert (row["host"], row["pid"]) == ("node-1", 85690)
    assert row["wrapper_ts"] is not None


def test_unknown_prefix_before_a_batch_header(write_log) -> None:
    line = "2025-05-25 21:40:21,123 | scheduler | " + _decode(1)[26:]
    log = load_sglang_log(write_log(line + "\n"), cache=False)
    assert log.batches.get_column("token").to_list() == [33536]


@pytest.mark.parametrize(
    "head",
    [
        b"May 25 21:40:0\x80 gpu-node-1 python3[85690]: ",  # journald -o short
        b"May 25 21:40:01.12854\x80 gpu-node-1 python3[85690]: ",  # short-precise
        b"2026-05-25T21:40:01.1\x80Z stdout F ",  # Kubernetes CRI
        b"2026-05-25T21:40:01Z \x80\x80\x80 F ",
        b"(Sched\x80ler pid=1) ",  # Ray
        b"\x80 - - ",
    ],
)
def test_an_invalid_byte_inside_a_wrapper_keeps_every_line(write_log, head: bytes) -> None:
    """A byte that is not UTF-8 where a wrapper's fixed-width field should be (read as
    U+FFFD, three bytes for one character) moves no cut into the middle of a character: the
    file loads and every line is accounted for."""
    good = {
        b"May": b"May 25 21:40:02 gpu-node-1 python3[85690]: ",
        b"2026": b"2026-05-25T21:40:02Z stdout F ",
        b"(": b"(Scheduler pid=1) ",
        b"\x80": b"",
    }[next(k for k in (b"May", b"2026", b"(", b"\x80") if head.startswith(k))]
    lines = [good + _decode(s).encode() for s in range(1, 6)]
    lines.insert(2, head + _decode(9).encode())
    log = load_sglang_log(write_log(b"\n".join(lines) + b"\n"), cache=False)
    assert log.events.height == 6
    assert sum(log.coverage()["counts"].values()) == 6
    assert log.batches.height == 6


def test_a_line_that_looks_compressed_is_text(write_log) -> None:
    """Bytes polars' CSV reader would inflate (a zlib header) at the start of a chunk stay
    lines of text."""
    log = load_sglang_log(write_log(b"x\x01\x00\x00\x00\x00\n" + _decode(1).encode() + b"\n"))
    assert log.events.height == 2
    assert log.batches.height == 1
