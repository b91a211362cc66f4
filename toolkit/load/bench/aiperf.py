"""AIPerf's JSON exports, one format: the summary JSON and the per-request records.

``profile_export_aiperf.json`` holds metric dicts, flat (newer) or under ``records`` (older),
and is read like GenAI-Perf's summary (``nvidia``); ``profile_export.jsonl`` holds one record
per request with absolute start times (``records``). Both are ``aiperf-json``; a file whose
first line is a request record is read as records.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ParseError
from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import Parsed, parse_json
from toolkit.load.bench.format import FILE, Options, Peek, file_text
from toolkit.load.bench.nvidia import has_metric_dicts, is_aiperf, read_json_text
from toolkit.load.bench.records import is_record, read_records
from toolkit.load.inputs import split_lines


def _detect(peek: Peek) -> bool:
    obj = peek.json_object
    return obj is not None and (is_record(obj) or (has_metric_dicts(obj) and is_aiperf(obj)))


def _load(path: Path, options: Options) -> list[Parsed]:
    text = file_text(path)
    first = next((line for line in split_lines(text) if line.strip()), "")
    try:
        records = is_record(parse_json(first, path, 1))
    except ParseError:
        records = False
    return read_records(path, text) if records else read_json_text(path, text)


AIPERF_JSON = result_format(
    "aiperf-json",
    "AIPerf `profile_export_aiperf.json` (metrics flat or under `records`), and its "
    "per-request `profile_export.jsonl` (absolute start times)",
    _detect,
    _load,
    FILE,
)
