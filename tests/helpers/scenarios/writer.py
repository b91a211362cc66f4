"""Turn a scenario and its timeline into a run directory.

Files: ``server.log`` (one per node, ``server-node{n}.log``, for a multi-node launch),
``bench.jsonl`` (one ``sglang.bench_serving`` result per phase), ``gpu.csv`` (nvidia-smi
``--query-gpu`` CSV; one per node), ``run.toml`` and ``expected.json``.

How the run was recorded is the scenario's too (``Scenario.wrapper``, ``gpu_format``,
``bench_format``, ``omit``, ``noise``...; ``variations`` sets them): a dcgmi trace is
``gpu.dcgmi`` (``gpu-node{n}.dcgmi``), an nvidia-smi dmon trace ``gpu.dmon``, the printed
benchmark blocks ``bench.log``. The defaults write the family's files byte for byte.
"""

from __future__ import annotations

import bisect
import json
import math
import random
import statistics
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from helpers.scenarios import formats as fmt
from helpers.scenarios import recorders
from helpers.scenarios.machine import admit_burst
from helpers.scenarios.spec import Scenario
from helpers.scenarios.timeline import PhaseRun, Segment, Timeline, play

__all__ = ["OMITTABLE", "expected_record", "write_run"]

GB = 1024**3
STAGGER_MS = 1.7  # a stage logs the same micro-batch this much after the one before it
PIPE_MS = 6.0  # with "interleave" noise a line reaches the file up to this much late

OMITTABLE: dict[str, str] = {
    "run.toml": "no run.toml: the layout only from the log's ServerArgs dump",
    "server_args": "no `server_args=` line: the layout only from run.toml's command",
    "bench": "no benchmark results",
    "gpu": "no GPU trace",
    "access": "no uvicorn access lines (stdout captured apart from stderr)",
}
"""What ``Scenario.omit`` may name → what the run then lacks."""


class _Log:
    """Lines of one node's log, kept with their time for sorting."""

    def __init__(self, sc: Scenario, node: int, host: str) -> None:
        self.sc, self.node, self.host = sc, node, host
        self.epoch = datetime.fromisoformat(sc.start)
        self.v = sc.version_tuple
        self.wrapper = sc.wrapper or ("journald" if sc.journald else "plain")
        self.rows: list[tuple[float, int, str, int]] = []
        self.main_pid = 41000 + 977 * node + sum(map(ord, sc.name)) % 500

    def pid(self, rank: int | None) -> int:
        return self.main_pid if rank is None else self.main_pid + 64 + rank

    def add(
        self,
        t: float,
        text: str,
        rank: int | None = None,
        tag: str | None = None,
        stream: str = "stderr",
        glue: str = "",
    ) -> None:
        """A line written at ``t`` by the process of ``rank`` (None: the main process);
        ``tag`` None writes it without SGLang's prefix; ``glue`` is text a tqdm bar left in
        front of it on the same stream."""
        ms = self.sc.log_ms and self.v >= (0, 5, 9)
        line = text if tag is None else f"[{fmt.stamp(self.epoch, t, ms)}{tag}] {text}"
        when = self.epoch + timedelta(milliseconds=t)
        pid = self.pid(rank)
        line = fmt.wrap(self.wrapper, when, self.host, pid, glue + line, stream)
        self.rows.append((t, len(self.rows), line, pid))

    def text(self) -> str:
        if "interleave" in self.sc.noise:
            self._interleave()
        self.rows.sort()
        return "".join(line + "\n" for _, _, line, _ in self.rows)

    def _interleave(self) -> None:
        """Each process's lines reach the file up to ``PIPE_MS`` late, in their own order."""
        rng = random.Random(f"{self.sc.name}/{self.node}/pipes")
        last: dict[int, float] = {}
        rows = []
        for t, n, line, pid in sorted(self.rows):
            key = max(t + rng.uniform(0.0, PIPE_MS), last.get(pid, -math.inf) + 1e-6)
            last[pid] = key
            rows.append((key, n, line, pid))
        self.rows = rows


