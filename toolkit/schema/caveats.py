"""Caveats: quirks a loader met in a file that change what a quantity read from it means.

A caveat is no error: the file was read, every line accounted for. It says which quantity is
affected, so a finding resting on that quantity can say so (``KINDS`` maps each kind to the
quantity it touches; ``toolkit.diagnose.caveats`` maps quantities to findings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from toolkit.schema import Column, schema_of

__all__ = ["CAVEATS", "KINDS", "Caveat", "caveat_frame"]

KINDS: dict[str, tuple[str, str]] = {
    "doubled-prefill": (
        "prefill_count",
        "prefill lines printed twice (same time and fields, one after the other; overlap mode "
        "before SGLang #18570): prefill counts and rates from the log count each batch twice "
        "unless the repeats are dropped",
    ),
    "mixed-wrappers": (
        "line_times",
        "lines under a wrapper (CRI, journald, docker) mixed with unwrapped or tqdm-glued ones: "
        "unwrapped lines carry only SGLang's own time",
    ),
    "time-only-stamps": (
        "line_times",
        "lines stamped HH:MM:SS without a date: the date comes from a wrapper or is missing, "
        "and times have 1 s resolution, so rates over short windows are coarse",
    ),
    "sampling-stall": (
        "gpu_busy",
        "the GPU sampler stopped for longer than several median intervals: busy shares "
        "average over the samples taken, not the gap",
    ),
    "guessed-header": (
        "gpu_busy",
        "GPU trace columns named by a header the loader did not read from the file (given "
        "fields over noheader rows): a wrong field list mislabels every column",
    ),
    "reprinted-table": (
        "gpu_busy",
        "a --query-gpu CSV re-printed in padded columns (column -t): fields were split again "
        "at runs of spaces, so a value holding two spaces would land in the wrong column",
    ),
    "default-table": (
        "gpu_busy",
        "the default nvidia-smi table: one sample per print (the -l period apart, 1 s time "
        "resolution), utilization only over the driver's last window: busy shares rest on "
        "few, coarse samples",
    ),
    "gateway-rename": (
        "stage_shares",
        "metrics scraped via a gateway that renames sglang:* to sglang_*: read as sglang:*",
    ),
    "router-series": (
        "stage_shares",
        "router series (sgl_router_*) kept in their own table, apart from engine series",
    ),
    "mixed-chunk": (
        "prefill_count",
        "mixed chunked prefill on: prefill batches also carry decode requests",
    ),
    "speculative": (
        "decode_tokens",
        "speculative decoding on: a decode step emits accept len tokens per request, not one",
    ),
}
"""Caveat kind → (the quantity it affects, what it means)."""

CAVEAT_COLUMNS: tuple[Column, ...] = (
    Column("kind", pl.String(), "the quirk (a key of KINDS)"),
    Column("file", pl.String(), "the input file it was met in"),
    Column("count", pl.Int64(), "lines, samples or series affected; null when not counted"),
    Column("length_s", pl.Float64(), "seconds affected (a sampling stall's gap); else null"),
    Column("affects", pl.String(), "the quantity it affects (prefill_count, gpu_busy, …)"),
    Column("detail", pl.String(), "one sentence with the numbers"),
)
CAVEATS = schema_of(CAVEAT_COLUMNS)


@dataclass(frozen=True)
class Caveat:
    """One quirk met in one file: its kind, the file, how much and what it affects."""

    kind: str
    file: str
    count: int | None = None
    length_s: float | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown caveat kind {self.kind!r}")

    @property
    def affects(self) -> str:
        """The quantity this kind of quirk affects."""
        return KINDS[self.kind][0]

    def text(self) -> str:
        """One line a reader understands: the detail, else what the kind means."""
        return self.detail or KINDS[self.kind][1]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``ppscope parse --json`` lists."""
        return {
            "kind": self.kind,
            "file": self.file,
            "count": self.count,
            "length_s": None if self.length_s is None else round(self.length_s, 3),
            "affects": self.affects,
            "detail": self.text(),
        }


def caveat_frame(caveats: list[Caveat]) -> pl.DataFrame:
    """Caveats as a ``CAVEATS`` table (for a finding's evidence)."""
    return pl.DataFrame([c.to_dict() for c in caveats], schema=CAVEATS)
