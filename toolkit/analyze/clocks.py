"""Each input's clock against the log's, found from their activity, and what is done with it.

A GPU trace, ``/metrics`` scrapes and a phase file are written on the clock of the host that
recorded them, the log on the server's. Each input's activity (GPUs busy, counters growing,
benchmark runs) is lined up with the log's decoding stretches (``series.cadence_windows``),
second by second (``assembly.clock_scores``), at every shift within ``REACH_S`` of its clock as
recorded (``run.toml``'s ``clock_offset_s`` added) and within ``ZONE_SLACK_S`` of each time-zone
difference (``ZONE_SHIFTS_S``: whole hours up to 14 h, and the half and quarter hours zones
use), so a trace on local time beside a container's log on UTC is found at the cost of a few
short searches, not a search of every second of a day.

The outcome (``ClockFit.outcome``):

``as recorded``
    no shift lines up better by ``CLOCK_GAIN``: the input is read as recorded;
``shifted``
    a shift agrees at least ``CLOCK_AGREEMENT`` and ``CLOCK_GAIN`` above both the recorded
    clock and any shift farther than a typical decoding stretch from it: it is applied and
    stated, with the ``clock_offset_s`` to set;
``weak``
    a shift agrees better than the recorded clock, but under ``CLOCK_AGREEMENT``: named, the
    input read as recorded when it overlaps the launch;
``ambiguous``
    two shifts agree nearly alike (periodic activity), or too weakly to place an input that
    does not overlap the launch as recorded: the input is not used, and the findings that
    need it are listed as skipped;
``unchecked``
    too little activity on either side (``MIN_ACTIVE_S``) to compare: read as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from toolkit.load.assembly import active_seconds, best_apart, best_shift, clock_scores

__all__ = [
    "CLOCK_AGREEMENT",
    "CLOCK_GAIN",
    "MIN_ACTIVE_S",
    "MIN_CLOCK_SHIFT_S",
    "REACH_S",
    "ZONE_SHIFTS_S",
    "ZONE_SLACK_S",
    "ClockFit",
    "classify",
    "fit_clock",
    "fits_note",
    "zone_of",
    "zone_words",
]

MIN_CLOCK_SHIFT_S = 3.0
"""A clock off the log's by less than this is within the sampling noise of both."""

CLOCK_GAIN = 0.15
"""Agreement a shift must gain over the recorded clock (and over any other shift) to count."""

CLOCK_AGREEMENT = 0.5
"""Agreement (shared active seconds over either's) at which a shift is applied."""

MIN_ACTIVE_S = 10
"""Active seconds each side needs before their clocks are compared at all."""

REACH_S = 900
"""Seconds either side of the recorded clock searched second by second (skew, a late start)."""

ZONE_SLACK_S = 120
"""Seconds either side of each zone difference searched (a host's clock drifts too)."""

_ZONE_MINUTES = (
    *(60 * h for h in range(1, 15)),
    150,  # Newfoundland in summer (UTC−2:30)
    210,  # Iran, Newfoundland (±3:30)
    270,  # Afghanistan (+4:30)
    330,  # India, Sri Lanka (+5:30)
    345,  # Nepal (+5:45)
    390,  # Myanmar, Cocos (+6:30)
    525,  # Eucla (+8:45)
    570,  # central Australia, Marquesas (±9:30)
    630,  # Lord Howe, Adelaide in summer (+10:30)
    765,  # Chatham (+12:45)
    825,  # Chatham in summer (+13:45)
)
ZONE_SHIFTS_S: tuple[int, ...] = tuple(
    sorted(sign * 60 * m for m in _ZONE_MINUTES for sign in (-1, 1))
)
"""Offsets between two clocks that keep different time zones: one on UTC (a container), the
other on the local time of one of the world's zones, either way round."""

ZONE_PREFERENCE = 0.05
"""Agreement a shift that makes a zone difference exact may lose against the best and still
be taken."""

OUTCOMES = ("as recorded", "shifted", "weak", "ambiguous", "unchecked")

_NAMES = {
    "GPU trace": ("the GPU trace", "is"),
    "metrics": ("the /metrics scrapes", "are"),
    "phases": ("the phase file", "is"),
}
_ACTIVITY = {
    "GPU trace": "the GPUs' busy stretches",
    "metrics": "the stretches in which /metrics counted generated tokens",
    "phases": "the benchmark runs of the phase file",
}