class _Ranks:
    """Scheduler ranks: which node, which tag, whether it prints batch lines."""

    def __init__(self, sc: Scenario) -> None:
        lay = sc.layout
        self.per_node = lay.pp // lay.nnodes if lay.pp > 1 else 1
        self.rows = []
        for s in range(lay.pp):
            for r in range(lay.tp):
                node = s // self.per_node if lay.nnodes > 1 else 0
                tag = fmt.rank_tag(sc.version_tuple, s, r, lay.pp, lay.tp)
                self.rows.append((s * lay.tp + r, node, s, r, tag))

    def all(self, node: int) -> list[tuple[int, int, int, str]]:
        return [(i, s, r, tag) for i, n, s, r, tag in self.rows if n == node]

    def loggers(self, node: int) -> list[tuple[int, int, str]]:
        """(rank index, stage, tag) of the ranks that print Prefill/Decode lines."""
        return [(i, s, tag) for i, s, r, tag in self.all(node) if r == 0]


def _command(sc: Scenario, node_rank: int = 0) -> str:
    la, v = sc.launch, sc.version_tuple
    env = " ".join(f"{k}={val}" for k, val in la.env)
    parts = [env] if env else []
    parts += ["python3 -m sglang.launch_server", f"--model-path {sc.model.path}"]
    parts.append("--trust-remote-code")
    if la.tp > 1:
        parts.append(f"--tp-size {la.tp}" if v >= (0, 5, 0) else f"--tp {la.tp}")
    if la.pp > 1:
        parts.append(f"--pp-size {la.pp}")
    if la.depth is not None:
        parts.append(f"--pp-async-batch-depth {la.depth}")
    if la.cap is not None:
        flag = "--pp-max-micro-batch-size" if v >= (0, 5, 5) else "--max-micro-batch-size"
        parts.append(f"{flag} {la.cap}")
    if la.mrr is not None:
        parts.append(f"--max-running-requests {la.mrr}")
    if la.max_total_tokens is not None:
        parts.append(f"--max-total-tokens {la.max_total_tokens}")
    if la.mem_fraction_given:
        parts.append(f"--mem-fraction-static {la.mem_fraction}")
    if la.graph_max_given:
        parts.append(f"--cuda-graph-max-bs {la.graph_max}")
    for flag, val in la.flags:
        parts.append(flag if val is None else f"{flag} {val}")
    if sc.decode_log_interval != 40:
        parts.append(f"--decode-log-interval {sc.decode_log_interval}")
    if la.nnodes > 1:
        parts += [f"--nnodes {la.nnodes}", f"--node-rank {node_rank}"]
        parts.append("--dist-init-addr 10.20.0.11:50000")
    parts += ["--host 0.0.0.0", "--port 30000"]
    return " ".join(parts)


def _server_args(sc: Scenario, node_rank: int) -> list[tuple[str, Any]]:
    la = sc.launch
    return fmt.server_args_fields(
        sc.version_tuple,
        model_path=sc.model.path,
        tp=la.tp,
        pp=la.pp,
        depth=la.depth,
        cap=la.cap,
        mrr=la.mrr,
        max_total_tokens=la.max_total_tokens,
        chunk=la.chunk,
        max_prefill_tokens=la.max_prefill_tokens,
        mem_fraction=la.mem_fraction,
        graph_max=la.graph_max,
        nnodes=la.nnodes,
        node_rank=node_rank,
        dist_init_addr="10.20.0.11:50000" if la.nnodes > 1 else None,
        attention_backend="fa3" if "H100" in sc.hardware.gpu_name else "flashinfer",
        seed=sum(map(ord, sc.name)) * 7919 % 1_000_000_007,
        decode_log_interval=sc.decode_log_interval,
    )


# -- memory ------------------------------------------------------------------------------------


