"""``toolkit.synth``: deterministic, realistic runs generated from the PP simulation.

- ``write_run``: one run directory (``server.log``, ``gpu.csv``, ``bench.jsonl``, ``run.toml``)
  for a layout, an SGLang version profile, a concurrency sweep and a seed.
- ``write_incident``: the three committed runs of ``data/incident`` (``tp8``, ``pp8``,
  ``pp8-fixed``), calibrated to the incident's four numbers.
- ``sample_root``: where the sample's runs are, written once into the cache outside a checkout.
- ``LAYOUTS``, ``TRUTH``, ``PROFILES``: the named layouts, the synthetic machine, the releases.

Regenerate ``data/incident`` with ``python -m toolkit.synth data/incident``.
"""

from __future__ import annotations

from toolkit.synth.calibrate import SEED_POINTS
from toolkit.synth.phases import Bench
from toolkit.synth.profiles import PROFILES
from toolkit.synth.runs import INCIDENT_RUNS, SWEEP, write_incident, write_run
from toolkit.synth.sample import sample_root
from toolkit.synth.truth import LAYOUTS, TRUTH, Truth

__all__ = [
    "INCIDENT_RUNS",
    "LAYOUTS",
    "PROFILES",
    "SEED_POINTS",
    "SWEEP",
    "TRUTH",
    "Bench",
    "Truth",
    "sample_root",
    "write_incident",
    "write_run",
]
