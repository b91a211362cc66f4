"""``ppscope ingest``: type a fleet of SGLang logs once into one Parquet dataset.

Without ``--dask`` the files are typed here, two threads per file. ``--dask`` starts a local
Dask cluster; ``--dask ADDRESS`` uses an existing scheduler (``tcp://host:8786``), whose
workers must see the input files and the output directory at the same paths. The dataset is
read back with ``toolkit.open_dataset`` and stands for the logs wherever a run directory or a
log path is accepted (``parse``, ``diagnose``, ``report`` ...).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit.cli.options import add_json, add_output, add_quiet
from toolkit.cli.output import emit, to_json
from toolkit.errors import ToolkitError
from toolkit.load.sglang.dataset import ingest

NAME = "ingest"
HELP = "type SGLang logs once into a Parquet dataset (here, or on a Dask cluster)"
EXAMPLES = """\
examples:
  ppscope ingest node*/server.log -o runs/pp8/logs           here, two threads per file
  ppscope ingest logs/*.log.gz -o fleet --dask                  a local Dask cluster
  ppscope ingest logs/*.log -o /mnt/nfs/fleet --dask tcp://sched:8786   an existing cluster
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="LOG", help="SGLang log files")
    add_output(parser, required=True, what="the dataset (a directory)", metavar="DIR")
    parser.add_argument(
        "--dask",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="type files and chunks as Dask tasks: a local cluster, or the scheduler at ADDRESS",
    )
    add_json(parser)
    add_quiet(parser, what="no line per log file as it is typed")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    with _client(args.dask) as client:
        record = ingest(
            args.paths,
            args.output,
            client=client,
            progress=None if args.quiet else _say,
        )
    seconds = time.perf_counter() - start
    summary = {"dataset": str(args.output), "seconds": round(seconds, 2), **record}
    if args.json:
        print(to_json(summary))
        return 0
    where = "here" if client is None else f"on Dask ({args.dask})"
    lines = [f"{args.output}: {len(record['files'])} file(s) typed {where} in {seconds:.1f} s"]
    lines += [f"  {f['path']}  ->  {f['dir']}" for f in record["files"]]
    emit("\n".join(lines), None)
    return 0


def _say(path: str) -> None:
    print(f"typing {path} ...", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _client(address: str | None) -> Iterator[Any]:
    """No client, a ``LocalCluster``'s, or one connected to an existing scheduler."""
    if address is None:
        yield None
        return
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:  # pragma: no cover - dask is a dependency
        raise ToolkitError(f"--dask needs dask[distributed]: {e}") from None
    if address == "local":
        with (
            LocalCluster(threads_per_worker=1, dashboard_address=":0") as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(address, timeout="20s")
    except OSError as e:
        raise ToolkitError(f"no Dask scheduler at {address}: {e}") from None
    with client:
        yield client
