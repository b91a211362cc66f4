"""The declared benchmark tables and the metric glossary."""

from __future__ import annotations

from toolkit.schema.bench import (
    LATENCY_METRICS,
    METRIC_GLOSSARY,
    RUN_COLUMNS,
    RUNS,
    glossary_markdown,
)


def test_every_column_is_documented_and_unique() -> None:
    names = [c.name for c in RUN_COLUMNS]
    assert len(names) == len(set(names)) == len(RUNS)
    assert all(c.doc for c in RUN_COLUMNS)


def test_the_issue_columns_are_declared() -> None:
    wanted = {
        "label", "backend", "tp", "pp", "dp", "ep", "max_concurrency", "request_rate",
        "num_prompts", "completed", "duration_s", "input_len", "output_len", "request_per_s",
        "input_tok_s", "output_tok_s", "total_tok_s", "concurrency_observed", "goodput_per_s",
    }  # fmt: skip
    assert wanted <= set(RUNS)
    for metric in LATENCY_METRICS:
        for stat in ("mean", "median", "p90", "p95", "p99", "std"):
            assert f"{metric}_{stat}_ms" in RUNS


def test_glossary_covers_the_contested_metrics() -> None:
    names = {m.name for m in METRIC_GLOSSARY}
    assert {"ttft", "tpot", "itl", "output_tok_s", "total_tok_s", "efficiency"} <= names
    table = glossary_markdown()
    assert table.splitlines()[0].startswith("| metric |")
    assert len(table.splitlines()) == len(METRIC_GLOSSARY) + 2
