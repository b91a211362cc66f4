"""``sglang.bench_serving`` results: the ``--output-file`` JSONL and the printed result block.

The JSONL holds one object per run; key names changed across versions (0.2.7 differs most) and
``result_dict`` maps them all. The printed block (``===== Serving Benchmark Result =====``) is
found anywhere in a text log, under any line prefix, with the rows of every version (the 0.4.0
``Max reqeuest concurrency:`` typo included) and trailing spaces on the values. vLLM prints the
same block, so its logs are read here too.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import Parsed, json_lines, layout_of, num, whole
from toolkit.load.bench.format import EMBEDDED, FILE, Options, Peek, file_text, plain_file
from toolkit.load.bench.result_dict import flavour, latency_column, read_result
from toolkit.load.sglang.server_args import ServerArgsError, parse_server_args

HEADER = b"= Serving Benchmark Result ="
_HEADER_RE = re.compile(r"=+ Serving Benchmark Result =+")
_FOOTER_RE = re.compile(r"^\s*={20,}\s*$")
_RULE_RE = re.compile(r"^\s*-{3,}[^-]*-{3,}\s*$")
_ROW_RE = re.compile(r"^\s*(?P<label>[A-Za-z#][^:]*?):\s+(?P<value>\S.*?)\s*$")
# A row found anywhere in a line, for lines whose wrapper prefix differs from the header's.
_LOOSE_ROW_RE = re.compile(
    r"(?:^|[\s|\]])(?P<label>(?:Backend|Traffic|Max|Maximum|Successful|Failed|Benchmark|Total|"
    r"Request|Input|Output|Peak|Concurrency|Accept|Mean|Median|Std|P\d+)\b[^:]*):\s+"
    r"(?P<value>\S.*?)\s*$"
)
_INLINE_ROW_RE = re.compile(
    r"(?P<label>(?:Backend|Traffic request rate|Max reqeuest concurrency|Max request concurrency|"
    r"Maximum request concurrency|Successful requests|Failed requests|Benchmark duration \(s\)|"
    r"Total input tokens|Total generated tokens(?: \(retokenized\))?|"
    r"(?:Request|Input token|Output token|Peak output token|Total token) throughput \([a-z/]+\)|"
    r"Request goodput \(req/s\)|Peak concurrent requests|Concurrency|Accept length|"
    r"(?:Mean|Median|Std|Max|P\d+) (?:TTFT|TPOT|ITL|E2E Latency|E2EL) \(ms\))):\s+"
    r"(?P<value>not set|\S+)",
    re.IGNORECASE,
)
_TEXT_LATENCY = re.compile(
    r"(mean|median|std|max|p\d+(?:\.\d+)?) (ttft|tpot|itl|e2e latency|e2el) \(ms\)"
)
_ROWS: dict[str, str] = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "request rate configured (rps)": "request_rate",
    "max request concurrency": "max_concurrency",
    "max reqeuest concurrency": "max_concurrency",  # SGLang ≤0.4.1 typo
    "maximum request concurrency": "max_concurrency",  # vLLM
    "successful requests": "completed",
    "failed requests": "failed",
    "benchmark duration (s)": "duration_s",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_per_s",
    "request goodput (req/s)": "goodput_per_s",
    "input token throughput (tok/s)": "input_tok_s",
    "output token throughput (tok/s)": "output_tok_s",
    "peak output token throughput (tok/s)": "peak_output_tok_s",
    "peak concurrent requests": "peak_concurrency",
    "total token throughput (tok/s)": "total_tok_s",
    "concurrency": "concurrency_observed",
    "accept length": "accept_length",
}
# Lines outside the block that still describe the next run.
_CONTEXT = (b"benchmark_args=", b"Namespace(", b"server_args=", b"Maximum request concurrency:")
_MAX_BLOCK_LINES = 120


# ----------------------------------------------------------------------------- JSONL
def read_jsonl(path: Path, text: str) -> list[Parsed]:
    """Every run object of an ``--output-file`` JSONL (blank lines skipped).

    Raises
    ------
    ParseError
        A line that is not a JSON object (with its line number).
    """
    out = []
    for lineno, obj in json_lines(path, text):
        parsed = read_result(obj)
        parsed.lineno = lineno
        out.append(parsed)
    return out


# ----------------------------------------------------------------------------- text
def read_text(path: Path) -> list[Parsed]:
    """One run per ``Serving Benchmark Result`` block of a plain text file."""
    if path.stat().st_size == 0:
        return []
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        marks = sorted(
            [(pos, "header") for pos in _line_starts(m, HEADER)]
            + [(pos, "context") for needle in _CONTEXT for pos in _line_starts(m, needle)]
        )
        out: list[Parsed] = []
        context: dict[str, Any] = {}  # what the client printed before the next block
        server: dict[str, Any] = {}  # the latest server launch in the same log, if any
        lineno, last, block_end = 1, 0, 0
        for pos, kind in _dedupe(marks):
            if pos < block_end:  # a row of the block just read (vLLM prints its cap inside)
                continue
            lineno += m[last:pos].count(b"\n")
            last = pos
            if kind == "context":
                found = _read_context(_line_at(m, pos))
                if "layout" in found:
                    server = found
                else:
                    context.update(found)
                continue
            lines, block_end = _lines_from(m, pos)
            parsed = _read_block(lines)
            parsed.lineno = lineno
            _apply_context(parsed, context, server)
            out.append(parsed)
            context = {}
        return out


def _line_starts(m: mmap.mmap, needle: bytes) -> Iterator[int]:
    pos = _find(m, needle, 0)
    while pos >= 0:
        start = m.rfind(b"\n", 0, pos) + 1
        yield start
        nxt = m.find(b"\n", pos)
        if nxt < 0:
            return
        pos = _find(m, needle, nxt)


_WINDOW = 64 << 20


def _find(m: mmap.mmap, needle: bytes, start: int) -> int:
    """``m.find(needle, start)``, a window at a time, each window's pages released once read:
    a scanned multi-GB log would otherwise count whole in the process's RSS."""
    while start < len(m):
        end = min(len(m), start + _WINDOW + len(needle))
        pos = m.find(needle, start, end)
        if hasattr(mmap, "MADV_DONTNEED"):  # still in the page cache
            page = start - start % mmap.PAGESIZE
            m.madvise(mmap.MADV_DONTNEED, page, end - page)
        if pos >= 0:
            return pos
        start += _WINDOW
    return -1


