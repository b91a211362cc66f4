"""Which compute processes ``nvidia-smi --query-compute-apps`` listed are the SGLang server's.

SGLang runs one scheduler process per GPU it uses, so every other process holding memory on
one of those GPUs competes with a stage for memory (a smaller KV pool: ``mem_fraction_static``
is a share of the whole card) and for compute. A process is judged the server's:

1. when a witness names it: its pid is one the log's wrapper headers name (journald
   ``ident[pid]``, Ray ``pid=``), or its name is SGLang's own (``sglang::scheduler_TP0`` as
   SGLang titles its schedulers, ``python -m sglang.launch_server``, ``sglang serve``);
2. else, on a GPU where no witnessed process runs, when its name is a name of the server's
   processes (of the witnessed ones; without any witness, the name listed on the most GPUs,
   then the most memory) and no process of that name holds more memory on the GPU (the server
   holds one process per GPU and its KV pool makes it the largest there).

Every other named process is not the server's. A process whose name was not listed
(``[Insufficient Permissions]``) and no pid witnesses is left unjudged (``server`` null). Two
SGLang servers on the same GPUs are not told apart by name.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from toolkit.load.gpu.inventory import with_listing
from toolkit.schema.gpu import PROCESSES

__all__ = ["SGLANG_PROCESS", "judge_processes"]

SGLANG_PROCESS = r"(?i)sglang::|sglang\.launch_server|\bsglang\s+serve\b|launch_server\.py"
"""A process name (or command line) that is SGLang's server (a regex for ``re`` and polars)."""


def judge_processes(apps: pl.DataFrame, server_pids: Iterable[int] = ()) -> pl.DataFrame:
    """Each listed process (``toolkit.schema.gpu.APPS`` rows, any number of listings) judged
    the server's or not, by the rules of the module docstring: ``toolkit.schema.gpu.PROCESSES``.

    ``server_pids`` are the process ids the server's log names (``SGLangLog.pids``).
    """
    if not apps.height:
        return pl.DataFrame(schema=PROCESSES)
    # a listing without gpu_uuid or gpu_bus_id names no GPU: each process is its own
    key = pl.coalesce(
        pl.format("gpu {}", pl.col("gpu")),
        pl.col("uuid"),
        pl.col("pci_bus_id"),
        pl.format("pid {}", pl.col("pid")),
        pl.lit("?"),
    )
    rows = with_listing(apps).with_columns(
        _key=key,
        _listing=pl.format("{}#{}", pl.col("source"), pl.col("snapshot")),
        _mib=pl.col("used_memory_mib").fill_null(0.0),
    )
    named = pl.any_horizontal(pl.col("gpu", "uuid", "pci_bus_id").is_not_null())
    rows = rows.with_columns(
        _gpu_mib=pl.when(named).then(pl.col("_mib").sum().over("_listing", "_key"))
    )
    rows = rows.with_columns(
        _share=pl.when(pl.col("_gpu_mib") > 0).then(pl.col("_mib") / pl.col("_gpu_mib"))
    )
    procs = (
        rows.sort(pl.col("_share").fill_null(-1.0), descending=True, maintain_order=True)
        .group_by("_key", "pid", "process_name", maintain_order=True)
        .agg(
            pl.col("gpu").drop_nulls().first(),
            pl.col("uuid").drop_nulls().first(),
            pl.col("pci_bus_id").drop_nulls().first(),
            pl.col("used_memory_mib").max(),
            pl.col("_gpu_mib").first().alias("gpu_listed_mib"),
            pl.col("_share").first().alias("memory_share"),
            pl.col("_listing").n_unique().cast(pl.Int64).alias("listings"),
        )
        .with_columns(of_listings=pl.lit(rows["_listing"].n_unique(), pl.Int64))
    )
    pids = sorted(set(server_pids))
    name = pl.col("process_name")
    by_pid = pl.col("pid").is_in(pids) if pids else pl.lit(False)
    by_name = name.str.contains(SGLANG_PROCESS).fill_null(False)
    procs = procs.with_columns(
        _witness=pl.when(by_pid)
        .then(pl.lit("pid named in the server's log"))
        .when(by_name)
        .then(pl.lit("SGLang's process name")),
        _family=pl.when(by_name).then(pl.lit("sglang")).otherwise(name),
    )
    witnessed = procs.filter(pl.col("_witness").is_not_null())
    if witnessed.height:
        families = set(witnessed["_family"].drop_nulls().to_list())
        kin = "the name of the server's witnessed processes"
    else:
        families = _majority(procs)
        kin = "the name listed on the most GPUs"
    procs = procs.with_columns(
        _gpu_witnessed=pl.col("_witness").is_not_null().any().over("_key"),
        _kin=pl.col("_family").is_in(sorted(families)).fill_null(False),
    )
    largest = pl.col("used_memory_mib").fill_null(0.0).rank("ordinal", descending=True)
    procs = procs.with_columns(
        _first=pl.when(pl.col("_kin")).then(largest.over("_key", "_kin")) == 1
    )
    kin_server = ~pl.col("_gpu_witnessed") & pl.col("_kin") & pl.col("_first").fill_null(False)
    verdict = (
        pl.when(pl.col("_witness").is_not_null())
        .then(pl.struct(server=pl.lit(True), judged_by=pl.col("_witness")))
        .when(kin_server)
        .then(pl.struct(server=pl.lit(True), judged_by=pl.lit(kin)))
        .when(pl.col("_kin"))
        .then(
            pl.struct(
                server=pl.lit(False),
                judged_by=pl.lit("a second process of the server's name on the GPU"),
            )
        )
        .when(name.is_not_null())
        .then(pl.struct(server=pl.lit(False), judged_by=pl.lit("not the server's name or pid")))
        .otherwise(pl.struct(server=pl.lit(None, pl.Boolean), judged_by=pl.lit("no name listed")))
    )
    out = procs.with_columns(verdict.alias("_v")).unnest("_v")
    return out.select(PROCESSES.names()).cast(dict(PROCESSES))


def _majority(procs: pl.DataFrame) -> set[str]:
    """The name on the most GPUs (ties: the most memory together); empty without names."""
    named = procs.filter(pl.col("_family").is_not_null())
    if not named.height:
        return set()
    ranked = (
        named.group_by("_family")
        .agg(pl.col("_key").n_unique().alias("gpus"), pl.col("used_memory_mib").sum())
        .sort("gpus", "used_memory_mib", "_family", descending=[True, True, False])
    )
    return {ranked["_family"][0]}
