"""Declared tables: every column ppscope produces, its type, and one line saying what it means.

Column names carry their units (``_tok_s``, ``_pct``, ``_gb``, ``_s``). Fields a format version
does not print are null, never guessed.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from toolkit.schema import Column, schema_of


class BatchField(NamedTuple):
    """One ``key: value`` field of a ``Prefill batch`` / ``Decode batch`` line."""

    key: str  # exactly as SGLang prints it, before ": "
    column: str
    dtype: pl.DataType
    doc: str


RANK_TAGS: tuple[str, ...] = ("dp", "pp", "attn_cp", "moe_dp", "tp", "ep")
"""Rank tags of the scheduler prefix (`` DP0 PP3 TP0``); each appears only when that size > 1."""

# Event kinds, one per input line.
KINDS: dict[str, str] = {
    "decode": "a `Decode batch` line",
    "prefill": "a `Prefill batch` line",
    "server_args": "the `server_args=` dump that starts a launch",
    "startup": "a startup fact: weights, KV pool, CUDA graphs, `max_total_num_tokens=`, ready",
    "override": "a runtime change of the arguments (`Global server args updated!`, "
    "`Config updated via context override:`)",
    "http": "a uvicorn access line",
    "error": "a warning, error or traceback line (grouped into `errors`)",
    "progress": "a progress bar (tqdm) without a log line",
    "marker": "a wrapper's own line: journald `-- Boot ... --`, `-- No entries --`",
    "blank": "an empty line",
    "other": "any other line, kept with its line number",
}

_I = pl.Int64()
_F = pl.Float64()
_B = pl.Boolean()

BATCH_FIELDS: tuple[BatchField, ...] = (
    BatchField("#new-seq", "new_seq", _I, "requests admitted by this prefill batch"),
    BatchField("#new-token", "new_token", _I, "new prompt tokens computed by this prefill batch"),
    BatchField("#cached-token", "cached_token", _I, "prompt tokens served from the prefix cache"),
    BatchField(
        "cache hit rate", "cache_hit_rate_pct", _F, "cumulative prefix-cache hit rate (≤0.4.3)"
    ),
    BatchField("token usage", "token_usage", _F, "KV pool in use on this rank, 0–1"),
    BatchField("#token", "token", _I, "KV tokens in use on this rank (global under PP)"),
    BatchField("#full token", "full_token", _I, "hybrid models: full-attention KV tokens in use"),
    BatchField(
        "full token usage", "full_token_usage", _F, "hybrid models: full-attention pool usage"
    ),
    BatchField("#swa token", "swa_token", _I, "hybrid models: sliding-window KV tokens in use"),
    BatchField(
        "swa token usage", "swa_token_usage", _F, "hybrid models: sliding-window pool usage"
    ),
    BatchField("mamba num", "mamba_num", _I, "hybrid models: mamba states in use"),
    BatchField("mamba usage", "mamba_usage", _F, "hybrid models: mamba pool usage"),
    BatchField("#gpu token", "gpu_token", _I, "hierarchical sparse cache: tokens on GPU"),
    BatchField("gpu token usage", "gpu_token_usage", _F, "hierarchical sparse cache: GPU usage"),
    BatchField("#cpu token", "cpu_token", _I, "hierarchical sparse cache: tokens on CPU"),
    BatchField("cpu token usage", "cpu_token_usage", _F, "hierarchical sparse cache: CPU usage"),
    BatchField(
        "#running-req",
        "running_req",
        _I,
        "requests in the running batch; under PP one micro-batch slot, not the total",
    ),
    BatchField(
        "#queue-req", "queue_req", _I, "requests waiting (global, the same on all PP ranks)"
    ),
    BatchField("#pending-token", "pending_token", _I, "prompt tokens still waiting for prefill"),
    BatchField("#replay-token", "replay_token", _I, "tokens replayed after retraction"),
    BatchField("accept len", "accept_len", _F, "speculative decoding: mean accepted length"),
    BatchField("accept rate", "accept_rate", _F, "speculative decoding: acceptance rate"),
    BatchField("cap len", "cap_len", _F, "speculative decoding: capped draft length"),
    BatchField(
        "block accept len", "block_accept_len", _F, "speculative decoding: block accept len"
    ),
    BatchField(
        "pre-allocated usage", "preallocated_usage", _F, "PD decode: pre-allocated KV share"
    ),
    BatchField("#prealloc-req", "prealloc_req", _I, "PD: requests pre-allocating KV"),
    BatchField("#transfer-req", "transfer_req", _I, "PD decode: requests receiving KV"),
    BatchField("#retracted-req", "retracted_req", _I, "requests retracted (KV pool full)"),
    BatchField("#inflight-req", "inflight_req", _I, "PD prefill: requests whose KV is in flight"),
    BatchField("#unbootstrapped-req", "unbootstrapped_req", _I, "PD prefill: not bootstrapped"),
    BatchField("#bootstrap-req", "bootstrap_req", _I, "PD prefill: bootstrapping"),
    BatchField("#optimistic-req", "optimistic_req", _I, "PD prefill: optimistic requests"),
    BatchField("#transferring-req", "transferring_req", _I, "PD prefill: transferring KV"),
    BatchField("#host-receive-req", "host_receive_req", _I, "PD: requests receiving on host"),
    BatchField("waiting-image-req", "waiting_image_req", _I, "EPD: requests waiting for images"),
    BatchField("largest-len", "largest_len", _I, "longest sequence in the batch (0.4.4)"),
    BatchField(
        "cuda graph",
        "cuda_graph",
        _B,
        "the batch ran a captured graph (also `cpu/npu/musa graph`); False = eager, slow",
    ),
    BatchField(
        "gen throughput (token/s)",
        "gen_tok_s",
        _F,
        "tokens generated by this scheduler per second since its previous Decode line",
    ),
    BatchField(
        "input throughput (token/s)",
        "input_tok_s",
        _F,
        "prompt tokens prefilled per second since the previous Prefill line",
    ),
    BatchField(
        "est. TFLOPS/s (per GPU)",
        "est_tflops_per_gpu",
        _F,
        "MFU metrics: estimated TFLOPS/s per GPU (decode or prefill)",
    ),
    BatchField(
        "est. read BW (GB/s per GPU)",
        "est_read_gb_s",
        _F,
        "MFU metrics: estimated memory read bandwidth per GPU",
    ),
    BatchField(
        "est. write BW (GB/s per GPU)",
        "est_write_gb_s",
        _F,
        "MFU metrics: estimated memory write bandwidth per GPU",
    ),
    BatchField("fwd occupancy", "fwd_occupancy_pct", _F, "device time busy in forward, %"),
    BatchField(
        "fwd+idle occupancy", "fwd_idle_occupancy_pct", _F, "device time in forward or idle, %"
    ),
)

EVENT_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "1-based line number in the (decompressed) file"),
    Column("ts", pl.Datetime("ms"), "local time of the line: SGLang's own, else the wrapper's"),
    Column("wrapper_ts", pl.Datetime("us"), "timestamp added by journald/docker/kubectl, if any"),
    Column("host", pl.String(), "journald host name, or docker compose service"),
    Column("pid", pl.Int64(), "journald or Ray process id"),
    Column("stream", pl.String(), "stdout/stderr where the wrapper says (Kubernetes CRI)"),
    *(Column(t, pl.Int32(), f"{t.upper()} rank from the scheduler prefix") for t in RANK_TAGS),
    Column("kind", pl.String(), "what the line is; see KINDS"),
    Column("level", pl.String(), "log level, when a custom logging format prints one"),
    Column("message", pl.String(), "the line after wrapper and SGLang prefix"),
)

BATCH_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("ts", pl.Datetime("ms"), "time the scheduler printed the line"),
    *(Column(t, pl.Int32(), f"{t.upper()} rank") for t in RANK_TAGS),
    Column("gpu_id", pl.Int32(), "GPU named in the message (0.1/0.2: `[gpu_id=N]`)"),
    Column("kind", pl.String(), "prefill or decode"),
    Column("forward_ct", pl.Int64(), "forward counter `[N]` (SGLANG_LOG_FORWARD_ITERS)"),
    Column("mixed_running_req", pl.Int64(), "running requests of a mixed-chunk prefill (0.2/0.3)"),
    Column("graph_device", pl.String(), "device label of the graph flag: cuda, cpu, npu, musa"),
    *(Column(f.column, f.dtype, f.doc) for f in BATCH_FIELDS),
    Column("extra", pl.String(), "fields this version of ppscope does not know, as printed"),
)

LAUNCH_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "line of the `server_args=` dump"),
    Column("ts", pl.Datetime("ms"), "time of the dump"),
    Column("launch", pl.Int32(), "0-based launch number within the loaded logs"),
    Column("complete", pl.Boolean(), "False when the dump was cut (truncated line)"),
    Column("tp_size", pl.Int64(), "tensor parallel size"),
    Column("pp_size", pl.Int64(), "pipeline parallel size"),
    Column("dp_size", pl.Int64(), "data parallel size"),
    Column("ep_size", pl.Int64(), "expert parallel size"),
    Column("pp_async_batch_depth", pl.Int64(), "extra PP micro-batch slots (≥0.5.7)"),
    Column("pp_max_micro_batch_size", pl.Int64(), "PP micro-batch cap; null = auto"),
    Column("max_running_requests", pl.Int64(), "as configured; resolved value is in startup"),
    Column("model_path", pl.String(), "model"),
)

STARTUP_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("launch", pl.Int32(), "launch the fact belongs to"),
    *(Column(t, pl.Int32(), f"{t.upper()} rank") for t in RANK_TAGS),
    Column("lineno", pl.Int64(), "line of the fact"),
    Column("ts", pl.Datetime("ms"), "time of the line"),
    Column("fact", pl.String(), "what was reported, e.g. max_total_num_tokens, kv_tokens"),
    Column("value", pl.Float64(), "its number (GB, s, tokens as named by `fact`)"),
    Column("text", pl.String(), "non-numeric value, e.g. the captured batch sizes list"),
)

OVERRIDE_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("launch", pl.Int32(), "launch whose arguments changed"),
    *(Column(t, pl.Int32(), f"{t.upper()} rank") for t in RANK_TAGS),
    Column("lineno", pl.Int64(), "line of the change"),
    Column("ts", pl.Datetime("ms"), "time of the line"),
    Column("key", pl.String(), "argument changed (null when the line could not be read)"),
    Column("value", pl.String(), "its new value, as JSON text"),
    Column("status", pl.String(), "`set`, else `refused`, `unchanged`, `unreadable`"),
    Column("note", pl.String(), "why it was refused, or what was odd about the line"),
)

SERVER_INFO_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "line of the answer (1 for a saved answer)"),
    Column("ts", pl.Datetime("ms"), "when the server was asked, on the log's clock"),
    Column("phase", pl.Int64(), "benchmark phase the call was made around (capture)"),
    Column("when", pl.String(), "`before`/`after` that phase, `start`/`end` of the capture"),
    Column("key", pl.String(), "argument"),
    Column("value", pl.String(), "its value in force, as JSON text"),
)

HTTP_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("ts", pl.Datetime("ms"), "time of the line"),
    Column("client", pl.String(), "client address:port"),
    Column("method", pl.String(), "HTTP method"),
    Column("path", pl.String(), "request path"),
    Column("status", pl.Int32(), "HTTP status code"),
)

ERROR_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "first line of the record"),
    Column("end_lineno", pl.Int64(), "last line of the record"),
    Column("ts", pl.Datetime("ms"), "time of the first line"),
    *(Column(t, pl.Int32(), f"{t.upper()} rank") for t in RANK_TAGS),
    Column("level", pl.String(), "warning, error or traceback"),
    Column("summary", pl.String(), "the first line, or a traceback's last (exception) line"),
    Column("text", pl.String(), "all lines of the record"),
)

OTHER_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("kind", pl.String(), "other, progress, marker, blank"),
    Column("message", pl.String(), "the line as read (its first MiB when it was longer)"),
    Column("line_bytes", pl.Int64(), "length in bytes of a line cut at 1 MiB, else null"),
)


EVENTS = schema_of(EVENT_COLUMNS)
BATCHES = schema_of(BATCH_COLUMNS)
LAUNCHES = schema_of(LAUNCH_COLUMNS)
STARTUP = schema_of(STARTUP_COLUMNS)
OVERRIDES = schema_of(OVERRIDE_COLUMNS)
SERVER_INFO = schema_of(SERVER_INFO_COLUMNS)
HTTP = schema_of(HTTP_COLUMNS)
ERRORS = schema_of(ERROR_COLUMNS)
OTHER = schema_of(OTHER_COLUMNS)
