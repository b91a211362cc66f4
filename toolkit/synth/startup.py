"""The startup block of one launch, worded as the profiled SGLang release prints it.

Order per scheduler rank: init torch distributed, load weights (≈ 5 min, with rank 0's tqdm
bar), KV pool, decode CUDA-graph capture, then the ``max_total_num_tokens=...`` summary. The
main process dumps ``server_args`` first and, once every rank is up, starts uvicorn, sends
SGLang's warmup request (one short prefill + 7 decode steps on every stage) and says it is
ready.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.analyze.model import Layout
from toolkit.synth.machine import AVAIL_AFTER_INIT_GB, INIT_MEM_GB, gpu_memory, pool_tokens
from toolkit.synth.profiles import Profile
from toolkit.synth.records import Processes, Record, access_line
from toolkit.synth.server_args import PORT, cuda_graph_bs, graph_max_bs, render_dump

__all__ = ["WARMUP_DECODE_STEPS", "WARMUP_PROMPT_TOKENS", "Startup", "startup_records"]

WARMUP_DECODE_STEPS = 7  # the warmup asks for 8 tokens: one from prefill, 7 from decode
WARMUP_PROMPT_TOKENS = 7
_SHARDS = 64
_TQDM = "██████████"


@dataclass(frozen=True)
class Startup:
    """The block's lines and when the server is ready (seconds after the launch)."""

    records: list[Record]
    ready_s: float
    scheduler_ready_s: float  # when the schedulers started their loops (throughput tics)
    warmup_prefill_s: float


def startup_records(
    layout: Layout, profile: Profile, procs: Processes, args: dict[str, object]
) -> Startup:
    """Every line the launch prints before the benchmark starts."""
    recs = [Record(0.0, procs.main, None, render_dump(args, profile))]
    memory = gpu_memory(layout)
    bs = cuda_graph_bs(graph_max_bs(layout))
    tokens = pool_tokens(layout)
    ranks = procs.logging_ranks()
    end = 0.0
    for pid, k, pp_tag, tp_tag in ranks:
        tags = profile.rank_tags(pp_tag, tp_tag)
        mem = memory[k]
        t = 3.8 + 0.013 * k
        recs.append(Record(t, pid, tags, "Init torch distributed begin."))
        t += 2.31 + 0.011 * k
        recs.append(Record(t, pid, tags, profile.init_end(2.31 + 0.011 * k, INIT_MEM_GB)))
        t += 0.74
        begin = f"Load weight begin. avail mem={AVAIL_AFTER_INIT_GB:.2f} GB"
        recs.append(Record(t, pid, tags, begin))
        load_s = 301.6 + 0.7 * k + 1.9 * mem.layers / 8
        if k == 0:
            recs += _shard_bars(t + 0.4, load_s, pid)
        t += load_s
        recs.append(Record(t, pid, tags, profile.load_end(load_s, mem.after_load, mem.weights)))
        t += 0.62
        recs.append(Record(t, pid, tags, profile.kv_allocated(tokens, mem.kv)))
        t += 0.09
        recs.append(Record(t, pid, tags, f"Memory pool end. avail mem={mem.after_pool:.2f} GB"))
        t += 0.85
        capture_s = 21.4 + 0.37 * k + (6.0 if layout.tp > 1 else 0.0)
        begin, *rest = profile.capture(bs, mem.before_capture, capture_s, mem.graphs)
        recs.append(Record(t, pid, tags, begin))
        for line in rest[:-1]:  # 0.5.7 lists the batch sizes right after "begin"
            recs.append(Record(t + 0.001, pid, tags, line))
        t += capture_s
        rate = len(bs) / capture_s
        bar = (
            f"Capturing batches (bs=1 avail_mem={mem.after_capture + 0.12:.2f} GB): 100%|{_TQDM}| "
            f"{len(bs)}/{len(bs)} [00:{round(capture_s):02d}<00:00, {rate:5.2f}it/s]"
        )
        recs.append(Record(t - 0.002, pid, None, bar, bracket=False))
        recs.append(Record(t, pid, tags, rest[-1]))
        t += 0.21
        summary = (
            f"max_total_num_tokens={tokens}, chunked_prefill_size={layout.chunked_prefill_size}, "
            f"max_prefill_tokens=16384, max_running_requests={layout.running_cap(262144)}, "
            f"context_len=262144, available_gpu_mem={mem.after_capture:.2f} GB"
        )
        recs.append(Record(t, pid, tags, summary))
        end = max(end, t)
    t = end + 1.63
    main = procs.main
    for msg in (
        f"INFO:     Started server process [{main}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        f"INFO:     Uvicorn running on http://0.0.0.0:{PORT} (Press CTRL+C to quit)",
    ):
        recs.append(Record(t, main, None, msg))
        t += 0.002
    t += 1.04
    recs.append(Record(t, main, None, access_line(40118, "GET /get_model_info")))
    t += 0.02
    warmup = t
    recs.append(Record(t, main, None, access_line(40122, "POST /generate")))
    for pid, k, pp_tag, tp_tag in ranks:
        line = profile.prefill(1, WARMUP_PROMPT_TOKENS, 0.0, 0, 0, 0, 0.0)
        recs.append(Record(t + 0.004 + 0.011 * k, pid, profile.rank_tags(pp_tag, tp_tag), line))
    ready = t + 0.61
    recs.append(Record(ready, main, None, "The server is fired up and ready to roll!"))
    return Startup(recs, ready, end, warmup)


def _shard_bars(t: float, load_s: float, pid: int) -> list[Record]:
    """Rank 0's ``Loading safetensors checkpoint shards`` bar: a line a minute, then 100 %."""
    rate = _SHARDS / load_s
    closed = load_s - 0.9  # the bar completes just before "Load weight end"
    stamps = [*(60.0 * m for m in range(int(closed // 60) + 1) if 60.0 * m < closed), closed]
    out = []
    for elapsed in stamps:
        done = _SHARDS if elapsed == closed else int(elapsed * rate)
        speed = f"{rate:.2f}it/s" if elapsed else "?it/s"
        eta = _mmss((_SHARDS - done) / rate) if elapsed else "?"
        text = (
            f"Loading safetensors checkpoint shards: {100 * done // _SHARDS:3d}% Completed | "
            f"{done}/{_SHARDS} [{_mmss(elapsed)}<{eta}, {speed}]"
        )
        out.append(Record(t + elapsed, pid, None, text, bracket=False))
    return out


def _mmss(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60:02d}:{s % 60:02d}"
