"""Declared tables of benchmark results and of the scaling analysis, and the metric glossary.

One ``Column`` per field with its type and one line of meaning; column names carry their units
(``_ms``, ``_s``, ``_tok_s``, ``_per_s``). Benchmark clients disagree on what their numbers mean,
so ``METRIC_GLOSSARY`` says what each metric means here and how each tool's figure maps onto it.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from toolkit.schema import Column, glossary, schema_of

_I = pl.Int64()
_F = pl.Float64()
_S = pl.String()
_B = pl.Boolean()

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e")
LATENCY_STATS: tuple[str, ...] = ("mean", "median", "p90", "p95", "p99", "std")
_LATENCY_DOC = {
    "ttft": "time to first token",
    "tpot": "time per output token after the first",
    "itl": "inter-token latency",
    "e2e": "end-to-end request latency",
}


def _latency_columns() -> tuple[Column, ...]:
    out = []
    for metric in LATENCY_METRICS:
        for stat in LATENCY_STATS:
            what = "standard deviation" if stat == "std" else stat
            out.append(Column(f"{metric}_{stat}_ms", _F, f"{_LATENCY_DOC[metric]}, {what}, ms"))
    return tuple(out)


RUN_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("run", _I, "0-based run number across everything loaded together"),
    Column("entry", _I, "0-based run number within its file"),
    Column("lineno", _I, "line where the run is (JSONL line, block header); null for JSON"),
    Column("format", _S, "input format: sglang-bench-jsonl, vllm-bench-json, genai-perf-csv..."),
    Column("label", _S, "layout label: argument, CSV column, run.toml, else from tp/pp sizes"),
    Column("label_from", _S, "where the label came from: argument, file, run.toml, layout, dir"),
    Column("backend", _S, "benchmark backend / endpoint type as the tool names it"),
    Column("model", _S, "model id, where the file names it"),
    Column("tp", _I, "tensor parallel size of the server"),
    Column("pp", _I, "pipeline parallel size"),
    Column("dp", _I, "data parallel size"),
    Column("ep", _I, "expert parallel size"),
    Column("layout_from", _S, "where tp/pp came from: file, run.toml, server-log, label"),
    Column("max_concurrency", _I, "client cap on requests in flight, as configured; null = none"),
    Column("concurrency", _I, "concurrency the analysis uses: max_concurrency, else label/column"),
    Column(
        "concurrency_from",
        _S,
        "source of concurrency: max_concurrency, file, label, path, observed (mean in flight "
        "of a run without a cap) or argument (given by the user)",
    ),
    Column("request_rate", _F, "configured arrival rate, req/s; inf = all at once"),
    Column("request_rate_text", _S, "the rate as written when it is not a number (`trace`)"),
    Column("num_prompts", _I, "requests the client was asked to send"),
    Column("completed", _I, "requests that succeeded"),
    Column("failed", _I, "requests that failed"),
    Column("duration_s", _F, "benchmark wall time, s"),
    Column("total_input_tokens", _I, "prompt tokens of completed requests"),
    Column("total_output_tokens", _I, "generated tokens of completed requests"),
    Column("input_len", _F, "mean prompt tokens per completed request"),
    Column("output_len", _F, "mean generated tokens per completed request"),
    Column("request_per_s", _F, "completed requests per second of benchmark time"),
    Column("input_tok_s", _F, "prompt tokens per second of benchmark time"),
    Column("output_tok_s", _F, "generated tokens per second of benchmark time (all streams)"),
    Column("total_tok_s", _F, "prompt + generated tokens per second"),
    Column("peak_output_tok_s", _F, "highest generated tokens/s over any 1 s window"),
    Column("goodput_per_s", _F, "requests/s that met every SLO given to the client"),
    Column("concurrency_observed", _F, "mean requests in flight: sum of latencies / duration"),
    Column("peak_concurrency", _I, "most requests in flight at once"),
    Column("accept_length", _F, "speculative decoding: mean accepted tokens per step"),
    *_latency_columns(),
    Column("itl_max_ms", _F, "largest inter-token gap, ms"),
    Column("ts", pl.Datetime("ms"), "when the run started or was saved, where the file says"),
    Column("extra", _S, "keys ppscope does not map, as a JSON object"),
)

REQUEST_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("run", _I, "run the request belongs to (``run`` of the runs table)"),
    Column("label", _S, "layout label of the run"),
    Column("concurrency", _I, "concurrency of the run"),
    Column("request", _I, "0-based request number within the run, in the file's order"),
    Column("ts", pl.Datetime("us"), "absolute start time (local), where the file has one"),
    Column("start_s", _F, "start, s after the run's first request started"),
    Column("ttft_ms", _F, "time to first token, ms"),
    Column("e2e_ms", _F, "end-to-end latency, ms"),
    Column("itl_mean_ms", _F, "mean gap between this request's streamed chunks, ms"),
    Column("input_len", _I, "prompt tokens"),
    Column("output_len", _I, "generated tokens"),
    Column("ok", _B, "the request succeeded"),
    Column("error", _S, "the client's error text, if any"),
)

SCALING_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout"),
    Column("concurrency", _I, "requests in flight"),
    Column("n_runs", _I, "runs aggregated (median) into this point; 0 = interpolated"),
    Column("output_tok_s", _F, "median generated tokens/s over the runs"),
    Column("per_stream_tok_s", _F, "output_tok_s / concurrency: what one request sees"),
    Column("baseline_concurrency", _I, "lowest measured concurrency of the layout (1 ideally)"),
    Column("ideal_tok_s", _F, "linear scaling from the baseline: c / c0 · tok_s(c0)"),
    Column("efficiency", _F, "output_tok_s / ideal_tok_s; 1 = linear, = tok_s(c)/(c·tok_s(1))"),
    Column("ttft_median_ms", _F, "median over runs of the run's median TTFT, ms"),
    Column("tpot_median_ms", _F, "median over runs of the run's median TPOT, ms"),
    Column("itl_median_ms", _F, "median over runs of the run's median ITL, ms"),
    Column("e2e_median_ms", _F, "median over runs of the run's median E2E latency, ms"),
    Column("interpolated", _B, "True when the point was interpolated, not measured"),
)

GAP_COLUMNS: tuple[Column, ...] = (
    Column("concurrency", _I, "requests in flight"),
    Column("a", _S, "first layout"),
    Column("b", _S, "second layout"),
    Column("a_tok_s", _F, "output tok/s of a"),
    Column("b_tok_s", _F, "output tok/s of b"),
    Column("ratio", _F, "a_tok_s / b_tok_s"),
    Column("difference_tok_s", _F, "a_tok_s - b_tok_s"),
    Column("leader", _S, "the faster layout; null on a tie"),
    Column("advantage", _F, "leader's tok/s over the other's (≥ 1)"),
    Column("interpolated", _B, "True when either side was interpolated"),
)

FRONTIER_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout"),
    Column("concurrency", _I, "requests in flight"),
    Column("n_runs", _I, "runs aggregated (median)"),
    Column("output_tok_s", _F, "median generated tokens/s"),
    Column("latency_ms", _F, "median per-token latency, ms (see latency_metric)"),
    Column("latency_metric", _S, "which latency: tpot_median_ms, else tpot_mean_ms, itl_median_ms"),
    Column("pareto", _B, "no other point has both lower latency and higher throughput"),
)

PHASE_MARK_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file (phases.jsonl of ppscope capture)"),
    Column("lineno", _I, "1-based line of the phase"),
    Column("phase", _I, "0-based phase of the sweep, as recorded"),
    Column("concurrency", _I, "requests the phase's benchmark kept in flight"),
    Column("num_prompts", _I, "requests the phase's benchmark sent"),
    Column("start", pl.Datetime("ms"), "when the phase's benchmark started, on the log's clock"),
    Column("end", pl.Datetime("ms"), "when it ended (or was stopped), on the log's clock"),
    Column("exit_code", _I, "the benchmark's exit code; null when it was stopped"),
    Column("results", _I, "result lines the phase added to bench.jsonl; null = unknown"),
    Column("interrupted", _B, "the capture was stopped during the phase"),
)

RUNS = schema_of(RUN_COLUMNS)
PHASE_MARKS = schema_of(PHASE_MARK_COLUMNS)
REQUESTS = schema_of(REQUEST_COLUMNS)
SCALING = schema_of(SCALING_COLUMNS)
GAP = schema_of(GAP_COLUMNS)
FRONTIER = schema_of(FRONTIER_COLUMNS)


class Metric(NamedTuple):
    """One metric as ppscope defines it, and how each tool's figure relates to it."""

    name: str
    meaning: str
    tools: str


