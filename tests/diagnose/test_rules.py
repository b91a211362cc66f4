"""Every rule fires on a run built to trigger it and stays silent on one that does not.

The runs are ``tests/data/diagnose/*``, written by ``make_fixtures.py`` (which imports nothing
from toolkit). Their impacts follow from the fixtures' own numbers by hand; severity comes from
the low end of each impact's range (high ≥ 20 %, medium ≥ 5 %, low above 0, info when nothing
sizes what the remedy recovers):

* pp8-underfilled: rounds (benchmark TPOT = c / tok/s) 1 request 29.2 ms, 32 requests in 4 slots
  of 8 129 ms; a straight line through (1, 29.2) and (8, 129.0) gives 14.3 ms per request, so
  micro-batches of 4 take 29.2 + 3·14.3 = 72 ms: 1 − 72/129 = 44 %. No filled phase checks that
  arithmetic and no trace measures the stages, so the range reaches down to 15 % → medium.
* pp8-running-cap: 32 → 64 requests gives 300 → 520 tok/s (elasticity log(520/300)/log 2 =
  0.79); at 128 offered 64 run: 1 − 0.5^0.79 = 42 %. Above 64 the growth may level off (to
  load^0.25: 16 %, less the arithmetic's own 10 %) → medium.
* tp8-kv-pressure: 16 → 32 requests gives 330 → 578 tok/s (elasticity 0.81); at 64 offered the
  full pool holds 48: 1 − 0.75^0.81 = 21 %, but carried up from 32 it may be as little as
  nothing → info (the text states the range).
* tp8-eager: every decode line says ``cuda graph: False`` and none says True, so no measured
  comparison exists: an assumed 1.2–2.5× eager step costs 17–60 % (1.5×: 33 %) → medium.
* pp8-imbalance: fwd occupancy 62,62,62,64,64,64,64,96 % with all 8 slots full: three layers
  off the last stage (8,8,8,8,8,8,8,5) bring it to ≈71 %, but one micro-batch's trip round
  the ring (the stages' mean share, 67 %, plus 8 hops of a link nothing measures, 3–21 % of
  the 57 ms round) is the floor: 0–34 % → info (the text states the range).
* pp8-bubbles: GPUs idle half the time beyond what the occupancy explains, no cause named.
* tp8-prefill: every second window holds a prefill and generates half the rate: half the time
  at half the rate loses 25 % of the decode tokens, at most the half of the time those windows
  last → medium.
* tp8-backlog and pp8-underfilled's async slots, pp8-foreign-process: nothing sizes what their
  remedy recovers → info (the text says why).
* pp8-underfilled's residual: the model (Kimi-K2 from the table, an unknown GPU) leaves
  ~54 ms per round, 33 % or more at every plausible bandwidth, routing and overhead; with no GPU
  trace to show the stages idle it stays a lead → medium.
"""

from __future__ import annotations

import re
from functools import cache

import polars as pl
import pytest
from helpers import TEST_DATA
from helpers.scenarios import build_variant

from toolkit.diagnose import FINDING_IDS, RULES, Finding, RunAnalysis, diagnose, rank
from toolkit.load.run import load_run

DIAG = TEST_DATA / "diagnose"

# (id, run where it must fire, its severity there, run where it must stay silent)
CASES = [
    ("pp-underfilled-slots", "pp8-underfilled", "medium", "pp8-filled"),
    ("running-cap", "pp8-running-cap", "medium", "pp8-underfilled"),
    ("kv-cache-pressure", "tp8-kv-pressure", "info", "tp8"),
    ("cuda-graph-miss", "tp8-eager", "medium", "tp8"),
    ("config-not-applied", "pp8-not-applied", "high", "pp8-underfilled"),
    ("stage-desync", "pp4-desync", "high", "pp8-underfilled"),
    ("stage-imbalance", "pp8-imbalance", "info", "pp8-bubbles"),
    ("gpu-idle-bubbles", "pp8-bubbles", "high", "pp8-imbalance"),
    ("prefill-interference", "tp8-prefill", "medium", "tp8"),
    ("queue-backlog", "tp8-backlog", "info", "pp8-running-cap"),
    ("scaling-collapse", "tp8-decline", "medium", "tp8"),
    ("pp-empty-async-slots", "pp8-underfilled", "info", "pp8-filled"),
    ("pp-low-concurrency", "pp8-low-c", "info", "tp8"),
    ("pp-lockstep-logging", "pp8-filled", "info", "pp4-desync"),
    ("unexplained-slowdown", "pp8-underfilled", "medium", "tp8"),
    ("input-mismatch", "pp8-restart", "info", "pp8-underfilled"),
    ("server-restart", "pp4-crash", "info", "pp8-restart"),
    ("foreign-gpu-process", "pp8-foreign-process", "info", "pp8-filled"),
]
HEALTHY = ("tp8", "pp8-filled", "pp8-low-c")


