"""``place_nodes``: the node of a multi-node launch each GPU trace sample was taken on.

Every node writes its own trace with the same GPU indices (0, 1, …), so an index alone names
no GPU of a multi-node launch. Witnesses, strongest first; each placement names its own:

1. ``run.toml``'s ``[gpu_trace.nodes]``: a trace file (its name, or its path under the run
   directory) → node rank;
2. the samples' ``host`` (dcgm-exporter ``Hostname``/``hostname``) equal to a host the SGLang
   logs name: the journald header of a log whose launch states its ``node_rank``, or the host
   of ``dist_init_addr`` (node 0);
3. the samples' GPU ``uuid``, when every UUID of a trace file (and host) is one the scheduler
   processes of one node's ranks hold (``identity.uuid_nodes``: compute-apps listings);
4. the trace files' names or folders: ``node1``, ``node-1``, ``rank1`` (numbered from 0, or
   from 1 when the numbers are 1…nnodes), or a log's host name; only when every file names a
   different node and there are ``nnodes`` files. A name is a guess (``guesses`` says so).

A launch on one node puts every sample on node 0. On several nodes, samples no witness places
keep a null node and ``problems`` says so: averaging one index over nodes mixes stages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load.sglang.wrappers import decode_header

__all__ = ["NodePlacement", "log_hosts", "place_nodes"]

RUN_TOML = "run.toml"
HOST = "host"
UUID = "UUID"
FILE_NAME = "file name"
ONE_NODE = "one node"
_NUMBERED = re.compile(r"(?<![a-z])(?:node|rank)[-_ ]?(\d{1,4})(?!\d)", re.IGNORECASE)
_HOST_WRAPPERS = ("journald", "ray")  # wrappers whose header names the host
_I32 = pl.Int32()
_UNITS = {"source": pl.String(), "host": pl.String(), "node": _I32, "witness": pl.String()}


@dataclass(frozen=True)
class NodePlacement:
    """Per trace source and host: its node (null: not placed) and the witness that said so.

    ``units`` has columns ``source``, ``host``, ``node``, ``witness``, ``samples``;
    ``problems`` are lines for ``Run.mismatches``; ``guesses`` say which placements rest on
    file names alone.
    """

    units: pl.DataFrame
    problems: tuple[str, ...] = ()
    guesses: tuple[str, ...] = ()

    def apply(self, samples: pl.DataFrame) -> pl.DataFrame:
        """``samples`` with their ``node`` filled (null where not placed); the other columns
        are shared, not copied."""
        node = pl.lit(None, _I32)
        placed = self.units.filter(pl.col("node").is_not_null())
        if placed.height == self.units.height and placed["node"].n_unique() == 1:
            node = pl.lit(placed["node"][0], _I32)
        else:
            for source, host, rank in placed.select("source", "host", "node").iter_rows():
                unit = (pl.col("source") == source) & pl.col("host").eq_missing(
                    pl.lit(host, pl.String)
                )
                node = pl.when(unit).then(pl.lit(rank, _I32)).otherwise(node)
        return samples.with_columns(node=node)

    def describe(self) -> str:
        """One line: ``gpu-node0.csv → node 0, gpu-node1.csv → node 1 (file name)``."""
        placed = self.units.filter(pl.col("node").is_not_null())
        parts = [
            f"{Path(s).name}{f' ({h})' if h else ''} → node {n} ({w})"
            for s, h, n, w in placed.select("source", "host", "node", "witness").iter_rows()
        ]
        return ", ".join(parts) or "no trace placed on a node"


def log_hosts(launches: Iterable[Any], stores: Iterable[Any]) -> dict[str, int]:
    """Host name → node rank from the logs of one multi-node start.

    ``launches`` are its ``Launch`` objects (``source``, ``server_args``); ``stores`` the log's
    sources (``path``, ``wrapper``, ``headers``). A host claimed by two nodes is left out.
    """
    hosts_of: dict[str, set[str]] = {}
    for store in stores:
        if str(store.wrapper).startswith(_HOST_WRAPPERS):
            names = {decode_header(store.wrapper, h)[0] for h in store.headers}
            hosts_of[str(store.path)] = {n for n in names if n}
    claims: dict[str, set[int]] = {}
    for launch in launches:
        args = launch.server_args or {}
        rank = args.get("node_rank", 0)
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            for host in hosts_of.get(str(launch.source), ()):
                claims.setdefault(_host_key(host), set()).add(rank)
        addr = args.get("dist_init_addr")
        if isinstance(addr, str) and addr.strip():
            head = addr.strip().rsplit(":", 1)[0] if addr.count(":") == 1 else addr.strip()
            claims.setdefault(_host_key(head.strip("[]")), set()).add(0)
    return {host: next(iter(ranks)) for host, ranks in claims.items() if len(ranks) == 1}


def place_nodes(
    samples: pl.DataFrame,
    *,
    nnodes: int,
    declared: Mapping[str, int] | None = None,
    hosts: Mapping[str, int] | None = None,
    root: Path | None = None,
    uuids: Mapping[str, int] | None = None,
) -> NodePlacement:
    """Which node each trace source (and host within it) was recorded on.

    Parameters
    ----------
    samples
        ``GpuTrace.samples`` (``source``, ``host``).
    nnodes
        Nodes of the launch (``RunLayout.nnodes``).
    declared
        ``run.toml``'s ``[gpu_trace.nodes]``: file name or path under ``root`` → node rank.
    hosts
        Host name → node rank (``log_hosts``).
    root
        The run directory, against which declared paths and folder names are read.
    uuids
        GPU UUID (lower case) → node rank (``identity.uuid_nodes``); read from the samples'
        ``uuid`` column.
    """
    units = (
        samples.group_by("source", "host", maintain_order=True)
        .agg(samples=pl.len())
        .sort("source", "host", nulls_last=True)
    )
    keys = [(s, h) for s, h in units.select("source", "host").iter_rows()]
    if nnodes <= 1:
        return NodePlacement(_units(units, dict.fromkeys(keys, (0, ONE_NODE))))
    found: dict[tuple[str, str | None], tuple[int, str]] = {}
    problems: list[str] = []
    sources = sorted({s for s, _ in keys})
    for name, node in (declared or {}).items():
        matched = [s for s in sources if _names(s, name, root)]
        if not matched:
            problems.append(f"run.toml [gpu_trace.nodes] names {name!r}, no GPU trace of the run")
        elif node >= nnodes:
            problems.append(
                f"run.toml [gpu_trace.nodes] puts {name!r} on node {node}, the launch has "
                f"{nnodes} nodes (0–{nnodes - 1}): not used"
            )
        else:
            found |= {k: (node, RUN_TOML) for k in keys if k[0] in matched and k not in found}
    known = {_host_key(h): n for h, n in (hosts or {}).items() if 0 <= n < nnodes}
    for key in keys:
        if key not in found and key[1] and _host_key(key[1]) in known:
            found[key] = (known[_host_key(key[1])], HOST)
    for key, node in _uuid_nodes(samples, uuids or {}, nnodes).items():
        if key not in found:
            found[key] = (node, UUID)
    by_name = _file_nodes(sources, keys, nnodes, known, root)
    for key in keys:
        if key not in found and key[0] in by_name:
            found[key] = (by_name[key[0]], FILE_NAME)
    out = _units(units, found)
    named = out.filter(pl.col("witness") == FILE_NAME)
    guesses = ()
    if named.height:
        placed = ", ".join(
            f"{Path(s).name} → node {n}" for s, n in named.select("source", "node").iter_rows()
        )
        guesses = (
            f"{placed}: placed by file name alone, a guess (the numbering, 0 or 1 first, is "
            "read from the names); declare each file's node in run.toml [gpu_trace.nodes], or "
            "record uuid in the trace with a compute-apps listing per node, to make it certain",
        )
    lost = out.filter(pl.col("node").is_null())
    if lost.height:
        names = sorted({Path(s).name for s in lost["source"]})
        files = ", ".join(names)
        problems.append(
            f"{int(lost['samples'].sum())} sample(s) of {files} could not be placed on a node of "
            f"the {nnodes}-node launch (no host the logs name, no node in the file names), so "
            "no stage uses them (one GPU index on several nodes would mix stages): declare "
            f'each file\'s node in run.toml, [gpu_trace.nodes] "{names[0]}" = <node rank>'
        )
    return NodePlacement(out, tuple(problems), guesses)


def _uuid_nodes(
    samples: pl.DataFrame, uuids: Mapping[str, int], nnodes: int
) -> dict[tuple[str, str | None], int]:
    """(source, host) → node for the units all of whose GPU UUIDs ``uuids`` puts on one node."""
    if not uuids or "uuid" not in samples.columns:
        return {}
    known = {u: n for u, n in uuids.items() if 0 <= n < nnodes}
    per_unit = (
        samples.filter(pl.col("uuid").is_not_null())
        .group_by("source", "host")
        .agg(pl.col("uuid").str.to_lowercase().unique())
    )
    out = {}
    for source, host, listed in per_unit.iter_rows():
        nodes = {known.get(u) for u in listed}
        if len(nodes) == 1 and None not in nodes:
            out[(source, host)] = next(iter(nodes))
    return out


def _units(
    units: pl.DataFrame, found: Mapping[tuple[str, str | None], tuple[int, str]]
) -> pl.DataFrame:
    rows = [
        (s, h, *found.get((s, h), (None, None)), n)
        for s, h, n in units.select("source", "host", "samples").iter_rows()
    ]
    return pl.DataFrame(rows, schema={**_UNITS, "samples": pl.UInt32()}, orient="row")


def _names(source: str, name: str, root: Path | None) -> bool:
    """Whether ``name`` (a file name, or a path under ``root``) is the trace file ``source``."""
    path = Path(source)
    if "/" not in name and "\\" not in name:
        return path.name == name
    if root is None:
        return False
    try:
        return path.resolve() == (root / name).resolve()
    except OSError:
        return False


def _file_nodes(
    sources: list[str],
    keys: list[tuple[str, str | None]],
    nnodes: int,
    hosts: Mapping[str, int],
    root: Path | None,
) -> dict[str, int]:
    """Source → node from file and folder names, when each of ``nnodes`` files names its own."""
    per_source = {s: {h for k, h in keys if k == s and h} for s in sources}
    if len(sources) != nnodes or any(len(h) > 1 for h in per_source.values()):
        return {}
    words = {s: _relative(s, root) for s in sources}
    by_host = {}
    for source, text in words.items():
        named = {n for host, n in hosts.items() if _word_in(host, text)}
        by_host[source] = next(iter(named)) if len(named) == 1 else None
    if _bijective(by_host, nnodes):
        return {s: n for s, n in by_host.items() if n is not None}
    numbers = {}
    for source, text in words.items():
        found = {int(m) for m in _NUMBERED.findall(text)}
        numbers[source] = next(iter(found)) if len(found) == 1 else None
    if _bijective(numbers, nnodes):
        return {s: n for s, n in numbers.items() if n is not None}
    shifted = {s: n - 1 if n is not None else None for s, n in numbers.items()}
    if _bijective(shifted, nnodes):  # node1, node2: numbered from 1
        return {s: n for s, n in shifted.items() if n is not None}
    return {}


def _bijective(nodes: Mapping[str, int | None], nnodes: int) -> bool:
    return sorted(n if n is not None else -1 for n in nodes.values()) == list(range(nnodes))


def _relative(source: str, root: Path | None) -> str:
    """The source's path under the run directory (its name when outside), lower case."""
    path = Path(source)
    if root is not None:
        try:
            return path.relative_to(root).as_posix().lower()
        except ValueError:
            pass
    return path.name.lower()


def _word_in(host: str, text: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(host)}(?![a-z0-9])", text) is not None


def _host_key(host: str) -> str:
    """A host name compared without case and domain (``H100-a07.cluster`` is ``h100-a07``);
    an IP address whole."""
    host = host.strip().lower()
    if re.fullmatch(r"[\d.]+|[0-9a-f]*:[0-9a-f:]*", host):
        return host
    return host.split(".", 1)[0]
