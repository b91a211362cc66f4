"""Runtime changes of a launch's arguments (``POST /set_internal_state``), read from its log.

SGLang logs an accepted change in one of three forms, and a refused one as a warning:

* ``Global server args updated! global_server_args_dict={...}`` (0.4 – 0.5.4): the whole dict
  of scheduler-visible arguments after the change;
* ``Global server args updated! get_global_server_args()=ServerArgs(...)`` (0.5.5 – 0.5.6): the
  whole ``ServerArgs`` after the change;
* ``Config updated via context override: {...}`` (later releases): only the changed keys;
* ``Updating KEY is not supported.`` and ``Updating KEY to VALUE is rejected because it is out
  of the valid range [1, N].``: nothing changed.

A whole-state form names every field; the change is what differs from the state before it,
which the caller knows (the launch's dump, then the changes so far).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from toolkit.load.sglang.server_args import ServerArgsError, parse_server_args
from toolkit.schema.sglang import OVERRIDES, RANK_TAGS

__all__ = [
    "OVERRIDE_PREFIXES",
    "REFUSED_MARK",
    "REFUSED_PREFIX",
    "Override",
    "changed_keys",
    "changes_by_launch",
    "override_table",
    "parse_override",
]

GLOBAL_UPDATED = "Global server args updated!"
CONTEXT_OVERRIDE = "Config updated via context override:"
OVERRIDE_PREFIXES = (GLOBAL_UPDATED, CONTEXT_OVERRIDE)
"""Message starts of an accepted runtime change."""
REFUSED_PREFIX = "Updating "
REFUSED_MARK = r" is (?:not supported|rejected because )"
"""After ``REFUSED_PREFIX``: a refused change (a pattern)."""
_REFUSED = re.compile(
    r"Updating (?P<key>[A-Za-z_][A-Za-z0-9_]{0,127})"
    r"(?: to (?P<value>[^\s]{1,64}))? is (?:not supported|rejected because (?P<why>.{1,200}))"
)
_WHOLE_STATE = re.compile(r"^[ \t]{0,8}(?:global_server_args_dict|get_global_server_args\(\))=")


@dataclass(frozen=True)
class Override:
    """One runtime change as logged: the values it states, or the key it refused."""

    values: dict[str, object]
    whole_state: bool
    """The line states every field (the change is what differs from the state before)."""
    refused: str | None = None
    """Why nothing changed (``not supported``, ``out of the valid range [1, 8]``)."""
    problems: tuple[str, ...] = ()


def parse_override(message: str) -> Override | None:
    """The runtime change a log message states, None when it states none.

    >>> parse_override("Config updated via context override: {'pp_max_micro_batch_size': 4}")
    Override(values={'pp_max_micro_batch_size': 4}, whole_state=False, refused=None, problems=())
    >>> parse_override("Updating tp_size is not supported.").refused
    'not supported'
    """
    if message.startswith(CONTEXT_OVERRIDE):
        return _read(message[len(CONTEXT_OVERRIDE) :].lstrip(), whole_state=False)
    if message.startswith(GLOBAL_UPDATED):
        rest = message[len(GLOBAL_UPDATED) :]
        m = _WHOLE_STATE.match(rest)
        if m is None:
            return Override({}, True, problems=("no state after the message",))
        return _read(rest[m.end() :], whole_state=True)
    if message.startswith(REFUSED_PREFIX):
        m = _REFUSED.match(message)
        if m is None:
            return None
        why = m.group("why")
        value = m.group("value")
        values: dict[str, object] = {m.group("key"): _number(value) if value else None}
        reason = why.rstrip(" .") if why else "not supported"
        return Override(values, False, refused=reason)
    return None


def changed_keys(before: dict[str, object], change: Override) -> dict[str, object]:
    """The keys a change sets to a new value (a whole-state line: those that differ)."""
    if change.refused is not None:
        return {}
    if not change.whole_state:
        return dict(change.values)
    return {k: v for k, v in change.values.items() if k not in before or before[k] != v}


def override_table(
    lines: pl.DataFrame, launch_args: Mapping[int, Mapping[str, object]]
) -> pl.DataFrame:
    """One row per argument a logged runtime change sets (``schema.sglang.OVERRIDES``).

    ``lines`` are the ``override`` and ``server_args`` lines in file order
    (``source``, ``_order``, ``lineno``, ``ts``, ``kind``, ``message``, rank tags); a change
    belongs to the launch whose dump precedes it in its file, and each rank's state starts
    from that launch's arguments. A line that states nothing readable is kept as
    ``unreadable``.
    """
    dumps = lines.filter(pl.col("kind") == "server_args").sort("_order", "lineno")
    index = {(r["source"], r["lineno"]): i for i, r in enumerate(dumps.iter_rows(named=True))}
    current: dict[str, int] = {}
    state: dict[tuple[int | None, str], dict[str, object]] = {}
    rows: list[dict[str, object]] = []
    for r in lines.sort("_order", "lineno").iter_rows(named=True):
        if r["kind"] == "server_args":
            current[r["source"]] = index[(r["source"], r["lineno"])]
            continue
        change = parse_override(r["message"] or "")
        launch = current.get(r["source"], None if dumps.height else 0)
        where = {c: r[c] for c in ("source", "lineno", "ts", *RANK_TAGS)} | {"launch": launch}
        if change is None:  # "Updating weights from disk is not supported": no argument
            rows.append(where | _row(None, None, "unreadable", "names no argument"))
            continue
        rank = " ".join(f"{t}{r[t]}" for t in RANK_TAGS if r.get(t) is not None)
        before = state.setdefault((launch, rank), dict(launch_args.get(launch, {})))
        note = "; ".join(change.problems) or None
        if change.refused is not None:
            for key, value in change.values.items():
                rows.append(where | _row(key, value, "refused", change.refused))
            continue
        changed = changed_keys(before, change)
        before.update(changed)
        if not changed:
            unread = bool(change.problems) or not change.values
            status = "unreadable" if unread else "unchanged"
            rows.append(where | _row(None, None, status, note or _NOTHING[status]))
        for key, value in changed.items():
            rows.append(where | _row(key, value, "set", note))
    return pl.DataFrame(rows, schema=OVERRIDES, orient="row")


_NOTHING = {"unreadable": "no value stated", "unchanged": "every value as before"}


def changes_by_launch(table: pl.DataFrame) -> dict[int | None, list[dict[str, object]]]:
    """Launch → its runtime changes, one per (time, key, value, status) whatever the ranks
    that logged it, JSON-ready (``ts`` as ISO text, ``value`` decoded)."""
    out: dict[int | None, list[dict[str, object]]] = {}
    seen = table.unique(["launch", "ts", "key", "value", "status"], maintain_order=True)
    for r in seen.iter_rows(named=True):
        out.setdefault(r["launch"], []).append(
            {
                "ts": r["ts"].isoformat(sep=" ") if r["ts"] is not None else None,
                "lineno": r["lineno"],
                "key": r["key"],
                "value": json.loads(r["value"]) if r["value"] is not None else None,
                "status": r["status"],
                "note": r["note"],
            }
        )
    return out


def _row(key: str | None, value: object, status: str, note: str | None) -> dict[str, object]:
    text = None if key is None else json.dumps(value, default=str)
    return {"key": key, "value": text, "status": status, "note": note}


def _read(text: str, *, whole_state: bool) -> Override:
    try:
        dump = parse_server_args(text)
    except ServerArgsError as e:
        return Override({}, whole_state, problems=(str(e),))
    problems = dump.problems if dump.complete else (*dump.problems, "the logged state is cut")
    return Override(dict(dump.args), whole_state, problems=tuple(problems))


def _number(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