METRIC_GLOSSARY: tuple[Metric, ...] = (
    Metric(
        "output_tok_s",
        "Generated tokens of all completed requests divided by the benchmark's wall time. The "
        "number that scales (or not) with concurrency; 'tok/s' and 'throughput' in a user's CSV "
        "are read as this.",
        "SGLang `output_throughput` (0.2.7: `output_token_throughput`); vLLM "
        "`output_throughput`; GenAI-Perf/AIPerf `output_token_throughput`. All count only "
        "generated tokens, not the prompt.",
    ),
    Metric(
        "total_tok_s",
        "Prompt plus generated tokens per second. Grows with prompt length, so it flatters "
        "long-prompt runs; do not compare it with output_tok_s.",
        "SGLang `total_throughput` (printed from 0.3.6, JSONL from 0.5.10); vLLM "
        "`total_token_throughput`; AIPerf `total_token_throughput`.",
    ),
    Metric(
        "input_tok_s",
        "Prompt tokens per second of benchmark time (not prefill speed).",
        "SGLang `input_throughput`; others: total input tokens / duration when both are given.",
    ),
    Metric(
        "request_per_s",
        "Completed requests per second of benchmark time.",
        "`request_throughput` in every tool.",
    ),
    Metric(
        "ttft",
        "Time from sending a request to its first streamed token, as the client sees it. It "
        "includes queueing inside the server, but not time the client held the request back to "
        "respect --max-concurrency.",
        "SGLang, vLLM, GenAI-Perf and AIPerf all measure from the HTTP send. Recent vLLM also "
        "reports the client-side wait (`*_client_queue_time_ms`); ppscope keeps it in `extra`.",
    ),
    Metric(
        "tpot",
        "Per request: (latency - TTFT) / (output tokens - 1), then averaged over requests. "
        "Each request counts once, whatever its length.",
        "SGLang and vLLM `*_tpot_ms`. SGLang 0.4.6-0.5.5 print no TPOT rows (the JSONL still "
        "has them). GenAI-Perf/AIPerf call this `inter_token_latency`, so their ITL goes to "
        "tpot here.",
    ),
    Metric(
        "itl",
        "Gaps between consecutive streamed chunks, pooled over all requests, so long requests "
        "weigh more. With several tokens per chunk (speculative decoding, batching in the "
        "HTTP layer) it is larger than tpot.",
        "SGLang and vLLM `*_itl_ms`. GenAI-Perf/AIPerf 'Inter Token Latency' is per-request "
        "TPOT (see tpot); their chunk gap is `inter_chunk_latency`, kept under `extra`.",
    ),
    Metric(
        "e2e",
        "Time from sending a request to its last token.",
        "SGLang `*_e2e_latency_ms`; vLLM `*_e2el_ms`; GenAI-Perf/AIPerf `request_latency`.",
    ),
    Metric(
        "max_concurrency",
        "The client's cap on requests in flight (a closed loop when request_rate is inf).",
        "SGLang/vLLM `--max-concurrency`; GenAI-Perf/AIPerf `--concurrency`. Null means no "
        "cap: then concurrency comes from the run's label or a `concurrency` column.",
    ),
    Metric(
        "concurrency_observed",
        "Mean number of requests in flight over the run (sum of latencies / duration). Below "
        "max_concurrency when the client could not keep the server full.",
        "SGLang's 'Concurrency:' row and JSONL `concurrency` (not the cap!).",
    ),
    Metric(
        "efficiency",
        "tok_s(c) / (c · tok_s(1)): the share of linear scaling a layout keeps. 1 at c = 1 by "
        "definition; when c = 1 was not measured the lowest measured c is the baseline.",
        "computed by ppscope (`toolkit.analyze.scaling`).",
    ),
    Metric(
        "per_stream_tok_s",
        "output_tok_s / concurrency: the speed one request sees on average.",
        "computed by ppscope.",
    ),
    Metric(
        "goodput_per_s",
        "Requests per second that met every SLO given to the client (--goodput).",
        "vLLM `request_goodput` (key `request_goodput:` in older versions); GenAI-Perf "
        "`request_goodput`; AIPerf `goodput`; SGLang ≥0.5.23 with --goodput.",
    ),
)

RUN_GLOSSARY = glossary(RUN_COLUMNS)
REQUEST_GLOSSARY = glossary(REQUEST_COLUMNS)


def glossary_markdown() -> str:
    """The metric glossary as a Markdown table, for reports and notebooks."""
    rows = ["| metric | meaning | how each tool reports it |", "|---|---|---|"]
    for m in METRIC_GLOSSARY:
        rows.append(f"| `{m.name}` | {m.meaning} | {m.tools} |")
    return "\n".join(rows)
