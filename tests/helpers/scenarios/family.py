"""The scenarios: one function each, whose docstring derives the injected costs by hand.

Notation (``machine``): a stage's step for ``b`` requests takes ``t_s(b) = n_s·(a + k·b)/g
+ n_s·r + [last] m/g`` ms; ``P(b) = Σ_s t_s(b) + p·h``; a round takes ``T = max(Σ_j t_max(b_j),
max_j P(b_j)) + o``; tok/s = requests / T. Each docstring ends with the derivation string that
``expected.json`` carries, word for word (a test checks that they agree).
"""

from __future__ import annotations

from dataclasses import replace

from helpers.scenarios import derive
from helpers.scenarios.hardware import (
    GPUS,
    MODELS,
    default_chunk,
    default_graph_max,
    default_running,
    pool_tokens,
)
from helpers.scenarios.machine import Machine
from helpers.scenarios.spec import Cause, Launch, Phase, Scenario
from helpers.scenarios.timeline import play

__all__ = ["SCENARIOS"]

PP_INFO = ("pp-lockstep-logging",)


def _scenario(
    name: str,
    *,
    label: str,
    version: str,
    model: str,
    gpu: str,
    machine: Machine,
    phases: list[tuple[int, int, int, int]],
    tp: int = 1,
    pp: int = 1,
    depth: int | None = None,
    cap: int | None = None,
    mrr: int | None = None,
    chunk: int | None = None,
    mem_fraction: float | None = None,
    graph_max: int | None = None,
    partition: tuple[int, ...] | None = None,
    max_total_tokens: int | None = None,
    nnodes: int = 1,
    env: tuple[tuple[str, str], ...] = (),
    **kw: object,
) -> Scenario:
    """A scenario with SGLang's defaults for whatever the launch does not set.

    ``phases`` are ``(c, num_prompts, ISL, OSL)``; a flag given here is on the command line.
    """
    mo, hw = MODELS[model], GPUS[gpu]
    v = tuple(int(p) for p in version.split("."))
    frac = mem_fraction if mem_fraction is not None else 0.85
    lay = Launch(tp=tp, pp=pp, depth=depth, partition=partition, nnodes=nnodes).layout(mo, v)
    pool = pool_tokens(mo, hw, lay, frac)
    if max_total_tokens is not None:
        pool = min(pool, max_total_tokens)
    running = mrr if mrr is not None else default_running(pool, mo.context_len)
    launch = Launch(
        tp=tp,
        pp=pp,
        depth=depth,
        chunk=chunk if chunk is not None else default_chunk(hw),
        mrr=mrr,
        mrr_resolved=running,
        cap=cap,
        pool=pool,
        max_total_tokens=max_total_tokens,
        graph_max=graph_max if graph_max is not None else min(default_graph_max(hw, tp), running),
        graph_max_given=graph_max is not None,
        mem_fraction=frac,
        mem_fraction_given=mem_fraction is not None,
        partition=partition,
        nnodes=nnodes,
        env=env,
        flags=(("--chunked-prefill-size", str(chunk)),) if chunk is not None else (),
    )
    return Scenario(
        name=name,
        label=label,
        version=version,
        model=mo,
        hardware=hw,
        launch=launch,
        machine=machine,
        phases=tuple(Phase(*p) for p in phases),
        **kw,
    )


def _kv_cause(sc: Scenario, phase: int) -> Cause:
    """KV pressure: the phase played with this pool, and with one that holds every request."""
    ph = sc.phases[phase]
    ample = ph.c * (ph.isl + ph.osl)
    run = play(sc).phases[phase]
    bigger = replace(sc, launch=replace(sc.launch, pool=max(ample, sc.launch.pool)))
    ample_tok_s = play(bigger).phases[phase].tok_s
    return derive.kv_pressure(sc, phase, run.tok_s, ample_tok_s, ample, run.retractions)


# -- injected causes ------------------------------------------------------------------------------


