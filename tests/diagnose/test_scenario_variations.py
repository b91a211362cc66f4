"""ppscope's diagnosis on the scenario family recorded other ways (``scenarios.variations``).

The same injected causes, other evidence: log wrappers and timestamps, decode-log intervals,
benchmark shapes (waves, random lengths, a test run, pauses, one concurrency, printed blocks,
none), GPU trace shapes (sampling, dmon, dcgmi, shifted clocks, none), missing files and noise.
The properties follow ``test_scenarios``: every injected cause named, ``high`` where it is
measured, its range holding the hand derivation where the serving model or a factor sizes it;
no ``high`` the scenario did not inject. Less evidence widens a range and so lowers a severity:
that is the honest answer, not a miss. Where a variation takes away the evidence a cause needs,
``DEGRADED`` says so per (variation, cause): ppscope must then list the check as skipped or
still name the cause with an honest label, never drop it silently.

The matrix (``PAIRS``) is a selection, not the product: each variation on the scenarios whose
causes lean on what it changes. Known failures are marked ``xfail(strict=True)`` per test and
pair in ``KNOWN``, with ppscope's answer and where it goes wrong; fixing one turns its xfail
into an XPASS, which fails until the mark is removed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.scenarios import VARIATIONS, build_variant, scenario, variant

from toolkit.diagnose import Finding, diagnose, skipped_checks
from toolkit.run_analysis import RunAnalysis

IMPACT_SLACK = 0.15
"""As in ``test_scenarios``: how far a measured impact may sit from the scenario's derivation."""
RANGE_SLACK = 0.05
"""How far outside a modelled or assumed range the derivation may sit (the variation's own
arithmetic against the scenario's)."""

PAIRS: dict[str, tuple[str, ...]] = {
    # wrappers: each once, on a scenario whose cause reads the lines it wraps
    "plain": ("pp16-multinode",),
    "journald": ("tp8-kv-pressure",),
    "journald-iso": ("pp8-running-cap",),
    "docker": ("pp8-packed",),
    "kubectl": ("pp4-stage-imbalance",),
    "cri": ("pp8-unexplained",),
    "python-logger": ("tp8-old-format-0.4.6",),
    "compose": ("pp4x-tp2-hybrid",),
    # log
    "log-ms": ("pp8-several-causes",),
    "log-seconds": ("tp8-prefill-interference",),
    "decode-interval-10": ("pp8-unexplained",),
    "decode-interval-100": ("pp8-running-cap", "pp8-healthy-full", "tp8-prefill-interference"),
    # benchmark
    "waves": ("pp8-several-causes", "tp8-healthy-high"),
    "length-jitter": (
        "pp8-packed",
        "tp8-graph-miss",
        "pp8-old-format-0.5.5",
        "pp8-several-causes",
    ),
    "warmup": ("tp8-graph-miss", "pp8-running-cap", "pp8-several-causes"),
    "short-gaps": ("pp8-several-causes",),
    "long-gaps": ("pp8-unexplained",),
    "single-phase": ("tp8-graph-miss", "pp8-running-cap", "pp4x-tp2-old-format-0.5.5"),
    "bench-stdout": ("pp8-packed", "tp8-old-format-0.4.6"),
    "no-bench": ("pp8-unexplained", "pp8-several-causes", "pp4x-tp2-old-format-0.5.5"),
    # GPU trace
    "gpu-100ms": ("pp4-stage-imbalance",),
    "gpu-5s": ("pp8-unexplained", "pp8-running-cap"),
    "smi-dmon": ("pp8-unexplained",),
    "dcgmi": ("pp4-stage-imbalance", "pp8-unexplained"),
    "gpu-clock-skew": ("pp8-unexplained", "pp8-healthy-full"),
    "gpu-clock-declared": ("pp4-stage-imbalance",),
    "no-gpu": ("pp4-stage-imbalance", "pp8-unexplained"),
    # missing pieces
    "no-run-toml": ("pp4-stage-imbalance", "tp8-kv-pressure"),
    "no-server-args": ("pp8-packed", "pp4-stage-imbalance", "tp8-graph-miss"),
    "unknown-model": ("pp8-unexplained", "pp8-several-causes", "tp8-healthy-high"),
    # noise
    "noise-http": ("pp8-running-cap",),
    "noise-traceback": ("pp8-several-causes",),
    "interleave": ("pp16-multinode", "tp8-prefill-interference"),
    "no-access-lines": ("pp8-packed",),
}
"""Variation → the scenarios it is applied to."""


@dataclass(frozen=True)
class Degraded:
    """The variation takes away what sizes or shows this cause: ppscope must list its check as
    skipped, or still name the cause (``high``, ``medium`` or ``low``) with the basis of its
    number; its impact is then not held to the derivation. What fails is a silent drop."""

    why: str