@dataclass(frozen=True)
class ClockFit:
    """How one input's clock lines up with the log's (see the module docstring)."""

    input: str  # "GPU trace", "metrics" or "phases"
    files: str  # its file names
    recorded_s: float  # run.toml's clock_offset_s, already applied to the input
    outcome: str  # one of OUTCOMES
    overlaps: bool  # as recorded, the input's span meets the launch's
    shift_s: float = 0.0  # the best shift found, on top of recorded_s
    agreement: float | None = None  # at that shift
    recorded_agreement: float | None = None  # at the recorded clock
    rival_s: float | None = None  # the best shift farther than a decoding stretch away
    rival: float | None = None  # its agreement

    @property
    def used(self) -> bool:
        """Whether the input is read (shifted, or as recorded)."""
        if self.outcome == "shifted":
            return True
        return self.outcome in ("as recorded", "weak", "unchecked") and self.overlaps

    @property
    def applied_s(self) -> float:
        """Seconds added to the input's recorded times (0 unless ``shifted``)."""
        return self.shift_s if self.outcome == "shifted" else 0.0

    @property
    def offset_s(self) -> float | None:
        """The clock offset in effect (``run.toml``'s plus the applied shift); None when the
        input is not used."""
        return self.recorded_s + self.applied_s if self.used else None

    @property
    def found_s(self) -> float:
        """The ``clock_offset_s`` the best shift asks for."""
        return self.recorded_s + self.shift_s

    @property
    def source(self) -> str:
        """Where the offset in effect comes from: ``estimated``, ``run.toml`` or ``none``."""
        if self.outcome == "shifted":
            return "estimated"
        return "run.toml" if self.recorded_s else "none"

    def record(self) -> dict[str, Any]:
        """``{input, files, offset_s, source, agreement, note}`` for ``--json``."""
        applied = self.agreement if self.outcome == "shifted" else self.recorded_agreement
        return {
            "input": self.input,
            "files": self.files,
            "offset_s": self.offset_s,
            "source": self.source,
            "agreement": None if applied is None else round(applied, 3),
            "note": self.note() or self._plain(),
        }

    def _plain(self) -> str:
        if self.outcome == "unchecked":
            return "too little activity on one side to check its clock; read as recorded"
        if not self.overlaps:
            return "does not overlap the launch and lines up with it at no shift searched"
        return "lines up with the log's decoding as recorded"

    def note(self) -> str | None:
        """What was found and done, for ``mismatches``; None when there is nothing to say."""
        if self.outcome not in ("shifted", "weak", "ambiguous"):
            return None
        what = _ACTIVITY.get(self.input, "its activity")
        recorded = self.recorded_agreement or 0.0
        score = self.agreement or 0.0
        if self.outcome == "ambiguous" and score >= CLOCK_AGREEMENT and self.rival_s is not None:
            return (
                f"{what} line up with the log's decoding about as well at "
                f"clock_offset_s = {self.found_s:g} ({score:.0%} agreement) as at "
                f"{self.recorded_s + self.rival_s:g} ({self.rival or 0.0:.0%}; "
                f"{recorded:.0%} as recorded), so its clock cannot be placed and it is not "
                "used for stage or GPU findings: set clock_offset_s in run.toml to the right "
                "one"
            )
        zone = zone_of(self.found_s)
        if zone is not None:
            name, verb = _NAMES.get(self.input, (f"the {self.input}", "is"))
            seen = (
                f"{name} {verb} on a clock {zone_words(zone)} the log's: {what} line up with the "
                f"log's decoding at clock_offset_s = {self.found_s:g} ({score:.0%} agreement "
                f"against {recorded:.0%} as recorded), a time-zone difference, as of a server "
                "in a container on UTC beside a host on local time"
            )
        else:
            seen = (
                f"{what} line up with the log's decoding {self.shift_s:+.0f} s later "
                f"({score:.0%} agreement against {recorded:.0%} as recorded)"
            )
        if self.outcome == "shifted":
            return (
                f"{seen}; it is read shifted: set clock_offset_s = {self.found_s:g} in run.toml to "
                "make it explicit"
            )
        if self.outcome == "ambiguous":  # too weak to place an input that does not overlap
            return (
                f"{seen}; too weak an agreement to place it (under {CLOCK_AGREEMENT:.0%}), so "
                "it is not used for stage or GPU findings: if its clock is off, set "
                f"clock_offset_s = {self.found_s:g} in run.toml"
            )
        return (
            f"{seen}; too weak an agreement to apply (under {CLOCK_AGREEMENT:.0%}), so it is "
            f"read as recorded: if its clock is off, set clock_offset_s = {self.found_s:g} in "
            "run.toml"
        )