@cache
def ctx(name: str) -> RunAnalysis:
    return RunAnalysis(load_run(DIAG / name, cache=False))


def _rule(rule_id: str):
    return dict(RULES)[rule_id]


def test_every_rule_has_a_case() -> None:
    assert sorted(c[0] for c in CASES) == sorted(FINDING_IDS)


@pytest.mark.parametrize(
    ("rule_id", "fires", "severity", "silent"), CASES, ids=[c[0] for c in CASES]
)
def test_rule_fires_and_stays_silent(rule_id: str, fires: str, severity: str, silent: str) -> None:
    found = _rule(rule_id)(ctx(fires))
    assert isinstance(found, Finding)
    assert found.id == rule_id
    assert found.severity == severity
    assert 0 < found.evidence.height <= 20
    assert re.search(r"\d", found.summary), "a summary states its numbers"
    assert found.remedy
    assert _rule(rule_id)(ctx(silent)) is None


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_get_no_high_finding(name: str) -> None:
    assert [f.id for f in diagnose([ctx(name)]) if f.severity == "high"] == []


def test_lock_step_logging_is_an_info_note_never_a_fault() -> None:
    found = diagnose([ctx("pp8-filled")])
    assert "stage-desync" not in {f.id for f in found}
    note = next(f for f in found if f.id == "pp-lockstep-logging")
    assert note.severity == "info"
    assert "not the total" in note.summary
    assert "every 40th" in note.summary  # SGLang's default --decode-log-interval
    assert note.evidence["running_req"].n_unique() >= 1


def test_lock_step_note_names_the_run_s_log_interval(tmp_path) -> None:
    run = build_variant("pp8-healthy-full", "decode-interval-100", tmp_path / "run")
    note = next(f for f in diagnose([RunAnalysis(run)]) if f.id == "pp-lockstep-logging")
    assert "every 100th" in note.summary


def test_incident_evidence_names_four_of_sixteen_slots() -> None:
    found = _rule("pp-underfilled-slots")(ctx("pp8-underfilled"))
    assert found.title.startswith("~4 of 16 slots active at 32 requests")
    assert "32 requests in flight" in found.summary
    assert "~4 of 16 slots active" in found.summary and "holds 8 (#running-req)" in found.summary
    c32 = found.evidence.filter(pl.col("offered") == 32).row(0, named=True)
    assert (round(c32["active_slots_est"]), c32["slots"], c32["verdict"]) == (4, 16, "under-filled")
    assert "--pp-max-micro-batch-size 4" in found.remedy
    assert found.impact == pytest.approx(0.44, abs=0.03) and found.basis == "measured"
    low = found.evidence.filter(pl.col("offered") == 1).row(0, named=True)
    assert low["verdict"].startswith("inherent")  # one request cannot fill eight stages


def test_running_cap_names_the_binding_limit() -> None:
    found = _rule("running-cap")(ctx("pp8-running-cap"))
    assert found.title.startswith("max_running_requests")
    assert "64//8 = 8" in found.summary
    assert found.basis == "measured" and found.impact == pytest.approx(0.42, abs=0.02)
    # a full KV pool is kv-cache-pressure's, not a second finding under running-cap
    assert _rule("running-cap")(ctx("tp8-kv-pressure")) is None
    kv = _rule("kv-cache-pressure")(ctx("tp8-kv-pressure"))
    assert kv.basis == "measured" and kv.impact == pytest.approx(0.21, abs=0.02)


def test_config_not_applied_lists_the_flag() -> None:
    found = _rule("config-not-applied")(ctx("pp8-not-applied"))
    row = found.evidence.row(0, named=True)
    assert (row["flag"], row["intended"], row["effective"]) == (
        "pp_max_micro_batch_size",
        "4",
        "null",
    )


def test_scaling_collapse_compares_layouts_diagnosed_together() -> None:
    findings = diagnose([ctx("pp8-underfilled"), ctx("tp8")])
    collapse = [f for f in findings if f.id == "scaling-collapse"]
    assert [f.run for f in collapse] == ["PP8"]
    # a symptom: the causes found on PP8 carry the cost, so it points at them as a note
    assert "TP8" in collapse[0].summary and collapse[0].severity == "info"
    assert "Causes found on this run: pp-underfilled-slots" in collapse[0].summary
    assert collapse[0].impact_range[0] > 0.5  # what serving 32 requests as TP8 recovers


