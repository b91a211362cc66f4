"""The README stays true: every command, flag and finding id it names exists, and every one the
code has is in the README."""

from __future__ import annotations

import argparse
import re

import pytest
from helpers import REPO

from toolkit.cli.main import COMMANDS, build_parser
from toolkit.diagnose import FINDING_IDS

README = (REPO / "README.md").read_text()


def _command_lines() -> list[str]:
    """The ``ppscope ...`` synopsis lines of the README's shell blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    return [line.strip() for b in blocks for line in b.splitlines() if line.startswith("ppscope ")]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _documented() -> dict[str, set[str]]:
    """Command → the flags its README synopsis shows (short and long forms)."""
    out: dict[str, set[str]] = {}
    for line in _command_lines():
        command = line.split()[1]
        flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", line))
        out.setdefault(command, set()).update(flags)
    return out


def test_every_command_is_documented_and_exists() -> None:
    assert set(_documented()) == {c.NAME for c in COMMANDS}


@pytest.mark.parametrize("name", [c.NAME for c in COMMANDS])
def test_every_flag_is_documented_and_exists(name: str) -> None:
    parser = _subparsers()[name]
    documented = _documented()[name]
    assert documented <= _flags(parser), f"the README names flags {name} lacks"
    for action in parser._actions:
        names = set(action.option_strings) - {"-h", "--help"}
        if names:
            assert names & documented, f"{name}: {sorted(names)} is not in the README"


def test_finding_ids_match_the_readme_table() -> None:
    rows = set(re.findall(r"^\| `([a-z]+-[a-z-]+)` \|", README, re.M))
    assert rows == set(FINDING_IDS)


def test_the_first_lines_give_the_two_commands() -> None:
    head = README.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in head] == ["make demo", "make test"]
