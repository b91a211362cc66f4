"""Which listed compute processes are the SGLang server's: by the log's pids, by SGLang's own
process names, else by the name the server's processes share; everything else is foreign."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from helpers import TEST_DATA
from helpers.gpu_fixtures import GPU_DATA

from toolkit.analyze.processes import judge_processes
from toolkit.load.gpu.trace import load_compute_apps, load_gpu_list
from toolkit.load.sglang.log import load_sglang_log
from toolkit.schema.gpu import PROCESSES

LISTING = load_gpu_list(GPU_DATA / "list-8gpu.txt")
UUID = "GPU-3f1a2b4c-0d5e-6f70-8192-a3b4c5d6e7f{}"
HEADER = "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"


def _apps(tmp_path: Path, rows: list[tuple[int, str, int, int]]) -> pl.DataFrame:
    """A ``--query-compute-apps`` CSV of (pid, name, MiB, GPU index) rows, mapped by ``-L``."""
    path = tmp_path / "apps.csv"
    body = "".join(f"{pid}, {name}, {mib} MiB, {UUID.format(g)}\n" for pid, name, mib, g in rows)
    path.write_text(HEADER + body, encoding="utf-8")
    return load_compute_apps(path, LISTING)


def _verdicts(judged: pl.DataFrame) -> dict[int, tuple[bool | None, str]]:
    return {r["pid"]: (r["server"], r["judged_by"]) for r in judged.iter_rows(named=True)}


def test_sglang_names_are_the_server_and_another_process_is_not() -> None:
    apps = load_compute_apps(GPU_DATA / "apps-loop-timestamp.csv", LISTING)
    judged = judge_processes(apps)
    assert judged.schema == PROCESSES
    assert judged.height == 9  # one row per process and GPU over the three listings
    foreign = judged.filter(~pl.col("server"))
    row = foreign.row(0, named=True)
    assert (row["gpu"], row["pid"], row["process_name"]) == (0, 71234, "/opt/venvs/a,b/bin/python3")
    assert row["used_memory_mib"] == 2048.0 and row["gpu_listed_mib"] == 80048.0
    assert row["memory_share"] == 2048.0 / 80048.0
    assert (row["listings"], row["of_listings"]) == (2, 3)
    assert set(judged.filter(pl.col("server"))["judged_by"]) == {"SGLang's process name"}


def test_generic_names_fall_to_the_name_on_most_gpus(tmp_path: Path) -> None:
    """python3 on all 8 GPUs is the server; a second python3 on GPU 2 holding less is not,
    and a process of another name is not either."""
    rows = [(100 + g, "python3", 70000, g) for g in range(8)]
    rows += [(200, "python3", 3000, 2), (300, "/usr/bin/ollama", 9000, 5)]
    judged = _verdicts(judge_processes(_apps(tmp_path, rows)))
    assert judged[102] == (True, "the name listed on the most GPUs")
    assert judged[200] == (False, "a second process of the server's name on the GPU")
    assert judged[300] == (False, "not the server's name or pid")


def test_the_log_s_journald_pids_witness_the_server(tmp_path: Path) -> None:
    """journald's ``python3[85912]`` names the PP0 scheduler: with generic names, the pid tells
    the server's python3 from another python3 on the same GPU, even a larger one."""
    log = load_sglang_log(TEST_DATA / "sglang" / "journald-short.log", cache=False)
    assert {85690, 85912, 85919} <= log.pids()
    rows = [(85912 + g, "python3", 60000, g) for g in range(8)] + [(4242, "python3", 70000, 0)]
    judged = _verdicts(judge_processes(_apps(tmp_path, rows), log.pids()))
    assert judged[85912] == (True, "pid named in the server's log")
    assert judged[4242] == (False, "a second process of the server's name on the GPU")
    bare = _verdicts(judge_processes(_apps(tmp_path, rows)))  # no pids: the larger wins
    assert bare[4242][0] is True and bare[85912][0] is False


def test_a_process_with_no_listed_name_is_left_unjudged() -> None:
    apps = load_compute_apps(GPU_DATA / "apps-nounits-bus.csv")
    judged = _verdicts(judge_processes(apps))
    assert judged[85690] == (True, "SGLang's process name")
    assert judged[85691] == (None, "no name listed")


def test_unmapped_gpus_are_kept_by_uuid_and_an_empty_listing_judges_nothing() -> None:
    judged = judge_processes(load_compute_apps(GPU_DATA / "apps-8gpu.csv"))
    assert judged["gpu"].null_count() == 8 and judged["uuid"].n_unique() == 8
    assert judged["server"].all()
    assert judge_processes(load_compute_apps(GPU_DATA / "apps-empty.csv")).height == 0


def test_a_listing_that_names_no_gpu_judges_by_witness_and_name_only(tmp_path: Path) -> None:
    path = tmp_path / "apps.csv"
    path.write_text(
        "pid, process_name, used_gpu_memory [MiB]\n"
        "85690, sglang::scheduler_TP0, 70000 MiB\n"
        "85691, sglang::scheduler_TP1, 70000 MiB\n"
        "4242, /usr/bin/python3, 5000 MiB\n",
        encoding="utf-8",
    )
    judged = _verdicts(judge_processes(load_compute_apps(path)))
    assert judged[85690][0] is True and judged[85691][0] is True  # not one server per "GPU"
    assert judged[4242] == (False, "not the server's name or pid")
