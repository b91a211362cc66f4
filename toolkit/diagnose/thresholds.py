"""Every number the findings compare against, in one place.

Severity comes from the low end of ``impact_range``, the share of throughput a finding's remedy
recovers (0–1):

=========  ====================================================================
high       low end ≥ ``HIGH_IMPACT`` (20 %); also a flag that did not take effect
           or stages that disagree within one launch (the run measured something
           else than asked)
medium     low end ≥ ``MEDIUM_IMPACT`` (5 %)
low        low end above 0
info       the remedy recovers nothing sized: a note, a symptom whose causes are
           named, or a cost the run cannot size
=========  ====================================================================
"""

from __future__ import annotations

HIGH_IMPACT = 0.20
MEDIUM_IMPACT = 0.05

# How sure a number is
MIN_NOISE = 0.02  # a rerun of the same benchmark differs by this much at least (relative)
ASSUMED_MODEL_ERROR = 0.15  # the serving model's error where no point of the run checks it
# How far the arithmetic that carries a measurement to the remedied run may miss on its own
# (relative, on the remedied throughput): set by the calibration suite's drawn runs.
METHOD_ERROR = 0.10

# Micro-batch slots
SLOT_TOLERANCE = 0.5  # active-slot estimates carry ~10 % noise: half a slot short is no fault
REPLAY_SLOT_SLACK = 0.15  # the logged slot "is" the replay's largest within this share of it

# Admission
QUEUED_SHARE = 0.3  # share of a phase's decode lines with waiters that makes it queued
KV_FULL = 0.85  # token usage at which the pool, not a request cap, holds admission
NEAR_CAP = 0.9  # running at this share of max_running_requests counts as at the cap
MODEL_AGREEMENT = 0.25  # the model sizes a phase only if it reproduces its tok/s this closely
# How decode throughput grows with the batch where nothing measures it: at least as the square
# root (a round reads its weights once), at most in proportion.
ASSUMED_ELASTICITY = (0.5, 1.0)
ELASTICITY_FLOOR = 0.25  # least growth with load a sweep may level off to above its loads

# KV pool
POOL_FULL = 0.95  # token usage counted as a full pool
POOL_FULL_SHARE = 0.1  # share of decode lines at a full pool that makes it pressure

# Processes on the run's GPUs
FOREIGN_MEMORY_SHARE = 0.10  # share of a GPU's listed memory a foreign process holds: medium

# CUDA graphs
ASSUMED_EAGER_SLOWDOWN = 1.5  # eager step over graph step when the log holds no comparison
EAGER_SLOWDOWN_RANGE = (1.2, 2.5)  # its plausible range: large batches to small ones
MIN_EAGER_SHARE = 0.05  # share of decode tokens on eager steps worth a finding

# Stages
MIN_BUSY_SAMPLES = 3  # trace samples per GPU a phase's busy share rests on; fewer are uncertain
IMBALANCE = 1.15  # busiest stage over the mean that counts as imbalance
IDLE = 0.40  # idle share of a decoding GPU worth explaining
UNEXPLAINED_IDLE = 0.15  # idle share beyond the model's that is a fault of its own

# Throughput
STANDING_LOSS = 0.6  # relative standing at high load over low load that counts as collapse
BEHIND = 0.8  # ... while delivering less than this share of the other layout
DECLINE = 0.9  # more load giving less than this share of the throughput
MIN_PREFILL_LOSS = 0.05  # decode throughput lost to prefill windows worth a finding
MIN_UNEXPLAINED = 0.10  # share of a round the model cannot explain worth a finding
HEALTHY_IDLE = 0.10  # a full pipeline's slowest stage idles up to this between graph steps
