"""The gap verdict every format leads with, and the caveat it carries across models/machines."""

from __future__ import annotations

import polars as pl
from helpers import TEST_DATA

from toolkit.analyze.headline import gap_verdict, headline
from toolkit.analyze.scaling import caveat, scaling_gap, unlike
from toolkit.load.bench.results import load_bench


def _gap() -> pl.DataFrame:
    runs = load_bench(TEST_DATA / "bench" / "csv" / "seed.csv").runs
    return scaling_gap(runs, "PP8", "TP8")


def test_like_for_like_layouts_have_no_caveat() -> None:
    facts = {"TP8": {"model": "m", "hardware": "H200"}, "PP8": {"model": "m", "hardware": None}}
    assert caveat(facts) == "" and unlike(facts) == []
    assert gap_verdict(_gap(), caveat(facts)) == gap_verdict(_gap())


def test_the_caveat_sits_inside_the_verdict_sentence() -> None:
    """A Kimi-K2 run on RTX PRO 6000 against a Llama-70B run on H200: the sentence that states
    the gap says, before its full stop, that it compares models and machines too."""
    facts = {
        "PP4": {"model": "moonshotai/Kimi-K2", "hardware": "RTX PRO 6000 (pcie)"},
        "PP8": {"model": "meta-llama/Llama-3.1-70B", "hardware": "H200 (nvlink)"},
    }
    said = caveat(facts)
    assert "models and machines" in said
    verdict = gap_verdict(_gap(), said)
    assert verdict.startswith("TP8 delivers") and verdict.endswith(f", {said}.")
    assert len(unlike(facts)) == 2  # the longer notes name each run's model and machine


def test_two_layouts_without_a_shared_concurrency_are_not_called_one() -> None:
    """Both layouts measured, at different concurrencies: no gap, said as it is."""
    runs = load_bench(TEST_DATA / "bench" / "csv" / "seed.csv").runs
    tp8 = runs.filter(pl.col("label") == "TP8").head(1)
    pp8 = runs.filter((pl.col("label") == "PP8") & (pl.col("concurrency") != tp8["concurrency"][0]))
    lead = headline(pl.concat([tp8, pp8]), {})
    assert lead.gap is None
    assert (
        lead.verdict == "TP8 and PP8 measured no concurrency in common: there is no gap to state."
    )
