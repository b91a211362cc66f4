"""The hand derivations behind each injected cause, as the strings ``expected.json`` carries.

Each helper computes a cause's cost from ``Machine`` and returns it with the text a reader can
check with a pocket calculator; the scenario docstrings repeat the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from helpers.scenarios.machine import Layout, Machine, admit_burst
from helpers.scenarios.spec import Cause, Scenario
from helpers.scenarios.timeline import play

__all__ = [
    "graph_miss",
    "imbalance",
    "kv_pressure",
    "overhead",
    "played",
    "prefill_share",
    "running_cap",
    "shape",
    "underfilled",
]


def _f(x: float) -> str:
    return f"{x:.1f}"


def shape(sizes: Sequence[int]) -> str:
    """``4×8`` for four slots of 8; ``8,8,7`` when they differ."""
    sizes = [b for b in sizes if b]
    if len(set(sizes)) == 1:
        return f"{len(sizes)}×{sizes[0]}"
    return ",".join(map(str, sizes))


def round_text(m: Machine, lay: Layout, sizes: Sequence[int], gmax: int) -> str:
    """``T = max(4·t_max(8)=29.8, P(8)=57.4) = 57.4 ms``, or the TP step ``t(64) = 13.2 ms``."""
    sizes = [b for b in sizes if b]
    t = m.round_ms(lay, sizes, gmax)
    if lay.pp == 1:
        return f"t({sizes[0]}) = {_f(t)} ms"
    slow = sum(max(m.stage_ms(lay, s, b, b <= gmax) for s in range(lay.pp)) for b in sizes)
    b_max = max(sizes)
    trip = m.trip_ms(lay, b_max, b_max <= gmax)
    if len(set(sizes)) == 1:
        first = f"{len(sizes)}·t_max({sizes[0]})={_f(slow)}"
    else:
        first = f"Σ t_max={_f(slow)}"
    extra = f" + {_f(m.o)}" if m.o else ""
    return f"T = max({first}, P({b_max})={_f(trip)}){extra} = {_f(t)} ms"


def _burst(sc: Scenario, phase: int, **launch: object) -> tuple[Layout, list[int]]:
    la = replace(sc.launch, **launch)
    lay = la.layout(sc.model, sc.version_tuple)
    ph = sc.phases[phase]
    sizes = admit_burst(ph.c, ph.isl, lay.slots, la.chunk, la.slot_cap, la.mrr_resolved)
    return lay, [b for b in sizes if b]


def underfilled(sc: Scenario, phase: int, cap: int) -> Cause:
    """Front-packed slots against ``--pp-max-micro-batch-size cap``."""
    m, la, ph = sc.machine, sc.launch, sc.phases[phase]
    lay, now = _burst(sc, phase)
    _, fixed = _burst(sc, phase, cap=cap)
    a, b = m.tok_s(lay, now, la.graph_max), m.tok_s(lay, fixed, la.graph_max)
    impact = round(1 - a / b, 3)
    flag = (
        "--pp-max-micro-batch-size" if sc.version_tuple >= (0, 5, 5) else "--max-micro-batch-size"
    )
    text = (
        f"c={ph.c}, ISL {ph.isl}, chunk {la.chunk}: slots {shape(now)} of {lay.slots}: "
        f"{round_text(m, lay, now, la.graph_max)} → {_f(a)} tok/s; {flag} {cap}: "
        f"{shape(fixed)}: {round_text(m, lay, fixed, la.graph_max)} → {_f(b)} tok/s; "
        f"1 − {_f(a)}/{_f(b)} = {impact:.3f}"
    )
    return Cause(impact, text, phase, (("launch", "cap", cap),))


def running_cap(sc: Scenario, phase: int) -> Cause:
    """``--max-running-requests`` holding requests in the queue, against no flag."""
    m, la, ph = sc.machine, sc.launch, sc.phases[phase]
    lay, now = _burst(sc, phase)
    free = replace(la, mrr=None, mrr_resolved=2048)
    _, fixed = _burst(sc, phase, mrr=None, mrr_resolved=2048)
    a, b = m.tok_s(lay, now, la.graph_max), m.tok_s(lay, fixed, la.graph_max)
    impact = round(1 - a / b, 3)
    text = (
        f"c={ph.c}, --max-running-requests {la.mrr} → {la.slot_cap} a slot: {shape(now)} run, "
        f"{ph.c - sum(now)} wait: {round_text(m, lay, now, la.graph_max)} → {_f(a)} tok/s; "
        f"without it ({free.mrr_resolved}//{lay.pp} = {free.slot_cap} a slot): {shape(fixed)}: "
        f"{round_text(m, lay, fixed, la.graph_max)} → {_f(b)} tok/s; "
        f"1 − {_f(a)}/{_f(b)} = {impact:.3f}"
    )
    return Cause(impact, text, phase, (("launch", "mrr", None), ("launch", "mrr_resolved", 2048)))


def graph_miss(sc: Scenario, phase: int) -> Cause:
    """Eager decode steps against the same step with a captured graph."""
    m, la, ph = sc.machine, sc.launch, sc.phases[phase]
    lay, sizes = _burst(sc, phase)
    eager = m.round_ms(lay, sizes, la.graph_max)
    graph = m.round_ms(lay, sizes)
    impact = round(1 - graph / eager, 3)
    b = max(sizes)
    text = (
        f"c={ph.c}: {shape(sizes)} > captured {la.graph_max}, eager "
        f"(+{m.e} ms launch per layer): {round_text(m, lay, sizes, la.graph_max)}; "
        f"with a graph for bs {b}: {round_text(m, lay, sizes, 1 << 30)}; "
        f"1 − {_f(graph)}/{_f(eager)} = {impact:.3f}"
    )
    return Cause(impact, text, phase, (("launch", "graph_max", 1 << 12),))


def imbalance(sc: Scenario, phase: int) -> Cause:
    """One stage slower than the rest: ``1 − mean/max`` stage time."""
    m, la = sc.machine, sc.launch
    lay, sizes = _burst(sc, phase)
    b = max(sizes)
    times = [m.stage_ms(lay, s, b) for s in range(lay.pp)]
    mean, top = sum(times) / len(times), max(times)
    impact = round(1 - mean / top, 3)
    layers = ",".join(map(str, lay.split))
    tok_s = m.tok_s(lay, sizes, la.graph_max)
    text = (
        f"layers {layers}, stage times at b={b}: {', '.join(_f(t) for t in times)} ms "
        f"(lm_head {m.m} on the last); mean {_f(mean)}, max {_f(top)}; "
        f"1 − mean/max = {impact:.3f} ({shape(sizes)}: "
        f"{round_text(m, lay, sizes, la.graph_max)} → {_f(tok_s)} tok/s)"
    )
    return Cause(impact, text, phase, (("launch", "partition", None),))


def prefill_share(sc: Scenario, phase: int) -> Cause:
    """Decode time lost to prefill passes: one wave prefills all, then decodes."""
    m, la, ph = sc.machine, sc.launch, sc.phases[phase]
    lay, sizes = _burst(sc, phase)
    b = sum(sizes)
    tokens = b * ph.isl
    passes = -(-tokens // la.chunk)
    pf = m.prefill_ms(lay, tokens) if lay.pp == 1 else None
    if pf is None:
        raise ValueError("prefill_share is derived for TP layouts")
    step = m.round_ms(lay, sizes, la.graph_max)
    decode = (ph.osl - 1) * step
    impact = round(pf / (pf + decode), 3)
    text = (
        f"c={ph.c}, ISL {ph.isl}, chunk {la.chunk}: a wave prefills {b}×{ph.isl} = {tokens} "
        f"tokens in {passes} passes = {tokens / 1000:g}k × {m.f} ms × {lay.layers} layers / "
        f"{lay.tp} = {pf / 1000:.2f} s while no decode runs; then {ph.osl - 1} steps × "
        f"{round_text(m, lay, sizes, la.graph_max)} = {decode / 1000:.2f} s; "
        f"lost = {pf / 1000:.2f}/({pf / 1000:.2f} + {decode / 1000:.2f}) = {impact:.3f}"
    )
    return Cause(impact, text, phase)


def overhead(sc: Scenario, phase: int) -> Cause:
    """An injected per-round overhead the layout does not explain."""
    m, la = sc.machine, sc.launch
    lay, sizes = _burst(sc, phase)
    clean = replace(m, o=0.0)
    a = m.tok_s(lay, sizes, la.graph_max)
    b = clean.tok_s(lay, sizes, la.graph_max)
    impact = round(1 - a / b, 3)
    text = (
        f"{shape(sizes)} of {lay.slots}, layers {','.join(map(str, lay.split))}: arithmetic "
        f"{round_text(clean, lay, sizes, la.graph_max)} → {_f(b)} tok/s; measured round "
        f"{round_text(m, lay, sizes, la.graph_max)} → {_f(a)} tok/s; "
        f"1 − {_f(a)}/{_f(b)} = {impact:.3f}"
    )
    return Cause(impact, text, phase, (("machine", "o", 0.0),))


def kv_pressure(
    sc: Scenario, phase: int, tok_s: float, ample_tok_s: float, pool: int, retractions: int
) -> Cause:
    """A KV pool too small: the phase played with this pool and with one that fits all."""
    la, ph = sc.launch, sc.phases[phase]
    full = ph.isl + ph.osl
    impact = round(1 - tok_s / ample_tok_s, 3)
    retracted = f" and are retracted ({retractions} times)" if retractions else ""
    text = (
        f"c={ph.c}, ISL {ph.isl} + OSL {ph.osl} = {full} tokens a request at the end; "
        f"pool {la.pool} holds {la.pool // full} of them, so requests queue{retracted}: "
        f"phase {_f(tok_s)} tok/s; with a pool of {pool} ({ph.c} × {full}): "
        f"{_f(ample_tok_s)} tok/s; 1 − {_f(tok_s)}/{_f(ample_tok_s)} = {impact:.3f}"
    )
    return Cause(impact, text, phase, (("launch", "pool", max(pool, la.pool)),))


def played(sc: Scenario, name: str, cause: Cause) -> Cause:
    """``cause`` sized by playing its phase round by round: the benchmark's output throughput
    as the run was, against the same run with the cause's ``fix`` (a prefill stall, which has
    no flag, is the share of the phase spent in prefill passes). For runs the hand
    derivation does not describe exactly (lengths drawn at random)."""
    run = play(sc).phases[cause.phase]
    ph = run.phase
    if not cause.fix:
        impact = round(run.prefill_ms / run.duration_ms, 3)
        text = (
            f"played, c={ph.c}: prefill passes take {run.prefill_ms / 1000:.2f} s of the "
            f"phase's {run.duration_ms / 1000:.2f} s with no decode step running: {impact:.3f}"
        )
        return replace(cause, impact=impact, derivation=text)
    launch = {k: v for part, k, v in cause.fix if part == "launch"}
    machine = {k: v for part, k, v in cause.fix if part == "machine"}
    fixed = replace(sc, launch=replace(sc.launch, **launch), machine=replace(sc.machine, **machine))
    a, b = run.tok_s, play(fixed).phases[cause.phase].tok_s
    impact = round(1 - a / b, 3)
    change = ", ".join(f"{k}={v}" for _, k, v in cause.fix)
    text = (
        f"played, c={ph.c} ({name}): phase {_f(a)} tok/s; with {change}: {_f(b)} tok/s; "
        f"1 − {_f(a)}/{_f(b)} = {impact:.3f}"
    )
    return replace(cause, impact=impact, derivation=text)
