"""vLLM ``benchmark_serving.py --save-result`` and ``vllm bench serve`` result JSON.

One JSON object per file; ``--append-result`` writes several, one per line. Keys follow the
``bench_serving`` family (``result_dict``); ``--save-detailed`` adds per-request arrays,
whose ``start_times`` are ``perf_counter`` readings: relative, so the requests table gets
``start_s`` but no absolute ``ts``.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ParseError
from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import Parsed, parse_json
from toolkit.load.bench.format import FILE, Options, Peek, file_text
from toolkit.load.bench.result_dict import flavour, read_result
from toolkit.load.inputs import split_lines


def read_vllm(path: Path, text: str) -> list[Parsed]:
    """The runs of a vLLM result file (one object, or one object per line)."""
    try:
        objects = [parse_json(text, path)]
        linenos: list[int | None] = [None]
    except ParseError:  # --append-result: one object per line
        objects, linenos = [], []
        for lineno, line in enumerate(split_lines(text), start=1):
            if line.strip():
                objects.append(parse_json(line, path, lineno))
                linenos.append(lineno)
    out = []
    for obj, lineno in zip(objects, linenos, strict=True):
        if not isinstance(obj, dict):
            raise ParseError(path, lineno, "expected a JSON object")
        parsed = read_result(obj)
        parsed.lineno = lineno
        out.append(parsed)
    return out


# ----------------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return flavour(peek) == "vllm"


def _load(path: Path, options: Options) -> list[Parsed]:
    return read_vllm(path, file_text(path))


VLLM_BENCH_JSON = result_format(
    "vllm-bench-json",
    "vLLM `benchmark_serving.py --save-result` / `vllm bench serve` JSON",
    _detect,
    _load,
    FILE,
)