def test_findings_are_ranked_by_severity_then_impact() -> None:
    ev = pl.DataFrame({"x": [1]})
    items = [
        Finding("b", "medium", "t", "s", ev, "r", impact=0.1),
        Finding("a", "high", "t", "s", ev, "r", impact=None),
        Finding("c", "high", "t", "s", ev, "r", impact=0.3),
        Finding("d", "info", "t", "s", ev, "r"),
        Finding("e", "medium", "t", "s", ev, "r", impact=0.15),
    ]
    assert [f.id for f in rank(items, [])] == ["c", "a", "e", "b", "d"]
    with pytest.raises(ValueError, match="severity"):
        Finding("x", "critical", "t", "s", ev, "r")


def test_json_shape_of_a_finding() -> None:
    found = diagnose([ctx("pp8-underfilled")])[0]
    d = found.to_dict()
    assert list(d) == [
        "id", "severity", "run", "launch", "title", "summary", "evidence", "remedy", "impact",
        "impact_range", "recovers", "basis", "phase", "promise", "caveats",
    ]  # fmt: skip
    assert 0 <= d["impact"] <= 1 and d["basis"] in ("measured", "modelled", "assumed")
    low, high = d["impact_range"]
    assert low <= d["impact"] <= high and d["recovers"].startswith("+")
    assert d["run"] == "PP8" and isinstance(d["evidence"], list) and d["evidence"]
    assert d["launch"] is None  # a run of one launch


def test_findings_compare_without_their_evidence() -> None:
    a = Finding("x", "low", "t", "s", pl.DataFrame({"v": [1]}), "r")
    b = Finding("x", "low", "t", "s", pl.DataFrame({"v": [2]}), "r")
    assert a == b and len({a, b}) == 1


def test_a_busy_share_read_from_few_samples_carries_no_finding(tmp_path) -> None:
    """The incident's 100 ms trace thinned to one round every 10 s: a phase of 10–30 s holds one
    to three samples per GPU. Their count is in the evidence, and a share resting on fewer than
    ``MIN_BUSY_SAMPLES`` neither sizes a stage's idle time nor its imbalance."""
    import shutil

    from helpers import SAMPLE

    from toolkit.diagnose.stages import certain_busy
    from toolkit.diagnose.thresholds import MIN_BUSY_SAMPLES

    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    csv = run_dir / "gpu.csv"
    header, *rows = csv.read_text().splitlines(keepends=True)
    # keep the first round of every tenth second (stamps YYYY/MM/DD HH:MM:SS.mmm)
    kept = [r for r in rows if r[18] == "0" and r[20] == "0"]
    csv.write_text(header + "".join(kept))
    ctx = RunAnalysis(run_dir)
    by_phase = ctx.busy_by_phase
    assert by_phase is not None and by_phase["samples"].min() < MIN_BUSY_SAMPLES
    certain = certain_busy(ctx)
    assert certain is not None and certain["samples"].min() >= MIN_BUSY_SAMPLES
    uncertain = set(by_phase.filter(pl.col("samples") < MIN_BUSY_SAMPLES)["phase"])
    for f in diagnose([ctx]):
        if f.basis == "measured" and f.id in ("unexplained-slowdown", "stage-imbalance"):
            assert f.phase not in uncertain, f
            assert f.evidence["samples"].min() >= MIN_BUSY_SAMPLES, f
    idle = {f.id: f for f in diagnose([ctx])}["gpu-idle-bubbles"]
    named = ", ".join(map(str, sorted(uncertain)))
    assert f"Phase(s) {named} hold fewer than {MIN_BUSY_SAMPLES}" in idle.summary


def test_uneven_slots_the_replay_fills_are_not_under_filled() -> None:
    """The lines show one slot (the first, fullest): 128 running over a logged slot of 21 reads
    as 6.1 slots, but a replay that fills all 8 with a largest slot of 22 says uneven, not
    empty. A replay that packs fewer slots, or disagrees with the logged size, changes nothing."""
    from toolkit.diagnose.slots import _replay_fills

    row = {"replay_active": 8, "replay_slot_max": 22, "slot_req": 21.0}
    assert _replay_fills(row, 8)
    assert not _replay_fills({**row, "replay_active": 3}, 8)
    assert not _replay_fills({**row, "slot_req": 32.0}, 8)
    assert not _replay_fills({**row, "replay_active": None}, 8)
