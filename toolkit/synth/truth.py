"""The synthetic machine: named layouts and the "hardware truth" the simulation runs on.

The truth is the closed-form model's machine (``toolkit.analyze.model``: Kimi-K2-class MoE on
8x RTX PRO 6000 Blackwell over PCIe) with four numbers calibrated so that the benchmark results
written by ``toolkit.synth`` reproduce the incident's four measured numbers:

==========  =====  ============  ===========================================
layout      c      seed tok/s    set mainly by
==========  =====  ============  ===========================================
TP8         1      26.3          ``allreduce_s`` (122 all-reduces per step)
TP8         32     577.8         ``e_eff`` (distinct experts a batch reads)
PP8 d=8     1      34.3          ``hop_s`` (per-stage p2p + gloo + CPU)
PP8 d=8     32     248.1         ``expert_penalty`` (the injected overhead)
==========  =====  ============  ===========================================

β stays at the incident's TP8 fit (1.504 TB/s, 84 % of the 1.79 TB/s spec). The simulation alone
predicts ≈ 400 tok/s for PP8 at c=32; the incident saw 248.1, ≈ 52 ms per round that no modelled
cost explains. The truth of the PP runs therefore carries an injected per-micro-batch stage
overhead: every decode forward of a stage pays again, ``expert_penalty`` times over, for the reads
of the experts its micro-batch touches beyond one request's top-k. It is zero at b = 1, so PP's
single-stream advantage stays; at b = 8 it is ≈ 5.1 ms per 8-layer stage, ≈ 38 ms per trip of the
eight stages (last-stage forward ≈ 15 ms instead of ≈ 10 ms). Steady decode then runs at ≈ 278
tok/s; the benchmark, which also pays the prefill of each burst, reports 248. It stands in for the
usual candidates (stream-fence bubbles, a slow W4A16 MoE kernel at M ≈ 1 token per expert, CPU per
iteration) without claiming which one it is. The TP runs do not carry it: the incident's TP8
numbers leave no such residual. ``e_eff`` comes out at ≈ 119 rather than the 207 a fit of the seed
numbers alone gives, for the same reason the PP steady rate sits above 248: the benchmark numbers
include the prefill of every burst, so the decode steps themselves must be faster than the seed
numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from toolkit.analyze.model import INCIDENT_HARDWARE, KIMI_K2, Hardware, Layout, ModelSpec, Params
from toolkit.errors import ToolkitError

__all__ = [
    "LAYOUTS",
    "MAX_TOTAL_NUM_TOKENS",
    "TRUTH",
    "PenalizedModel",
    "Truth",
    "layout_named",
    "truth_params",
]

# KV pool sizes the startup block prints: PP8 is bounded by the heaviest stage, TP8
# holds the MLA latent of all 61 layers on every GPU.
MAX_TOTAL_NUM_TOKENS = {"pp": 327680, "tp": 139827}

LAYOUTS: dict[str, Layout] = {
    "tp8": Layout(tp=8, max_total_num_tokens=MAX_TOTAL_NUM_TOKENS["tp"]),
    "pp8": Layout(pp=8, pp_async_batch_depth=8, max_total_num_tokens=MAX_TOTAL_NUM_TOKENS["pp"]),
    "pp8-fixed": Layout(
        pp=8,
        pp_async_batch_depth=8,
        pp_max_micro_batch_size=4,
        max_total_num_tokens=MAX_TOTAL_NUM_TOKENS["pp"],
    ),
}
"""The incident's layouts: ``tp8``, ``pp8`` (the seed's ``--pp-size 8 --pp-async-batch-depth
8``) and ``pp8-fixed`` (the remedy, ``--pp-max-micro-batch-size 4``)."""


def layout_named(name: str | Layout) -> Layout:
    """A ``Layout`` by its name in ``LAYOUTS``, or the layout itself."""
    if isinstance(name, Layout):
        return name
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ToolkitError(f"unknown layout {name!r} (known: {', '.join(LAYOUTS)})") from None


@dataclass(frozen=True)
class PenalizedModel(ModelSpec):
    """The model as the synthetic PP machine runs it: the injected per-micro-batch overhead.

    ``distinct_experts`` is what the stage clock charges reads for; here the experts beyond a
    single request's top-k cost ``1 + expert_penalty`` times their bytes.
    """

    expert_penalty: float = 0.0

    def distinct_experts(self, b: float) -> float:
        d = super().distinct_experts(b)
        return d + self.expert_penalty * max(0.0, d - self.top_k)


@dataclass(frozen=True)
class Truth:
    """The calibrated numbers of the synthetic machine (see the module docstring)."""

    e_eff: float  # routing skew: effective expert count
    allreduce_s: float  # α_AR of one TP all-reduce
    hop_s: float  # one PP hop: p2p latency + gloo + per-stage CPU
    expert_penalty: float  # the injected PP overhead, extra cost per expert beyond top-k
    hbm_bytes_s: float = INCIDENT_HARDWARE.hbm_bytes_s
    jitter: float = 0.02  # forward times vary ±2 %, so the logged rates wobble like real ones
    iteration_s: float = 0.2e-3  # CPU time of one scheduler loop iteration (Python, per rank)


# Solved with ``toolkit.synth.calibrate.solve`` for the default sweep (ISL 1000, OSL 256).
TRUTH = Truth(e_eff=119.0, allreduce_s=270.0e-6, hop_s=0.4996e-3, expert_penalty=0.908)


def truth_params(layout: Layout, truth: Truth = TRUTH) -> Params:
    """The simulation parameters of ``layout`` on the synthetic machine.

    PP layouts get the injected overhead; TP-only layouts do not (module docstring).
    """
    base = {f.name: getattr(KIMI_K2, f.name) for f in fields(ModelSpec)}
    base["e_eff"] = truth.e_eff
    penalty = truth.expert_penalty if layout.pp > 1 else 0.0
    model = PenalizedModel(**base, expert_penalty=penalty)
    hardware: Hardware = replace(
        INCIDENT_HARDWARE,
        hbm_bytes_s=truth.hbm_bytes_s,
        allreduce_s=truth.allreduce_s,
        hop_s=truth.hop_s,
    )
    return Params(model, hardware)