def fit_clock(
    activity: pl.DataFrame,
    windows: pl.DataFrame,
    *,
    input: str,
    files: str,
    recorded_s: float,
    overlaps: bool,
) -> ClockFit:
    """Line one input's activity up with the log's decoding stretches.

    Parameters
    ----------
    activity
        ``ts`` and ``busy_pct`` per second of the input, on its recorded clock (``run.toml``'s
        offset applied); a second counts as active by ``assembly.active_seconds``.
    windows
        The log's decoding stretches (``start``, ``end``: ``series.cadence_windows``).
    input, files, recorded_s, overlaps
        What ``ClockFit`` carries: the input's kind and files, ``run.toml``'s offset, and
        whether its span meets the launch's as recorded.
    """
    spans = list(zip(windows["start"].to_list(), windows["end"].to_list(), strict=True))
    base = ClockFit(input, files, recorded_s, "unchecked", overlaps)
    logged = sum((b - a).total_seconds() + 1 for a, b in spans if a and b)
    if len(active_seconds(activity)) < MIN_ACTIVE_S or logged < MIN_ACTIVE_S:
        return base
    ranges = [(-REACH_S, REACH_S), *((z - ZONE_SLACK_S, z + ZONE_SLACK_S) for z in ZONE_SHIFTS_S)]
    scores = clock_scores(activity, spans, ranges)
    if scores is None:
        return base
    lengths = (windows["end"] - windows["start"]).dt.total_seconds()
    apart = max(float(lengths.median() or 0.0), MIN_CLOCK_SHIFT_S)
    return classify(base, scores, apart)


def classify(base: ClockFit, scores: dict[int, float], apart_s: float) -> ClockFit:
    """``base`` with the outcome ``scores`` (agreement per shift) give."""
    recorded = scores.get(0, 0.0)
    shift, score = best_shift(scores)
    zone = zone_of(base.recorded_s + shift)
    if zone is not None:
        # a zone difference is exact (a container keeps its host's clock): among shifts about
        # as good, the one that makes it exact; an input's activity starts a little before
        # the log's first decode line of each stretch, which leans the best a few seconds off
        exact = round(zone - base.recorded_s)
        if exact in scores and scores[exact] >= score - ZONE_PREFERENCE:
            shift, score = float(exact), scores[exact]
    rival_s, rival = best_apart(scores, shift, apart_s)
    found = ClockFit(
        base.input,
        base.files,
        base.recorded_s,
        "as recorded",
        base.overlaps,
        shift,
        score,
        recorded,
        rival_s,
        rival,
    )
    if abs(shift) < MIN_CLOCK_SHIFT_S or score - recorded < CLOCK_GAIN:
        return found
    if score < CLOCK_AGREEMENT:
        outcome = "weak" if base.overlaps else "ambiguous"
    elif score - rival < CLOCK_GAIN:
        outcome = "ambiguous"
    else:
        outcome = "shifted"
    return _with(found, outcome)


def _with(fit: ClockFit, outcome: str) -> ClockFit:
    return ClockFit(
        fit.input,
        fit.files,
        fit.recorded_s,
        outcome,
        fit.overlaps,
        fit.shift_s,
        fit.agreement,
        fit.recorded_agreement,
        fit.rival_s,
        fit.rival,
    )


def zone_of(offset_s: float) -> int | None:
    """The zone difference (``ZONE_SHIFTS_S``) within ``ZONE_SLACK_S`` of ``offset_s``, or
    None."""
    near = [z for z in ZONE_SHIFTS_S if abs(offset_s - z) <= ZONE_SLACK_S]
    return min(near, key=lambda z: abs(offset_s - z)) if near else None


def zone_words(offset_s: float) -> str:
    """``3 h ahead of`` for an offset of −10800 s (the input's clock runs ahead, so the offset
    added to its times is negative); ``5 h 30 min behind`` for +19800."""
    minutes = round(abs(offset_s) / 60)
    hours, rest = divmod(minutes, 60)
    span = f"{hours} h" + (f" {rest} min" if rest else "")
    return f"{span} {'ahead of' if offset_s < 0 else 'behind'}"


def fits_note(fits: Sequence[ClockFit], inputs: Sequence[str] = ()) -> str | None:
    """Why an input that is there is not read: the first fit (of ``inputs``, all when empty)
    whose clock cannot be placed, in words for a skipped check's ``supply``; None when none."""
    for fit in fits:
        if fit.outcome == "ambiguous" and (not inputs or fit.input in inputs):
            return (
                f"the {fit.input} ({fit.files}) is there, but its clock cannot be placed on the "
                "log's (input-mismatch says why): set clock_offset_s in run.toml"
            )
    return None
