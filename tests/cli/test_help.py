"""Every command's ``--help``: an example, no docstring markup, and the shared vocabulary."""

from __future__ import annotations

import pytest

from toolkit.cli.main import COMMANDS, build_parser, main

NAMES = [c.NAME for c in COMMANDS]
TAKES_RUN_DIRS = {"model", "diagnose", "timeline", "report"}  # RUN_DIR... (several)
NO_JSON = {"timeline", "report", "demo", "capture"}  # they write files of their own format
WRITES_DIRECTORY = {"capture": "RUN_DIR", "demo": "DIR", "ingest": "DIR"}  # -o names a folder


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["--help"], capsys)
    assert "``" not in text and "examples:" in text
    for name in NAMES:
        assert f"\n    {name} " in text


@pytest.mark.parametrize("name", NAMES)
def test_command_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help([name, "--help"], capsys)
    assert "``" not in text
    examples = text.split("examples:\n", 1)[1]
    assert f"ppscope {name} " in examples
    metavar = WRITES_DIRECTORY.get(name, "FILE")
    assert f"-o {metavar}, --output {metavar}" in text
    assert ("--json" in text) == (name not in NO_JSON)
    if name in TAKES_RUN_DIRS:
        assert "RUN_DIR [RUN_DIR ...]" in text or "[RUN_DIR ...]" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_every_documented_example_parses() -> None:
    """The examples in each --help are valid command lines (parsed, not run)."""
    parser = build_parser()
    for command in COMMANDS:
        for line in command.EXAMPLES.splitlines()[1:]:
            words = line.strip().split("  ")[0].split()  # the part before the comment
            assert words[:2] == ["ppscope", command.NAME]
            parser.parse_args(words[1:])
