"""Deterministic generator of a large journald-wrapped SGLang PP8 log for the benchmark.

The output imitates ``journalctl -u sglang`` (``-o short``) of a PP8×TP1 server with
v0.5.10-style lines: one startup block (``server_args=ServerArgs(...)`` and the per-rank load,
KV-cache and CUDA-graph lines), then a steady state at ~80 lines/s with the line mix 70 %
``Decode batch``, 10 % ``Prefill batch``, 12 % uvicorn access lines, 4 %
``Receive: obj=GenerateReqInput(...)`` and 4 % other lines (warnings, tqdm bars, NCCL lines,
retractions). About 10 % of the scheduler lines carry a second rank tag (``PP3 TP1``). The content
depends only on the seed, so a smaller file is a prefix of a larger one.

Speed: numbers are drawn once per 8-rank decode round (not per field per line), the journal and
bracket timestamps are rendered once per second, and lines are written in ~8 MB blocks.

    python bench/make_log.py --size-mb 1000 --out bench/out/sglang-1g.log
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from reshape import WRAPPERS, Reshaper
from server_args_repr import CUDA_GRAPH_BS, server_args_repr

GENERATOR_VERSION = 2  # bump when the output changes; bench/run.py then regenerates
SEED = 20260525
HOST = "gpu-node-1"
START = datetime(2026, 5, 25, 21, 40, 21)
PP_SIZE = 8
HTTP_PID = 85614
RANK_PIDS = tuple(85687 + r for r in range(PP_SIZE))  # PP3 -> 85690
MAX_TOTAL_TOKENS = 327680
BLOCK_BYTES = 8 << 20

# Kind codes of steady-state lines and their weights in percent (two-tag scheduler lines ≈ 10 %).
DEC, DEC2, PRE, PRE2, ACC, RCV, OTH = range(7)
KIND_WEIGHTS = (63, 7, 9, 1, 12, 4, 4)
KIND_TABLE_SIZE = 1 << 20
ROUNDS_PER_S = 80 * 0.70 / PP_SIZE  # 8-rank decode rounds per second

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def journal_ts(t: datetime) -> str:
    """``journalctl -o short`` timestamp: ``%b %e %H:%M:%S`` (day padded with a space)."""
    return f"{_MONTHS[t.month - 1]} {t.day:2d} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def bracket_ts(t: datetime) -> str:
    """SGLang's ``%Y-%m-%d %H:%M:%S`` log timestamp."""
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def _head(pid: int) -> str:
    return f" {HOST} python3[{pid}]: "


# --------------------------------------------------------------------------------------------
# startup block


