"""``ppscope ingest`` on a Dask LocalCluster gives the tables of the local parse, row for row,
and a run directory holding the dataset is diagnosed and reported like one holding the logs."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers import SAMPLE, TEST_DATA

import toolkit
from toolkit import load_sglang_log, open_dataset
from toolkit.cli.main import main
from toolkit.load.run import load_run
from toolkit.load.sglang.dataset import ingest

LOGS = TEST_DATA / "sglang"
TABLES = ("events", "batches", "startup", "errors", "other", "http", "launch_table")


def _same(a: toolkit.SGLangLog, b: toolkit.SGLangLog) -> None:
    for name in TABLES:
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.coverage() == b.coverage()
    assert [la.server_args for la in a.launches] == [la.server_args for la in b.launches]


def _runs(tmp_path: Path) -> list[list[Path]]:
    """Several multi-file runs: two nodes, mixed wrappers with a .gz, and one file of many
    chunks."""
    gz = tmp_path / "journald-short.log.gz"
    gz.write_bytes(gzip.compress((LOGS / "journald-short.log").read_bytes()))
    return [
        [LOGS / "multinode-a.log", LOGS / "multinode-b.log"],
        [LOGS / "v0.5.23-pp8.log", gz, LOGS / "k8s-cri.log", LOGS / "messy.log"],
        [SAMPLE / "pp8" / "server.log", LOGS / "v0.4.6-dp-attn.log"],
    ]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("dask.distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=":0", processes=True
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def test_dask_ingest_equals_the_local_parse(tmp_path: Path, client) -> None:
    for i, files in enumerate(_runs(tmp_path)):
        out = tmp_path / f"dataset-{i}"
        record = ingest(files, out, client=client, chunk_bytes=20_000)
        assert [f["path"] for f in record["files"]] == [str(f) for f in files]
        assert all(f["dir"].startswith("host=") for f in record["files"])
        _same(open_dataset(out), load_sglang_log(files, cache=False))
        here = tmp_path / f"here-{i}"
        ingest(files, here, chunk_bytes=20_000)
        for f in json.loads((out / "dataset.json").read_text())["files"]:
            pieces = sorted(p.name for p in (out / f["dir"]).glob("part-*.parquet"))
            assert pieces == sorted(p.name for p in (here / f["dir"]).glob("part-*.parquet"))


def test_a_dataset_is_partitioned_by_host_and_file(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    ingest([LOGS / "journald-short.log", LOGS / "v0.5.16.log"], ds)
    dirs = sorted(str(p.relative_to(ds).parent) for p in ds.rglob("manifest.json"))
    assert dirs[0].startswith("host=gpu-node-1/file=journald-short.log-")
    assert dirs[1].startswith("host=unknown/file=v0.5.16.log-")
    rows = 0
    for d in dirs:  # each file's pieces share one schema; files may differ (their versions do)
        scanned = pl.scan_parquet(ds / d / "part-*.parquet", hive_partitioning=True)
        assert scanned.select("host", "file").head(1).collect().row(0)[0] in d
        rows += scanned.select(pl.len()).collect().item()
    assert rows == open_dataset(ds).coverage()["lines"]


@pytest.fixture(scope="module")
def dataset_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample PP8 run with its server log replaced by a dataset of it."""
    run = tmp_path_factory.mktemp("run") / "pp8"
    shutil.copytree(SAMPLE / "pp8", run)
    log = run / "server.log"
    moved = run.parent / "server.log"
    log.rename(moved)
    assert main(["ingest", str(moved), "-o", str(run / "logs"), "-q"]) == 0
    return run


def test_a_run_directory_holding_a_dataset_is_diagnosed_alike(dataset_run: Path) -> None:
    run = load_run(dataset_run)
    assert set(run.files) >= {"sglang-dataset"} and "sglang-log" not in run.files
    assert run.log is not None and run.layout.label == load_run(SAMPLE / "pp8").layout.label
    ids = [(f.id, f.severity) for f in toolkit.diagnose([dataset_run])]
    assert ids == [(f.id, f.severity) for f in toolkit.diagnose([SAMPLE / "pp8"])]


def test_parse_and_report_read_a_dataset(
    dataset_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", str(dataset_run / "logs"), "--json", "-q"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)["files"]
    assert summary["lines"] == load_sglang_log(SAMPLE / "pp8" / "server.log").coverage()["lines"]
    out = tmp_path / "pp8.html"
    assert main(["report", str(dataset_run), "-o", str(out), "-q"]) == 0
    assert out.stat().st_size > 100_000
