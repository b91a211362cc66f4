"""Declared tables of PyTorch profiler traces (Kineto Chrome-trace JSON), as SGLang writes them
with ``/start_profile``: one file per rank, the events ppscope keeps, one row each.

Times are the trace's own: ``ts_us`` as written (µs; relative to ``baseTimeNanoseconds`` in
Kineto releases that write it, else since the epoch), ``dur_us`` the event's length. Argument
fields an event lacks are null.
"""

from __future__ import annotations

import polars as pl

from toolkit.schema import Column, glossary, schema_of

_F, _S, _I = pl.Float64(), pl.String(), pl.Int64()

EVENT_COLUMNS: tuple[Column, ...] = (
    Column("event", _I, "0-based index of the event in the file's traceEvents array"),
    Column("ph", _S, "phase: X (a complete range), s or f (a flow's start or end)"),
    Column("cat", _S, "category: user_annotation, cpu_op, kernel, gpu_memcpy, ac2g, ..."),
    Column("name", _S, "range, operator or kernel name"),
    Column("ts_us", _F, "start (µs, the trace's clock)"),
    Column("dur_us", _F, "length (µs); null for flows"),
    Column("pid", _S, "process id (CPU events) or device index (GPU events), as text"),
    Column("tid", _S, "thread id (CPU events) or stream (GPU events), as text"),
    Column("stream", _I, "CUDA stream of a GPU event (args stream); null on the CPU"),
    Column("device", _I, "GPU index of a GPU event (args device)"),
    Column("correlation", _I, "CUDA correlation id linking a launch to its kernel"),
    Column("external_id", _I, "args External id: the CPU operator a kernel belongs to"),
    Column("flow_id", _I, "id of a flow event (ph s/f)"),
    Column("in_nelems", _I, "args In msg nelems of a communication event"),
    Column("out_nelems", _I, "args Out msg nelems of a communication event"),
    Column("dtype", _S, "args dtype of a communication event (Float, BFloat16, ...)"),
    Column("collective", _S, "args Collective name (allreduce, send, recv, ...)"),
    Column("group_size", _I, "args Group size of a communication event"),
)
EVENTS = schema_of(EVENT_COLUMNS)

ACCOUNT_COLUMNS: tuple[Column, ...] = (
    Column("phase", _S, "profile folder's phase (profile/<phase>/); null when not named"),
    Column("pp", _I, "pipeline stage (PP rank)"),
    Column("step", _I, "0-based scheduler-loop iteration of the stage in the profile"),
    Column("start_us", _F, "iteration start: its recv_requests range (µs, trace clock)"),
    Column("span_ms", _F, "iteration length: to the next recv_requests start"),
    Column("compute_ms", _F, "GPU busy with kernels, copies and sets other than communication"),
    Column("comm_ms", _F, "GPU in communication kernels (NCCL SendRecv, collectives)"),
    Column("transfer_ms", _F, "of comm_ms, moving data (see transfer_basis)"),
    Column("wait_ms", _F, "of comm_ms, a kernel waiting for its peer: comm_ms - transfer_ms"),
    Column("idle_cpu_ms", _F, "GPU idle while the CPU loop works (scheduling, results)"),
    Column("idle_recv_ms", _F, "GPU idle while the CPU blocks in a receive from the stage before"),
    Column("idle_other_ms", _F, "GPU idle outside any loop range"),
    Column("graph_launch_ms", _F, "CPU time in cudaGraphLaunch"),
    Column("graph_launches", _I, "cudaGraphLaunch calls"),
    Column("comm_bytes", _I, "bytes the communication kernels carried, when the trace says"),
    Column(
        "transfer_basis",
        _S,
        "how transfer_ms was found: modelled (bytes / a bandwidth, "
        "named) or measured (the shortest communication kernel of its size on the stage)",
    ),
)
ACCOUNT = schema_of(ACCOUNT_COLUMNS)

DEFINITIONS = glossary(EVENT_COLUMNS) | glossary(ACCOUNT_COLUMNS)
