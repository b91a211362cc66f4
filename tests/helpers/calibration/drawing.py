"""One draw: a model, a GPU, a layout, the machine's costs, a load, and what is injected.

A seed first fixes the draw's promise (``_Plan``): healthy or the causes to inject, the
layout's shape (TP, PP, TP×PP) and the load (low or high). Attempts then draw the rest afresh,
each from its own stream: model, GPU, layout, SGLang version, costs, lengths and the flags that
inject the causes; the spec takes SGLang's defaults for what the launch does not set
(``family._scenario``). ``truth`` then says whether the attempt keeps the promise: a healthy
run whose remedies all recover under ``HEALTHY_BELOW`` at every phase, or a faulty run whose
injected causes each recover at least ``INJECTED_AT_LEAST`` while no other remedy recovers
``HEALTHY_BELOW``. The first attempt that keeps it is the draw; after ``ATTEMPTS`` the draw
falls back to another shape, then to its first cause alone.

Costs (ms, ``Machine``): weights per layer over an HBM bandwidth drawn ±40 % around 80 % of the
datasheet's (``a``), KV and compute per request (``k``; MoE adds the experts a further request
pulls in), the lm_head over the same bandwidth plus sampling (``m``), a PP hop (``h``: 0.05–1
ms on NVLink, 0.15–3 ms on PCIe), an all-reduce per layer (``r``: 5–80 µs on NVLink, 40–400 µs
on PCIe), an eager step's launch time per layer (``e``) and prefill FLOPs over 30–70 % of the
datasheet's compute (``f``), each drawn log-uniformly.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

from helpers.calibration import truth
from helpers.calibration.tables import GPU_FIGURES, MODEL_FIGURES
from helpers.scenarios.family import _scenario
from helpers.scenarios.hardware import GPUS, MODELS, default_chunk, pool_tokens
from helpers.scenarios.machine import Machine, admit_burst, layer_split
from helpers.scenarios.spec import Cause, Launch, Scenario
from helpers.scenarios.timeline import forget

__all__ = [
    "CAUSES",
    "HEALTHY_BELOW",
    "INJECTED_AT_LEAST",
    "Calibrated",
    "draw",
]

CAUSES: tuple[str, ...] = (
    "pp-underfilled-slots",
    "running-cap",
    "kv-cache-pressure",
    "cuda-graph-miss",
    "stage-imbalance",
    "prefill-interference",
    "unexplained-slowdown",
)
"""The causes a faulty draw injects (ppscope's finding ids)."""

HEALTHY_BELOW = 0.05
"""A remedy recovering less than this share at every phase leaves the run healthy."""
INJECTED_AT_LEAST = 0.10
"""An injected cause's remedy recovers at least this share at its phase."""
HEALTHY_SHARE = 1 / 3
"""Share of draws that are healthy when the caller does not say."""
SECOND_CAUSE = 0.25
"""Chance that a faulty draw injects a second cause (one of ``_PAIRS``)."""
ATTEMPTS = 60
"""Attempts at one plan before the draw falls back to the next."""

_NEEDS_PP = {"pp-underfilled-slots", "stage-imbalance"}
_NEEDS_LOAD = {
    "pp-underfilled-slots",
    "running-cap",
    "kv-cache-pressure",
    "cuda-graph-miss",
    "stage-imbalance",
}
_PAIRS = {
    frozenset(p)
    for p in (
        ("pp-underfilled-slots", "cuda-graph-miss"),
        ("pp-underfilled-slots", "unexplained-slowdown"),
        ("running-cap", "unexplained-slowdown"),
        ("running-cap", "cuda-graph-miss"),
        ("kv-cache-pressure", "cuda-graph-miss"),
        ("kv-cache-pressure", "unexplained-slowdown"),
        ("stage-imbalance", "unexplained-slowdown"),
        ("cuda-graph-miss", "unexplained-slowdown"),
        ("prefill-interference", "unexplained-slowdown"),
    )
}
_VERSIONS = (("0.5.23", 0.5), ("0.5.10", 0.35), ("0.5.5", 0.15))


@dataclass(frozen=True)
class Calibrated(Scenario):
    """A drawn scenario and its truth (``expected.json``'s ``calibration`` record)."""

    truth: dict[str, Any] = field(default_factory=dict, compare=False)


def _log(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _layouts(model: str, gpu: str, shape: str) -> list[tuple[int, int]]:
    """(tp, pp) of ``shape`` ("tp", "pp", "tpxpp") on one node whose fullest stage leaves room
    for a KV pool of 64k tokens at a memory fraction of 0.85."""
    mo, hw = MODELS[model], GPUS[gpu]
    out = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if not 2 <= tp * pp <= hw.gpus or pp > mo.layers // 4:
                continue
            if (shape == "tp") != (pp == 1) or (shape == "pp") != (tp == 1):
                continue
            lay = Launch(tp=tp, pp=pp).layout(mo, (0, 5, 23))
            if pool_tokens(mo, hw, lay, 0.85) >= 65536:
                out.append((tp, pp))
    return out


def _machine(
    rng: random.Random, model: str, gpu: str, context: int, moe_weight: tuple[float, float]
) -> tuple[Machine, dict[str, float]]:
    """The machine's costs for ``model`` on ``gpu`` (module docstring)."""
    mo, fig, g = MODELS[model], MODEL_FIGURES[model], GPU_FIGURES[gpu]
    nvlink = GPUS[gpu].interconnect == "nvlink"
    bw = g.hbm_tb_s * 0.8 * _log(rng, 0.6, 1.4)  # TB/s: GB per ms
    eff = rng.uniform(0.3, 0.7)
    layer_gb = (fig.step_gb - fig.lm_head_gb) / mo.layers
    a = layer_gb / bw
    per_layer_params = fig.active_params_b * 1e9 / mo.layers
    k = context * mo.kv_bytes / 1e9 / bw + 2 * per_layer_params / (g.tflops * eff * 1e9)
    moe = rng.uniform(*moe_weight) if fig.moe else 0.0
    k += moe * a
    costs = {
        "hbm_tb_s": round(bw, 4),
        "compute_share": round(eff, 3),
        "moe_per_request": round(moe, 3),
    }
    m = Machine(
        a=round(a, 5),
        k=round(k, 6),
        m=round(fig.lm_head_gb / bw + _log(rng, 0.05, 0.5), 4),
        h=round(_log(rng, 0.05, 1.0) if nvlink else _log(rng, 0.15, 3.0), 4),
        r=round(_log(rng, 0.005, 0.08) if nvlink else _log(rng, 0.04, 0.4), 5),
        e=round(_log(rng, 0.03, 0.3), 4),
        f=round(2 * per_layer_params * 1e3 / (g.tflops * 1e12 * eff) * 1e3, 4),
    )
    return m, costs


def _ladder(rng: random.Random, high: bool, pp: int) -> list[int]:
    """Concurrencies of one sweep: low ends at most at the stage count (2 without PP); high
    climbs by 4 from 1 to 16–128."""
    if not high:
        return [1, rng.choice([c for c in (2, 4, 8) if c <= max(pp, 2)])]
    top = rng.choice([c for c in (16, 32, 64, 128) if c >= 4 * pp])
    return sorted({1, *(top // 4**i for i in (2, 1, 0) if top // 4**i > 1)})


def _filled(rng: random.Random, pp: int) -> tuple[int, int, list[int]]:
    """(chunk, ISL, concurrencies) of a high-load PP sweep in which every burst gives every
    stage a slot: a prefill pass takes ``n`` whole prompts (``ISL = chunk / n``) and each load
    is ``pp · n`` times a power of 4, so the passes go round the slots evenly."""
    isl = rng.choice([256, 512, 1024, 2048])
    n = rng.choice([k for k in (1, 2, 4) if 1024 <= isl * k <= 8192])
    base = pp * n
    return isl * n, isl, [1, *(base * 4**i for i in range(3) if base * 4**i <= 128)]


def _version(rng: random.Random) -> str:
    return rng.choices([v for v, _ in _VERSIONS], [w for _, w in _VERSIONS])[0]


def _partition(rng: random.Random, split: tuple[int, ...]) -> tuple[int, ...]:
    """A bad ``SGLANG_PP_LAYER_PARTITION``: one stage takes 30–100 % of a stage's layers more,
    one from each other stage in turn."""
    pp, parts = len(split), list(split)
    heavy = rng.randrange(pp)
    donors = [s for s in range(pp) if s != heavy]
    for i in range(max(1, round(min(split) * rng.uniform(0.3, 1.0)))):
        s = donors[i % len(donors)]
        if parts[s] > 1:
            parts[s] -= 1
            parts[heavy] += 1
    return tuple(parts)


@dataclass(frozen=True)
class _Plan:
    """What a draw promises: the injected causes, the layout's shape and the load."""

    causes: frozenset[str]
    shape: str  # "tp", "pp" or "tpxpp"
    high: bool


def _attempt(name: str, rng: random.Random, plan: _Plan) -> Calibrated | None:
    """One try at ``plan``; None when the axes drawn cannot hold it."""
    causes, high = plan.causes, plan.high
    moe_only = "pp-underfilled-slots" in causes
    model = rng.choice([m for m, fig in MODEL_FIGURES.items() if fig.moe or not moe_only])
    gpus = [g for g in GPU_FIGURES if _layouts(model, g, plan.shape)]
    if not gpus:
        return None
    gpu = rng.choice(gpus)
    tp, pp = rng.choice(_layouts(model, gpu, plan.shape))
    mo, hw = MODELS[model], GPUS[gpu]
    version = _version(rng)
    natural = layer_split(mo.layers, pp, (0, 5, 5))
    if "stage-imbalance" in causes and natural[-1] - min(natural) >= 2 and rng.random() < 0.5:
        version = "0.5.5"  # the whole remainder on the last stage is the imbalance
    v = tuple(int(x) for x in version.split("."))
    depth = None
    if pp > 1 and v >= (0, 5, 7):
        # Extra slots that fill cost a weight read each in this machine: a healthy loaded PP
        # run does without them.
        depth = rng.choice([None, 0] if high and not causes else [None, None, 0, pp])
    chunk = default_chunk(hw)
    if rng.random() < 0.25:
        chunk = rng.choice([2048, 4096, 8192])
    cs = _ladder(rng, high, pp)
    osl = rng.choice([256, 384, 512, 768, 1024])
    isl = rng.choice([128, 256, 512, 1024])
    if pp > 1 and high:
        chunk, isl, cs = _filled(rng, pp)
    kw: dict[str, Any] = {}
    env: list[tuple[str, str]] = []
    moe_weight = (0.05, 0.5)
    if "pp-underfilled-slots" in causes:
        chunk = default_chunk(hw)
        top = max(16, pp * rng.choice([4, 8]))
        cs = [1, top // 2, top]
        isl = max(chunk // math.ceil(2 * top / pp), 64)  # a pass packs ≥ 2·top/pp prompts
        moe_weight = (0.3, 0.8)
    if "prefill-interference" in causes:
        isl = rng.choice([4096, 8192, 16384, 32768])
        osl = rng.choice([128, 192, 256])
        cs = _ladder(rng, False, pp) if not high else [1, 4, 16]
    if isl + osl > mo.context_len:
        return None
    machine, costs = _machine(rng, model, gpu, isl + osl // 2, moe_weight)
    if "cuda-graph-miss" in causes:
        machine = replace(machine, e=round(_log(rng, 0.1, 0.5), 4))
    if "stage-imbalance" in causes and v > (0, 5, 5):
        kw["partition"] = _partition(rng, layer_split(mo.layers, pp, v))
        env.append(("SGLANG_PP_LAYER_PARTITION", ",".join(map(str, kw["partition"]))))
    if rng.random() < 0.2:
        kw["mem_fraction"] = round(rng.uniform(0.78, 0.9), 2)
    # One wave a phase; long prompts come in three, so later prefills land among decode steps.
    waves = 3 if "prefill-interference" in causes else 1
    phases = [(c, max(c * waves, 2), isl, osl) for c in cs]
    journald = rng.random() < 0.3
    log_ms = v >= (0, 5, 9) and rng.random() < 0.3
    if log_ms:
        env.append(("SGLANG_LOG_MS", "1"))

    def build() -> Scenario:
        return _scenario(
            name,
            label=f"{name} {_label(tp, pp)}",
            version=version,
            model=model,
            gpu=gpu,
            machine=machine,
            phases=phases,
            tp=tp,
            pp=pp,
            depth=depth,
            chunk=None if chunk == default_chunk(hw) else chunk,
            env=tuple(env),
            journald=journald,
            log_ms=log_ms,
            **kw,
        )

    sc = build()
    la, top = sc.launch, max(cs)
    if la.pool < top * (isl + osl) * (1.0 if "kv-cache-pressure" in causes else 1.2):
        return None  # the weights leave too little room (a heavy stage), or KV would bind
    if "running-cap" in causes:
        per_slot = max(1, round(top / pp * rng.uniform(0.2, 0.6)))
        kw["mrr"] = max(2, per_slot * pp)
    if "kv-cache-pressure" in causes:
        want = int(top * (isl + osl) * rng.uniform(0.3, 0.6)) // 64 * 64
        if want < 2 * (isl + osl) or want >= la.pool:
            return None
        kw["max_total_tokens"] = want
    if "cuda-graph-miss" in causes:
        b = max(_burst(sc, top))
        options = [g for g in (2, 4, 8, 16, 32, 64) if b // 8 <= g < b]
        if not options:
            return None
        kw["graph_max"] = rng.choice(options)
    sc = build()
    if "unexplained-slowdown" in causes:
        share = rng.uniform(0.2, 0.55)
        rnd = sc.machine.round_ms(sc.layout, _burst(sc, top), sc.launch.graph_max)
        machine = replace(machine, o=round(rnd * share / (1 - share), 3))
        sc = build()
    # nvidia-smi every 100 ms as `ppscope capture` records it, or coarser by hand.
    sc = replace(sc, gpu_interval_ms=rng.choice([100, 250, 1000]))
    drawn = {
        "shape": plan.shape,
        "load": "high" if high else "low",
        "gpu": gpu,
        "interconnect": hw.interconnect,
        "moe": MODEL_FIGURES[model].moe,
        "params_b": MODEL_FIGURES[model].params_b,
        "costs": costs,
    }
    return Calibrated(**{f: getattr(sc, f) for f in sc.__dataclass_fields__}, truth=drawn)


def _burst(sc: Scenario, c: int) -> list[int]:
    """Slot sizes a burst of ``c`` of the sweep's prompts is admitted to."""
    la, lay, ph = sc.launch, sc.layout, next(p for p in sc.phases if p.c == c)
    return admit_burst(c, ph.isl, lay.slots, la.chunk, la.slot_cap, la.mrr_resolved)


def _label(tp: int, pp: int) -> str:
    if tp > 1 and pp > 1:
        return f"PP{pp}xTP{tp}"
    return f"PP{pp}" if pp > 1 else f"TP{tp}"


def _judge(sc: Calibrated, causes: frozenset[str]) -> Calibrated | None:
    """``sc`` with its causes and truth when it keeps the draw's promise, else None. The
    arithmetic screen turns most unfit draws away; the played shares decide, one remedy at a
    time, stopping at the first that breaks the promise."""
    for cause, share in truth.screen(sc).items():
        if cause in causes and share < INJECTED_AT_LEAST * 0.9:
            return None
        if cause not in causes and share >= HEALTHY_BELOW * 0.9:
            return None
    shares = {}
    for share in truth.shares(sc):
        if share.cause in causes and share.best < INJECTED_AT_LEAST:
            return None
        if share.cause not in causes and share.best >= HEALTHY_BELOW:
            return None
        shares[share.cause] = share
    others = {k: s.best for k, s in shares.items() if k not in causes}
    headroom = max(others.values(), default=0.0)
    found = {}
    for cause in sorted(causes):
        share = shares[cause]
        fix = truth.fix_of(sc, cause, share.phase)
        found[cause] = Cause(share.best, share.derivations[share.phase], share.phase, fix)
    record = dict(sc.truth) | {
        "healthy": not causes,
        "headroom": headroom,
        "headroom_from": max(others, key=others.get) if others else None,
        "shares": {k: s.to_dict(sc) for k, s in shares.items()},
        "healthy_below": HEALTHY_BELOW,
        "injected_at_least": INJECTED_AT_LEAST,
    }
    return replace(sc, causes=found, truth=record)


def _plans(rng: random.Random, healthy: bool) -> list[_Plan]:
    """The plan of a draw, then the ones it falls back to (other shapes, then the first cause
    alone) should no attempt hold it."""
    first: frozenset[str] = frozenset()
    causes = first
    if not healthy:
        first = frozenset({rng.choice(CAUSES)})
        pairs = sorted((p for p in _PAIRS if first <= p), key=sorted)
        causes = rng.choice(pairs) if pairs and rng.random() < SECOND_CAUSE else first
    shapes = ["pp", "tpxpp"] if causes & _NEEDS_PP else ["tp", "pp", "tpxpp"]
    shape = rng.choice(shapes)
    high = bool(causes & _NEEDS_LOAD) or rng.random() < 0.5
    plans = [_Plan(causes, s, high) for s in [shape, *(s for s in shapes if s != shape)]]
    if causes != first:
        plans.append(_Plan(first, shape if not first & _NEEDS_PP else "pp", high))
    return plans


def draw(seed: int, *, healthy: bool | None = None) -> Calibrated:
    """The run of ``seed``: healthy (about a third, unless ``healthy`` says) or with one
    injected cause (sometimes two). The same seed gives the same run."""
    rng = random.Random(f"calibration/{seed}")
    drawn_healthy = rng.random() < HEALTHY_SHARE
    plans = _plans(rng, drawn_healthy if healthy is None else healthy)
    name = f"cal-{seed:04d}"
    for plan in plans:
        tag = "+".join(sorted(plan.causes)) or "healthy"
        for attempt in range(ATTEMPTS):
            stream = random.Random(f"calibration/{seed}/{tag}/{plan.shape}/{attempt}")
            sc = _attempt(name, stream, plan)
            judged = None if sc is None else _judge(sc, plan.causes)
            forget(name)
            if judged is not None:
                return replace(judged, truth=judged.truth | {"seed": seed, "attempt": attempt})
    raise RuntimeError(f"seed {seed}: no attempt held {plans[0]}")
