"""Recognize an input file's format from its first lines, never from its name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench import sniff_bench_format
from toolkit.load.bench.format import EMBEDDED
from toolkit.load.gpu import sniff_gpu_format
from toolkit.load.inputs import check_input
from toolkit.load.phase_marks import PHASE_FORMAT, is_phase_file
from toolkit.load.profile import TORCH_TRACE, is_torch_trace
from toolkit.load.prometheus import sniff_metrics_format
from toolkit.load.requests.export import REQUESTS_FORMAT, is_request_file
from toolkit.load.server_info import SERVER_INFO_FORMAT, is_server_info
from toolkit.load.sglang.dataset import DATASET_FILE, is_dataset
from toolkit.load.sglang.plan import BRACKET
from toolkit.load.text import head_lines

_SERVER_HINTS = re.compile(
    BRACKET
    + r"|(?:Decode|Prefill) batch(?:[.,] #| \[\d+\], #|\(mixed )"
    + r"|server_args=(?:ServerArgs\(|\{)|max_total_num_tokens=\d|The server is fired up"
)


HF_CONFIG = "hf-config"
"""A Hugging Face model ``config.json``: the served model's architecture."""
_HF_KEYS = ("num_hidden_layers", "hidden_size", "architectures", "model_type")


def sniff(path: Path) -> str | None:
    """The format name of a file (``sglang-log``, a GPU, benchmark or metrics format,
    ``hf-config``, ``torch-profiler-trace``, ``ppscope-phases``, ``server-info``,
    ``sglang-requests``), or None; a dataset directory written by ``ppscope ingest`` is
    ``sglang-dataset``.

    Raises
    ------
    ToolkitError
        When ``path`` is no regular readable file (a pipe, a device, no permission).
    """
    if is_dataset(path):
        return "sglang-dataset"
    check_input(path)
    if is_hf_config(path):
        return HF_CONFIG
    if is_torch_trace(path):
        return TORCH_TRACE  # a PyTorch profiler trace: JSON, but no result or metrics
    if is_phase_file(path):
        return PHASE_FORMAT  # before the benchmark formats: its lines are JSON objects too
    if is_server_info(path):
        return SERVER_INFO_FORMAT
    if is_request_file(path):
        return REQUESTS_FORMAT  # per-request JSON lines the server wrote
    metrics = sniff_metrics_format(path)
    if metrics is not None:
        return metrics  # /metrics snapshots or a Prometheus API answer: JSON with SGLang names
    gpu = sniff_gpu_format(path)
    if gpu is not None:
        return gpu  # first: a process list may name "sglang::scheduler"
    bench = sniff_bench_format(path)
    if bench is not None and BENCH_FORMATS[bench].kind != EMBEDDED:
        return bench  # JSON/CSV results: "sglang" in them names a backend, not a server log
    if any(_SERVER_HINTS.search(line) for line in head_lines(path, n=2000)):
        return "sglang-log"  # may also hold printed benchmark blocks: both are read
    return bench


def expand(paths: list[Path]) -> Iterator[Path]:
    """Files named, and the files inside directories named (sorted, hidden ones skipped); a
    dataset directory (``ppscope ingest``) is one input, not the Parquet files inside it."""
    for path in paths:
        if is_dataset(path):
            yield path
        elif path.is_dir():
            datasets = [d.parent for d in path.rglob(DATASET_FILE) if is_dataset(d.parent)]
            for child in sorted({*path.rglob("*"), *datasets}):
                parts = child.relative_to(path).parts
                hidden = any(part.startswith(".") for part in parts)
                inside = any(child != d and d in child.parents for d in datasets)
                if not hidden and not inside and (child.is_file() or child in datasets):
                    yield child
        else:
            yield path


def is_hf_config(path: Path) -> bool:
    """A JSON object that describes a model (``model_type``, layers, hidden size)."""
    head = head_lines(path, n=40)
    if not head or not head[0].lstrip().startswith("{"):
        return False
    text = "\n".join(head)
    return sum(f'"{key}"' in text for key in _HF_KEYS) >= 2
