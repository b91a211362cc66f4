"""One Prometheus exposition text (a ``/metrics`` answer) as samples, read with a real parser.

``prometheus_client``'s parser reads the text, so quoted label values with spaces, commas or
escapes are read right. Histogram buckets are not needed (the table keeps Δsum/Δcount means),
so their lines are counted and left out before parsing, which makes a scrape of many ranks
cheap. A text the parser rejects is read again line by line: the lines it still rejects are
counted, the others kept. ``_created`` samples (when a series was created) are counted and
left out: they are no measurement.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from toolkit.errors import shorten
from toolkit.load.prometheus.tally import Tally

__all__ = ["Sample", "exposition_samples", "resolve"]

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


def exposition_samples(text: str, skipped: Tally, where: str = "") -> Iterator[Sample]:
    """The samples of one exposition text; what is left out is counted in ``skipped``
    (``bucket``, ``created``, ``quantile``, ``non-finite``, ``unreadable``); ``where``
    (``file:line``) names the scrape in the note of an unreadable line."""
    kept: list[str] = []
    for line in text.split("\n"):
        head = line.lstrip()
        if head and not head.startswith("#") and _name_of(head).endswith("_bucket"):
            skipped.add("bucket")
            continue
        kept.append(line)
    try:
        families = list(text_string_to_metric_families("\n".join(kept) + "\n"))
    except Exception:  # the parser raises assorted types on bad text
        yield from _line_by_line(kept, skipped, where)
        return
    types = {f.name: f.type for f in families}
    for family in families:
        for s in family.samples:
            yield from _sample(s.name, s.labels, s.value, types, skipped)


def _line_by_line(lines: list[str], skipped: Tally, where: str) -> Iterator[Sample]:
    """The samples of the lines the parser reads one by one, with the ``# TYPE`` lines seen."""
    types: dict[str, str] = {}
    for i, line in enumerate(lines, 1):
        head = line.strip()
        if not head:
            continue
        if head.startswith("#"):
            parts = head.split(None, 3)
            if len(parts) == 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        try:
            families = list(text_string_to_metric_families(head + "\n"))
        except Exception:  # the parser raises assorted types on bad text
            skipped.add("unreadable", f"{where}, text line {i}: {shorten(head, 80)}")
            continue
        for family in families:
            for s in family.samples:
                yield from _sample(s.name, s.labels, s.value, types, skipped)


def _sample(
    name: str, labels: dict[str, str], value: float, types: dict[str, str], skipped: Tally
) -> Iterator[Sample]:
    found = resolve(name, types)
    if found is None:
        skipped.add("created" if name.endswith("_created") else "quantile")
        return
    value = float(value)
    if not math.isfinite(value):
        skipped.add("non-finite")
        return
    metric, kind, part = found
    yield Sample(metric, kind, part, dict(labels), value)


def _name_of(line: str) -> str:
    """The sample name a line starts with (up to ``{``, a space or a tab)."""
    end = len(line)
    for stop in ("{", " ", "\t"):
        i = line.find(stop, 0, end)
        if i >= 0:
            end = i
    return line[:end]
