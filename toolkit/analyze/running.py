"""Requests running under PP, line by line, from what the KV pool holds and what was admitted.

Under pipeline parallelism a decode line's ``#running-req`` is one micro-batch slot; the
scheduler's total is not logged. ``#token`` counts the KV tokens of all slots, and the reference
stage's Prefill lines say how many prompt tokens were admitted between two decode lines. Every
running request gains one token per round, so the tokens generated in a line's window
(``gen throughput`` × the window) over the requests running is what each of them gained. What
``#token`` holds less than the admitted prompts and the generated tokens was freed by finished
requests, each of which held its prompt plus what it had generated; the estimate takes the
oldest admitted as the first to finish (in a closed loop they have run longest). So

    running = admitted − finished,   finished = freed tokens / (prompt + generated so far)

with no assumption about output lengths: requests finishing together (a closed-loop wave),
one by one (lengths drawn at random) or never (the run ended first) all read right. Without
Prefill lines, tokens ``#token`` holds beyond what generation explains are the admissions (a
wave that finishes and is replaced within one line's window then reads as requests finished).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PhaseLine", "running_in_phase"]


@dataclass(frozen=True)
class PhaseLine:
    """One decode line of a phase, with what the estimate needs of it."""

    token: float
    made: float
    """Tokens generated in the line's window (gen throughput × window)."""
    admitted: float
    """Prompt tokens the Prefill lines admitted in the line's window."""
    slack: float = 0.0
    """Tokens ``made`` may be off by: gen throughput × the resolution of the timestamps."""


_NONE = 1e-9
"""Fewer requests (or tokens) than this are none: rounding, never a request."""


def running_in_phase(
    lines: Sequence[PhaseLine], prompt: float, *, prefill_logged: bool
) -> list[tuple[float, float]]:
    """(running requests, tokens generated per running request) after each line of a phase.

    Parameters
    ----------
    lines
        The phase's decode lines in log order.
    prompt
        Mean prompt tokens per request.
    prefill_logged
        The phase's admissions are in Prefill lines; else tokens that generation does not
        explain are taken as admissions.
    """
    if not lines or not prompt > 0 or not math.isfinite(prompt):
        return [(math.nan, math.nan)] * len(lines)
    cohorts: deque[list[float]] = deque()  # [requests, per-request count at admission]
    count = born = 0.0  # requests held, and their admission counts summed (for the mean age)
    age = 0.0  # tokens generated per running request since the phase began
    taken_in = made_total = freed_seen = 0.0
    out: list[tuple[float, float]] = []
    for k, line in enumerate(lines):
        tokens_in, made = max(line.admitted, 0.0), max(line.made, 0.0)
        if k == 0 and tokens_in > 0:
            # The first line's window reaches back to the last line of the run before: what
            # #token holds beyond the admitted prompts was generated.
            made = max(made, line.token - tokens_in)
        if k == 0 and (not prefill_logged or tokens_in <= 0):
            # No Prefill line before the phase's first decode line (a log that starts while
            # requests run): what #token holds beyond the window's generation are prompts.
            tokens_in = max(line.token - made, 0.0)
        new = tokens_in / prompt
        # A phase's first requests were admitted before it decoded; later ones mid-window.
        held = count + (new if k == 0 else new / 2.0)
        step = made / held if held > _NONE else 0.0  # a sliver of a request generates nothing
        taken_in += tokens_in
        made_total += made
        # Freed tokens within the slack of the windows' lengths are timing noise (a window
        # read from whole-second stamps), neither requests finishing nor coming back.
        freed = taken_in + made_total - line.token - max(line.slack, 0.0)
        surplus = freed_seen - freed - 2.0 * max(line.slack, 0.0)
        if surplus > 0 and not prefill_logged and k > 0:
            # #token holds more than what was admitted and generated: requests admitted
            # without a Prefill line to say so.
            taken_in += surplus
            new += surplus / prompt
            freed += surplus
        if new > 0:
            at = age if k == 0 else age + step / 2.0
            cohorts.append([new, at])
            count += new
            born += new * at
        age += step
        to_free, freed_seen = max(freed - freed_seen, 0.0), max(freed_seen, freed)
        finished_at = age - step / 2.0  # on average, mid-window
        while to_free > _NONE and cohorts:
            n, at = cohorts[0]
            length = max(prompt + max(finished_at - at, 0.0), 1.0)
            gone = min(n, to_free / length)
            to_free -= gone * length
            count -= gone
            born -= gone * at
            if n - gone <= _NONE:
                cohorts.popleft()
            else:
                cohorts[0][0] = n - gone
        if count <= _NONE:
            count = born = 0.0
        generated = max(age - born / count, 0.0) if count > 0 else 0.0
        out.append((count, generated))
    return out