_GPU_GONE = "the per-stage busy time and the idle slowest stage come from the GPU trace"
_NOT_PLACED = (
    "dcgmi prints no time and nothing gives its start: the trace is on the log's clock only "
    "where its busy stretches place it clearly (labelled), else it is left out"
)
_SWEEP = "sized from the run's own sweep (neighbouring loads); one load leaves a model or a factor"

DEGRADED: dict[str, dict[str, Degraded]] = {
    "no-gpu": {
        "stage-imbalance": Degraded(_GPU_GONE),
        "unexplained-slowdown": Degraded(_GPU_GONE),
    },
    "dcgmi": {
        "stage-imbalance": Degraded(_NOT_PLACED),
        "unexplained-slowdown": Degraded(_NOT_PLACED),
    },
    "single-phase": {
        "cuda-graph-miss": Degraded(_SWEEP + " (graph steps at neighbouring batch sizes)"),
        "running-cap": Degraded(_SWEEP),
        "kv-cache-pressure": Degraded(_SWEEP),
        "pp-underfilled-slots": Degraded(_SWEEP + " (rounds at two micro-batch sizes)"),
    },
    "no-bench": {
        "unexplained-slowdown": Degraded(
            "the measured round rests on the log alone (no benchmark TPOT)"
        ),
    },
    "unknown-model": {
        "unexplained-slowdown": Degraded(
            "the serving model's prediction is gone: only the GPU idle sizes it"
        ),
        "pp-underfilled-slots": Degraded("one under-filled phase is sized by the serving model"),
        "kv-cache-pressure": Degraded("the serving model sizes the cost of a small pool"),
        "running-cap": Degraded("the serving model sizes the cost of a cap"),
    },
}
"""Variation → cause → why its evidence is gone (every other cause must stay ``high``)."""


# -- known failures -------------------------------------------------------------------------------

KNOWN: dict[tuple[str, str, str], str] = {
    # (test, scenario, variation) → what ppscope said, and why; none at present
}
"""(test, scenario, variation) → what ppscope said against what was injected, and why."""


# -- building --------------------------------------------------------------------------------------


def _pairs() -> list[tuple[str, str]]:
    return [(sc, var) for var, scs in PAIRS.items() for sc in scs]


def _params(test: str, keep: Any = None) -> list[Any]:
    """The pairs of ``test`` (those ``keep(scenario, variation)`` accepts), each with its
    ``KNOWN`` xfail."""
    out = []
    for sc, var in _pairs():
        if keep is not None and not keep(sc, var):
            continue
        marks = []
        if (test, sc, var) in KNOWN:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[(test, sc, var)]))
        out.append(pytest.param(sc, var, id=f"{sc}+{var}", marks=marks))
    return out


@dataclass
class Diagnosed:
    expected: dict[str, Any]
    findings: list[Finding]
    skipped: dict[str, str]  # check → the input it lacked


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory):
    """(scenario, variation) → ``Diagnosed``: each pair built and diagnosed once, on demand."""
    root = tmp_path_factory.mktemp("scenario-variations")
    cache: dict[tuple[str, str], Diagnosed] = {}

    def get(sc: str, var: str) -> Diagnosed:
        if (sc, var) not in cache:
            directory = build_variant(sc, var, root / f"{sc}+{var}")
            expected = json.loads((directory / "expected.json").read_text(encoding="utf-8"))
            ctx = RunAnalysis(Path(directory))
            findings = diagnose([ctx])
            skipped = {row["check"]: row["missing"] for row in skipped_checks([ctx])}
            cache[(sc, var)] = Diagnosed(expected, findings, skipped)
        return cache[(sc, var)]

    return get


def _by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def _degraded(var: str, cause: str) -> Degraded | None:
    return DEGRADED.get(var, {}).get(cause)


# -- the matrix itself -----------------------------------------------------------------------------


def test_the_matrix_is_a_selection_of_fitting_pairs() -> None:
    """Every variation is used, on scenarios it changes, and the matrix stays small."""
    assert set(PAIRS) == set(VARIATIONS)
    pairs = _pairs()
    assert len(pairs) == len(set(pairs)) <= 60
    for sc, var in pairs:
        assert VARIATIONS[var].fits(scenario(sc)), (sc, var)
    assert {k[1:] for k in KNOWN} <= set(pairs), "a KNOWN entry names a pair not in PAIRS"
    for var, causes in DEGRADED.items():
        assert var in VARIATIONS and causes


# -- the properties of test_scenarios --------------------------------------------------------------


