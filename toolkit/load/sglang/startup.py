"""Startup facts of an SGLang launch, read from the lines each scheduler rank prints once.

Weights, KV pool, CUDA graph capture and the scheduler summary
(``max_total_num_tokens=..., max_running_requests=...``) as ``(fact, value, text)`` rows.
Sizes are in GB and times in seconds, as SGLang prints them.
"""

from __future__ import annotations

import re

_NUM = r"(-?\d+(?:\.\d+)?)"
_LIST = r"(\[[\d, ]*\])"

# (message prefix, marker, pattern, fact names for its groups): the pattern is searched after
# the first ``marker`` (or right after the prefix). Literal finds replace ``.*?`` gaps, so no
# pattern backtracks over the text between them: time stays linear in the line's length.
_FACTS: tuple[tuple[str, str | None, re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (prefix, marker, re.compile(p), names)
    for prefix, marker, p, names in (
        ("Init torch distributed ends.", None, rf"mem usage={_NUM} GB", ("init_mem_gb",)),
        ("Init torch distributed ends. elapsed=", None, rf"^{_NUM} s", ("init_elapsed_s",)),
        ("Load weight begin. avail mem=", None, rf"^{_NUM} GB", ("load_begin_avail_gb",)),
        ("Load weight end. elapsed=", None, rf"^{_NUM} s", ("load_elapsed_s",)),
        ("Load weight end.", None, rf"avail mem={_NUM} GB", ("load_end_avail_gb",)),
        ("Load weight end.", None, rf"mem usage={_NUM} GB", ("weight_mem_gb",)),
        ("KV Cache is allocated.", None, r"#tokens: (\d+)", ("kv_tokens",)),
        ("KV Cache is allocated.", None, rf"K size: {_NUM} GB", ("kv_k_gb",)),
        ("KV Cache is allocated.", None, rf"(?<!K)V size: {_NUM} GB", ("kv_v_gb",)),
        ("KV Cache is allocated.", None, rf"(?<![KV])KV size: {_NUM} GB", ("kv_size_gb",)),
        ("Memory pool end. avail mem=", None, rf"^{_NUM} GB", ("mem_pool_avail_gb",)),
        ("Capture ", "begin.", rf"avail mem={_NUM} GB", ("graph_begin_avail_gb",)),
        ("Capture ", None, rf"\bbs={_LIST}", ("cuda_graph_bs",)),
        ("Capture cuda graph bs ", None, rf"^{_LIST}", ("cuda_graph_bs",)),
        ("Capture cuda graph num tokens ", None, rf"^{_LIST}", ("cuda_graph_num_tokens",)),
        ("Capture ", "end. ", rf"^Time elapsed: {_NUM} s|elapsed={_NUM} s", ("graph_elapsed_s",)),
        ("Capture ", "end.", rf"mem usage={_NUM} GB", ("graph_mem_gb",)),
        ("Capture ", "end.", rf"avail mem={_NUM} GB", ("graph_end_avail_gb",)),
        ("max_total_num_tokens=", None, rf"available_[cg]pu_mem={_NUM} GB",
         ("available_gpu_mem_gb",)),
    )
)  # fmt: skip
_SUMMARY_KEYS = (
    "max_total_num_tokens",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "max_running_requests",
    "context_len",
)
_VALUE = re.compile(r"-?[\d.]+|None|True|False")


def startup_facts(message: str) -> list[tuple[str, float | None, str | None]]:
    """The facts one startup message states, as ``(fact, value, text)``.

    Examples
    --------
    >>> startup_facts("Memory pool end. avail mem=4.10 GB")
    [('mem_pool_avail_gb', 4.1, None)]
    """
    facts: list[tuple[str, float | None, str | None]] = []
    if message.startswith("max_total_num_tokens="):
        for part in message.split(", "):
            key, _, text = part.partition("=")
            value = _VALUE.match(text)
            if key in _SUMMARY_KEYS and value is not None:
                text = value.group(0)
                facts.append((key, _number(text), None if _number(text) is not None else text))
    elif message.startswith("The server is fired up"):
        facts.append(("ready", None, "ready"))
    elif message.startswith("Capture ") and (" begin." in message or " end." in message):
        facts.append(("graph_capture", None, _capture_name(message)))
    for prefix, marker, pattern, names in _FACTS:
        if not message.startswith(prefix):
            continue
        at = len(prefix) if marker is None else message.find(marker, len(prefix))
        if at < 0:
            continue
        if marker is not None:
            at += len(marker)
        m = pattern.search(message[at:])
        if m is None:
            continue
        groups = [g for g in m.groups() if g is not None] or [None]
        for name, text in zip(names, groups[: len(names)], strict=True):
            if text is None:
                continue
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
