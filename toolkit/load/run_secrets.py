"""The secret values a run's inputs hold: found once by their key, removed everywhere they recur.

A value is found where its key says it is secret: ``run.toml``'s command and a launch command
the log echoes (``--api-key VALUE``), each ServerArgs dump (``api_key='…'``), ``/server_info``
answers, a benchmark result's unmapped fields (a client command, the server's arguments),
metric labels, and the log lines that name a secret key. Every output then replaces each of
these values wherever it recurs, with or without its key (``toolkit.load.redact.scrub``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.redact import secrets_in_args, secrets_in_command, secrets_in_text

if TYPE_CHECKING:
    from toolkit.load.run import Run

__all__ = ["run_secrets"]

LOG_LINES = 10_000
"""Log lines naming a secret key that are read for values (a log names them near its start;
a cap keeps a huge log's cost bounded)."""
_HINTS = ("key", "token", "secret", "passw", "credential", "sig", "auth", "cookie", "://")
"""Literal words a line that holds a secret contains (lower case)."""


def run_secrets(run: Run) -> frozenset[str]:
    """Every secret value the inputs of ``run`` hold (an input that cannot be read adds none:
    its error is reported where it is used)."""
    found: set[str] = set()
    for part in (_commands, _launches, _log_lines, _server_info, _bench, _labels):
        found |= _guarded(part, run)
    return frozenset(found)


def _guarded(part: Callable[[Run], Iterable[str]], run: Run) -> set[str]:
    try:
        return set(part(run))
    except (ToolkitError, OSError, ValueError):
        return set()


def _from_command(command: str) -> set[str]:
    return secrets_in_command(command) | secrets_in_text(command)


def _commands(run: Run) -> set[str]:
    found = _from_command(run.config.command) if run.config.command else set()
    if run.command is not None:
        found |= _from_command(run.command[0])
    return found


def _launches(run: Run) -> set[str]:
    found: set[str] = set()
    for launch in run.log.launches if run.log is not None else []:
        found |= secrets_in_args(launch.server_args)
    return found


def _log_lines(run: Run) -> set[str]:
    if run.log is None:
        return set()
    low = pl.col("message").str.to_lowercase()
    hit = pl.any_horizontal([low.str.contains(h, literal=True) for h in _HINTS])
    hit = hit & ~pl.col("kind").is_in(["decode", "prefill"])  # batch lines count tokens
    lines = run.log.scan().filter(hit).select("message").head(LOG_LINES).collect()
    found: set[str] = set()
    for message in lines["message"].to_list():
        found |= secrets_in_text(message or "")
    return found


def _server_info(run: Run) -> set[str]:
    info = run.server_info
    if info is None:
        return set()
    found: set[str] = set()
    for key, value in info.select("key", "value").unique().iter_rows():
        found |= _from_json_text(value, key)
    return found


def _bench(run: Run) -> set[str]:
    results = run.bench_all
    runs = results.runs if results is not None else None
    return _in_column(runs, "extra", lambda text: _from_json_text(text, ""))


def _labels(run: Run) -> set[str]:
    metrics = run.metrics
    return _in_column(metrics.samples if metrics is not None else None, "labels", secrets_in_text)


def _in_column(
    frame: pl.DataFrame | None, column: str, read: Callable[[str], set[str]]
) -> set[str]:
    """The secrets ``read`` finds in each distinct text of ``column`` (none without it)."""
    if frame is None or column not in frame.columns:
        return set()
    return set().union(*(read(v) for v in frame[column].drop_nulls().unique().to_list()))


def _from_json_text(text: str | None, key: str) -> set[str]:
    """Secrets of a value kept as JSON text under ``key`` (nested objects, command strings)."""
    if not text:
        return set()
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    return _from_value({key: value} if key else value)


def _from_value(value: Any) -> set[str]:
    if isinstance(value, str):
        return _from_command(value) if "--" in value else secrets_in_text(value)
    if isinstance(value, list):
        return set().union(*(_from_value(v) for v in value)) if value else set()
    if isinstance(value, dict):
        found = secrets_in_args(value)
        for item in value.values():
            found |= _from_value(item)
        return found
    return set()