@pytest.mark.parametrize(("sc", "var"), _params("causes"))
def test_every_injected_cause_is_named_and_high_where_measured(
    diagnosed, sc: str, var: str
) -> None:
    """Every injected cause is named with the range of its impact, ``high`` when the run
    measures it; one whose evidence the variation takes away (``DEGRADED``) is skipped, or
    named and, when its cost is not sized, says so. Never dropped silently."""
    run = diagnosed(sc, var)
    found = _by_id(run.findings)
    for cause in run.expected["injected"]:
        f = found.get(cause)
        degraded = _degraded(var, cause)
        if degraded is not None and cause in run.skipped:
            continue
        assert f is not None, f"{sc}+{var}: {cause} not found; got {sorted(found)}"
        if f.impact is None:
            assert degraded is not None, f"{sc}+{var}: {cause} not sized: {f}"
            assert "not sized" in f.summary, f"{sc}+{var}: {f}"
            continue
        assert f.basis is not None and f.impact_range is not None, f"{sc}+{var}: {f}"
        if f.basis == "measured" and degraded is None:
            assert f.severity == "high", f"{sc}+{var}: {f}"


@pytest.mark.parametrize(("sc", "var"), _params("stray"))
def test_no_high_the_scenario_did_not_inject(diagnosed, sc: str, var: str) -> None:
    run = diagnosed(sc, var)
    allowed = set(run.expected["injected"]) | set(run.expected.get("incidental", ()))
    stray = [(f.id, f.impact, f.basis) for f in run.findings if f.severity == "high"]
    stray = [s for s in stray if s[0] not in allowed]
    assert not stray, f"{sc}+{var}: unexpected high findings {stray}"
    if run.expected["healthy"]:
        assert not [f for f in run.findings if f.severity == "high"]


def _sized(sc: str, var: str) -> bool:
    return bool(variant(sc, var).causes)


@pytest.mark.parametrize(("sc", "var"), _params("impacts", _sized))
def test_impacts_land_near_the_derivation(diagnosed, sc: str, var: str) -> None:
    """The impact lands near the scenario's: the hand derivation, or where lengths are drawn at
    random the cost played with and without the fix; a modelled or assumed one holds it within
    its range (a cause whose evidence is gone is exempt: its number is a model's or a
    factor's)."""
    run = diagnosed(sc, var)
    found = _by_id(run.findings)
    for cause, derived in run.expected["impacts"].items():
        if _degraded(var, cause) is not None or cause not in found:
            continue  # the cause test says whether it may be missing
        f = found[cause]
        assert f.impact is not None and f.basis in ("measured", "modelled", "assumed")
        assert f.impact_range is not None
        if f.basis == "assumed":  # a stated assumption, never a silent one
            assert "assumed" in f.summary
        if f.basis == "measured":
            assert f.impact == pytest.approx(derived["impact"], abs=IMPACT_SLACK), (
                f"{sc}+{var}: {cause} {f.impact:.3f} ({f.basis}); {derived['derivation']}"
            )
        else:
            low, high = f.impact_range
            assert low - RANGE_SLACK <= derived["impact"] <= high + RANGE_SLACK, (
                f"{sc}+{var}: {cause} {low:.3f}–{high:.3f} ({f.basis}); {derived['derivation']}"
            )


# -- honesty about what is missing ---------------------------------------------------------------


@pytest.mark.parametrize(("sc", "var"), _params("skipped"))
def test_a_skipped_check_reports_no_finding(diagnosed, sc: str, var: str) -> None:
    """A check listed as skipped for want of an input found nothing: the reader is told to add
    that input, not shown a finding the same check made without it."""
    run = diagnosed(sc, var)
    both = [(f.id, f.severity, run.skipped[f.id]) for f in run.findings if f.id in run.skipped]
    assert not both, f"{sc}+{var}: findings of checks listed as skipped: {both}"


def _clocked(sc: str, var: str) -> bool:
    return var in ("dcgmi", "gpu-clock-skew", "gpu-clock-declared")


@pytest.mark.parametrize(("sc", "var"), _params("clock", _clocked))
def test_a_gpu_trace_off_the_log_clock_is_named(diagnosed, sc: str, var: str) -> None:
    """A trace on another clock is named and corrected (undeclared shift), taken as declared
    (``clock_offset_s``), or, when nothing places it (dcgmi prints no time), said to be unusable:
    its checks skipped, or an input-mismatch naming it."""
    run = diagnosed(sc, var)
    notes = [f for f in run.findings if f.id == "input-mismatch"]
    about_clock = [f for f in notes if "GPU clock" in f.summary or "GPU trace" in f.summary]
    if var == "gpu-clock-declared":
        assert not about_clock, f"{sc}+{var}: the declared offset was not taken: {about_clock}"
    elif var == "gpu-clock-skew":
        assert about_clock, f"{sc}+{var}: the 45 s shift is not named"
        assert "45" in about_clock[0].summary or "44" in about_clock[0].summary
    else:
        named = bool(about_clock) or run.skipped.get("gpu-idle-bubbles") == "GPU trace"
        assert named, f"{sc}+{var}: a trace with no time on it is neither skipped nor named"
