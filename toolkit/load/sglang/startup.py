"""Startup facts of an SGLang launch, read from the lines each scheduler rank prints once.

Weights, KV pool, CUDA graph capture and the scheduler summary
(``max_total_num_tokens=..., max_running_requests=...``) as ``(fact, value, text)`` rows.
Sizes are in GB and times in seconds, as SGLang prints them.
"""

from __future__ import annotations

import re

_NUM = r"(-?\d+(?:\.\d+)?)"
_LIST = r"(\[[\d, ]*\])"
_ASSIGN = re.compile(r"(\w+)=(-?[\d.]+|None|True|False)")

# (pattern, fact names for its groups); a line may match several patterns.
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(p), names)
    for p, names in (
        (rf"^Init torch distributed ends\..*?mem usage={_NUM} GB", ("init_mem_gb",)),
        (rf"^Init torch distributed ends\. elapsed={_NUM} s", ("init_elapsed_s",)),
        (rf"^Load weight begin\. avail mem={_NUM} GB", ("load_begin_avail_gb",)),
        (rf"^Load weight end\. elapsed={_NUM} s", ("load_elapsed_s",)),
        (rf"^Load weight end\..*?avail mem={_NUM} GB", ("load_end_avail_gb",)),
        (rf"^Load weight end\..*?mem usage={_NUM} GB", ("weight_mem_gb",)),
        (r"^KV Cache is allocated\..*?#tokens: (\d+)", ("kv_tokens",)),
        (rf"^KV Cache is allocated\..*?K size: {_NUM} GB", ("kv_k_gb",)),
        (rf"^KV Cache is allocated\..*?(?<!K)V size: {_NUM} GB", ("kv_v_gb",)),
        (rf"^KV Cache is allocated\..*?(?<![KV])KV size: {_NUM} GB", ("kv_size_gb",)),
        (rf"^Memory pool end\. avail mem={_NUM} GB", ("mem_pool_avail_gb",)),
        (rf"^Capture .*?begin\..*?avail mem={_NUM} GB", ("graph_begin_avail_gb",)),
        (rf"^Capture .*?\bbs={_LIST}", ("cuda_graph_bs",)),
        (rf"^Capture cuda graph bs {_LIST}", ("cuda_graph_bs",)),
        (rf"^Capture cuda graph num tokens {_LIST}", ("cuda_graph_num_tokens",)),
        (rf"^Capture .*?end\. (?:Time elapsed: |.*?elapsed=){_NUM} s", ("graph_elapsed_s",)),
        (rf"^Capture .*?end\..*?mem usage={_NUM} GB", ("graph_mem_gb",)),
        (rf"^Capture .*?end\..*?avail mem={_NUM} GB", ("graph_end_avail_gb",)),
        (rf"^max_total_num_tokens=.*?available_[cg]pu_mem={_NUM} GB", ("available_gpu_mem_gb",)),
    )
)
_SUMMARY_KEYS = (
    "max_total_num_tokens",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "max_running_requests",
    "context_len",
)


def startup_facts(message: str) -> list[tuple[str, float | None, str | None]]:
    """The facts one startup message states, as ``(fact, value, text)``.

    Examples
    --------
    >>> startup_facts("Memory pool end. avail mem=4.10 GB")
    [('mem_pool_avail_gb', 4.1, None)]
    """
    facts: list[tuple[str, float | None, str | None]] = []
    if message.startswith("max_total_num_tokens="):
        for key, text in _ASSIGN.findall(message):
            if key in _SUMMARY_KEYS:
                facts.append((key, _number(text), None if _number(text) is not None else text))
    elif message.startswith("The server is fired up"):
        facts.append(("ready", None, "ready"))
    elif message.startswith("Capture ") and re.search(r" (?:begin|end)\.", message):
        facts.append(("graph_capture", None, _capture_name(message)))
    for pattern, names in _PATTERNS:
        m = pattern.search(message)
        if m is None:
            continue
        for name, text in zip(names, m.groups(), strict=True):
            if text.startswith("["):
                sizes = [int(x) for x in re.findall(r"\d+", text)]
                facts.append((name, float(max(sizes)) if sizes else None, text))
            else:
                facts.append((name, _number(text), None))
    return facts


def _capture_name(message: str) -> str:
    """``Capture target decode CUDA graph begin. ...`` → ``target decode CUDA graph begin``."""
    head = message.removeprefix("Capture ").split(".", 1)[0]
    return head.split(" bs ", 1)[0].split(" num tokens ", 1)[0]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
