"""Findings: every hypothesis about why a layout does not scale, checked with evidence.

``diagnose(runs)`` runs each rule of ``RULES`` on each run and returns the findings ranked by
severity, then by the share of throughput each remedy recovers. A rule is one function of a
``RunAnalysis`` that returns a ``Finding`` or None; ids are a stable public vocabulary:

==========================  =========================================================
``input-mismatch``          info: inputs from other launches, files or clocks, left out
``server-restart``          info: a launch ended in a crash (its last error line)
``pp-underfilled-slots``    enough requests for every stage, fewer slots hold them
``running-cap``             a limit holds requests in the queue (names it)
``kv-cache-pressure``       retractions, or a full KV pool
``cuda-graph-miss``         decode steps ran eagerly
``foreign-gpu-process``     another process than the server holds a GPU of the run
``config-not-applied``      a launch flag did not take effect
``stage-desync``            stages disagree at the same log ordinal (a bug)
``stage-imbalance``         one stage busier than the rest
``scaling-collapse``        falls behind another layout, or declines, as load grows
``queue-backlog``           requests queue with no configured limit reached
``gpu-idle-bubbles``        GPUs idle while decoding (explained by occupancy or not)
``prefill-interference``    decode windows with prefill passes generate less
``pp-empty-async-slots``    pp_async_batch_depth slots that never hold requests
``pp-low-concurrency``      info: fewer requests than stages, inherent
``pp-lockstep-logging``     info: every stage logs the same batch, the normal PP log
``unexplained-slowdown``    time per round no finding and no model term explains
==========================  =========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path

from toolkit.diagnose.admission import queue_backlog, running_cap
from toolkit.diagnose.caveats import with_caveats
from toolkit.diagnose.coherence import input_mismatch
from toolkit.diagnose.config import config_not_applied
from toolkit.diagnose.cudagraph import cuda_graph_miss
from toolkit.diagnose.finding import SEVERITIES, Finding, severity_of
from toolkit.diagnose.imbalance import stage_imbalance
from toolkit.diagnose.inputs import skipped
from toolkit.diagnose.kv import kv_cache_pressure
from toolkit.diagnose.measured_stages import with_measured_stages
from toolkit.diagnose.packing import pp_underfilled_slots
from toolkit.diagnose.processes import foreign_gpu_process
from toolkit.diagnose.residual import unexplained_slowdown
from toolkit.diagnose.restarts import server_restart
from toolkit.diagnose.slots import pp_empty_async_slots, pp_low_concurrency
from toolkit.diagnose.stages import gpu_idle_bubbles, pp_lockstep_logging, stage_desync
from toolkit.diagnose.throughput import prefill_interference, scaling_collapse
from toolkit.load.run import Run
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "FINDING_IDS",
    "RULES",
    "SEVERITIES",
    "Finding",
    "Rule",
    "RunAnalysis",
    "diagnose",
    "rank",
    "severity_of",
    "skipped_checks",
]

Rule = Callable[[RunAnalysis], Finding | None]

RULES: tuple[tuple[str, Rule], ...] = (
    ("input-mismatch", input_mismatch),
    ("server-restart", server_restart),
    ("config-not-applied", config_not_applied),
    ("stage-desync", stage_desync),
    ("pp-underfilled-slots", pp_underfilled_slots),
    ("running-cap", running_cap),
    ("kv-cache-pressure", kv_cache_pressure),
    ("cuda-graph-miss", cuda_graph_miss),
    ("foreign-gpu-process", foreign_gpu_process),
    ("stage-imbalance", stage_imbalance),
    ("prefill-interference", prefill_interference),
    ("queue-backlog", queue_backlog),
    ("pp-empty-async-slots", pp_empty_async_slots),
    ("pp-low-concurrency", pp_low_concurrency),
    ("pp-lockstep-logging", pp_lockstep_logging),
    ("unexplained-slowdown", unexplained_slowdown),
    ("gpu-idle-bubbles", gpu_idle_bubbles),
    ("scaling-collapse", scaling_collapse),
)
"""(id, rule) in tie-break order; every rule returns a finding with its own id or None. The last
two read the findings before them on the same run (``RunAnalysis.found``): what the causes
explain, and which causes a collapse has."""

FINDING_IDS: tuple[str, ...] = tuple(name for name, _ in RULES)


def diagnose(
    runs: Iterable[Run | RunAnalysis | str | Path],
    *,
    rules: Sequence[tuple[str, Rule]] = RULES,
    compare_models: bool = False,
    step: Callable[[str], AbstractContextManager[object]] | None = None,
) -> list[Finding]:
    """Check every hypothesis on every run; findings ranked (see ``rank``).

    Parameters
    ----------
    runs
        Run directories, loaded ``Run`` objects or ``RunAnalysis`` bundles. Runs diagnosed
        together are each other's peers (``scaling-collapse`` compares them).
    rules
        The rules to apply, by default all of ``RULES``.
    compare_models
        Compare runs of different models with each other (``scaling-collapse``); by default
        only runs of the same model are.
    step
        Called with ``check LABEL`` around each run's checks (a progress line).

    Returns
    -------
    list[Finding]
        Each finding carries the label of its run in ``run``.
    """
    contexts = [r if isinstance(r, RunAnalysis) else RunAnalysis(r) for r in runs]
    for ctx in contexts:
        ctx.peers = tuple(c for c in contexts if c is not ctx)
        ctx.compare_models = compare_models
    findings = []
    for ctx in contexts:
        with step(f"check {ctx.label}") if step is not None else nullcontext():
            for unit in ctx.launches:  # each launch on its own; peers are other runs only
                unit.peers, unit.compare_models = ctx.peers, compare_models
                unit.found = []
                for _, rule in rules:
                    found = rule(unit)
                    if found is not None:
                        found = with_caveats(unit, with_measured_stages(unit, found))
                        unit.found.append(found)
                        findings.append(replace(found, run=ctx.label, launch=unit.launch_name))
    return rank(findings, [name for name, _ in rules])


def skipped_checks(
    runs: Iterable[RunAnalysis], *, rules: Sequence[tuple[str, Rule]] = RULES
) -> list[dict[str, str]]:
    """Per run, the checks its inputs could not support (``run``, ``check``, ``missing``,
    ``supply``): a rule without its input finds nothing, which is not the same as "clear".
    Called after ``diagnose`` on the same analyses, a check that reported a finding ran and
    is not listed."""
    names = tuple(name for name, _ in rules)
    return [
        {**row, "launch": unit.launch_name}
        for ctx in runs
        for unit in ctx.launches
        for row in skipped(unit, names)
    ]


def rank(findings: Iterable[Finding], order: Sequence[str] = FINDING_IDS) -> list[Finding]:
    """Severity first, then the estimated throughput share (unknown last), then rule order."""
    position = {name: i for i, name in enumerate(order)}
    items = list(findings)
    return sorted(
        items,
        key=lambda f: (
            SEVERITIES.index(f.severity),
            -(f.impact if f.impact is not None else -1.0),
            position.get(f.id, len(position)),
        ),
    )
