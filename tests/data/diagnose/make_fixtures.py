"""Write the diagnose fixtures: small run directories, each with one known cause.

Run from the repository root: ``.venv/bin/python tests/data/diagnose/make_fixtures.py``.
The output is committed; this script documents how it was made. Lines follow SGLang 0.5.23
: a ``server_args={...}`` dict dump, per-rank
startup lines, ``Prefill batch`` / ``Decode batch`` lines every stage prints in lock-step, and
``sglang.bench_serving`` JSONL results. Numbers are made to be self-consistent: ``#token`` is
running requests × (prompt + tokens generated so far).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).parent
T0 = datetime(2026, 5, 1, 10, 0, 0)
ISL, OSL = 1000, 256


@dataclass
class Launch:
    tp: int = 1
    pp: int = 1
    depth: int = 0
    cap: int | None = None  # pp_max_micro_batch_size
    mrr: int | None = None  # max_running_requests as given
    mrr_resolved: int = 2048
    chunk: int = 8192
    pool: int = 327680
    graph_max: int = 256
    disable_graph: bool = False
    extra: dict[str, object] = field(default_factory=dict)


def stamp(t: float) -> str:
    return (T0 + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S")


def tags(la: Launch) -> list[str]:
    if la.pp > 1:
        return (
            [f" PP{k}" for k in range(la.pp)]
            if la.tp == 1
            else [f" PP{k} TP0" for k in range(la.pp)]
        )
    return [" TP0"] if la.tp > 1 else [""]


def graph_sizes(max_bs: int) -> list[int]:
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 513, 16)]
    return [s for s in sizes if s <= max_bs]


def server_args(la: Launch) -> dict[str, object]:
    args: dict[str, object] = {
        "model_path": "/models/Kimi-K2.6",
        "tokenizer_path": "/models/Kimi-K2.6",
        "trust_remote_code": True,
        "host": "0.0.0.0",
        "port": 30000,
        "mem_fraction_static": 0.86,
        "max_running_requests": la.mrr,
        "max_total_tokens": None,
        "chunked_prefill_size": la.chunk,
        "max_prefill_tokens": 16384,
        "schedule_policy": "fcfs",
        "schedule_conservativeness": 1.0,
        "page_size": 1,
        "tp_size": la.tp,
        "pp_size": la.pp,
        "pp_max_micro_batch_size": la.cap,
        "pp_async_batch_depth": la.depth,
        "decode_log_interval": 40,
        "dp_size": 1,
        "ep_size": 1,
        "nnodes": 1,
        "attention_backend": "fa3",
        "disable_cuda_graph": la.disable_graph,
        "disable_overlap_schedule": la.pp > 1,
        "cuda_graph_max_bs_decode": la.graph_max,
        "cuda_graph_bs_decode": graph_sizes(la.graph_max),
        "enable_dp_attention": False,
    }
    args.update(la.extra)
    return args


def startup(la: Launch, t: float) -> list[str]:
    out = [f"[{stamp(t)}] server_args={server_args(la)!r}"]
    sizes = [] if la.disable_graph else graph_sizes(la.graph_max)
    for tag in tags(la):
        out.append(
            f"[{stamp(t + 300)}{tag}] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {la.pool}, KV size: 3.02 GB"
        )
        if sizes:
            out.append(
                f"[{stamp(t + 315)}{tag}] Capture target decode CUDA graph end. bs={sizes}, "
                "elapsed=14.73 s, mem usage=1.39 GB, avail mem=4.62 GB."
            )
        out.append(
            f"[{stamp(t + 316)}{tag}] max_total_num_tokens={la.pool}, chunked_prefill_size="
            f"{la.chunk}, max_prefill_tokens=16384, max_running_requests={la.mrr_resolved}, "
            "context_len=262144, available_gpu_mem=4.62 GB"
        )
    out.append(f"[{stamp(t + 318)}] The server is fired up and ready to roll!")
    return out


@dataclass
class Phase:
    """One benchmark run: ``slots`` are the requests per active slot (the log shows one of
    them per decode line); ``queue`` requests wait throughout."""

    start: float
    slots: list[int]
    gen_tok_s: float
    lines: int = 14
    interval: float = 1.0
    queue: int = 0
    graph: bool | None = True
    fwd: list[float] | None = None  # per-stage fwd occupancy %, or None
    prefill_every: int = 0  # a prefill pass before every n-th decode line (0 = never)
    prefill_dip: float = 0.0  # gen throughput lost in windows with a prefill pass
    token_skew: dict[tuple[int, int], int] = field(default_factory=dict)  # (rank, line) → +token

    @property
    def running(self) -> int:
        return sum(self.slots)


def phase_lines(la: Launch, ph: Phase) -> list[str]:
    out = []
    ranks = tags(la)
    queue = ph.queue + ph.running
    t = ph.start
    for slot in ph.slots:  # the opening burst, front-packed slot by slot
        queue -= slot
        tokens = min(slot * ISL, la.chunk)
        for tag in ranks:
            out.append(
                f"[{stamp(t)}{tag}] Prefill batch, #new-seq: {slot}, #new-token: {tokens}, "
                f"#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: {queue}, "
                f"#pending-token: {queue * ISL}, cuda graph: False, input throughput (token/s): "
                "5234.11"
            )
    generated = 0.0
    for i in range(ph.lines):
        t = ph.start + 1 + (i + 1) * ph.interval
        gen = ph.gen_tok_s
        if ph.prefill_every and i > 1 and i % ph.prefill_every == 0:
            gen *= 1 - ph.prefill_dip
            for tag in ranks:
                out.append(
                    f"[{stamp(t - ph.interval / 2)}{tag}] Prefill batch, #new-seq: 1, "
                    f"#new-token: {ISL}, #cached-token: 0, token usage: 0.10, #running-req: "
                    f"{ph.slots[0] - 1}, #queue-req: {ph.queue}, #pending-token: 0, cuda graph: "
                    "False, input throughput (token/s): 900.00"
                )
        generated += gen * ph.interval
        # Closed loop, equal lengths: a wave finishes together and is replaced at once.
        per_request = (generated / ph.running) % OSL
        token = round(ph.running * (ISL + per_request))
        slot = ph.slots[i % len(ph.slots)]
        for k, tag in enumerate(ranks):
            tok = token + ph.token_skew.get((k, i), 0)
            usage = tok / la.pool
            graph = "" if ph.graph is None else f"cuda graph: {ph.graph}, "
            line = (
                f"[{stamp(t)}{tag}] Decode batch, #running-req: {slot}, #token: {tok}, "
                f"token usage: {usage:.2f}, {graph}gen throughput (token/s): {gen:.2f}, "
                f"#queue-req: {ph.queue}"
            )
            if ph.fwd is not None:
                line += f", fwd occupancy: {ph.fwd[k]:.1f}%, fwd+idle occupancy: 99.0%"
            out.append(line)
    return out


def bench_line(c: int, tok_s: float, ttft_ms: float = 300.0) -> str:
    n = max(c, 2)
    duration = n * OSL / tok_s
    return json.dumps(
        {
            "backend": "sglang-oai",
            "dataset_name": "random",
            "request_rate": math.inf,
            "max_concurrency": c,
            "random_input_len": ISL,
            "random_output_len": OSL,
            "random_range_ratio": 1.0,
            "duration": duration,
            "completed": n,
            "total_input_tokens": n * ISL,
            "total_output_tokens": n * OSL,
            "request_throughput": n / duration,
            "input_throughput": n * ISL / duration,
            "output_throughput": tok_s,
            "median_ttft_ms": ttft_ms,
            "mean_ttft_ms": ttft_ms,
            "median_tpot_ms": 1000.0 * c / tok_s,
            "mean_tpot_ms": 1000.0 * c / tok_s,
        }
    )


def command(la: Launch, **flags: object) -> str:
    parts = ["python -m sglang.launch_server --model-path /models/Kimi-K2.6 --trust-remote-code"]
    if la.tp > 1:
        parts.append(f"--tp-size {la.tp}")
    if la.pp > 1:
        parts.append(f"--pp-size {la.pp}")
    if la.depth:
        parts.append(f"--pp-async-batch-depth {la.depth}")
    if la.cap is not None:
        parts.append(f"--pp-max-micro-batch-size {la.cap}")
    if la.mrr is not None:
        parts.append(f"--max-running-requests {la.mrr}")
    for key, value in flags.items():
        parts.append(f"--{key.replace('_', '-')} {value}")
    return " ".join(parts)


def write(
    name: str,
    la: Launch,
    phases: list[Phase],
    bench: list[tuple[int, float]],
    *,
    label: str,
    cmd: str | None = None,
    extra_lines: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> None:
    out = HERE / name
    out.mkdir(parents=True, exist_ok=True)
    lines = startup(la, 0.0)
    for ph in phases:
        lines += phase_lines(la, ph)
    lines += extra_lines or []
    # Keep the file in time order, as a log is (stable: rank order within a second).
    lines.sort(key=lambda s: s[1:20])
    (out / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if bench:
        (out / "bench.jsonl").write_text(
            "\n".join(bench_line(c, t) for c, t in bench) + "\n", encoding="utf-8"
        )
    for file_name, text in (files or {}).items():
        (out / file_name).write_text(text, encoding="utf-8")
    toml = [f'label = "{label}"', f"command = {json.dumps(cmd or command(la))}", "synthetic = true"]
    toml.append('notes = "ppscope diagnose fixture, written by make_fixtures.py"')
    (out / "run.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")


def gpu_files(la: Launch, t: float, foreign: dict[int, tuple[int, str, int]]) -> dict[str, str]:
    """``nvidia-smi -L`` of an 8-GPU host and one ``--query-compute-apps`` listing taken at
    ``t``: a scheduler per stage (``sglang::scheduler_PP{k}``, pid 85690 + k), plus the
    ``foreign`` processes, GPU → (pid, name, MiB)."""
    uuid = "GPU-3f1a2b4c-0d5e-6f70-8192-a3b4c5d6e7f{}"
    listing = [f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: {uuid.format(g)})" for g in range(8)]
    when = (T0 + timedelta(seconds=t)).strftime("%Y/%m/%d %H:%M:%S")
    apps = ["timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"]
    for k in range(la.pp):
        apps.append(f"{when}.{k:03d}, {uuid.format(k)}, {85690 + k}, sglang::scheduler_PP{k}, "
                    "70000 MiB")  # fmt: skip
        if k in foreign:
            pid, name, mib = foreign[k]
            apps.append(f"{when}.{k:03d}, {uuid.format(k)}, {pid}, {name}, {mib} MiB")
    return {"gpus.txt": "\n".join(listing) + "\n", "apps.csv": "\n".join(apps) + "\n"}


def main() -> None:
    pp8 = Launch(pp=8, depth=8)
    # The incident: 32 requests front-packed into 4 slots of 8 (chunk 8192 / ISL 1000).
    write(
        "pp8-underfilled",
        pp8,
        [Phase(400, [1], 34.3, lines=8, interval=1.2), Phase(440, [8, 8, 8, 8], 248.1)],
        [(1, 34.3), (32, 248.1)],
        label="PP8",
    )
    # The remedy: a per-slot cap of 4 spreads 32 requests over 8 slots.
    fixed = Launch(pp=8, depth=0, cap=4)
    write(
        "pp8-filled",
        fixed,
        [Phase(400, [1], 34.3, lines=8, interval=1.2), Phase(440, [4] * 8, 560.0, interval=0.6)],
        [(1, 34.3), (32, 560.0)],
        label="PP8 mbs4",
    )
    # The same run with another user's process holding 24000 MiB on stage 3's GPU.
    write(
        "pp8-foreign-process",
        fixed,
        [Phase(400, [1], 34.3, lines=8, interval=1.2), Phase(440, [4] * 8, 560.0, interval=0.6)],
        [(1, 34.3), (32, 560.0)],
        label="PP8 shared GPU",
        files=gpu_files(fixed, 450.0, {3: (51234, "/home/alice/venv/bin/python", 24000)}),
    )
    # One request cannot fill eight stages: inherent.
    write(
        "pp8-low-c",
        pp8,
        [Phase(400, [1], 34.3, lines=10, interval=1.2), Phase(430, [4], 59.0, lines=10)],
        [(1, 34.3), (4, 59.0)],
        label="PP8 low load",
    )
    tp8 = Launch(tp=8, pool=139827, graph_max=512)
    write(
        "tp8",
        tp8,
        [Phase(400, [1], 26.3, lines=8, interval=1.5), Phase(440, [32], 577.8, interval=2.2)],
        [(1, 26.3), (32, 577.8)],
        label="TP8",
    )
    # --max-running-requests 64 under PP8: 8 slots of 64//8 = 8, the rest of 128 waits.
    # A sweep below the cap measures how throughput grows with load: 32 → 64 requests gives
    # 300 → 520 tok/s, elasticity log(520/300)/log 2 = 0.79; at 128 offered only 64 run, so
    # the cap costs 1 − (64/128)^0.79 = 42 % (high).
    capped = Launch(pp=8, depth=0, mrr=64, mrr_resolved=64)
    write(
        "pp8-running-cap",
        capped,
        [
            Phase(300, [4] * 8, 300.0, interval=0.8),
            Phase(350, [8] * 8, 520.0, interval=0.8),
            Phase(400, [8] * 8, 520.0, queue=64, interval=0.8),
        ],
        [(32, 300.0), (64, 520.0), (128, 520.0)],
        label="PP8 mrr64",
    )
    # A small KV pool: the pool runs full, requests are retracted and the rest wait.
    small = Launch(tp=8, pool=60000, graph_max=512)
    retract = [
        f"[{stamp(444 + 2 * i)} TP0] KV cache pool is full. Retract requests. "
        f"#retracted_reqs: 2, #new_token_ratio: 0.7000 -> {0.8 + 0.05 * i:.4f}"
        for i in range(4)
    ]
    # Below the pressure the sweep grows 330 → 578 tok/s from 16 to 32 requests (elasticity
    # 0.81); at 64 offered the full pool holds 48 running: 1 − (48/64)^0.81 = 21 % (high).
    write(
        "tp8-kv-pressure",
        small,
        [
            Phase(360, [16], 330.0, lines=8, interval=2.0),
            Phase(400, [32], 578.0, lines=8, interval=2.0),
            Phase(440, [48], 780.0, queue=16, interval=2.0),
        ],
        [(16, 330.0), (32, 578.0), (64, 780.0)],
        label="TP8 small pool",
        extra_lines=retract,
    )
    # Graphs captured only up to 32: batches of 64 run eagerly.
    eager = Launch(tp=8, pool=139827, graph_max=32)
    write(
        "tp8-eager",
        eager,
        [Phase(440, [64], 700.0, graph=False, interval=2.6)],
        [(64, 700.0)],
        label="TP8 eager",
    )
    # The command asks for a per-slot cap of 4; the logged ServerArgs say None.
    write(
        "pp8-not-applied",
        pp8,
        [Phase(440, [8, 8, 8, 8], 248.1)],
        [(32, 248.1)],
        label="PP8 cap asked",
        cmd=command(pp8, pp_max_micro_batch_size=4),
    )
    # PP4 with stage 2 disagreeing on #token at three ordinals: a desync.
    pp4 = Launch(pp=4)
    skew = {(2, 3): 512, (2, 7): 512, (2, 9): 1024}
    write(
        "pp4-desync",
        pp4,
        [Phase(440, [8, 8, 8, 8], 400.0, token_skew=skew)],
        [(32, 400.0)],
        label="PP4 desync",
    )
    # A full pipeline whose last stage (lm_head) is much busier than the rest.
    busy = [62.0, 62.0, 62.0, 64.0, 64.0, 64.0, 64.0, 96.0]
    write(
        "pp8-imbalance",
        fixed,
        [Phase(440, [4] * 8, 560.0, interval=0.6, fwd=busy)],
        [(32, 560.0)],
        label="PP8 imbalanced",
    )
    # A full pipeline whose GPUs still idle most of the time: bubbles the slots do not explain.
    write(
        "pp8-bubbles",
        fixed,
        [Phase(440, [4] * 8, 300.0, interval=1.1, fwd=[38.0] * 8)],
        [(32, 300.0)],
        label="PP8 bubbles",
    )
    # Steady TP decode interrupted by prefill passes that halve the windows they fall in.
    write(
        "tp8-prefill",
        tp8,
        [Phase(440, [32], 577.8, lines=24, interval=2.2, prefill_every=2, prefill_dip=0.5)],
        [(32, 450.0)],
        label="TP8 prefill-heavy",
    )
    # A queue with no limit reached: more load than the layout serves (no prefill evidence).
    write(
        "tp8-backlog",
        tp8,
        [Phase(440, [60], 1000.0, queue=40, interval=2.5)],
        [(100, 1000.0)],
        label="TP8 saturated",
    )
    # A restart: the first start decoded a little, then the server was launched again and the
    # benchmark ran against the second one. The run is the second start; the first is named.
    first = phase_lines(pp8, Phase(400, [8], 67.5, lines=6, interval=1.2))
    write(
        "pp8-restart",
        pp8,
        [Phase(2440, [8, 8, 8, 8], 248.1)],
        [(32, 248.1)],
        label="PP8 restarted",
        extra_lines=first + startup(pp8, 2000.0),
    )
    # Throughput that falls as load grows.
    write(
        "tp8-decline",
        tp8,
        [Phase(440, [16], 330.0, lines=8, interval=2.0)],
        [(8, 180.0), (16, 330.0), (32, 250.0)],
        label="TP8 declining",
    )


if __name__ == "__main__":
    main()
