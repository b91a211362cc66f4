"""The ground truth of a draw: what each remedy ppscope could propose recovers, phase by phase.

A remedy's recoverable share at a phase is ``1 − now/after``: the benchmark's output tok/s of
the phase as played, against the same session played with the remedy applied
(``derive.played``). The remedies, one per finding id:

========================  ===================================================================
``pp-underfilled-slots``  ``--pp-max-micro-batch-size ⌈c/pp⌉`` for the phase's ``c``
``pp-empty-async-slots``  ``--pp-async-batch-depth 0``
``stage-imbalance``       the layer split that makes the top load's round shortest
``cuda-graph-miss``       graphs captured up to any batch
``running-cap``           no ``--max-running-requests`` (SGLang's defaults, graph sizes included)
``kv-cache-pressure``     a pool that holds every request of the heaviest phase at full length
``unexplained-slowdown``  the per-round overhead ``o`` removed
``prefill-interference``  no remedy to play: the share of the phase spent in prefill passes
========================  ===================================================================

A remedy that changes nothing on a run (no flag to remove, nothing eager, a pool that never
fills, the same slot sizes) recovers 0 there without being played. ``screen`` is the same
arithmetic on one decode round (``Machine.tok_s`` at the slot sizes a burst is admitted to),
cheap enough to turn most unfit draws away before anything is played.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from helpers.scenarios import derive
from helpers.scenarios.hardware import default_graph_max, default_running
from helpers.scenarios.machine import Layout, Machine, admit_burst
from helpers.scenarios.spec import Cause, Launch, Scenario

__all__ = [
    "REMEDIES",
    "Share",
    "best_split",
    "fix_of",
    "played",
    "prefill_free",
    "screen",
    "shares",
]

REMEDIES: tuple[str, ...] = (
    "pp-underfilled-slots",
    "pp-empty-async-slots",
    "stage-imbalance",
    "cuda-graph-miss",
    "running-cap",
    "kv-cache-pressure",
    "unexplained-slowdown",
    "prefill-interference",
)
"""The finding ids whose remedies the truth plays, in report order."""

ANY_BATCH = 1 << 12
"""A CUDA-graph max batch no phase reaches."""

Fix = tuple[tuple[str, str, Any], ...]


@dataclass(frozen=True)
class Share:
    """What one remedy recovers on a run: per phase, and where it recovers most."""

    cause: str
    remedy: str  # the change, as the flag or setting a user would apply
    by_phase: tuple[float, ...]
    derivations: tuple[str, ...]  # per phase; "" where the remedy changes nothing

    @property
    def phase(self) -> int:
        """The phase where the remedy recovers most (the first of equals)."""
        return max(range(len(self.by_phase)), key=lambda i: (self.by_phase[i], -i))

    @property
    def best(self) -> float:
        return self.by_phase[self.phase]

    def to_dict(self, sc: Scenario) -> dict[str, Any]:
        return {
            "remedy": self.remedy,
            "by_concurrency": {
                str(ph.c): s for ph, s in zip(sc.phases, self.by_phase, strict=True)
            },
            "share": self.best,
            "concurrency": sc.phases[self.phase].c,
        }


# -- the remedies, as changes of the spec ---------------------------------------------------------


def best_split(m: Machine, lay: Layout, sizes: list[int], graph_max: int) -> tuple[int, ...]:
    """The layer split whose round at these slot sizes is shortest: the last stage (which also
    runs the lm_head) gets ``n`` layers, the others share the rest evenly; every ``n`` is
    tried, and the current split wins ties."""
    best, best_ms = lay.split, m.round_ms(lay, sizes, graph_max)
    p, total = lay.pp, lay.layers
    for last in range(1, total - (p - 1) + 1):
        base, rem = divmod(total - last, p - 1)
        if base < 1:
            continue
        split = (*((base,) * (p - 1 - rem)), *((base + 1,) * rem), last)
        ms = m.round_ms(replace(lay, split=split), sizes, graph_max)
        if ms < best_ms - 1e-9:
            best, best_ms = split, ms
    return best


def _burst(sc: Scenario, launch: Launch, phase: int) -> list[int]:
    ph = sc.phases[phase]
    lay = launch.layout(sc.model, sc.version_tuple)
    sizes = admit_burst(ph.c, ph.isl, lay.slots, launch.chunk, launch.slot_cap, launch.mrr_resolved)
    return [b for b in sizes if b]


def _top(sc: Scenario) -> int:
    return max(range(len(sc.phases)), key=lambda i: (sc.phases[i].c, i))


def _remedies(sc: Scenario) -> Iterator[tuple[str, str, list[Fix | None]]]:
    """(finding id, remedy, per phase the spec changes that apply it or None where it changes
    nothing); prefill, which has no remedy to play, is not among them."""
    la, lay, n = sc.launch, sc.layout, len(sc.phases)
    if lay.pp > 1:
        caps: list[Fix | None] = []
        for i, ph in enumerate(sc.phases):
            cap = max(math.ceil(ph.c / lay.pp), 1)
            same = sorted(_burst(sc, replace(la, cap=cap), i)) == sorted(_burst(sc, la, i))
            caps.append(None if ph.c < 2 or same else (("launch", "cap", cap),))
        yield "pp-underfilled-slots", "--pp-max-micro-batch-size ⌈c/pp⌉", caps
        if lay.depth > 0:
            yield (
                "pp-empty-async-slots",
                "--pp-async-batch-depth 0",
                [(("launch", "depth", 0),)] * n,
            )
        top = _top(sc)
        split = best_split(sc.machine, lay, _burst(sc, la, top), la.graph_max)
        fix: Fix | None = None if split == lay.split else (("launch", "partition", split),)
        text = "SGLANG_PP_LAYER_PARTITION=" + ",".join(map(str, split))
        yield "stage-imbalance", text, [fix] * n
    top_c = max(ph.c for ph in sc.phases)
    eager = la.graph_max < top_c
    yield (
        "cuda-graph-miss",
        "--cuda-graph-max-bs covering every batch",
        [(("launch", "graph_max", ANY_BATCH),) if eager else None] * n,
    )
    free = default_running(la.pool, sc.model.context_len)
    unset: Fix = (("launch", "mrr", None), ("launch", "mrr_resolved", free))
    if not la.graph_max_given:  # SGLang sizes its graphs from the running limit too
        unset += (("launch", "graph_max", min(default_graph_max(sc.hardware, la.tp), free)),)
    capped = la.mrr is not None and la.mrr < free
    yield "running-cap", "no --max-running-requests", [unset if capped else None] * n
    ample = max(ph.c * (ph.isl + ph.osl) for ph in sc.phases)
    yield (
        "kv-cache-pressure",
        f"a KV pool of {ample} tokens",
        [(("launch", "pool", ample),) if la.pool < ample else None] * n,
    )
    yield (
        "unexplained-slowdown",
        "the per-round overhead removed",
        [(("machine", "o", 0.0),) if sc.machine.o else None] * n,
    )


def _apply(sc: Scenario, fix: Fix) -> Scenario:
    launch = {k: v for part, k, v in fix if part == "launch"}
    machine = {k: v for part, k, v in fix if part == "machine"}
    return replace(sc, launch=replace(sc.launch, **launch), machine=replace(sc.machine, **machine))


# -- the cheap screen and the played truth --------------------------------------------------------


def _prefill_estimate(sc: Scenario, phase: int) -> float:
    """The share of a phase in prefill passes, from one burst: its prompts in passes of the
    chunk (under PP the passes of a round overlap but for the slowest stage's share of each),
    then ``OSL − 1`` rounds of decode at the burst's slot sizes."""
    m, la, lay, ph = sc.machine, sc.launch, sc.layout, sc.phases[phase]
    tokens = ph.c * ph.isl
    passes = -(-tokens // la.chunk)
    trip = m.prefill_ms(lay, min(tokens, la.chunk))
    if lay.pp > 1:
        rounds = -(-passes // lay.slots)
        share = max(lay.split) / lay.layers
        prefill = passes * trip * share + rounds * trip * (1 - share)
    else:
        prefill = passes * trip
    decode = (ph.osl - 1) * m.round_ms(lay, _burst(sc, la, phase), la.graph_max)
    return prefill / (prefill + decode)


def screen(sc: Scenario) -> dict[str, float]:
    """Per finding id, the most one decode round's arithmetic says its remedy recovers at any
    phase, and the estimated prefill share (KV pressure needs the played session and is not
    screened)."""
    out: dict[str, float] = {}
    for cause, _, fixes in _remedies(sc):
        if cause == "kv-cache-pressure":
            continue
        best = 0.0
        for i, fix in enumerate(fixes):
            if fix is None:
                continue
            fixed = _apply(sc, fix)
            now = sc.machine.tok_s(sc.layout, _burst(sc, sc.launch, i), sc.launch.graph_max)
            after = fixed.machine.tok_s(
                fixed.layout, _burst(fixed, fixed.launch, i), fixed.launch.graph_max
            )
            best = max(best, 1 - now / after)
        out[cause] = best
    out["prefill-interference"] = max(_prefill_estimate(sc, i) for i in range(len(sc.phases)))
    return out


def prefill_free(sc: Scenario) -> Share:
    """The share of each phase spent in prefill passes, with no decode step running."""
    shares, texts = [], []
    for i in range(len(sc.phases)):
        cause = derive.played(sc, "prefill-interference", Cause(0.0, "", i))
        shares.append(cause.impact)
        texts.append(cause.derivation)
    return Share(
        "prefill-interference", "no prefill pass in the decode loop", (*shares,), (*texts,)
    )


def shares(sc: Scenario) -> Iterator[Share]:
    """What each remedy recovers per phase, one finding id at a time (prefill first: it is
    read off the session as played, which every other share needs too)."""
    yield prefill_free(sc)
    for cause, remedy, fixes in _remedies(sc):
        got, texts = [], []
        for i, fix in enumerate(fixes):
            if fix is None:
                got.append(0.0)
                texts.append("")
                continue
            played = derive.played(sc, cause, Cause(0.0, "", i, fix))
            got.append(played.impact)
            texts.append(played.derivation)
        yield Share(cause, remedy, (*got,), (*texts,))


def played(sc: Scenario) -> dict[str, Share]:
    """Per finding id, what its remedy recovers per phase."""
    return {s.cause: s for s in shares(sc)}


def fix_of(sc: Scenario, cause: str, phase: int) -> Fix:
    """The spec changes of ``cause``'s remedy at ``phase`` (empty for prefill)."""
    for name, _, fixes in _remedies(sc):
        if name == cause:
            return fixes[phase] or ()
    return ()
