"""A server log of two starts with other flags, each with its own finished requests."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path


def _launch(start: datetime, mrr: int, rids: list[str]) -> list[str]:
    """One PP2 server start at ``start`` (``--max-running-requests mrr``): its dump, the
    startup summary, a minute of lock-step decode lines and a ``ReqTimeStats`` line of each
    stage per finished request."""

    def at(s: float, tag: str = "") -> str:
        return f"[{(start + timedelta(seconds=s)):%Y-%m-%d %H:%M:%S}{tag}]"

    lines = [
        f"{at(0)} server_args=ServerArgs(model_path='Qwen/Qwen2.5-7B-Instruct', tp_size=1, "
        f"pp_size=2, max_running_requests={mrr}, enable_request_time_stats_logging=True)",
        f"{at(30, ' PP0')} max_total_num_tokens=500000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=32768, "
        "available_gpu_mem=12.10 GB",
        f"{at(31)} The server is fired up and ready to roll!",
    ]
    for i in range(30):
        for pp in (0, 1):
            lines.append(
                f"{at(60 + 2 * i, f' PP{pp}')} Decode batch, #running-req: 4, #token: "
                f"{4 * (100 + 2 * i)}, token usage: 0.01, cuda graph: True, gen throughput "
                "(token/s): 120.00, #queue-req: 0"
            )
    for k, rid in enumerate(rids):
        for pp in (0, 1):
            lines.append(
                f"{at(70 + 10 * k, f' PP{pp}')} ReqTimeStats(rid={rid}, input_len=100, "
                "cached_input_len=0, output_len=64, type=unified): queue_duration=5.00ms, "
                "forward_duration=900.00ms"
            )
    return lines


def write_restart_log(path: Path) -> None:
    """Two PP2 starts an hour apart: ``--max-running-requests 256`` finishing a1, a2, a3,
    then 64 finishing b1, b2 (SGLang 0.5 lines)."""
    first = _launch(datetime(2025, 11, 20, 14), 256, ["a1", "a2", "a3"])
    second = _launch(datetime(2025, 11, 20, 15), 64, ["b1", "b2"])
    path.write_text("\n".join(first + second) + "\n", encoding="utf-8")
