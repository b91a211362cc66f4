"""What a load left out or changed, counted by reason, with the first place of each."""

from __future__ import annotations

from collections import Counter

__all__ = ["REASONS", "Tally"]

REASONS: dict[str, str] = {
    "bucket": "histogram bucket samples left out (a histogram is read from its _sum and _count)",
    "created": "_created samples left out (when a series was created: no measurement)",
    "quantile": "summary quantile samples left out (the interval mean is read instead)",
    "non-finite": "NaN or infinite values left out",
    "unreadable": "exposition lines the Prometheus parser rejects",
    "bad line": "lines that are no scrape",
    "http header": "HTTP status and header lines of a saved answer (its Date gives the time)",
    "time line": "time lines written before a saved answer (they give its time)",
    "blank": "blank lines",
    "compressed": "compressed stream cut or corrupt: the scrapes before the damage are read",
    "bad result": "query results that are no series of [time, value] pairs",
    "bad value": "[time, value] pairs that are no numbers, or times no clock reaches",
    "bad row": "AIPerf export rows of an unknown metric_type or without a metric_name",
    "reset": "counter or histogram intervals dropped: the value went down (a server restart)",
    "duplicate": "samples printed twice in one scrape with the same value, read once",
    "conflict": "samples printed twice in one scrape with different values, left out",
}
"""Reason → what it means in a note."""


class Tally:
    """Counts by reason (``REASONS``) and, per reason, where it first happened."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def add(self, reason: str, where: str | None = None, n: int = 1) -> None:
        """Count ``n`` of ``reason``; ``where`` (``file:line``, and why) is kept for the first."""
        if n <= 0:
            return
        self.counts[reason] += n
        if where is not None and reason not in self.first:
            self.first[reason] = where

    def notes(self) -> list[str]:
        """One line per reason counted: ``12 counter or histogram intervals dropped: …``."""
        out = []
        for reason, n in sorted(self.counts.items()):
            line = f"{n} {REASONS.get(reason, reason)}"
            if reason in self.first:
                line += f" (first: {self.first[reason]})"
            out.append(line)
        return out