def _dedupe(marks: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """One mark per line; a header wins over context on the same line."""
    by_line: dict[int, str] = {}
    for pos, kind in marks:
        if by_line.get(pos) != "header":
            by_line[pos] = kind
    yield from sorted(by_line.items())


def _line_at(m: mmap.mmap, pos: int) -> str:
    end = m.find(b"\n", pos)
    raw = m[pos : end if end >= 0 else len(m)]
    return raw.decode("utf-8", "replace").rstrip("\r")


def _lines_from(m: mmap.mmap, pos: int) -> tuple[list[str], int]:
    """The block whose header starts at ``pos``, up to its footer, and the offset after it."""
    header = _line_at(m, pos)
    found = _HEADER_RE.search(header)
    prefix = header[: found.start()] if found else ""
    out = [header]
    pos = _next_line(m, pos)
    while pos < len(m) and len(out) < _MAX_BLOCK_LINES:
        line = _line_at(m, pos)
        body = line[len(prefix) :] if line.startswith(prefix) else line
        if _HEADER_RE.search(line):
            break  # a block without footer: the next one starts here
        out.append(line)
        pos = _next_line(m, pos)
        if _FOOTER_RE.match(body):
            break
    return out, pos


def _next_line(m: mmap.mmap, pos: int) -> int:
    end = m.find(b"\n", pos)
    return len(m) if end < 0 else end + 1


def _read_block(lines: list[str]) -> Parsed:
    """Rows of one block: ``lines[0]`` is the header, the block ends at the ``====`` footer."""
    out = Parsed()
    header = _HEADER_RE.search(lines[0])
    prefix = lines[0][: header.start()] if header else ""
    rest = lines[0][header.end() :] if header else ""
    if rest.strip():
        # The block pasted as one line (issue trackers flatten it): rows are found by name.
        for m in _INLINE_ROW_RE.finditer(rest):
            _store_row(out, m.group("label"), m.group("value"))
        return out
    for line in lines[1:]:
        body = line[len(prefix) :] if line.startswith(prefix) else line
        if _HEADER_RE.search(body) or _FOOTER_RE.match(body):
            break
        if _RULE_RE.match(body):
            continue
        m = _ROW_RE.match(body) or _LOOSE_ROW_RE.search(line)
        if m is None:
            continue
        _store_row(out, m.group("label").strip(), m.group("value").strip())
    return out


def _store_row(out: Parsed, label: str, value: str) -> None:
    key = label.lower()
    column = _ROWS.get(key)
    if column is None:
        lat = _TEXT_LATENCY.fullmatch(key)
        if lat is not None:
            stat, metric = lat.group(1), lat.group(2).replace(" latency", "_latency")
            if (stat, metric) == ("max", "itl"):
                column = "itl_max_ms"
            else:
                column = latency_column(f"{stat}_{metric}_ms")
    if column is None:
        out.extra[label] = num(value) if num(value) is not None else value
    elif column == "backend":
        out.values[column] = value
    elif column == "request_rate":
        out.values[column] = num(value)
        if num(value) is None:
            out.values["request_rate_text"] = value
    else:
        out.values.setdefault(column, num(value))


def _read_context(line: str) -> dict[str, Any]:
    """What a ``benchmark_args=Namespace(...)``, ``server_args=`` or vLLM line says."""
    at = line.find("server_args=")
    if at >= 0:
        try:
            args = parse_server_args(line[at + len("server_args=") :]).args
        except ServerArgsError:
            return {}
        return {"layout": layout_of(args), "model": args.get("model_path")}
    at = line.find("Namespace(")
    if at >= 0:
        # An argparse Namespace repr has the dataclass shape the server_args reader handles.
        try:
            args = parse_server_args("ServerArgs(" + line[at + len("Namespace(") :]).args
        except ServerArgsError:
            return {}
        return {
            key: args[key]
            for key in ("backend", "max_concurrency", "num_prompts", "request_rate", "tag", "model")
            if args.get(key) is not None
        }
    at = line.find("Maximum request concurrency:")
    if at >= 0:
        value = whole(line[at + len("Maximum request concurrency:") :].strip())
        return {"max_concurrency": value} if value is not None else {}
    return {}


def _apply_context(parsed: Parsed, context: dict[str, Any], server: dict[str, Any]) -> None:
    values = parsed.values
    if values.get("max_concurrency") is None and context.get("max_concurrency") is not None:
        values["max_concurrency"] = whole(context["max_concurrency"])
    if values.get("num_prompts") is None and context.get("num_prompts") is not None:
        values["num_prompts"] = whole(context["num_prompts"])
    if values.get("backend") is None and context.get("backend") is not None:
        values["backend"] = str(context["backend"])
    if "request_rate" not in values and context.get("request_rate") is not None:
        values["request_rate"] = num(context["request_rate"])
    model = context.get("model") or server.get("model")
    if values.get("model") is None and model is not None:
        values["model"] = str(model)
    if context.get("tag") is not None:
        parsed.hint = str(context["tag"])
    parsed.layout = dict(server.get("layout", {}))


# ----------------------------------------------------------------------------- the formats
def _detect_jsonl(peek: Peek) -> bool:
    return flavour(peek) == "sglang"


def _load_jsonl(path: Path, options: Options) -> list[Parsed]:
    return read_jsonl(path, file_text(path))


def _detect_text(peek: Peek) -> bool:
    return peek.contains(HEADER)


def _load_text(path: Path, options: Options) -> list[Parsed]:
    with plain_file(path) as plain:
        return read_text(plain)


SGLANG_BENCH_JSONL = result_format(
    "sglang-bench-jsonl",
    "`sglang.bench_serving --output-file` JSONL, one object per run (0.2.7+)",
    _detect_jsonl,
    _load_jsonl,
    FILE,
)
SGLANG_BENCH_TEXT = result_format(
    "sglang-bench-text",
    "the printed `Serving Benchmark Result` block, inside any text log",
    _detect_text,
    _load_text,
    EMBEDDED,
)
