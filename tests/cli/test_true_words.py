"""What the command line says is what it does: every option's help against argparse's own
type, default and choices, and `parse`'s summary fields against the fixtures they describe."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import build_parser, main

PROMETHEUS = TEST_DATA / "prometheus"
GPU = TEST_DATA / "gpu"
SGLANG = TEST_DATA / "sglang"
NUMERIC_METAVARS = {"N", "SECONDS"}
DIRECTORY_WORDS = re.compile(r"\b(folder|directory)\b")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options() -> list[tuple[str, argparse.Action]]:
    return [
        (name, action)
        for name, sub in _commands().items()
        for action in sub._actions
        if action.help and not isinstance(action, argparse._HelpAction)
    ]


def _shown(value: object) -> str:
    """A default as a help text writes it: ``(1, 4)`` → ``1,4``, ``5.0`` → ``5``."""
    if isinstance(value, tuple | list):
        return ",".join(_shown(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@pytest.mark.parametrize(("command", "action"), _options(), ids=lambda x: str(x)[:40])
def test_help_states_the_real_default_type_and_choices(
    command: str, action: argparse.Action
) -> None:
    text = " ".join(str(action.help).split())
    where = f"{command} {'/'.join(action.option_strings) or action.dest}"
    stated = re.search(r"\(default:? ([\w.,/~-]+)\)", text)
    if stated and re.match(r"[\d.]|[\w-]+$", stated.group(1)) and action.default is not None:
        assert stated.group(1) == _shown(action.default), f"{where}: help {text!r}"
    if stated and re.match(r"\d", stated.group(1)):  # a number stated must be argparse's own
        assert action.default is not None, f"{where}: help states a default argparse lacks"
    first = re.match(r"(\w+) \(default\)", text)
    if first:
        assert first.group(1) == action.default, where
    for choice in action.choices or ():
        assert str(choice) in text, f"{where}: choice {choice!r} missing from the help"
    if action.metavar in NUMERIC_METAVARS:
        assert action.type is not None and isinstance(action.type("2"), int | float), where
    if action.metavar == "FILE":
        assert not DIRECTORY_WORDS.search(text), f"{where}: FILE names a folder: {text!r}"
    if action.metavar in ("DIR", "RUN_DIR") and action.option_strings:
        assert action.type is Path, where


def test_every_command_that_shows_progress_can_be_quiet() -> None:
    commands = _commands()
    for name, sub in commands.items():
        if name == "cache":  # prints its table at once: nothing to wait for
            continue
        quiet = next((a for a in sub._actions if "-q" in a.option_strings), None)
        assert quiet is not None, f"{name} has no -q"
    by_name = {n: next(a for a in s._actions if "-q" in a.option_strings) for n, s in
               commands.items() if n != "cache"}  # fmt: skip
    assert "capture:" in str(by_name["capture"].help)  # it reads no files: its steps
    assert "files are read" not in str(by_name["demo"].help)
    assert "files are read" not in str(by_name["ingest"].help)


def test_demo_and_ingest_write_folders() -> None:
    commands = _commands()
    for name in ("demo", "ingest"):
        out = next(a for a in commands[name]._actions if "-o" in a.option_strings)
        assert out.metavar == "DIR" and "instead of printing" not in str(out.help)
    demo_out = next(a for a in commands["demo"]._actions if "-o" in a.option_strings)
    assert demo_out.default == Path("ppscope-demo")


# ----------------------------------------------------------------------------- parse summaries
def _parse(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    main(["parse", "-q", "--no-cache", str(path)])
    return capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.name for p in PROMETHEUS.glob("metrics*.txt")))
def test_pp_rank_words_match_the_file(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = PROMETHEUS / name
    ranks = sorted(set(re.findall(r'pp_rank="(\d+)"', path.read_text())), key=int)
    text = _parse(path, capsys)
    assert ("no pp_rank label" in text) == (not ranks), text
    for rank in ranks:
        assert f"PP{rank}" in text
    if ranks:  # every series named is listed, timed or not
        assert "metrics: -" not in text


@pytest.mark.parametrize("name", sorted(p.name for p in GPU.glob("exporter-*.prom")))
def test_exporter_labels_are_not_metrics(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _parse(GPU / name, capsys)
    metrics = next(line for line in text.splitlines() if line.strip().startswith("metrics:"))
    for label in ("driver_version", "pod", "namespace", "container", "hostname", "uuid"):
        assert label not in metrics.split(":", 1)[1].replace(" ", "").split(","), metrics
    labels = [line for line in text.splitlines() if line.strip().startswith("labels:")]
    if "DCGM_FI_DRIVER_VERSION" in (GPU / name).read_text():
        assert labels and "driver_version" in labels[0]


@pytest.mark.parametrize("name", sorted(p.name for p in SGLANG.glob("*.log")))
def test_dump_cut_only_for_a_cut_dump(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = SGLANG / name
    text = _parse(path, capsys)
    if "server_args=" not in path.read_text(errors="replace"):
        assert "(dump cut)" not in text
    for line in text.splitlines():
        if "(dump cut)" in line:  # a dump was cut: the settings it did state follow
            assert "launch at line" in line


def test_a_span_across_midnight_dates_its_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (PROMETHEUS / "metrics.jsonl").read_text()
    stamps = sorted(set(re.findall(r'"ts": "([^"]+)"', source)))
    start = datetime.fromisoformat(stamps[0])
    shift = datetime(start.year, start.month, start.day, 23, 59, 55) - start
    for stamp in stamps:  # the same scrapes, 5 s before midnight on
        moved = datetime.fromisoformat(stamp) + shift
        source = source.replace(f'"ts": "{stamp}"', f'"ts": "{moved.isoformat()}"')
    path = tmp_path / "metrics.jsonl"
    path.write_text(source)
    text = _parse(path, capsys)
    last = datetime.fromisoformat(stamps[-1]) + shift
    assert last.date() == (start + shift + timedelta(days=1)).date()
    assert f"to {last:%Y-%m-%d %H:%M:%S}" in text


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("empty.log", b"", "an empty file"),
        ("plot.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10", "a PNG image"),
        ("noise.bin", bytes(range(256)) * 8, "binary data"),
    ],
)
def test_parse_of_nothing_readable_fails(
    tmp_path: Path, name: str, content: bytes, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["parse", "-q", str(path)]) == 1
    assert f"{path}: not recognized: {why}" in capsys.readouterr().err


def test_parse_of_an_empty_folder_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "-q", str(tmp_path)]) == 1
    assert f"{tmp_path}: an empty folder" in capsys.readouterr().err
