"""One Prometheus exposition text (a ``/metrics`` answer) as samples, read with a real parser.

``prometheus_client``'s parser reads each series' name and labels, so quoted label values with
spaces, commas, braces or escapes are read right; it reads each distinct series text once, since
a capture prints the same series every scrape. Values are numbers as Prometheus prints them
(``NaN``, ``+Inf`` included). Histogram buckets are not needed (the table keeps Δsum/Δcount
means), so their lines are counted and left out unparsed. A line that does not read is counted
with its place; the others are kept. ``_created`` samples (when a series was created) are
counted and left out: they are no measurement.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from toolkit.errors import shorten
from toolkit.load.prometheus.tally import Tally

__all__ = ["MAX_SERIES", "ExpositionReader", "Sample", "exposition_samples", "resolve"]

MAX_SERIES = 200_000
"""Distinct series texts remembered; past this the memory starts over (hostile input)."""
_SUFFIXES = ("_total", "_sum", "_count", "_created", "_bucket", "_gsum", "_gcount")
_HISTOGRAMS = {"histogram", "summary"}
_UNTYPED = {None, "unknown", "untyped"}


class Sample(NamedTuple):
    """One sample: the series' metric name, its kind and part, labels and value."""

    metric: str
    kind: str  # gauge, counter, histogram
    part: str  # value (gauge, counter), sum or count (histogram)
    labels: dict[str, str]
    value: float


def resolve(name: str, types: dict[str, str]) -> tuple[str, str, str] | None:
    """(metric, kind, part) of a sample name, from the ``# TYPE`` of its family when declared,
    else from its name (``_total`` a counter, ``_sum``/``_count`` a histogram's parts, anything
    else a gauge); None for samples that are no measurement (``_created``, buckets, quantiles).

    >>> resolve("sglang:prompt_tokens_total", {"sglang:prompt_tokens": "counter"})
    ('sglang:prompt_tokens_total', 'counter', 'value')
    >>> resolve("sglang:e2e_request_latency_seconds_sum", {})
    ('sglang:e2e_request_latency_seconds', 'histogram', 'sum')
    >>> resolve("sglang:num_queue_reqs", {"sglang:num_queue_reqs": "gauge"})
    ('sglang:num_queue_reqs', 'gauge', 'value')
    """
    declared = _declared(types, name)
    if declared is not None:
        if declared == "counter":
            return name, "counter", "value"
        if declared in _HISTOGRAMS:
            return None  # a summary's quantile line: the mean comes from _sum and _count
        return name, "gauge", "value"
    for suffix in _SUFFIXES:
        if not name.endswith(suffix):
            continue
        base = name[: -len(suffix)]
        declared = _declared(types, base)
        if suffix in ("_created", "_bucket"):
            return None
        if declared in _HISTOGRAMS and suffix in ("_sum", "_count"):
            return base, "histogram", suffix[1:]
        if declared == "counter" and suffix == "_total":
            return name, "counter", "value"
        if declared is None:
            if suffix == "_total":
                return name, "counter", "value"
            if suffix in ("_sum", "_count"):
                return base, "histogram", suffix[1:]
        break
    return name, "gauge", "value"


def _declared(types: dict[str, str], name: str) -> str | None:
    """The declared type of a family; None when undeclared or declared without a type."""
    declared = types.get(name)
    return None if declared in _UNTYPED else declared


class ExpositionReader:
    """Reads exposition texts; a series' name and labels are parsed once per distinct text
    (a capture prints the same series every second), values on every line."""

    def __init__(self) -> None:
        self._series: dict[str, tuple[str, dict[str, str]] | None] = {}

    def samples(self, text: str, skipped: Tally, where: str = "") -> Iterator[Sample]:
        """The samples of one exposition text; what is left out is counted in ``skipped``
        (``bucket``, ``created``, ``quantile``, ``non-finite``, ``unreadable``); ``where``
        (``file:line``) names the scrape in the note of an unreadable line."""
        types: dict[str, str] = {}
        buckets = 0
        for i, line in enumerate(text.split("\n"), 1):
            head = line.strip()
            if not head:
                continue
            if head[0] == "#":
                parts = head.split(None, 3)
                if len(parts) == 4 and parts[1] == "TYPE":
                    types[parts[2]] = parts[3].strip()
                continue
            if _is_bucket(head):
                buckets += 1
                continue
            found = self._sample_of(head)
            if found is None:
                skipped.add("unreadable", f"{where}, text line {i}: {shorten(head, 80)}")
                continue
            name, labels, value = found
            yield from _sample(name, labels, value, types, skipped)
        skipped.add("bucket", n=buckets)

    def _sample_of(self, line: str) -> tuple[str, dict[str, str], float] | None:
        """(name, labels, value) of a sample line; None when it is unreadable."""
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")  # values and timestamps hold no brace
            if close < brace:
                return None
            key, rest = line[: close + 1], line[close + 1 :]
        else:
            key, _, rest = line.replace("\t", " ").partition(" ")
        tokens = rest.split()
        if len(tokens) not in (1, 2):  # a value, and an optional timestamp
            return None
        try:
            value = float(tokens[0])
            if len(tokens) == 2:
                float(tokens[1])
        except ValueError:
            return None
        if key not in self._series:
            if len(self._series) >= MAX_SERIES:
                self._series.clear()
            self._series[key] = _parse_series(key)
        series = self._series[key]
        return None if series is None else (series[0], series[1], value)


def _parse_series(key: str) -> tuple[str, dict[str, str]] | None:
    """Name and labels of ``name{labels}`` by ``prometheus_client``'s parser, or None."""
    try:
        for family in text_string_to_metric_families(key + " 0\n"):
            for sample in family.samples:
                return sample.name, dict(sample.labels)
    except Exception:  # the parser raises assorted types on bad text
        return None
    return None


def exposition_samples(text: str, skipped: Tally, where: str = "") -> Iterator[Sample]:
    """The samples of one exposition text (``ExpositionReader.samples`` of a fresh reader)."""
    return ExpositionReader().samples(text, skipped, where)


def _sample(
    name: str, labels: dict[str, str], value: float, types: dict[str, str], skipped: Tally
) -> Iterator[Sample]:
    found = resolve(name, types)
    if found is None:
        reason = "quantile"
        if name.endswith(("_created", "_bucket")):
            reason = name.rsplit("_", 1)[1]
        skipped.add(reason)
        return
    value = float(value)
    if not math.isfinite(value):
        skipped.add("non-finite")
        return
    metric, kind, part = found
    yield Sample(metric, kind, part, dict(labels), value)


def _is_bucket(line: str) -> bool:
    """Whether a sample line's name ends in ``_bucket``."""
    at = line.find("_bucket")
    if at <= 0:
        return False
    brace = line.find("{")
    return (brace < 0 or at + 7 == brace) and line[at + 7 : at + 8] in ("{", " ", "\t")
