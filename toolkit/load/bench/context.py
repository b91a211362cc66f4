"""What a run directory says about the benchmark runs found in it.

A result file rarely names its server's layout. The directory it sits in may: its ``run.toml``
(label, launch command) and a server log beside it (read with ``load_sglang_log``), whose
``server_args`` dump gives tp/pp when all launches in it agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.load import text as lines_io
from toolkit.load.bench.common import layout_of
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command

__all__ = ["RunContext", "walk"]


@dataclass
class RunContext:
    """What a run directory says about the runs found in it."""

    directory: Path
    is_run_dir: bool  # named by the user (not just the parent of a named file)
    cache: bool
    config: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        self.config = read_run_config(self.directory)

    @cached_property
    def toml_layout(self) -> dict[str, int]:
        command = self.config.command
        if not command:
            return {}
        try:
            flags = parse_launch_command(command)
        except ServerArgsError:
            return {}
        layout = layout_of(flags)
        if "sglang" in command:  # unset sizes are SGLang's defaults, not unknowns
            layout = {"tp": 1, "pp": 1, **layout}
        return layout

    @cached_property
    def server_layout(self) -> dict[str, int]:
        """tp/pp of the server log(s) in a run directory, when all launches agree."""
        if not self.is_run_dir:
            return {}
        layouts = []
        for path in walk(self.directory):
            head = lines_io.head_lines(path, n=2000)
            if not any("server_args=" in line for line in head):
                continue
            try:
                log = load_sglang_log(path, cache=self.cache)
                layouts.extend(layout_of(launch.server_args) for launch in log.launches)
            except ToolkitError:
                continue
        distinct = {tuple(sorted(x.items())) for x in layouts if x}
        return dict(distinct.pop()) if len(distinct) == 1 else {}


def walk(directory: Path) -> Iterator[Path]:
    """Files under a directory, sorted, hidden files and folders (caches) skipped."""
    for child in sorted(directory.rglob("*")):
        hidden = any(part.startswith(".") for part in child.relative_to(directory).parts)
        if child.is_file() and not hidden and child.name != "run.toml":
            yield child
