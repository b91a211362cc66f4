"""Write whole run directories: ``server.log``, ``gpu.csv``, ``compute-apps.csv``,
``bench.jsonl`` and ``run.toml``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from toolkit.analyze.model import Layout, StageClock
from toolkit.synth.bench_jsonl import bench_result, write_bench
from toolkit.synth.gpu_csv import QUERY, compute_apps_lines, gpu_csv_lines, write_gpu_csv
from toolkit.synth.machine import pool_tokens
from toolkit.synth.phases import Bench, Phase, run_sweep
from toolkit.synth.profiles import Profile, profile_named
from toolkit.synth.records import Processes
from toolkit.synth.server_args import launch_command, server_args
from toolkit.synth.sglang_log import server_log_lines, write_server_log
from toolkit.synth.startup import startup_records
from toolkit.synth.truth import TRUTH, Truth, layout_named, truth_params

__all__ = ["INCIDENT_RUNS", "SWEEP", "write_incident", "write_run"]

SWEEP = (1, 2, 4, 8, 16, 32, 64)
INCIDENT_RUNS = ("tp8", "pp8", "pp8-fixed")
HARDWARE = "8x RTX PRO 6000 Blackwell"
_BENCH_GAP_AFTER_READY_S = 47.0  # the operator starts the sweep a little after "ready"


def write_run(
    directory: str | Path,
    *,
    layout_name: str | Layout,
    version: str = "0.5.23",
    concurrencies: Sequence[int] = SWEEP,
    seed: int = 0,
    bench: Bench | None = None,
    truth: Truth = TRUTH,
    regenerate: str | None = None,
) -> Path:
    """Write one synthetic run (one server launch and a benchmark sweep) into ``directory``.

    Parameters
    ----------
    layout_name
        ``"tp8"``, ``"pp8"``, ``"pp8-fixed"`` (``toolkit.synth.LAYOUTS``) or any ``Layout``.
    version
        SGLang release whose formats the files use: ``"0.5.23"`` or ``"0.5.7"``.
    concurrencies
        One ``bench_serving`` run per value, in this order.
    seed
        Fixes pids, ports, GPU ids and the simulation's timing noise; same seed, same bytes.
    bench, truth
        The client's request lengths and the synthetic machine (defaults: the incident's).
    regenerate
        The shell command that rewrites this run, for ``run.toml``'s notes.

    Returns
    -------
    Path
        The run directory.
    """
    layout = layout_named(layout_name)
    profile = profile_named(version)
    bench = bench or Bench()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    procs = Processes.of(layout, seed)
    args = server_args(layout, profile, seed)
    startup = startup_records(layout, profile, procs, args)
    phases = run_sweep(
        layout,
        truth_params(layout, truth),
        tuple(concurrencies),
        bench=bench,
        start_s=startup.ready_s + _BENCH_GAP_AFTER_READY_S,
        seed=seed,
        jitter=truth.jitter,
        iteration_s=truth.iteration_s,
    )
    write_server_log(
        out / "server.log", server_log_lines(layout, profile, procs, startup, phases, seed)
    )
    write_gpu_csv(out / "gpu.csv", gpu_csv_lines(layout, phases, seed))
    apps = compute_apps_lines(layout, procs.schedulers, phases, seed)
    write_gpu_csv(out / "compute-apps.csv", apps)
    info = _server_info(args, profile, layout)
    write_bench(out / "bench.jsonl", [bench_result(p, bench, profile, info) for p in phases])
    call = _call(layout_name, version, tuple(concurrencies), seed)
    how = f"Regenerate: {regenerate} (this run: {call})." if regenerate else f"Written by {call}."
    (out / "run.toml").write_text(
        _run_toml(layout, profile, bench, phases, truth, how), encoding="utf-8"
    )
    return out


def write_incident(root: str | Path = "data/incident", *, seed: int = 0) -> list[Path]:
    """The three incident runs, ``tp8/``, ``pp8/`` and ``pp8-fixed/``, under ``root``."""
    command = "python -m toolkit.synth data/incident"
    return [
        write_run(Path(root) / name, layout_name=name, seed=seed, regenerate=command)
        for name in INCIDENT_RUNS
    ]


# ── run.toml ─────────────────────────────────────────────────────────────────────────────────


def _call(layout: str | Layout, version: str, concurrencies: tuple[int, ...], seed: int) -> str:
    """The ``write_run`` call that writes this run again."""
    sweep = "" if concurrencies == SWEEP else f", concurrencies={concurrencies}"
    name = f'"{layout}"' if isinstance(layout, str) else repr(layout)
    return (
        f'toolkit.synth.write_run(<dir>, layout_name={name}, version="{version}"{sweep}, '
        f"seed={seed})"
    )


def _label(layout: Layout) -> str:
    label = layout.label
    if layout.pp > 1 and layout.pp_max_micro_batch_size is not None:
        label += f" mbs{layout.pp_max_micro_batch_size}"
    return label


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _run_toml(
    layout: Layout,
    profile: Profile,
    bench: Bench,
    phases: Sequence[Phase],
    truth: Truth,
    how: str,
) -> str:
    results = ", ".join(
        f"c={p.concurrency}: {p.num_prompts * bench.output_len / (p.end_s - p.start_s):.1f}"
        for p in phases
    )
    notes = [
        "SYNTHETIC DATA: generated by ppscope's toolkit.synth, not measured on real hardware.",
        how,
        "The files come from a deterministic simulation of SGLang's PP event loop "
        "(toolkit.analyze.model.sim) of a Kimi-K2-class MoE on 8 PCIe GPUs, written in the "
        f"formats of sglang {profile.version}: server.log (journald -o short), gpu.csv "
        f"(nvidia-smi --query-gpu={QUERY} --format=csv -lms 100) and bench.jsonl "
        "(sglang.bench_serving --backend sglang --dataset-name random "
        f"--random-input-len {bench.input_len} --random-output-len {bench.output_len} "
        "--random-range-ratio 1.0 --request-rate inf --warmup-requests 0 --max-concurrency C "
        f"--num-prompts max(C, {bench.min_prompts})).",
        f"Simulated output throughput (tok/s): {results}. The Decode lines' gen throughput "
        "reads about 10 % higher: the benchmark number also pays for the prefill of each burst.",
        "Calibrated so the benchmark numbers match the incident: PP8 34.3 (c=1) and 248.1 "
        "(c=32), TP8 26.3 (c=1) and 577.8 (c=32), within 5 %. Machine: beta = "
        f"{truth.hbm_bytes_s / 1e12:.3f} TB/s, e_eff = {truth.e_eff:g}, all-reduce "
        f"{truth.allreduce_s * 1e6:.1f} us, PP hop {truth.hop_s * 1e3:.4g} ms.",
    ]
    if layout.pp > 1:
        notes.append(_injected(layout, truth))
    else:
        notes.append("No overhead is injected into TP runs: the incident's TP8 numbers need none.")
    c32 = [p for p in phases if p.concurrency == 32]
    if layout.pp > 1 and layout.pp_max_micro_batch_size is not None and c32:
        rate = c32[0].num_prompts * bench.output_len / (c32[0].end_s - c32[0].start_s)
        notes.append(
            f"Remedy (--pp-max-micro-batch-size {layout.pp_max_micro_batch_size}) with the "
            f"same injected overhead: {rate:.1f} tok/s at c=32, against 248.1 for the "
            "incident layout."
        )
    lines = [
        f"label = {_toml_string(_label(layout))}",
        f"command = {_toml_string(launch_command(layout))}",
        f"hardware = {_toml_string(HARDWARE)}",
        'interconnect = "pcie"',
        "clock_offset_s = 0.0",
        "synthetic = true",
        f"notes = {_toml_string(' '.join(notes))}",
    ]
    return "\n".join(lines) + "\n"


def _injected(layout: Layout, truth: Truth) -> str:
    """What the PP truth adds, in ms per stage and per trip, measured on the stage clock."""
    with_it = StageClock(layout, truth_params(layout, truth))
    without = StageClock(layout, truth_params(layout, replace(truth, expert_penalty=0.0)))
    extra = [with_it.decode(k, 8) - without.decode(k, 8) for k in range(layout.pp)]
    return (
        "Injected (the incident's unexplained overhead, about 52 ms per round at c=32, kept for "
        "every PP run because a scheduling remedy does not remove it): each decode forward of a "
        f"stage pays {truth.expert_penalty:g}x again for reading the experts its micro-batch "
        "touches beyond one request's top-8; nothing at 1 request per micro-batch, "
        f"{max(extra) * 1e3:.1f} ms per stage and {sum(extra) * 1e3:.1f} ms per trip of "
        f"all {layout.pp} stages at 8 requests (toolkit.synth.truth)."
    )


def _server_info(args: dict[str, object], profile: Profile, layout: Layout) -> dict[str, object]:
    """What ``/get_server_info`` returns: the server args, scheduler facts and the version."""
    info: dict[str, object] = dict(args)
    info["max_total_num_tokens"] = pool_tokens(layout)
    info["max_req_input_len"] = 262138
    info["version"] = profile.version
    return info
