"""Caveats in the findings they touch: a finding resting on an affected quantity says so.

Loaders state the quirks they met (``toolkit.schema.caveats``); each kind affects one
quantity, and ``RESTS_ON`` names the findings that read it. ``with_caveats`` adds one sentence
per relevant caveat to such a finding's summary and lists them in ``Finding.caveats``; the
finding's numbers, severity and evidence stay as the rule made them. Modes no rule models
(mixed chunked prefill, speculative decoding) are caveats too: from the batch lines that show
them, or from the launch's arguments when the lines do not.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

from toolkit.diagnose.finding import Finding
from toolkit.errors import ToolkitError
from toolkit.load.sglang.caveats import log_caveats
from toolkit.run_analysis import RunAnalysis
from toolkit.schema.caveats import Caveat

__all__ = ["RESTS_ON", "run_caveats", "with_caveats"]

_SLOTS = ("pp-underfilled-slots", "pp-empty-async-slots", "pp-low-concurrency")
RESTS_ON: dict[str, tuple[str, ...]] = {
    "gpu_busy": ("gpu-idle-bubbles", "stage-imbalance", "unexplained-slowdown"),
    "prefill_count": ("prefill-interference", *_SLOTS, "queue-backlog"),
    "line_times": ("prefill-interference", "stage-desync", "unexplained-slowdown"),
    "decode_tokens": (*_SLOTS, "prefill-interference", "scaling-collapse", "running-cap"),
    "stage_shares": (),  # a spelling or a split table: the shares read are whole
}
"""Affected quantity → the findings that rest on it."""

_SEEN: weakref.WeakKeyDictionary[RunAnalysis, tuple[Caveat, ...]] = weakref.WeakKeyDictionary()


def run_caveats(ctx: RunAnalysis) -> tuple[Caveat, ...]:
    """Every caveat of a run's inputs: its log, GPU trace and metrics, and the modes its
    launch arguments turn on that its lines do not show."""
    if ctx in _SEEN:
        return _SEEN[ctx]
    found: list[Caveat] = []
    run = ctx.run
    try:
        log = run.log
        if log is not None:
            found += log_caveats(log)
        gpu = run.gpu
        if gpu is not None:
            found += gpu.caveats
        metrics = run.metrics
        if metrics is not None:
            found += metrics.caveats
    except ToolkitError:
        pass  # an input that cannot be read is reported by parse and the skipped checks
    found += _launch_modes(ctx, {c.kind for c in found})
    _SEEN[ctx] = tuple(found)
    return _SEEN[ctx]


def _launch_modes(ctx: RunAnalysis, seen: set[str]) -> list[Caveat]:
    """Mixed chunked prefill or speculative decoding set in the launch arguments, when no batch
    line already said so (SGLang ≥ 0.4 prints no mixed-chunk mark on its prefill lines)."""
    args = ctx.server_args
    where = "the launch arguments"
    out = []
    if args.get("enable_mixed_chunk") is True and "mixed-chunk" not in seen:
        detail = (
            "enable_mixed_chunk is on: a prefill batch also carries the decode requests of its "
            "slot (allowed under PP since SGLang #22920)"
        )
        out.append(Caveat("mixed-chunk", where, detail=detail))
    algorithm = args.get("speculative_algorithm")
    if algorithm not in (None, "", "None") and "speculative" not in seen:
        detail = (
            f"speculative decoding ({algorithm}) is on: a decode step emits about accept len "
            "tokens per request (under PP behind SGLANG_ENABLE_PP_SPEC, SGLang #30775)"
        )
        out.append(Caveat("speculative", where, detail=detail))
    return out


def with_caveats(ctx: RunAnalysis, finding: Finding) -> Finding:
    """``finding`` with the caveats of the quantities it rests on, in its summary and
    ``caveats``; unchanged when none applies."""
    wanted = {q for q, ids in RESTS_ON.items() if finding.id in ids}
    if not wanted:
        return finding
    relevant = [c for c in run_caveats(ctx) if c.affects in wanted]
    if not relevant:
        return finding
    notes = " ".join(f"Caveat ({c.kind}, {_name(c.file)}): {c.text()}." for c in relevant)
    return replace(
        finding,
        summary=f"{finding.summary} {notes}",
        caveats=tuple({**c.to_dict(), "file": _name(c.file)} for c in relevant),
    )


def _name(file: str) -> str:
    """A file's name as a reader knows it (no directories of this machine)."""
    return file.replace("\\", "/").rsplit("/", 1)[-1]