def _memory(sc: Scenario, stage: int) -> dict[str, float]:
    """GB figures a rank prints at start-up: weights, KV pool, graphs, what is left."""
    lay, mo, la = sc.layout, sc.model, sc.launch
    total = sc.hardware.mem_mib / 1024
    share = lay.split[stage] / lay.layers
    weights = mo.weights_gb * share / lay.tp * 1e9 / GB
    if stage in (0, lay.pp - 1):
        weights *= 1.03  # embedding / lm_head
    kv_per_token = mo.kv_bytes * lay.split[stage] / (1 if mo.mla else lay.tp)
    kv = la.pool * kv_per_token / GB
    graphs = 0.0 if not la.graph_max else 0.4 + la.graph_max / 400
    start = total - 0.6
    after_load = start - weights
    after_pool = after_load - kv
    final = after_pool - graphs
    return {
        "total": total,
        "start": start,
        "weights": weights,
        "after_load": after_load,
        "kv": kv,
        "after_pool": after_pool,
        "graphs": graphs,
        "final": final,
        "used_mib": (total - final + 0.9) * 1024,
    }


# -- the log -------------------------------------------------------------------------------------


def _startup(sc: Scenario, logs: list[_Log], ranks: _Ranks) -> float:
    """Start-up lines on every node; returns the time the server is ready (ms)."""
    v, lay, la, mo = sc.version_tuple, sc.layout, sc.launch, sc.model
    load_ms = 1000.0 * (20 + mo.weights_gb * 0.25 / max(lay.nnodes, 1))
    capture_ms = 9000.0 + 40.0 * len(fmt.graph_sizes(v, la.graph_max)) if la.graph_max else 0.0
    sizes = fmt.graph_sizes(v, la.graph_max) if la.graph_max else []
    end = 0.0
    for node, log in enumerate(logs):
        if lay.pp > 1:
            log.add(0.0, "Pipeline parallelism is incompatible with overlap schedule.", tag="")
        if "server_args" not in sc.omit:
            log.add(1.0, fmt.server_args_line(v, _server_args(sc, node)), tag="")
        for i, s, r, tag in ranks.all(node):
            mem = _memory(sc, s)
            d = 13.0 * i
            log.add(3000 + d, "Init torch distributed begin.", i, tag)
            if v < (0, 5, 0):
                log.add(3400 + d, "sglang is using nccl==2.21.5", i, tag)
            used = 0.55 + 0.01 * r
            if v >= (0, 5, 10):
                log.add(
                    5200 + d,
                    f"Init torch distributed ends. elapsed=2.2{i % 10} s, mem usage={used:.2f} GB",
                    i,
                    tag,
                )
            else:
                log.add(5200 + d, f"Init torch distributed ends. mem usage={used:.2f} GB", i, tag)
            log.add(6000 + d, f"Load weight begin. avail mem={mem['start']:.2f} GB", i, tag)
            t = 6000 + load_ms + 310.0 * i
            glue = ""
            if "traceback" in sc.noise and i == 0:  # the loading bar, glued to the next line
                shards = max(int(mo.weights_gb // 5), 1)
                glue = (
                    f"Loading safetensors checkpoint shards: 100% Completed | {shards}/{shards} "
                    f"[00:{load_ms / 1000 % 60:02.0f}<00:00,  {load_ms / 1000 / shards:.2f}s/it]"
                )
            if v <= (0, 5, 5):
                text = (
                    f"Load weight end. type={mo.arch}, dtype={mo.dtype}, "
                    f"avail mem={mem['after_load']:.2f} GB, mem usage={mem['weights']:.2f} GB."
                )
            else:
                text = (
                    f"Load weight end. elapsed={(t - 6000 - d) / 1000:.2f} s, type={mo.arch}, "
                    f"avail mem={mem['after_load']:.2f} GB, mem usage={mem['weights']:.2f} GB."
                )
            log.add(t, text, i, tag, glue=glue)
            kv = mem["kv"]
            if mo.mla:
                sizes_txt = f"KV size: {kv:.2f} GB"
            else:
                sizes_txt = f"K size: {kv / 2:.2f} GB, V size: {kv / 2:.2f} GB"
            dtype = f"dtype: {mo.dtype}, " if v >= (0, 5, 16) else ""
            log.add(
                t + 200, f"KV Cache is allocated. {dtype}#tokens: {la.pool}, {sizes_txt}", i, tag
            )
            log.add(t + 450, f"Memory pool end. avail mem={mem['after_pool']:.2f} GB", i, tag)
            t += 900
            if sizes:
                avail = mem["after_pool"] - 0.1
                if v >= (0, 5, 16):
                    log.add(
                        t,
                        "Capture target decode CUDA graph begin. backend=full, "
                        f"num_tokens_per_req=1, avail mem={avail:.2f} GB",
                        i,
                        tag,
                    )
                else:
                    log.add(
                        t,
                        "Capture cuda graph begin. This can take up to several minutes. "
                        f"avail mem={avail:.2f} GB",
                        i,
                        tag,
                    )
                    if r == 0:
                        log.add(t + 5, f"Capture cuda graph bs {sizes}", i, tag)
                t += capture_ms
                if r == 0 and s == 0:  # tqdm on stderr: no prefix
                    rate = len(sizes) / capture_ms * 1000
                    bs = "bs=1 " if v >= (0, 4, 10) else ""
                    log.add(
                        t - 10,
                        f"Capturing batches ({bs}avail_mem={avail - mem['graphs']:.2f} GB): "
                        f"100%|██████████| {len(sizes)}/{len(sizes)} "
                        f"[00:{capture_ms / 1000:02.0f}<00:00,  {rate:.2f}it/s]",
                        i,
                    )
                el, gm, fin = capture_ms / 1000, mem["graphs"], mem["final"]
                if v >= (0, 5, 16):
                    text = (
                        f"Capture target decode CUDA graph end. bs={sizes}, elapsed={el:.2f} s, "
                        f"mem usage={gm:.2f} GB, avail mem={fin:.2f} GB."
                    )
                else:
                    text = (
                        f"Capture cuda graph end. Time elapsed: {el:.2f} s. "
                        f"mem usage={gm:.2f} GB. avail mem={fin:.2f} GB."
                    )
                log.add(t, text, i, tag)
            if r == 0:
                log.add(
                    t + 300,
                    f"max_total_num_tokens={la.pool}, chunked_prefill_size={la.chunk}, "
                    f"max_prefill_tokens={la.max_prefill_tokens}, "
                    f"max_running_requests={la.mrr_resolved}, context_len={mo.context_len}, "
                    f"available_gpu_mem={mem['final']:.2f} GB",
                    i,
                    tag,
                )
            end = max(end, t + 300)
    main = logs[0]
    t = end + 2000
    up = [
        f"INFO:     Started server process [{main.main_pid}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ]
    for k, text in enumerate(up):
        main.add(t + k, text, tag="")
    t += 1000
    if "access" not in sc.omit:
        main.add(t, fmt.access_line(40118, "/get_model_info", "GET"), tag="", stream="stdout")
        main.add(t + 20, fmt.access_line(40122, "/generate"), tag="", stream="stdout")
    for node, log in enumerate(logs):
        for i, s, tag in ranks.loggers(node):
            fields = {
                "new_seq": 1,
                "new_token": 7,
                "usage": 0.0,
                "running": 0,
                "queue": 0,
                "pending": 0,
                "input_tput": 0.0,
            }
            log.add(
                t + 5 + STAGGER_MS * s, fmt.batch_line(sc.version_tuple, "prefill", fields), i, tag
            )
    main.add(t + 400, "The server is fired up and ready to roll!", tag="")
    return t + 400


def _events(sc: Scenario, tl: Timeline, logs: list[_Log], ranks: _Ranks, ready: float) -> None:
    v = sc.version_tuple
    main = logs[0]
    for ev in tl.events:
        t = ready + ev.t
        if ev.kind == "access":
            if "access" not in sc.omit:
                line = fmt.access_line(ev.fields["port"], sc.api_path)
                main.add(t, line, tag="", stream="stdout")
            continue
        for node, log in enumerate(logs):
            if ev.kind == "retract":
                for i, s, _r, tag in ranks.all(node):
                    log.add(t + STAGGER_MS * s, fmt.retract_line(ev.fields), i, tag)
                continue
            for i, s, tag in ranks.loggers(node):
                log.add(t + STAGGER_MS * s, fmt.batch_line(v, ev.kind, ev.fields), i, tag)


def _noise(sc: Scenario, tl: Timeline, logs: list[_Log], ready: float) -> None:
    """Lines a real log holds that say nothing about the scheduler (``formats.NOISE``)."""
    main = logs[0]
    end = ready + tl.phases[-1].end + 5000
    mid = [ready + (run.start + run.end) / 2 for run in tl.phases]
    if "http" in sc.noise:
        probe = 0
        for k, t in enumerate(range(int(ready) + 2500, int(end), 5000)):
            line = fmt.access_line(49310 + k % 90, "/health", "GET", client="10.42.0.1")
            main.add(t, line, tag="", stream="stdout")
            if k % 12 == 5:
                probe += 1
                line = fmt.access_line(50211 + probe, "/v1/models", "GET", client="10.42.7.3")
                main.add(t + 37, line, tag="", stream="stdout")
        for n, t in enumerate((mid[0], mid[-1], mid[-1] + 900)):
            line = fmt.access_line(
                51822 + n, "/v1/chat/completions", status="400 Bad Request", client="10.42.3.17"
            )
            main.add(t + 11, line, tag="", stream="stdout")
    if "traceback" in sc.noise:
        main.add(ready + 1500, fmt.WARNINGS[1])
        main.add(ready + 1500, fmt.WARNINGS[2])
        main.add(mid[0] + 5, fmt.WARNINGS[0])
        t = mid[-1] + 433
        line = fmt.access_line(
            51907, "/v1/chat/completions", status="500 Internal Server Error", client="10.42.3.17"
        )
        main.add(t, line, tag="", stream="stdout")
        main.add(t + 1, fmt.TRACEBACK[0], tag="")
        for text in fmt.TRACEBACK[1:]:
            main.add(t + 1, text)


# -- the benchmark -----------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(name: str, values: list[float], ps: tuple[int, ...]) -> dict[str, float]:
    mean = math.fsum(values) / len(values)
    out = {
        f"mean_{name}_ms": mean,
        f"median_{name}_ms": statistics.median(values),
        f"std_{name}_ms": math.sqrt(math.fsum((x - mean) ** 2 for x in values) / len(values)),
    }
    for p in ps:
        out[f"p{p}_{name}_ms"] = _pct(values, p)
    return out


def _weighted_stats(
    name: str, pairs: list[tuple[float, int]], ps: tuple[int, ...]
) -> dict[str, float]:
    """``_stats`` of the values ``gap`` repeated ``count`` times, without expanding them."""
    pairs = sorted(pairs)
    total = sum(c for _, c in pairs)
    mean = math.fsum(g * c for g, c in pairs) / total
    var = math.fsum((g - mean) ** 2 * c for g, c in pairs) / total
    ends, acc = [], 0
    for _, c in pairs:
        acc += c
        ends.append(acc)

    def at(k: int) -> float:  # the k-th smallest value, 0-based
        return pairs[bisect.bisect_right(ends, k)][0]

    def pct(q: float) -> float:
        pos = (total - 1) * q / 100
        lo = math.floor(pos)
        return at(lo) + (at(min(lo + 1, total - 1)) - at(lo)) * (pos - lo)

    out = {f"mean_{name}_ms": mean, f"median_{name}_ms": pct(50), f"std_{name}_ms": math.sqrt(var)}
    for p in ps:
        out[f"p{p}_{name}_ms"] = pct(p)
    return out


def bench_record(sc: Scenario, run: PhaseRun) -> dict[str, Any]:
    """One ``bench_serving --output-file`` JSONL record, with the keys of ``sc.version``."""
    v, ph, reqs = sc.version_tuple, run.phase, run.requests
    dur = run.duration_ms / 1000.0
    n = len(reqs)
    out_tokens = sum(r.osl for r in reqs)
    in_tokens = sum(r.isl for r in reqs)
    e2e = [r.finish - r.arrival for r in reqs]
    ttft = [r.first_token - r.arrival for r in reqs]
    tpot = [(r.finish - r.first_token) / (r.osl - 1) for r in reqs if r.osl > 1]
    new = v >= (0, 5, 23)
    rec: dict[str, Any] = {
        "backend": "sglang-oai",
        "dataset_name": "random",
        "request_rate": math.inf,
        "max_concurrency": ph.c,
        "sharegpt_output_len": None,
        "random_input_len": ph.isl,
        "random_output_len": ph.osl,
        "random_range_ratio": sc.range_ratio,
        "duration": dur,
        "completed": n,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "total_output_tokens_retokenized": out_tokens,
        "request_throughput": n / dur,
        "input_throughput": in_tokens / dur,
        "output_throughput": out_tokens / dur,
    }
    if v >= (0, 5, 10):
        rec["total_throughput"] = (in_tokens + out_tokens) / dur
    e2e_ps = (90, 95, 99) if new else (90, 99) if v >= (0, 5, 10) else (99,)
    rec |= _stats("e2e_latency", e2e, e2e_ps)
    rec |= _stats("ttft", ttft, (90, 95, 99) if new else (99,))
    rec |= _stats("tpot", tpot, (90, 95, 99) if new else (99,))
    rec |= _weighted_stats("itl", run.itl, (90, 95, 99) if new else (95, 99))
    rec["concurrency"] = sum(e2e) / run.duration_ms
    rec["accept_length"] = None
    if v >= (0, 5, 5):
        rec["tag"] = None
        rec["total_input_text_tokens"] = in_tokens
        rec["total_input_vision_tokens"] = 0
        rec["server_info"] = dict(_server_args(sc, 0))
    if v >= (0, 5, 10):
        rec["max_output_tokens_per_s"] = float(max(run.tokens_at.values()))
        rec["max_concurrent_requests"] = min(ph.c, ph.num_prompts)
    return {
        k: (round(x, 6) if isinstance(x, float) and math.isfinite(x) else x) for k, x in rec.items()
    }


# -- the GPU trace -------------------------------------------------------------------------------


def _gpu_samples(
    sc: Scenario, tl: Timeline, node: int, ready: float
) -> tuple[list[recorders.Gpu], list[recorders.Sample]]:
    """The GPUs of one node and their samples: busy share and power per polling round, the
    round's time on the trace's clock (``gpu_clock_offset_s`` ahead of the log's)."""
    lay, hw = sc.layout, sc.hardware
    rng = random.Random(f"{sc.name}/{node}")
    segs = [Segment(ready + g.t0, ready + g.t1, g.busy) for g in tl.segments]
    step = sc.gpu_interval_ms
    window = sc.util_window_ms or step  # what one sample averages
    t0 = math.floor((ready + tl.phases[0].start - 12_000) / 1000) * 1000 + 137.0
    t_end = ready + tl.phases[-1].end + 6000
    per_node = lay.pp // lay.nnodes if lay.pp > 1 else 1
    gpus = []
    for g in range(hw.gpus):
        stage = node * per_node + g // lay.tp if lay.pp > 1 else 0
        if stage >= lay.pp or (lay.pp == 1 and g >= lay.tp):
            continue
        mem = _memory(sc, stage)["used_mib"] + rng.uniform(-40, 40)
        uuid = "GPU-" + "-".join(f"{rng.getrandbits(b):0{b // 4}x}" for b in (32, 16, 16, 16, 48))
        gpus.append(recorders.Gpu(g, stage, int(mem), uuid))
    samples = []
    k = 0
    t = t0
    while t <= t_end:
        lo, hi = t - window, t
        while k < len(segs) and segs[k].t1 <= lo:
            k += 1
        busy = [0.0] * lay.pp
        j = k
        while j < len(segs) and segs[j].t0 < hi:
            seg = segs[j]
            overlap = min(seg.t1, hi) - max(seg.t0, lo)
            if overlap > 0:
                for s in range(lay.pp):
                    busy[s] += overlap * seg.busy[s] / window
            j += 1
        values = []
        for gpu in gpus:
            b = min(busy[gpu.stage], 1.0)
            power = hw.idle_w + (hw.tdp_w - hw.idle_w) * (0.2 + 0.6 * b if b > 0.005 else 0.0)
            power += rng.uniform(-3, 3)
            values.append((b, power))
        samples.append(recorders.Sample(t + 1000.0 * sc.gpu_clock_offset_s, tuple(values)))
        t += step
    return gpus, samples


def _gpu_trace(sc: Scenario, tl: Timeline, node: int, ready: float) -> str:
    """One node's GPU trace in the scenario's shape (``recorders.GPU_FORMATS``)."""
    gpus, samples = _gpu_samples(sc, tl, node, ready)
    epoch = datetime.fromisoformat(sc.start)
    multi = sc.layout.nnodes > 1
    return recorders.gpu_text(sc.gpu_format, epoch, gpus, samples, sc.hardware.gpu_name, multi)


def _bench_text(sc: Scenario, tl: Timeline) -> str:
    """What ``bench_serving`` prints for each phase (``bench_format = "stdout"``)."""
    lines = []
    for run in tl.phases:
        rec = bench_record(sc, run)
        ph = run.phase
        lines += [
            f"benchmark_args=Namespace(backend='sglang-oai', base_url=None, host='0.0.0.0', "
            f"port=30000, dataset_name='random', num_prompts={ph.num_prompts}, "
            f"random_input_len={ph.isl}, random_output_len={ph.osl}, "
            f"random_range_ratio={sc.range_ratio}, request_rate=inf, "
            f"max_concurrency={ph.c}, output_file=None, seed=1)",
            f"#Input tokens: {rec['total_input_tokens']}",
            f"#Output tokens: {rec['total_output_tokens']}",
            "Starting initial single prompt test run...",
            "Initial test run completed. Starting main benchmark run...",
            f"100%|██████████| {ph.num_prompts}/{ph.num_prompts} "
            f"[{int(run.duration_ms // 60000):02d}:{int(run.duration_ms / 1000 % 60):02d}<00:00,"
            f"  {run.duration_ms / 1000 / ph.num_prompts:.2f}s/it]",
            *recorders.bench_block(sc.version_tuple, rec),
        ]
    return "\n".join(lines) + "\n"


# -- run.toml and expected.json --------------------------------------------------------------------


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=True)


def _run_toml(sc: Scenario) -> str:
    notes = (
        "Generated scenario, not measured: tests/helpers/scenarios builds it from a small "
        "arithmetic machine (step time a + k*b per layer, PP hop, all-reduce, lm_head). "
        f"Scenario {sc.name!r}; what is injected and what it costs is in expected.json. " + sc.notes
    ).strip()
    rows = [
        f"label = {_toml_str(sc.label)}",
        f"command = {_toml_str(_command(sc))}",
        f"hardware = {_toml_str(sc.hardware_label)}",
        f"interconnect = {_toml_str(sc.hardware.interconnect)}",
        f"clock_offset_s = {sc.declared_offset_s:.1f}",
        "synthetic = true",
        f"notes = {_toml_str(notes)}",
    ]
    if sc.gpu_format == "dcgmi":  # a trace without timestamps needs its sampling period
        rows += ["", "[gpu_trace]", f"interval_s = {sc.gpu_interval_ms / 1000:g}"]
    return "\n".join(rows) + "\n"


def expected_record(sc: Scenario, tl: Timeline | None = None) -> dict[str, Any]:
    """What is true about the run: injected causes with their cost, checks that bound what is
    not injected, and per phase the arithmetic (and, given a timeline, what was played)."""
    lay, la, m = sc.layout, sc.launch, sc.machine
    phases = []
    for n, ph in enumerate(sc.phases):
        sizes = admit_burst(ph.c, ph.isl, lay.slots, la.chunk, la.slot_cap, la.mrr_resolved)
        sizes = [b for b in sizes if b]
        b = max(sizes)
        stage = [m.stage_ms(lay, s, b) for s in range(lay.pp)]
        row: dict[str, Any] = {
            "c": ph.c,
            "num_prompts": ph.num_prompts,
            "isl": ph.isl,
            "osl": ph.osl,
            "slot_sizes": sizes,
            "round_ms": round(m.round_ms(lay, sizes, la.graph_max), 3),
            "decode_tok_s": round(m.tok_s(lay, sizes, la.graph_max), 3),
            "cuda_graph": all(b <= la.graph_max for b in sizes),
            "stage_ms": [round(t, 3) for t in stage],
            "stage_busy": [round(x, 4) for x in m.busy(lay, sizes, la.graph_max)],
            "stage_imbalance": round(1 - sum(stage) / len(stage) / max(stage), 4),
        }
        if tl is not None:
            run = tl.phases[n]
            row |= {
                "bench_tok_s": round(run.tok_s, 6),
                "duration_s": round(run.duration_ms / 1000, 6),
                "prefill_share": round(run.prefill_ms / run.duration_ms, 4),
                "retractions": run.retractions,
                "queue_at_decode": run.max_queue,
                "max_token_usage": round(run.max_usage, 4),
                "eager_share": round(run.eager_steps / max(run.decode_steps, 1), 4),
            }
        phases.append(row)
    full = [r for r in phases if sum(r["slot_sizes"]) >= lay.pp and len(r["slot_sizes"]) >= lay.pp]
    checks: dict[str, Any] = {
        # 1 − mean/max stage time where every stage has a micro-batch (else it does not bind)
        "stage_imbalance": max((r["stage_imbalance"] for r in full), default=0.0),
    }
    if tl is not None:
        checks |= {
            "prefill_share_max": max(r["prefill_share"] for r in phases),
            "retractions": sum(r["retractions"] for r in phases),
            "queue_at_decode_max": max(r["queue_at_decode"] for r in phases),
            "eager_share_max": max(r["eager_share"] for r in phases),
        }
    out = {
        "scenario": sc.name,
        "healthy": sc.healthy,
        "injected": sorted(sc.causes),
        "impacts": {
            k: {"impact": c.impact, "phase": c.phase, "derivation": c.derivation}
            for k, c in sorted(sc.causes.items())
        },
        "incidental": list(sc.incidental),
        "checks": checks,
        "model": sc.model.path,
        "hardware": sc.hardware_label,
        "gpu_name": sc.hardware.gpu_name,
        "interconnect": sc.hardware.interconnect,
        "sglang_version": sc.version,
        "layout": sc.describe(),
        "machine_ms": asdict(m),
        "phases": phases,
    }
    if sc.variation is not None:
        out["variation"] = sc.variation
    return out


def write_run(sc: Scenario, directory: str | Path) -> Path:
    """Write the run directory of ``sc`` into ``directory`` (created); returns it."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ranks = _Ranks(sc)
    nodes = sc.layout.nnodes
    logs = [_Log(sc, n, sc.hosts[n % len(sc.hosts)]) for n in range(nodes)]
    ready = _startup(sc, logs, ranks)
    tl = play(sc)
    _events(sc, tl, logs, ranks, ready)
    _noise(sc, tl, logs, ready)
    ext = {"smi": "csv", "smi-dmon": "dmon", "dcgmi": "dcgmi"}[sc.gpu_format]
    for n, log in enumerate(logs):
        name = "server.log" if nodes == 1 else f"server-node{n}.log"
        (out / name).write_text(log.text(), encoding="utf-8")
        if "gpu" not in sc.omit:
            trace = f"gpu.{ext}" if nodes == 1 else f"gpu-node{n}.{ext}"
            (out / trace).write_text(_gpu_trace(sc, tl, n, ready), encoding="utf-8")
    if "bench" not in sc.omit and sc.bench_format == "jsonl":
        bench = "".join(json.dumps(bench_record(sc, run)) + "\n" for run in tl.phases)
        (out / "bench.jsonl").write_text(bench, encoding="utf-8")
    elif "bench" not in sc.omit:
        (out / "bench.log").write_text(_bench_text(sc, tl), encoding="utf-8")
    if "run.toml" not in sc.omit:
        (out / "run.toml").write_text(_run_toml(sc), encoding="utf-8")
    record = expected_record(sc, tl)
    (out / "expected.json").write_text(
        json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return out