def pp8_packed() -> Scenario:
    """PP8 with ``--pp-async-batch-depth 8``: 32 requests pack 4 of 16 slots, 8 each.

    Qwen3-235B-A22B (94 layers: 11,11,12,12,12,12,12,12) on 8×H100; a = 0.10, k = 0.06
    (MoE: each request pulls in other experts), lm_head m = 0.5, hop h = 0.3 ms. Sweep
    c = 1, 4, 32 (ISL 1000, OSL 512). A burst of 32 with chunk 8192 admits 8 a pass on four
    consecutive slot turns, front first; 12 slots stay empty.

    By hand, b = 8: t_s = 12·(0.10 + 0.48) = 6.96 ms (6.38 on the 11-layer stages, 7.46 on
    PP7 with the lm_head); P(8) = 2·6.38 + 5·6.96 + 7.46 + 8·0.3 = 57.42 ms, more than
    4·7.46, so T = 57.4 ms. With a per-slot cap of 4: t_max(4) = 12·0.34 + 0.5 = 4.58,
    8·4.58 = 36.6 > P(4) = 34.9, so T = 36.6 ms.

    c=32, ISL 1000, chunk 8192: slots 4×8 of 16: T = max(4·t_max(8)=29.8, P(8)=57.4) = 57.4
    ms → 557.3 tok/s; --pp-max-micro-batch-size 4: 8×4: T = max(8·t_max(4)=36.6, P(4)=34.9)
    = 36.6 ms → 873.4 tok/s; 1 − 557.3/873.4 = 0.362
    """
    sc = _scenario(
        "pp8-packed",
        label="PP8 depth 8",
        version="0.5.23",
        model="Qwen/Qwen3-235B-A22B",
        gpu="h100",
        machine=Machine(a=0.10, k=0.06, m=0.5, h=0.3, f=1.0),
        phases=[(1, 2, 1000, 512), (4, 4, 1000, 512), (32, 32, 1000, 512)],
        pp=8,
        depth=8,
        journald=True,
        incidental=("pp-empty-async-slots", "pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"pp-underfilled-slots": derive.underfilled(sc, 2, cap=4)})


def pp8_running_cap() -> Scenario:
    """``--max-running-requests 64`` under PP8 at c=128: 8 slots of 8 run, 64 wait.

    Llama-4-Maverick (48 layers, 6 a stage) on 8×B200; a = 0.4, k = 0.02, m = 0.15,
    h = 0.1; chunk 16384 (the default above 160 GB). The per-slot cap is 64 // 8 = 8, so the
    8 slots hold 64 and the other 64 requests queue while the KV pool is 3 % used. Phases
    c = 64 (everything runs) and c = 128 (the first wave waits for the second).

    By hand: t_7(8) = 6·(0.4 + 0.16) + 0.15 = 3.51 ms, 8 slots → T = 28.1 ms. Without the
    flag the cap is 2048 // 8 = 256 and 128 requests land 16 or 17 a slot (16 per
    16384-token pass plus the split one): t_7(16) = 6·0.72 + 0.15 = 4.47, t_7(17) = 4.59,
    t_7(14) = 4.23; Σ over the 8 slots = 35.8 ms, below one trip of the 17-request slot,
    P(17) = 48·(0.4 + 0.34) + 0.15 + 8·0.1 = 36.5 ms, for 128 tokens.

    c=128, --max-running-requests 64 → 8 a slot: 8×8 run, 64 wait: T = max(8·t_max(8)=28.1,
    P(8)=27.8) = 28.1 ms → 2279.2 tok/s; without it (2048//8 = 256 a slot):
    16,16,17,16,16,17,16,14: T = max(Σ t_max=35.8, P(17)=36.5) = 36.5 ms → 3509.7 tok/s; 1 −
    2279.2/3509.7 = 0.351
    """
    sc = _scenario(
        "pp8-running-cap",
        label="PP8 mrr64",
        version="0.5.10",
        model="meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        gpu="b200",
        machine=Machine(a=0.4, k=0.02, m=0.15, h=0.1, f=0.3),
        phases=[(64, 64, 1000, 256), (128, 128, 1000, 256)],
        pp=8,
        depth=0,
        mrr=64,
        incidental=("queue-backlog", *PP_INFO),
    )
    return replace(sc, causes={"running-cap": derive.running_cap(sc, 1)})


def tp8_kv_pressure() -> Scenario:
    """TP8 with ``--mem-fraction-static 0.5``: the KV pool cannot hold 64 requests.

    Qwen2.5-72B-Instruct on 8×L40S (PCIe); a = 2.1, k = 0.004, all-reduce r = 0.25 ms a
    layer, m = 1.0: t(b) = 80·(2.1 + 0.004·b)/8 + 80·0.25 + 1.0/8 = 41.125 + 0.04·b ms, so
    throughput grows almost in proportion to the batch. 18 GB of weights per GPU leave
    5 GiB for KV at 0.5: 133888 tokens. Phases c = 8 (fits) and c = 64 (ISL 2000, OSL 1000).

    By hand, the bound: 133888 // 3000 = 44 requests fit at full length, t(44) = 42.9 ms →
    1026 tok/s of decode against 64/t(64) = 64/43.7 ms = 1465 tok/s. Played round by round
    the pool admits more (the new-token ratio reserves little), runs full, retracts
    requests (they re-prefill what they had generated) and the rest queue; both numbers
    below are those phases' bench output throughput (prefill included).

    c=64, ISL 2000 + OSL 1000 = 3000 tokens a request at the end; pool 133888 holds 44 of
    them, so requests queue and are retracted (19 times): phase 625.6 tok/s; with a pool of
    192000 (64 × 3000): 1134.5 tok/s; 1 − 625.6/1134.5 = 0.449
    """
    sc = _scenario(
        "tp8-kv-pressure",
        label="TP8 small pool",
        version="0.5.23",
        model="Qwen/Qwen2.5-72B-Instruct",
        gpu="l40s",
        machine=Machine(a=2.1, k=0.004, m=1.0, r=0.25, f=10.0),
        phases=[(8, 8, 2000, 1000), (64, 64, 2000, 1000)],
        tp=8,
        mem_fraction=0.5,
        incidental=("queue-backlog", "prefill-interference"),
    )
    return replace(sc, causes={"kv-cache-pressure": _kv_cause(sc, 1)})


def tp8_graph_miss() -> Scenario:
    """TP8 with ``--cuda-graph-max-bs 32``: the batch of 64 runs eagerly.

    Llama-3.1-70B-Instruct on 8×A100 SXM; a = 0.875, k = 0.003, r = 0.03, m = 1.0 and
    e = 0.25 ms of launch time per layer when no graph covers the batch. Sweep c = 1, 8, 32,
    64 (ISL 128, OSL 1024): the first three run captured graphs (``cuda graph: True``), the
    last does not, so batch sizes 32 and 64 sit side by side in the log.

    By hand: t(32) = 80·(0.875 + 0.096)/8 + 2.4 + 0.125 = 12.2 ms; t(64) = 80·(0.875 +
    0.192)/8 + 2.525 = 13.2 ms with a graph, + 80·0.25 = 20 ms eager.

    c=64: 1×64 > captured 32, eager (+0.25 ms launch per layer): t(64) = 33.2 ms; with a
    graph for bs 64: t(64) = 13.2 ms; 1 − 13.2/33.2 = 0.603
    """
    sc = _scenario(
        "tp8-graph-miss",
        label="TP8 graphs to 32",
        version="0.5.10",
        model="meta-llama/Llama-3.1-70B-Instruct",
        gpu="a100",
        machine=Machine(a=0.875, k=0.003, m=1.0, r=0.03, e=0.25, f=11.0),
        phases=[(1, 2, 128, 1024), (8, 8, 128, 1024), (32, 32, 128, 1024), (64, 64, 128, 1024)],
        tp=8,
        graph_max=32,
        incidental=("scaling-collapse",),
    )
    return replace(sc, causes={"cuda-graph-miss": derive.graph_miss(sc, 3)})


def pp4_stage_imbalance() -> Scenario:
    """PP4 with ``SGLANG_PP_LAYER_PARTITION=16,16,16,32``: every round waits for PP3.

    Llama-3.3-70B FP8 on 4×RTX 6000 Ada (PCIe); a = 0.9, k = 0.01, m = 2.0, h = 0.4;
    chunk 4096 (48 GB GPUs). 32 requests of ISL 500 pack 8 a pass, one pass per slot: the
    4 slots are full, so the round is the slowest stage's work, 4·t_3(8). The GPU trace
    shows PP3 busy all the time and the others under half.

    By hand, b = 8: t_0..2 = 16·(0.9 + 0.08) = 15.68 ms, t_3 = 32·0.98 + 2.0 = 33.36 ms;
    balanced (20 layers each) the stages would take 19.6 ms (21.6 with the lm_head):
    T = 86.4 ms → 370 tok/s instead of 240.

    layers 16,16,16,32, stage times at b=8: 15.7, 15.7, 15.7, 33.4 ms (lm_head 2.0 on the
    last); mean 20.1, max 33.4; 1 − mean/max = 0.397 (4×8: T = max(4·t_max(8)=133.4,
    P(8)=82.0) = 133.4 ms → 239.8 tok/s)
    """
    sc = _scenario(
        "pp4-stage-imbalance",
        label="PP4 uneven split",
        version="0.5.23",
        model="RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
        gpu="rtx6000ada",
        machine=Machine(a=0.9, k=0.01, m=2.0, h=0.4, f=4.0),
        phases=[(1, 2, 500, 512), (32, 32, 500, 512)],
        pp=4,
        partition=(16, 16, 16, 32),
        env=(("SGLANG_PP_LAYER_PARTITION", "16,16,16,32"),),
        notes="Launched with SGLANG_PP_LAYER_PARTITION=16,16,16,32 in the environment.",
        incidental=("pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"stage-imbalance": derive.imbalance(sc, 1)})


def tp8_prefill_interference() -> Scenario:
    """TP8 on 32k-token prompts: each wave prefills for longer than it decodes.

    Mistral-Large-Instruct-2411 (88 layers) on 8×H200; a = 0.84, k = 0.04 (long contexts
    make every request's attention read dear), r = 0.03, m = 1.2; prefill f = 10 ms per
    thousand tokens per layer on one GPU, so an 8192-token pass takes 8.192·10·88/8 = 901 ms.
    Phases c = 1 and c = 8 (3 waves, ISL 32000, OSL 1024); logs with SGLANG_LOG_MS=1.

    A window of 40 decode steps at c = 8 takes 40·15.55 = 0.62 s; the window that holds a
    wave's prefill takes 28.8 s more, so it generates about 1/46 of the pure-decode rate.

    c=8, ISL 32000, chunk 8192: a wave prefills 8×32000 = 256000 tokens in 32 passes = 256k
    × 10.0 ms × 88 layers / 8 = 28.16 s while no decode runs; then 1023 steps × t(8) = 15.5
    ms = 15.91 s; lost = 28.16/(28.16 + 15.91) = 0.639
    """
    sc = _scenario(
        "tp8-prefill-interference",
        label="TP8 long prompts",
        version="0.5.10",
        model="mistralai/Mistral-Large-Instruct-2411",
        gpu="h200",
        machine=Machine(a=0.84, k=0.04, m=1.2, r=0.03, f=10.0),
        phases=[(1, 2, 32000, 1024), (8, 24, 32000, 1024)],
        tp=8,
        log_ms=True,
        env=(("SGLANG_LOG_MS", "1"),),
    )
    return replace(sc, causes={"prefill-interference": derive.prefill_share(sc, 1)})


def pp4x_tp2_hybrid() -> Scenario:
    """PP4×TP2 with ``--pp-async-batch-depth 4``: 16 requests pack 2 of 8 slots.

    GLM-4.5-Air (46 layers: 11,11,12,12) on 8×L40S; TP2 inside each stage (only the
    ``PPk TP0`` ranks print batch lines); a = 0.15, k = 0.12, r = 0.05, m = 0.6, h = 0.4;
    ``--chunked-prefill-size 8192``. Phases c = 1 and 16 (ISL 1000, OSL 512); the GPU trace is
    sampled every 100 ms (``nvidia-smi … -lms 100``).

    By hand, b = 8: t_s = 12·(0.15 + 0.96)/2 + 12·0.05 = 7.26 ms (6.655 on 11 layers, 7.56
    on PP3); P(8) = 2·6.655 + 7.26 + 7.56 + 4·0.4 = 29.7 ms. b = 4: t_3 = 12·0.63/2 + 0.6 +
    0.3 = 4.68 → 4·4.68 = 18.7 ms.

    c=16, ISL 1000, chunk 8192: slots 2×8 of 8: T = max(2·t_max(8)=15.1, P(8)=29.7) = 29.7
    ms → 538.2 tok/s; --pp-max-micro-batch-size 4: 4×4: T = max(4·t_max(4)=18.7, P(4)=18.7)
    = 18.7 ms → 854.7 tok/s; 1 − 538.2/854.7 = 0.370
    """
    sc = _scenario(
        "pp4x-tp2-hybrid",
        label="PP4xTP2",
        version="0.5.23",
        model="zai-org/GLM-4.5-Air",
        gpu="l40s",
        machine=Machine(a=0.15, k=0.12, m=0.6, h=0.4, r=0.05, f=2.0),
        phases=[(1, 2, 1000, 512), (16, 16, 1000, 512)],
        pp=4,
        tp=2,
        depth=4,
        chunk=8192,
        gpu_interval_ms=100,
        incidental=("pp-empty-async-slots", "pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"pp-underfilled-slots": derive.underfilled(sc, 1, cap=4)})


def pp16_multinode() -> Scenario:
    """PP16 over two nodes with ``--pp-async-batch-depth 8``: 32 requests pack 4 of 24 slots.

    DeepSeek-R1-0528 (61 layers: 3,3,3 then 4 on the last 13 stages) on 2×8 H100; stages
    0–7 on the first node, 8–15 on the second, one log and one GPU trace per node;
    a = 0.12, k = 0.06, m = 0.8, h = 0.25 and x = 1.5 ms for each of the two hops that cross
    the nodes. Phases c = 1 and 32 (ISL 1000, OSL 512).

    By hand, b = 8: 3-layer stages 1.8 ms, 4-layer 2.4, PP15 3.2; P(8) = 3·1.8 + 12·2.4 +
    3.2 + 16·0.25 + 2·1.5 = 44.4 ms. b = 2: PP15 = 4·0.24 + 0.8 = 1.76 → 16·1.76 = 28.2 ms.

    c=32, ISL 1000, chunk 8192: slots 4×8 of 24: T = max(4·t_max(8)=12.8, P(8)=44.4) = 44.4
    ms → 720.7 tok/s; --pp-max-micro-batch-size 2: 16×2: T = max(16·t_max(2)=28.2,
    P(2)=22.4) = 28.2 ms → 1136.4 tok/s; 1 − 720.7/1136.4 = 0.366
    """
    sc = _scenario(
        "pp16-multinode",
        label="PP16 2 nodes",
        version="0.5.23",
        model="deepseek-ai/DeepSeek-R1-0528",
        gpu="h100",
        machine=Machine(a=0.12, k=0.06, m=0.8, h=0.25, x=1.5, f=1.5),
        phases=[(1, 2, 1000, 512), (32, 32, 1000, 512)],
        pp=16,
        depth=8,
        nnodes=2,
        journald=True,
        hosts=("h100-a07", "h100-a08"),
        notes="Two nodes of 8 GPUs (InfiniBand between them): one log and one GPU trace each.",
        incidental=("pp-empty-async-slots", "pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"pp-underfilled-slots": derive.underfilled(sc, 1, cap=2)})


def pp8_several_causes() -> Scenario:
    """PP8: packed slots at c=32, eager steps at c=128, a KV pool too small for long prompts.

    DeepSeek-V3.1 (61 layers: 7,7,7,8,8,8,8,8) on 8×H200 with ``--cuda-graph-max-bs 8``
    and ``--max-total-tokens 196608``; a = 0.12, k = 0.05, m = 0.2, h = 0.3, e = 0.6.
    Phases: c = 32 (ISL 1000, OSL 256) packs 4 slots of 8; c = 128 fills all 8 slots with
    16 or 17, above the captured 8, so every step is eager; c = 64 with 8192-token prompts
    needs 64·8448 tokens of KV and the pool holds 23 such requests.

    By hand: t_7(8) = 8·(0.12 + 0.40) + 0.2 = 4.36, P(8) = 61·0.52 + 0.2 + 2.4 = 34.3 ms;
    t_7(4) = 8·0.32 + 0.2 = 2.76 → 8·2.76 = 22.1 ms. At b = 16 an eager stage adds 8·0.6 =
    4.8 ms and an eager trip 61·0.6 = 36.6 ms. The KV cost is played round by round (both
    numbers are the phase's bench output throughput): 23 requests, about 3 a slot, against
    8 a slot; the pool runs 99 % full with requests waiting (admission keeps it just short of
    a retraction).

    c=32, ISL 1000, chunk 8192: slots 4×8 of 8: T = max(4·t_max(8)=17.4, P(8)=34.3) = 34.3
    ms → 932.4 tok/s; --pp-max-micro-batch-size 4: 8×4: T = max(8·t_max(4)=22.1, P(4)=22.1)
    = 22.1 ms → 1446.7 tok/s; 1 − 932.4/1446.7 = 0.355

    c=128: 16,16,17,16,16,17,16,14 > captured 8, eager (+0.6 ms launch per layer): T =
    max(Σ t_max=98.9, P(17)=98.4) = 98.9 ms; with a graph for bs 17: T = max(Σ t_max=60.5,
    P(17)=61.8) = 61.8 ms; 1 − 61.8/98.9 = 0.375

    c=64, ISL 8192 + OSL 256 = 8448 tokens a request at the end; pool 196608 holds 23 of
    them, so requests queue: phase 824.9 tok/s; with a pool of 540672 (64 × 8448): 1366.2
    tok/s; 1 − 824.9/1366.2 = 0.396
    """
    sc = _scenario(
        "pp8-several-causes",
        label="PP8 three faults",
        version="0.5.23",
        model="deepseek-ai/DeepSeek-V3.1",
        gpu="h200",
        machine=Machine(a=0.12, k=0.05, m=0.2, h=0.3, e=0.6, f=0.4),
        phases=[(32, 32, 1000, 256), (128, 128, 1000, 256), (64, 64, 8192, 256)],
        pp=8,
        graph_max=8,
        max_total_tokens=196608,
        incidental=("prefill-interference", "queue-backlog", "stage-imbalance", *PP_INFO),
    )
    causes = {
        "pp-underfilled-slots": derive.underfilled(sc, 0, cap=4),
        "cuda-graph-miss": derive.graph_miss(sc, 1),
        "kv-cache-pressure": _kv_cause(sc, 2),
    }
    return replace(sc, causes=causes)


def pp8_unexplained() -> Scenario:
    """PP8 with 8 slots of 4, balanced, but every round takes 40 ms more than the layout.

    Mixtral-8x22B (56 layers, 7 a stage) on 8×A100 PCIe with ``--pp-max-micro-batch-size 4
    --pp-async-batch-depth 0``; a = 0.5, k = 0.02, m = 0.2, h = 0.15, and an injected
    o = 40 ms per round that nothing in the layout accounts for (GPUs idle meanwhile). Stage
    imbalance 1 − 4.085/4.26 = 0.041. Phases c = 1 and 32 (ISL 256, OSL 384).

    By hand, b = 4: t_s = 7·(0.5 + 0.08) = 4.06 ms, PP7 4.26; 8·4.26 = 34.1 ms > P(4) =
    56·0.58 + 0.2 + 8·0.15 = 33.9 ms.

    8×4 of 8, layers 7,7,7,7,7,7,7,7: arithmetic T = max(8·t_max(4)=34.1, P(4)=33.9) = 34.1
    ms → 939.0 tok/s; measured round T = max(8·t_max(4)=34.1, P(4)=33.9) + 40.0 = 74.1 ms →
    432.0 tok/s; 1 − 432.0/939.0 = 0.540
    """
    sc = _scenario(
        "pp8-unexplained",
        label="PP8 mbs4 slow",
        version="0.5.23",
        model="mistralai/Mixtral-8x22B-Instruct-v0.1",
        gpu="a100pcie",
        machine=Machine(a=0.5, k=0.02, m=0.2, h=0.15, o=40.0, f=8.9),
        phases=[(1, 2, 256, 384), (32, 32, 256, 384)],
        pp=8,
        depth=0,
        cap=4,
        incidental=("gpu-idle-bubbles", "pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"unexplained-slowdown": derive.overhead(sc, 1)})


# -- older log formats ----------------------------------------------------------------------------


def pp8_old_format_055() -> Scenario:
    """SGLang 0.5.5 PP8 (8 slots: no async depth yet): 32 requests pack 4 slots of 8.

    Qwen3-30B-A3B (48 layers, 6 a stage) on 8×RTX 4090; a = 0.1, k = 0.08, m = 0.3,
    h = 0.5; the default chunk on 24 GB GPUs is 2048, so ISL 256 admits 8 a pass. Lines in
    0.5.5 form: ``Decode batch, …, #queue-req: 0, `` with the trailing comma, ServerArgs
    repr with ``pp_max_micro_batch_size=None``, ``Capture cuda graph bs [...]``.

    By hand, b = 8: t_s = 6·(0.1 + 0.64) = 4.44 ms (PP7 4.74); P(8) = 48·0.74 + 0.3 + 8·0.5 =
    39.8 ms. b = 4: 6·0.42 + 0.3 = 2.82 → 8·2.82 = 22.6 < P(4) = 24.5 ms.

    c=32, ISL 256, chunk 2048: slots 4×8 of 8: T = max(4·t_max(8)=19.0, P(8)=39.8) = 39.8 ms
    → 803.6 tok/s; --pp-max-micro-batch-size 4: 8×4: T = max(8·t_max(4)=22.6, P(4)=24.5) =
    24.5 ms → 1308.3 tok/s; 1 − 803.6/1308.3 = 0.386
    """
    sc = _scenario(
        "pp8-old-format-0.5.5",
        label="PP8 (0.5.5)",
        version="0.5.5",
        model="Qwen/Qwen3-30B-A3B",
        gpu="rtx4090",
        machine=Machine(a=0.1, k=0.08, m=0.3, h=0.5, f=2.0),
        phases=[(1, 2, 256, 512), (32, 32, 256, 512)],
        pp=8,
        incidental=("pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"pp-underfilled-slots": derive.underfilled(sc, 1, cap=4)})


def pp4x_tp2_old_format_055() -> Scenario:
    """SGLang 0.5.5 PP4×TP2 (rank tags ``TP0 PP1``, TP before PP): 16 requests pack 2 slots.

    Mixtral-8x7B (32 layers, 8 a stage) on 8×A10G; a = 0.5, k = 0.4 (2 of 8 experts a
    token: a larger batch reads more of them), r = 0.15, m = 0.6, h = 0.5; chunk 2048, ISL
    256: 8 a pass.

    By hand, b = 8: t_s = 8·(0.5 + 3.2)/2 + 8·0.15 = 16.0 ms (PP3 16.3); P(8) = 3·16.0 + 16.3
    + 4·0.5 = 66.3 ms. b = 4: t_s = 9.6, PP3 9.9; P(4) = 40.7 > 4·9.9.

    c=16, ISL 256, chunk 2048: slots 2×8 of 4: T = max(2·t_max(8)=32.6, P(8)=66.3) = 66.3 ms
    → 241.3 tok/s; --pp-max-micro-batch-size 4: 4×4: T = max(4·t_max(4)=39.6, P(4)=40.7) =
    40.7 ms → 393.1 tok/s; 1 − 241.3/393.1 = 0.386
    """
    sc = _scenario(
        "pp4x-tp2-old-format-0.5.5",
        label="PP4xTP2 (0.5.5)",
        version="0.5.5",
        model="mistralai/Mixtral-8x7B-Instruct-v0.1",
        gpu="a10g",
        machine=Machine(a=0.5, k=0.4, m=0.6, h=0.5, r=0.15, f=3.0),
        phases=[(1, 2, 256, 512), (16, 16, 256, 512)],
        pp=4,
        tp=2,
        incidental=("pp-low-concurrency", *PP_INFO),
    )
    return replace(sc, causes={"pp-underfilled-slots": derive.underfilled(sc, 1, cap=4)})


def tp8_old_format_046() -> Scenario:
    """SGLang 0.4.6 TP8 with ``--cuda-graph-max-bs 32``: the batch of 64 runs eagerly.

    Meta-Llama-3-70B-Instruct on 8×H100; a = 0.53, k = 0.003, r = 0.03, m = 1.0, e = 0.2.
    Lines in 0.4.6 form: ``Decode batch. …`` (a period), prefill lines without ``cuda
    graph``, ``Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]``, ServerArgs repr with
    ``max_micro_batch_size``, benchmark JSONL without ``server_info``. Sweep c = 1, 16, 32,
    64 (ISL 128, OSL 1024).

    By hand: t(64) = 80·(0.53 + 0.192)/8 + 80·0.03 + 1.0/8 = 9.745 ms with a graph; eager
    adds 80·0.2 = 16 ms.

    c=64: 1×64 > captured 32, eager (+0.2 ms launch per layer): t(64) = 25.7 ms; with a
    graph for bs 64: t(64) = 9.7 ms; 1 − 9.7/25.7 = 0.621
    """
    sc = _scenario(
        "tp8-old-format-0.4.6",
        label="TP8 (0.4.6)",
        version="0.4.6",
        model="meta-llama/Meta-Llama-3-70B-Instruct",
        gpu="h100",
        machine=Machine(a=0.53, k=0.003, m=1.0, r=0.03, e=0.2, f=3.5),
        phases=[(1, 2, 128, 1024), (16, 16, 128, 1024), (32, 32, 128, 1024), (64, 64, 128, 1024)],
        tp=8,
        graph_max=32,
        mem_fraction=0.81,
        incidental=("scaling-collapse",),
    )
    return replace(sc, causes={"cuda-graph-miss": derive.graph_miss(sc, 3)})


# -- healthy runs -------------------------------------------------------------------------------


def tp8_healthy_high() -> Scenario:
    """TP8 up to c=64 with graphs to 512: no queue, no retraction, nothing to find.

    Llama-3.1-405B-Instruct-FP8 (126 layers) on 8×H200; a = 0.96, k = 0.004, r = 0.025,
    m = 1.0: t(b) = 126·(0.96 + 0.004·b)/8 + 126·0.025 + 1/8 = 18.395 + 0.063·b ms, so c = 1,
    8, 32, 64 give 54, 423, 1568, 2854 tok/s of decode. Prompts of 128 tokens against 1024
    generated keep prefill under 4 % of every phase.
    """
    return _scenario(
        "tp8-healthy-high",
        label="TP8",
        version="0.5.23",
        model="meta-llama/Llama-3.1-405B-Instruct-FP8",
        gpu="h200",
        machine=Machine(a=0.96, k=0.004, m=1.0, r=0.025, f=7.2),
        phases=[(1, 2, 128, 1024), (8, 8, 128, 1024), (32, 32, 128, 1024), (64, 64, 128, 1024)],
        tp=8,
    )


def pp8_healthy_low() -> Scenario:
    """PP8 at c=1 and 4: fewer requests than stages, which is inherent (info only).

    Qwen3-235B-A22B-Instruct-2507-FP8 on 8×RTX PRO 6000 Blackwell (PCIe); a = 0.12,
    k = 0.05, m = 0.6, h = 0.5. One request: P(1) = 94·0.17 + 0.6 + 4 = 20.6 ms → 48.6
    tok/s; four requests share one slot: P(4) = 94·0.32 + 4.6 = 34.7 ms → 115 tok/s. Each GPU
    works one stage of one micro-batch a trip, about 1/8 of the time.
    """
    return _scenario(
        "pp8-healthy-low",
        label="PP8 low load",
        version="0.5.23",
        model="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        gpu="rtxpro6000",
        machine=Machine(a=0.12, k=0.05, m=0.6, h=0.5, f=1.5),
        phases=[(1, 4, 1000, 512), (4, 8, 1000, 512)],
        pp=8,
        incidental=("pp-low-concurrency", *PP_INFO),
    )


def pp8_healthy_full() -> Scenario:
    """PP8 with ``--pp-max-micro-batch-size 4 --pp-async-batch-depth 0`` at c=32: all 8 slots
    hold 4; balanced stages.

    Llama-2-70b-chat (80 layers, 10 a stage) on 8×L40S; a = 2.0, k = 0.01, m = 0.5 (a 32k
    vocabulary), h = 0.2. b = 4: t_s = 10·2.04 = 20.4 ms, PP7 20.9; 8·20.9 = 167.2 ms >
    P(4) = 165.3 ms → 191.4 tok/s, every GPU busy 20.4·8/167.2 = 98 % (PP7 100 %). Stage
    imbalance 1 − 20.4625/20.9 = 0.021. Phases c = 1 and 32 (ISL 256, OSL 256).
    """
    return _scenario(
        "pp8-healthy-full",
        label="PP8 mbs4",
        version="0.5.10",
        model="meta-llama/Llama-2-70b-chat-hf",
        gpu="l40s",
        machine=Machine(a=2.0, k=0.01, m=0.5, h=0.2, f=9.8),
        phases=[(1, 2, 256, 256), (32, 32, 256, 256)],
        pp=8,
        depth=0,
        cap=4,
        incidental=("pp-low-concurrency", *PP_INFO),
    )


SCENARIOS = {
    "pp8-packed": pp8_packed,
    "pp8-running-cap": pp8_running_cap,
    "tp8-kv-pressure": tp8_kv_pressure,
    "tp8-graph-miss": tp8_graph_miss,
    "pp4-stage-imbalance": pp4_stage_imbalance,
    "tp8-prefill-interference": tp8_prefill_interference,
    "pp4x-tp2-hybrid": pp4x_tp2_hybrid,
    "pp16-multinode": pp16_multinode,
    "pp8-several-causes": pp8_several_causes,
    "tp8-healthy-high": tp8_healthy_high,
    "pp8-healthy-low": pp8_healthy_low,
    "pp8-healthy-full": pp8_healthy_full,
    "pp8-unexplained": pp8_unexplained,
    "pp8-old-format-0.5.5": pp8_old_format_055,
    "pp4x-tp2-old-format-0.5.5": pp4x_tp2_old_format_055,
    "tp8-old-format-0.4.6": tp8_old_format_046,
}
"""Scenario name → the function that builds its spec (names are stable)."""
