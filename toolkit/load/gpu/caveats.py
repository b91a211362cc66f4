"""Caveats of a GPU trace file: sampling stalls, a header given, not read, and tables printed
for people (a re-printed CSV, the default nvidia-smi table).

A sampler that stops (a busy host, a paused container, a restarted ``nvidia-smi -l``) leaves a
gap; busy shares then average the samples around it as if the gap were not there. A gap is a
stall when it is longer than ``STALL_FACTOR`` times the GPU's median interval (and at least
``STALL_MIN_S``); the gaps of the GPUs of one poll are one stall. An nvidia-smi CSV read with a
given field list (``noheader`` rows) has its columns named by that list, not by the file; one
whose header names no unit (nvidia-smi always prints ``[%]``, ``[MiB]``, ``[W]`` in its header,
also with ``nounits``) had its header written by hand over ``noheader`` rows.
"""

from __future__ import annotations

import polars as pl

from toolkit.load.gpu.format import Part
from toolkit.schema.caveats import Caveat

__all__ = ["STALL_FACTOR", "STALL_MIN_S", "part_caveats", "sampling_stalls"]

STALL_FACTOR = 5.0
"""A gap longer than this many median intervals of the same GPU is a stall."""
STALL_MIN_S = 1.0
"""…and at least this long: a 10 ms sampler that misses a few polls is no stall."""
_HEADER_FORMATS = ("nvidia-smi-csv", "nvidia-smi-csv-reprinted")
_REPRINTED = "nvidia-smi-csv-reprinted"  # toolkit.load.gpu.reprint.FORMAT (which imports this)
_TABLE = "nvidia-smi-table"  # toolkit.load.gpu.smitable.FORMAT
_KEYS = ("host", "gpu", "uuid", "mig_instance")


def sampling_stalls(samples: pl.DataFrame) -> pl.DataFrame:
    """One row per stall: ``start`` (last sample before it), ``gap_s``, ``median_s``."""
    if "ts" not in samples.columns or samples.get_column("ts").null_count() == samples.height:
        return pl.DataFrame(
            schema={"start": pl.Datetime("ms"), "gap_s": pl.Float64, "median_s": pl.Float64}
        )
    keys = [k for k in _KEYS if k in samples.columns]
    timed = samples.select(*keys, "ts").drop_nulls("ts").unique().sort([*keys, "ts"])
    gap = (pl.col("ts").shift(-1) - pl.col("ts")).dt.total_milliseconds() / 1e3
    gaps = timed.with_columns(gap_s=gap.over(keys) if keys else gap).drop_nulls("gap_s")
    gaps = gaps.with_columns(
        median_s=pl.col("gap_s").median().over(keys) if keys else pl.col("gap_s").median()
    )
    stalls = gaps.filter(
        (pl.col("gap_s") > STALL_FACTOR * pl.col("median_s")) & (pl.col("gap_s") >= STALL_MIN_S)
    )
    # the GPUs of one poll stall together: one stall per second it began in
    return (
        stalls.group_by(start=pl.col("ts").dt.truncate("1s"))
        .agg(pl.col("gap_s").max(), pl.col("median_s").median())
        .sort("start")
    )


def part_caveats(part: Part) -> list[Caveat]:
    """The caveats of one trace file."""
    out = []
    stalls = sampling_stalls(part.samples)
    if stalls.height:
        total = float(stalls["gap_s"].sum())
        longest = stalls.sort("gap_s", descending=True).row(0, named=True)
        out.append(
            Caveat(
                "sampling-stall",
                part.path,
                stalls.height,
                total,
                f"{stalls.height} sampling stall(s), {total:.1f} s in all; the longest "
                f"{longest['gap_s']:.1f} s after {longest['start']:%H:%M:%S} (median interval "
                f"{longest['median_s']:.2f} s): busy shares average over the samples taken",
            )
        )
    out += _printed_for_people(part)
    if part.format in _HEADER_FORMATS and part.samples.height:
        headers = part.skipped.filter(pl.col("reason") == "header")["line"].to_list()
        n = part.samples.height
        if not headers:
            detail = (
                f"{n} rows with no header in the file: columns named by the given field list "
                "([gpu_trace] fields or --gpu-fields)"
            )
            out.append(Caveat("guessed-header", part.path, n, detail=detail))
        elif not any("[" in h for h in headers) and _has_units(part.samples):
            out.append(
                Caveat(
                    "guessed-header",
                    part.path,
                    n,
                    detail=f"{n} rows under a header that names no unit (nvidia-smi always "
                    "prints them): written by hand over noheader rows, so its order is a guess",
                )
            )
    return out


def _printed_for_people(part: Part) -> list[Caveat]:
    """A trace read from a table printed for people: re-printed CSV, or the default table."""
    n = part.samples.height
    if not n:
        return []
    if part.format == _REPRINTED:
        detail = (
            f"{n} rows of a --query-gpu csv re-printed in padded columns (column -t): fields "
            "split again at runs of spaces; check the columns against the query"
        )
        return [Caveat("reprinted-table", part.path, n, detail=detail)]
    if part.format != _TABLE:
        return []
    prints = part.samples.get_column("sample").n_unique()
    ts = part.samples.get_column("ts").drop_nulls().unique().sort()
    if ts.len() > 1:
        step = (ts.diff().dt.total_milliseconds() / 1e3).median()
        timing = f"median {step:.0f} s apart: the -l period; times to the second"
    elif ts.len() == 1:
        timing = "one print time"
    else:
        timing = "no print time: untimed"
    detail = (
        f"the default nvidia-smi table: {prints} print(s), {n} samples, one per GPU per print "
        f"({timing}); busy shares rest on these few samples"
    )
    return [Caveat("default-table", part.path, n, detail=detail)]


def _has_units(samples: pl.DataFrame) -> bool:
    """Whether the samples hold a quantity nvidia-smi prints with a unit in its header."""
    cols = [c for c in ("util_pct", "mem_used_mib", "power_w") if c in samples.columns]
    return any(samples.get_column(c).null_count() < samples.height for c in cols)
