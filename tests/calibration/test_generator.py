"""The calibration draws themselves (``helpers.calibration``): independent of ppscope,
deterministic per seed, spread over the axes the calibration needs, and true to what they say
they inject. Whether ppscope diagnoses them well is ``make calibration``'s report; that
healthy draws get no high finding is ``test_healthy``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import REPO
from helpers.calibration import (
    CAUSES,
    HEALTHY_BELOW,
    INJECTED_AT_LEAST,
    Calibrated,
    draw,
    draws,
    write,
)
from helpers.calibration.tables import GPU_FIGURES, MODEL_FIGURES
from helpers.independence import toolkit_imports

PACKAGE = REPO / "tests" / "helpers" / "calibration"
SEEDS = 60
"""Draws the coverage is checked on (each is played several times: about 0.5 s a draw)."""


@pytest.fixture(scope="module")
def drawn() -> list[Calibrated]:
    return list(draws(SEEDS))


def test_imports_nothing_from_toolkit() -> None:
    assert not toolkit_imports(PACKAGE)


def test_the_same_seed_gives_the_same_run() -> None:
    for seed in (3, 17):
        a, b = draw(seed), draw(seed)
        assert a == b and a.truth == b.truth, seed
    assert draw(3) != draw(4)


def test_the_caller_may_ask_for_a_healthy_or_a_faulty_run() -> None:
    assert draw(5, healthy=True).healthy
    faulty = draw(5, healthy=False)
    assert not faulty.healthy and set(faulty.causes) <= set(CAUSES)


def test_the_draws_cover_models_gpus_layouts_and_loads(drawn: list[Calibrated]) -> None:
    figures = [MODEL_FIGURES[p] for p in {sc.model.path for sc in drawn}]
    assert len(figures) >= 6
    assert {f.moe for f in figures} == {True, False}
    assert min(f.params_b for f in figures) <= 10 and max(f.params_b for f in figures) >= 900
    assert len({sc.truth["gpu"] for sc in drawn}) >= 4
    assert {sc.hardware.interconnect for sc in drawn} == {"pcie", "nvlink"}
    shapes = {sc.truth["shape"] for sc in drawn}
    assert shapes == {"tp", "pp", "tpxpp"}
    for sc in drawn:
        lay, cs = sc.layout, [ph.c for ph in sc.phases]
        assert sc.truth["shape"] == (
            "tpxpp" if lay.tp > 1 and lay.pp > 1 else "pp" if lay.pp > 1 else "tp"
        )
        if sc.truth["load"] == "low":
            assert max(cs) <= max(lay.pp, 2), (sc.name, cs)
        else:
            assert len(cs) >= 3 and max(cs) >= 16, (sc.name, cs)
    for shape in shapes:
        kinds = {(sc.healthy, sc.truth["load"]) for sc in drawn if sc.truth["shape"] == shape}
        assert {True, False} <= {h for h, _ in kinds}, shape
        assert {"low", "high"} <= {load for _, load in kinds}, shape


def test_every_cause_is_injected_and_a_third_of_the_runs_are_healthy(
    drawn: list[Calibrated],
) -> None:
    injected = {c for sc in drawn for c in sc.causes}
    assert injected == set(CAUSES)
    assert any(len(sc.causes) == 2 for sc in drawn)
    assert 0.2 <= sum(sc.healthy for sc in drawn) / len(drawn) <= 0.5


def test_costs_are_drawn_over_wide_ranges(drawn: list[Calibrated]) -> None:
    """No cost sits at one value: per link, hops and all-reduces spread over a factor of 5 or
    more, and the bandwidths over ±30 % of the plausible one."""
    for link in ("pcie", "nvlink"):
        runs = [sc for sc in drawn if sc.hardware.interconnect == link]
        hops = [sc.machine.h for sc in runs if sc.layout.pp > 1]
        reduces = [sc.machine.r for sc in runs if sc.layout.tp > 1]
        for values in (hops, reduces):
            assert len(set(values)) == len(values) >= 5, link
            assert max(values) / min(values) >= 5, (link, values)
    ratios = [
        sc.truth["costs"]["hbm_tb_s"] / (GPU_FIGURES[sc.truth["gpu"]].hbm_tb_s * 0.8)
        for sc in drawn
    ]
    assert min(ratios) < 0.7 and max(ratios) > 1.3
    assert all(0.6 - 1e-6 <= r <= 1.4 + 1e-6 for r in ratios)


def test_each_layout_fits_its_gpus(drawn: list[Calibrated]) -> None:
    """The fullest stage's weights fit in 85 % of a GPU, with room for the pool."""
    for sc in drawn:
        lay, mo = sc.layout, sc.model
        gib = mo.weights_gb * 1.03 * max(lay.split) / lay.layers / lay.tp * 1e9 / 1024**3
        assert gib <= 0.85 * sc.hardware.mem_mib / 1024, sc.name
        assert sc.launch.pool > 0, sc.name


def test_healthy_runs_leave_no_remedy_five_percent(drawn: list[Calibrated]) -> None:
    healthy = [sc for sc in drawn if sc.healthy]
    assert healthy
    for sc in healthy:
        t = sc.truth
        assert not sc.causes and sc.machine.o == 0.0
        assert t["healthy"] and t["headroom"] < HEALTHY_BELOW, (sc.name, t["headroom_from"])
        for cause, share in t["shares"].items():
            assert max(share["by_concurrency"].values()) < HEALTHY_BELOW, (sc.name, cause)


def test_faulty_runs_know_what_each_cause_costs(drawn: list[Calibrated]) -> None:
    faulty = [sc for sc in drawn if not sc.healthy]
    assert faulty
    for sc in faulty:
        t = sc.truth
        assert t["headroom"] < HEALTHY_BELOW, (sc.name, t["headroom_from"])
        for cause, known in sc.causes.items():
            share = t["shares"][cause]
            assert known.impact == share["share"] >= INJECTED_AT_LEAST, (sc.name, cause)
            assert sc.phases[known.phase].c == share["concurrency"]
            assert known.derivation.startswith("played, c="), known.derivation
            assert known.fix or cause == "prefill-interference", (sc.name, cause)
        others = [s for c, s in t["shares"].items() if c not in sc.causes]
        assert all(s["share"] < HEALTHY_BELOW for s in others), sc.name


def test_the_run_directory_carries_the_truth(drawn: list[Calibrated], tmp_path: Path) -> None:
    sc = next(sc for sc in drawn if len(sc.causes) == 2)
    directory = write(sc, tmp_path / sc.name)
    names = {p.name for p in directory.iterdir()}
    assert {"server.log", "bench.jsonl", "gpu.csv", "run.toml", "expected.json"} <= names
    record = json.loads((directory / "expected.json").read_text(encoding="utf-8"))
    assert record["injected"] == sorted(sc.causes)
    assert record["calibration"] == json.loads(json.dumps(sc.truth))
    for cause, known in sc.causes.items():
        assert math.isclose(record["impacts"][cause]["impact"], known.impact)
    bench = [json.loads(line) for line in (directory / "bench.jsonl").read_text().splitlines()]
    assert [r["max_concurrency"] for r in bench] == [ph.c for ph in sc.phases]
