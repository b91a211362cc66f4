"""Variations: the same injected causes, recorded the way other real runs are.

A variation changes how a scenario's run was served, benchmarked or recorded, never what is
wrong with it: the same causes are injected (``expected.json`` lists the same ids; a cost the
timeline plays, KV pressure, is played again on the varied run). Axes, from the published
input formats:

* ``wrapper``: the tool in front of every line (journald, docker, kubectl, the node's CRI file,
  a parent Python logger, docker compose) or none;
* ``log``: second or millisecond SGLang timestamps, ``--decode-log-interval`` 10 or 100;
* ``bench``: several waves a phase, lengths drawn with ``--random-range-ratio``, a test run
  before each phase, short or long pauses, one concurrency only, the printed result blocks
  instead of JSONL, no results at all;
* ``gpu``: 100 ms or 5 s sampling, ``nvidia-smi dmon``, ``dcgmi dmon`` (no timestamps), a
  trace on another clock (declared in run.toml or not), no trace at all;
* ``missing``: no run.toml, no ServerArgs dump, a model id no table knows;
* ``noise``: health probes and failed requests, a traceback and warnings, lines of different
  processes a few ms out of order, no access lines.

``removes`` names the evidence a variation takes away (the names of ppscope's declared inputs
where one fits, e.g. ``GPU trace``): a cause that needs it may honestly come out lower, or its
check skipped; the tests say which, per variation. ``keeps_arithmetic`` is False where the
run no longer matches the hand derivation exactly (lengths drawn at random), so an impact is
then not compared with it.

Usage::

    from helpers.scenarios import build_variant

    build_variant("pp8-packed", "docker", tmp_path / "pp8-packed+docker")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from helpers.scenarios import derive
from helpers.scenarios.family import _kv_cause
from helpers.scenarios.spec import Model, Phase, Scenario

__all__ = ["VARIATIONS", "Variation", "vary"]

UNKNOWN_MODEL = "acme-ai/orion-chat-v3"
"""A model id no public table holds (an in-house fine-tune): its architecture is unknown."""


@dataclass(frozen=True)
class Variation:
    """One way the same run may have been recorded: ``change`` rewrites the spec."""

    name: str
    axis: str  # wrapper, log, bench, gpu, missing, noise
    doc: str
    change: Callable[[Scenario], Scenario]
    fits: Callable[[Scenario], bool] = lambda sc: True  # whether it changes this scenario
    removes: tuple[str, ...] = ()  # evidence the varied run lacks
    keeps_arithmetic: bool = True  # the hand derivations still describe the run exactly

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "axis": self.axis,
            "description": self.doc,
            "removes": list(self.removes),
            "keeps_arithmetic": self.keeps_arithmetic,
        }


HIGH = 0.20
"""A cause costs at least this share of throughput to count as injected (``high`` on the
severity scale of the README)."""


def vary(sc: Scenario, variation: Variation) -> Scenario:
    """``sc`` recorded as ``variation`` says. A played cost (KV pressure) is played again;
    where the hand derivations no longer describe the run (``keeps_arithmetic`` False) every
    cost is played (``derive.played``), and a variation that takes a cause below ``HIGH`` is
    refused: it would no longer inject what ``expected.json`` says."""
    if not variation.fits(sc):
        raise ValueError(
            f"variation {variation.name!r} does not apply to {sc.name!r}: it would change "
            f"nothing there, or take an injected cause below {HIGH:.0%}"
        )
    out = replace(variation.change(sc), variation=variation.describe())
    causes = dict(out.causes)
    if "kv-cache-pressure" in causes:
        causes["kv-cache-pressure"] = _kv_cause(out, causes["kv-cache-pressure"].phase)
    if not variation.keeps_arithmetic:
        causes = {k: derive.played(out, k, c) for k, c in causes.items()}
        lost = {k: c.impact for k, c in causes.items() if c.impact < HIGH}
        if lost:
            raise ValueError(
                f"variation {variation.name!r} takes {sc.name!r}'s causes below {HIGH:.0%}: {lost}"
            )
    return replace(out, causes=causes)


# -- the changes ----------------------------------------------------------------------------------


def _wrapper(name: str) -> Callable[[Scenario], Scenario]:
    return lambda sc: replace(sc, wrapper=name, journald=name == "journald")


def _wrapped(sc: Scenario) -> str:
    return sc.wrapper or ("journald" if sc.journald else "plain")


def _env(sc: Scenario, key: str, value: str | None) -> Scenario:
    env = tuple((k, v) for k, v in sc.launch.env if k != key)
    if value is not None:
        env += ((key, value),)
    return replace(sc, launch=replace(sc.launch, env=env))


def _log_ms(on: bool) -> Callable[[Scenario], Scenario]:
    def change(sc: Scenario) -> Scenario:
        return replace(_env(sc, "SGLANG_LOG_MS", "1" if on else None), log_ms=on)

    return change


WAVES = 4


def _waves(sc: Scenario) -> Scenario:
    """Each phase with c ≥ 4 sends ``WAVES``·c requests: finished ones are replaced."""
    phases = tuple(
        replace(ph, num_prompts=max(ph.num_prompts, WAVES * ph.c)) if ph.c >= 4 else ph
        for ph in sc.phases
    )
    return replace(sc, phases=phases)


def _kept_phases(sc: Scenario) -> list[int]:
    return sorted({c.phase for c in sc.causes.values()}) or [len(sc.phases) - 1]


def _single_phase(sc: Scenario) -> Scenario:
    """Only the phase a cause is sized at (the last one of a healthy run)."""
    keep = _kept_phases(sc)
    index = {old: new for new, old in enumerate(keep)}
    causes = {k: replace(c, phase=index[c.phase]) for k, c in sc.causes.items()}
    phases: tuple[Phase, ...] = tuple(sc.phases[i] for i in keep)
    return replace(sc, phases=phases, causes=causes)


def _jitter(sc: Scenario) -> Scenario:
    return replace(sc, range_ratio=0.5)


def _causes_survive(change: Callable[[Scenario], Scenario]) -> Callable[[Scenario], bool]:
    """Whether every cause still costs ``HIGH`` or more, played on the changed run."""

    def fits(sc: Scenario) -> bool:
        out = change(sc)
        return all(derive.played(out, k, c).impact >= HIGH for k, c in out.causes.items())

    return fits


def _unknown_model(sc: Scenario) -> Scenario:
    model: Model = replace(sc.model, path=UNKNOWN_MODEL)
    return replace(sc, model=model)


def _omit(*what: str) -> Callable[[Scenario], Scenario]:
    return lambda sc: replace(sc, omit=sc.omit | frozenset(what))


def _noise(name: str, **more: object) -> Callable[[Scenario], Scenario]:
    return lambda sc: replace(sc, noise=(*sc.noise, name), **more)


_V = (0, 5, 9)  # SGLANG_LOG_MS exists from here

VARIATIONS: dict[str, Variation] = {
    v.name: v
    for v in (
        # -- wrappers ------------------------------------------------------------------------
        Variation(
            "plain",
            "wrapper",
            "the lines as SGLang wrote them (stderr to a file), no journald",
            _wrapper("plain"),
            lambda sc: _wrapped(sc) != "plain",
        ),
        Variation(
            "journald",
            "wrapper",
            "journalctl -o short: host and a PID per process in front of every line",
            _wrapper("journald"),
            lambda sc: _wrapped(sc) != "journald",
        ),
        Variation(
            "journald-iso",
            "wrapper",
            "journalctl -o short-iso: `2026-05-12T09:31:32+0000 host python3[pid]: `",
            _wrapper("journald-iso"),
        ),
        Variation(
            "docker",
            "wrapper",
            "docker logs --timestamps: an RFC 3339 time with nanoseconds in front of every line",
            _wrapper("docker"),
        ),
        Variation(
            "kubectl",
            "wrapper",
            "kubectl logs --timestamps: RFC3339Nano (trailing zeros of the fraction dropped)",
            _wrapper("kubectl"),
        ),
        Variation(
            "cri",
            "wrapper",
            "the node's CRI log file: time on UTC+2, `stdout`/`stderr`, `F`; SGLang logs UTC",
            _wrapper("cri"),
        ),
        Variation(
            "python-logger",
            "wrapper",
            "re-wrapped by a parent Python logger: `2026-05-12 09:31:32,531 - __main__ - INFO - `",
            _wrapper("python-logger"),
        ),
        Variation(
            "compose",
            "wrapper",
            "docker compose logs: `sglang-1  | ` in front of every line",
            _wrapper("compose"),
        ),
        # -- log ------------------------------------------------------------------------------
        Variation(
            "log-ms",
            "log",
            "SGLANG_LOG_MS=1: millisecond timestamps",
            _log_ms(True),
            lambda sc: sc.version_tuple >= _V and not sc.log_ms,
        ),
        Variation(
            "log-seconds",
            "log",
            "second timestamps (no SGLANG_LOG_MS)",
            _log_ms(False),
            lambda sc: sc.log_ms,
        ),
        Variation(
            "decode-interval-10",
            "log",
            "--decode-log-interval 10: a decode line every 10 decode steps of a scheduler",
            lambda sc: replace(sc, decode_log_interval=10),
        ),
        Variation(
            "decode-interval-100",
            "log",
            "--decode-log-interval 100: a decode line every 100 decode steps of a scheduler",
            lambda sc: replace(sc, decode_log_interval=100),
        ),
        # -- benchmark ----------------------------------------------------------------------
        Variation(
            "waves",
            "bench",
            f"num_prompts = {WAVES}·c: finished requests are replaced, several waves a phase",
            _waves,
            lambda sc: any(ph.c >= 4 and ph.num_prompts < WAVES * ph.c for ph in sc.phases),
        ),
        Variation(
            "length-jitter",
            "bench",
            "--random-range-ratio 0.5: ISL and OSL drawn from [len/2, len] per request",
            _jitter,
            _causes_survive(_jitter),
            keeps_arithmetic=False,
        ),
        Variation(
            "warmup",
            "bench",
            "bench_serving's test run (one request, 32 tokens) and its 1 s sleep before each phase",
            lambda sc: replace(sc, warmup=32),
        ),
        Variation(
            "short-gaps",
            "bench",
            "phases 1.5 s apart",
            lambda sc: replace(sc, gap_s=1.5),
        ),
        Variation(
            "long-gaps",
            "bench",
            "phases 5 min apart",
            lambda sc: replace(sc, gap_s=300.0),
        ),
        Variation(
            "single-phase",
            "bench",
            "one concurrency only: the phase the cause is sized at",
            _single_phase,
            lambda sc: len(sc.phases) > 1 and len(_kept_phases(sc)) == 1,
            removes=("the sweep",),
        ),
        Variation(
            "bench-stdout",
            "bench",
            "the printed `Serving Benchmark Result` blocks (bench.log) instead of JSONL",
            lambda sc: replace(sc, bench_format="stdout"),
        ),
        Variation(
            "no-bench",
            "bench",
            "no benchmark results",
            _omit("bench"),
            removes=("benchmark results",),
        ),
        # -- GPU trace -----------------------------------------------------------------------
        Variation(
            "gpu-100ms",
            "gpu",
            "nvidia-smi -lms 100: each sample re-reads the last second's utilization",
            lambda sc: replace(sc, gpu_interval_ms=100, util_window_ms=1000),
            lambda sc: sc.gpu_interval_ms != 100,
        ),
        Variation(
            "gpu-5s",
            "gpu",
            "nvidia-smi -l 5: a sample every 5 s, each the utilization of its last second",
            lambda sc: replace(sc, gpu_interval_ms=5000, util_window_ms=1000),
        ),
        Variation(
            "smi-dmon",
            "gpu",
            "nvidia-smi dmon -s pum -o DT: 1 s, date and time columns, no GPU name",
            lambda sc: replace(sc, gpu_format="smi-dmon", gpu_interval_ms=1000),
        ),
        Variation(
            "dcgmi",
            "gpu",
            "dcgmi dmon -e 203,1001,1002,155,252 -d 1000: SM active, no timestamps "
            "(run.toml gives interval_s, nothing gives the start)",
            lambda sc: replace(sc, gpu_format="dcgmi", gpu_interval_ms=1000),
            removes=("GPU clock",),
        ),
        Variation(
            "gpu-clock-skew",
            "gpu",
            "the GPU trace's clock 45 s ahead of the log's, not declared",
            lambda sc: replace(sc, gpu_clock_offset_s=45.0),
        ),
        Variation(
            "gpu-clock-declared",
            "gpu",
            "the GPU trace on the host's UTC+2, the log on UTC; run.toml clock_offset_s = -7200",
            lambda sc: replace(sc, gpu_clock_offset_s=7200.0, declared_offset_s=-7200.0),
        ),
        Variation(
            "no-gpu",
            "gpu",
            "no GPU trace",
            _omit("gpu"),
            removes=("GPU trace",),
        ),
        # -- missing pieces -----------------------------------------------------------------
        Variation(
            "no-run-toml",
            "missing",
            "no run.toml: the layout only from the ServerArgs dump, no launch command",
            _omit("run.toml"),
            removes=("launch command", "hardware", "interconnect"),
        ),
        Variation(
            "no-server-args",
            "missing",
            "no `server_args=` line: the layout from run.toml's command and the startup summary",
            _omit("server_args"),
            removes=("ServerArgs dump",),
        ),
        Variation(
            "unknown-model",
            "missing",
            f"model id {UNKNOWN_MODEL!r}: no table knows its architecture",
            _unknown_model,
            removes=("model architecture",),
        ),
        # -- noise ---------------------------------------------------------------------------
        Variation(
            "noise-http",
            "noise",
            "chat-completions requests, /health probes every 5 s, /v1/models, 400 answers",
            _noise("http", api_path="/v1/chat/completions"),
        ),
        Variation(
            "noise-traceback",
            "noise",
            "an unrelated request's traceback, tokenizer warnings, a tqdm bar glued to a line",
            _noise("traceback"),
        ),
        Variation(
            "interleave",
            "noise",
            "lines of different processes up to 6 ms out of order",
            _noise("interleave"),
        ),
        Variation(
            "no-access-lines",
            "noise",
            "stdout captured apart: no uvicorn access lines in the log",
            _omit("access"),
            removes=("access lines",),
        ),
    )
}
"""Variation name → what it changes."""