def startup_lines() -> list[str]:
    """The launch: server_args, per-rank load/KV/graph lines, tqdm bars, uvicorn start-up."""
    out: list[tuple[float, int, str]] = []

    def emit(dt: float, pid: int, msg: str, tags: str | None = "") -> None:
        t = START + timedelta(seconds=int(dt))
        if tags is None:  # no SGLang prefix (tqdm, raw stderr)
            line = f"{journal_ts(t)}{_head(pid)}{msg}\n"
        else:
            line = f"{journal_ts(t)}{_head(pid)}[{bracket_ts(t)}{tags}] {msg}\n"
        out.append((dt, len(out), line))

    emit(0, HTTP_PID, "server_args=" + server_args_repr(PP_SIZE))
    emit(0, HTTP_PID, "Pipeline parallelism is incompatible with overlap schedule.")
    weights = (71.24, 69.03, 69.05, 69.02, 69.04, 69.01, 69.06, 83.76)
    layers = (7, 7, 7, 7, 7, 7, 7, 12)
    pools = (1048576, 1153433, 1153433, 1153433, 1153433, 1153433, 1153433, MAX_TOTAL_TOKENS)
    for r, pid in enumerate(RANK_PIDS):
        tag = f" PP{r}"
        emit(4, pid, "Init torch distributed begin.", tag)
        emit(6, pid, f"Init torch distributed ends. elapsed=2.{31 + r} s, mem usage=0.79 GB", tag)
        emit(7, pid, "Load weight begin. avail mem=93.61 GB", tag)
    for i, done in enumerate((0, 12, 27, 41, 58, 64)):
        eta = "?" if done == 0 else f"{(64 - done) * 5 // 60:02d}:{(64 - done) * 5 % 60:02d}"
        rate = "?it/s" if done == 0 else "0.21it/s"
        pct = done * 100 // 64
        emit(
            8 + 60 * i,
            RANK_PIDS[0],
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/64 "
            f"[{i * 60 // 60:02d}:00<{eta}, {rate}]",
            None,
        )
    for r, pid in enumerate(RANK_PIDS):
        tag = f" PP{r}"
        w = weights[r]
        after = 93.61 - w
        kv = pools[r] * layers[r] * 1152 / 1e9
        pool_end = after - kv - 0.04
        cap_begin = pool_end - 0.11
        cap_use = 1.07 if r == PP_SIZE - 1 else 1.02
        cap_end = cap_begin - cap_use
        t0 = 312 + r * 0.7
        emit(
            t0,
            pid,
            f"Load weight end. elapsed={t0 - 7:.2f} s, type=DeepseekV3ForCausalLM, "
            f"avail mem={after:.2f} GB, mem usage={w:.2f} GB.",
            tag,
        )
        emit(t0 + 1, pid, f"KV Cache is allocated. #tokens: {pools[r]}, KV size: {kv:.2f} GB", tag)
        emit(t0 + 1, pid, f"Memory pool end. avail mem={pool_end:.2f} GB", tag)
        emit(
            t0 + 2,
            pid,
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={cap_begin:.2f} GB",
            tag,
        )
        emit(t0 + 2, pid, f"Capture cuda graph bs {CUDA_GRAPH_BS}", tag)
        emit(
            t0 + 14,
            pid,
            f"Capturing batches (bs=1 avail_mem={cap_end + 0.02:.2f} GB): 100%|██████████| "
            f"{len(CUDA_GRAPH_BS)}/{len(CUDA_GRAPH_BS)} [00:12<00:00,  2.9{r}it/s]",
            None,
        )
        emit(
            t0 + 14,
            pid,
            f"Capture cuda graph end. Time elapsed: 12.{40 + r} s. mem usage={cap_use:.2f} GB. "
            f"avail mem={cap_end:.2f} GB.",
            tag,
        )
        emit(
            t0 + 15,
            pid,
            f"max_total_num_tokens={MAX_TOTAL_TOKENS}, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=2048, context_len=262144, "
            f"available_gpu_mem={cap_end:.2f} GB",
            tag,
        )
    t = 330
    emit(t, HTTP_PID, f"INFO:     Started server process [{HTTP_PID}]")
    emit(t, HTTP_PID, "INFO:     Waiting for application startup.")
    emit(t, HTTP_PID, "INFO:     Application startup complete.")
    emit(t, HTTP_PID, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    emit(t + 1, HTTP_PID, 'INFO:     127.0.0.1:40118 - "GET /get_model_info HTTP/1.1" 200 OK')
    for r, pid in enumerate(RANK_PIDS):
        emit(
            t + 2,
            pid,
            "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 0.00",
            f" PP{r}",
        )
    emit(t + 3, HTTP_PID, 'INFO:     127.0.0.1:40124 - "POST /generate HTTP/1.1" 200 OK')
    emit(t + 3, HTTP_PID, "The server is fired up and ready to roll!")
    return [line for _, _, line in sorted(out)]  # journald merges the processes by time


STARTUP_SECONDS = 340


# --------------------------------------------------------------------------------------------
# steady state: pools of pre-rendered message tails


def _access_pool(rng: random.Random, n: int) -> list[str]:
    """uvicorn access tails, starting after the bracket timestamp."""
    reqs = (
        (80, '"POST /generate HTTP/1.1" 200 OK'),
        (12, '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        (4, '"GET /health HTTP/1.1" 200 OK'),
        (2, '"GET /metrics HTTP/1.1" 200 OK'),
        (1, '"POST /generate HTTP/1.1" 400 Bad Request'),
        (1, '"POST /v1/chat/completions HTTP/1.1" 503 Service Unavailable'),
    )
    pick = rng.choices([r for _, r in reqs], weights=[w for w, _ in reqs], k=n)
    return [f"] INFO:     127.0.0.1:{rng.randint(32768, 60999)} - {r}\n" for r in pick]


def _receive_pool(rng: random.Random, n: int) -> list[str]:
    """``--log-requests`` tails (~300 chars of ``GenerateReqInput(...)``)."""
    out = []
    for _ in range(n):
        rid = f"{rng.getrandbits(128):032x}"
        ids = ", ".join(str(rng.randint(100, 163839)) for _ in range(rng.randint(3, 6)))
        mnt = rng.choice((256, 512, 1000, 1024, 2048))
        out.append(
            f"] Receive: obj=GenerateReqInput(rid='{rid}', text=None, input_ids=[{ids}, ...], "
            f"sampling_params={{'temperature': 0.0, 'max_new_tokens': {mnt}, 'ignore_eos': True}}, "
            "return_logprob=False, stream=False)\n"
        )
    return out


def _other_pool(rng: random.Random, n: int) -> list[tuple[int, bool, str]]:
    """Miscellaneous lines as (pid index, has SGLang bracket, tail); pid index 8 is the HTTP pid."""
    out: list[tuple[int, bool, str]] = []
    for _ in range(n):
        r = rng.randrange(PP_SIZE)
        roll = rng.random()
        if roll < 0.25:
            tid = 86000 + rng.randrange(900)
            ch = rng.randrange(32)
            out.append(
                (
                    r,
                    False,
                    f"{HOST}:{RANK_PIDS[r]}:{tid} [{r}] NCCL INFO Channel {ch:02d}/0 : "
                    f"{r}[{r}] -> {(r + 1) % PP_SIZE}[{(r + 1) % PP_SIZE}] via P2P/CUMEM/read\n",
                )
            )
        elif roll < 0.45:
            done = rng.randrange(1, 1001)
            out.append(
                (
                    8,
                    False,
                    f"Processed prompts: {done * 100 // 1000:3d}%|{'█' * (done // 100):<10}| "
                    f"{done}/1000 [{done // 60:02d}:{done % 60:02d}<00:00, "
                    f"{rng.uniform(20, 40):.2f}it/s]\n",
                )
            )
        elif roll < 0.65:
            old = rng.uniform(0.3, 0.6)
            out.append(
                (
                    r,
                    True,
                    f" PP{r}] KV cache pool is full. Retract requests. "
                    f"#retracted_reqs: {rng.randint(1, 4)}, "
                    f"#new_token_ratio: {old:.4f} -> {min(1.0, old + 0.3):.4f}\n",
                )
            )
        elif roll < 0.80:
            out.append(
                (
                    r,
                    False,
                    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: "
                    "FutureWarning: The pynvml package is deprecated. Please install "
                    "nvidia-ml-py instead. If you did not install pynvml directly, please report "
                    "this to the maintainers of the package that installed pynvml for you.\n",
                )
            )
        elif roll < 0.92:
            out.append(
                (
                    8,
                    True,
                    "] Finish: obj=GenerateReqInput(rid='"
                    f"{rng.getrandbits(128):032x}'), out={{'meta_info': {{'prompt_tokens': "
                    f"{rng.randint(800, 1200)}, 'completion_tokens': {rng.randint(200, 2048)}, "
                    "'finish_reason': {'type': 'length'}}}\n",
                )
            )
        else:
            out.append(
                (
                    r,
                    True,
                    f" PP{r}] Scheduler watchdog: forward_ct={rng.randint(10**5, 10**7)}, "
                    f"last batch took {rng.uniform(0.2, 3.0):.2f} s\n",
                )
            )
    return out


def steady_blocks(rng: random.Random, t0: float) -> Iterator[str]:
    """Yield one string per simulated second of steady-state traffic, forever."""
    kinds = rng.choices(range(7), weights=KIND_WEIGHTS, k=KIND_TABLE_SIZE)
    per_sec = [rng.randint(72, 88) for _ in range(4099)]
    access = _access_pool(rng, 8191)
    receive = _receive_pool(rng, 2039)
    other = _other_pool(rng, 1021)
    rr_strs = [str(i) for i in range(17)]
    heads = [_head(p) for p in (*RANK_PIDS, HTTP_PID)]
    tag1 = [f" PP{r}] " for r in range(PP_SIZE)]
    tag2 = [f" PP{r} TP1] " for r in range(PP_SIZE)]
    n_kinds, n_acc, n_rcv, n_oth, n_sec = len(kinds), len(access), len(receive), len(other), 4099
    rand = rng.random
    ki = ai = ci = oi = 0
    dec_rank = PP_SIZE  # forces a new decode round on the first decode line
    pre_rank = PP_SIZE
    dmsg: list[str] = []
    pmsg: list[str] = []

    # Workload state: a cohort of requests decodes until it finishes, then a new cohort starts.
    cohort_left = 0
    n_req = 32
    ctx = 1000.0
    per_req_rate = 7.75
    sec = 0
    t = START + timedelta(seconds=t0)
    one = timedelta(seconds=1)
    while True:
        if cohort_left <= 0:
            cohort_left = rng.randint(60, 200)
            n_req = rng.randint(24, 40) if rng.random() < 0.7 else rng.randint(8, 128)
            ctx = rng.uniform(800.0, 1200.0)
            per_req_rate = rng.uniform(6.5, 9.0)
        cohort_left -= 1
        tput = n_req * per_req_rate
        step = per_req_rate / ROUNDS_PER_S  # context growth per request per decode round
        jts = journal_ts(t)
        bts = bracket_ts(t)
        jh = [jts + h for h in heads]
        pre1 = [jh[r] + "[" + bts + tag1[r] for r in range(PP_SIZE)]
        pre2 = [jh[r] + "[" + bts + tag2[r] for r in range(PP_SIZE)]
        jb = [h + "[" + bts for h in jh]
        http = jb[PP_SIZE]
        slot = n_req / PP_SIZE
        parts: list[str] = []
        app = parts.append
        for _ in range(per_sec[sec % n_sec]):
            k = kinds[ki]
            ki += 1
            if ki == n_kinds:
                ki = 0
            if k <= DEC2:
                if dec_rank == PP_SIZE:
                    dec_rank = 0
                    ctx += step
                    tok = min(int(n_req * ctx), MAX_TOTAL_TOKENS - 512)
                    cg = "True" if rand() > 0.02 else "False"
                    q = 0 if rand() > 0.1 else int(rand() * 6)
                    shared = (
                        f", #token: {tok}, token usage: {tok / MAX_TOTAL_TOKENS:.2f}, "
                        f"cuda graph: {cg}, gen throughput (token/s): "
                        f"{tput * (0.95 + 0.1 * rand()):.2f}, #queue-req: {q}\n"
                    )
                    # Lock-step: every stage prints the same micro-batch's values as its
                    # n-th line (the PP scheduler's normal log; a disagreement is a desync).
                    running = rr_strs[min(16, max(1, int(slot + 3.0 * rand() - 1.5)))]
                    dmsg = ["Decode batch, #running-req: " + running + shared] * PP_SIZE
                r = dec_rank
                dec_rank += 1
                app((pre1 if k == DEC else pre2)[r] + dmsg[r])
            elif k <= PRE2:
                if pre_rank == PP_SIZE:
                    pre_rank = 0
                    seqs = 1 + int(rand() * 9)
                    new_tok = min(8192, int(seqs * ctx * (0.8 + 0.4 * rand())))
                    cached = 0 if rand() < 0.8 else 64 * int(rand() * 16)
                    msg = (
                        f"Prefill batch, #new-seq: {seqs}, #new-token: {new_tok}, "
                        f"#cached-token: {cached}, "
                        f"token usage: {min(n_req * ctx / MAX_TOTAL_TOKENS, 0.99):.2f}, "
                        f"#running-req: {int(rand() * 16)}, #queue-req: {int(rand() * 31)}, "
                        "cuda graph: False, input throughput (token/s): "
                        f"{4000 + 5000 * rand():.2f}\n"
                    )
                    pmsg = [msg] * PP_SIZE
                r = pre_rank
                pre_rank += 1
                app((pre1 if k == PRE else pre2)[r] + pmsg[r])
            elif k == ACC:
                app(http + access[ai])
                ai += 1
                if ai == n_acc:
                    ai = 0
            elif k == RCV:
                app(http + receive[ci])
                ci += 1
                if ci == n_rcv:
                    ci = 0
            else:
                p, br, tail = other[oi]
                oi += 1
                if oi == n_oth:
                    oi = 0
                app((jb[p] if br else jh[p]) + tail)
        yield "".join(parts)
        sec += 1
        t += one


def meta_path(path: str | Path) -> Path:
    """Sidecar ``<log>.meta.json`` describing a generated log."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def write_log(
    path: str | Path, size_bytes: int, wrapper: str = "journald", old_every: int = 0
) -> dict[str, Any]:
    """Write the reference log to *path*: whole lines, at most *size_bytes* bytes.

    ``wrapper`` (``reshape.WRAPPERS``) is how the lines were collected; with ``old_every`` = N,
    every N-th batch line is in the 0.5.5 profile (``reshape``).

    Also writes :func:`meta_path` and returns its content (``bytes``, ``lines``, ``version``, ...).
    """
    rng = random.Random(SEED)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    lines = 0
    meta_path(path).unlink(missing_ok=True)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:

        def put(data: bytes) -> bool:
            nonlocal written, lines
            room = size_bytes - written
            full = len(data) <= room
            if not full:
                data = data[: data.rfind(b"\n", 0, room) + 1]
            f.write(data)
            written += len(data)
            lines += data.count(b"\n")
            return full

        shape = Reshaper(wrapper, START.year, old_every)
        plain = wrapper == "journald" and not old_every
        if put(("".join(startup_lines()) if plain else shape("".join(startup_lines()))).encode()):
            buf: list[str] = []
            size = 0
            for block in steady_blocks(rng, STARTUP_SECONDS):
                buf.append(block)
                size += len(block)
                if size >= BLOCK_BYTES:
                    text = "".join(buf)
                    if not put((text if plain else shape(text)).encode()):
                        break
                    buf.clear()
                    size = 0
        f.flush()
        os.fsync(f.fileno())  # no writeback left to disturb the timings that follow
    tmp.replace(path)
    meta = {
        "version": GENERATOR_VERSION,
        "seed": SEED,
        "requested_bytes": size_bytes,
        "wrapper": wrapper,
        "old_every": old_every,
        "bytes": written,
        "lines": lines,
    }
    meta_path(path).write_text(json.dumps(meta) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    """CLI: ``--size-mb N --out PATH`` (1 MB = 10**6 bytes)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=1000.0, help="target size, 1 MB = 10**6 B")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "sglang-1g.log"))
    ap.add_argument("--wrapper", choices=WRAPPERS, default="journald")
    ap.add_argument("--old-every", type=int, default=0, help="every N-th batch line as 0.5.5")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    info = write_log(args.out, int(args.size_mb * 1_000_000), args.wrapper, args.old_every)
    dt = time.perf_counter() - t
    print(
        f"wrote {args.out}: {info['bytes']:,} bytes, {info['lines']:,} lines, "
        f"{info['bytes'] / max(info['lines'], 1):.1f} B/line, {dt:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
